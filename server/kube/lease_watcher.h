// One coordination.k8s.io/v1 Lease followed by list + watch: the scheduler's leader-election
// record, for the leader fence (server/service/leader_fence.h).
#ifndef FITLEDGER_SERVER_KUBE_LEASE_WATCHER_H_
#define FITLEDGER_SERVER_KUBE_LEASE_WATCHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace fitledger::kube {

class ApiTransport;

// A Lease's spec as leader election reads it (client-go
// tools/leaderelection/resourcelock/leaselock.go, LeaseSpecToLeaderElectionRecord: an absent
// field is the zero value).
struct LeaseRecord {
  std::string namespace_name;
  std::string name;
  std::string resource_version;
  std::string holder_identity;         // "" when released (leaderelection.go release) or unset
  int64_t lease_duration_seconds = 0;  // 0: unset
  std::optional<absl::Time> acquire_time;
  std::optional<absl::Time> renew_time;
  int64_t lease_transitions = 0;
};

// Decodes a Lease object (JSON). InvalidArgument naming the field for a wrong type, or a time
// that is not RFC 3339 (MicroTime: "2024-05-01T10:00:00.123456Z"). Pure.
absl::StatusOr<LeaseRecord> ParseLease(absl::string_view json);

struct LeaseWatcherOptions {
  std::string namespace_name;
  std::string name;
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(10);
  absl::Duration request_timeout = absl::Seconds(30);
  int64_t watch_timeout_seconds = 300;  // asked of the API server; the watch is then resumed
  // Refresh re-reads the Lease at most once per this.
  absl::Duration min_refresh_interval = absl::Milliseconds(200);
};

// Follows one Lease and hands every state of it to `on_change`, in order, on its own thread:
// a LIST of the Lease's namespace with fieldSelector metadata.name=NAME and no resourceVersion (a
// consistent read), then a WATCH with the same selector from the LIST's resourceVersion,
// resumed from the last resourceVersion when it ends, a new LIST after a 410. Every request
// names the Lease by that selector, so RBAC can grant get, list and watch on it alone
// (resourceNames): the API server authorizes a list or watch whose fieldSelector is
// metadata.name=NAME as a request for NAME (apiserver endpoints/handlers/get.go ListResource).
// `on_change` gets nullopt while the Lease does not exist.
//
// Refresh re-reads the Lease at once (the watch may lag behind the API: a new leader's first
// calls can come before its watch shows the change): the watch is interrupted, the LIST sent
// again, and the watch resumed from it, on the same thread, so states never arrive out of order.
//
// Thread-safe. Start() spawns the thread, Stop() joins it; the constructor spawns nothing.
class LeaseWatcher {
 public:
  using OnChange = std::function<void(const std::optional<LeaseRecord>& lease)>;
  // `client` must outlive this.
  LeaseWatcher(ApiTransport* client, LeaseWatcherOptions options, OnChange on_change);
  ~LeaseWatcher();
  LeaseWatcher(const LeaseWatcher&) = delete;
  LeaseWatcher& operator=(const LeaseWatcher&) = delete;

  void Start();
  void Stop();

  // Asks for the Lease to be read again now (a consistent LIST); ignored within
  // min_refresh_interval of the last one. Does not block.
  void Refresh();

  // True once a LIST has been applied.
  bool synced() const { return synced_.load(); }

 private:
  void Run();
  // LIST the Lease and apply it; sets `*resource_version`. Cancelled when interrupted.
  absl::Status List(std::string* resource_version);
  // WATCH from `*resource_version` until the stream ends; `*gone` on a 410.
  absl::Status Watch(std::string* resource_version, bool* gone);
  std::string Path(absl::string_view query) const;
  bool WaitOrStop(absl::Duration d);

  // Constant after construction.
  ApiTransport* const client_;
  const LeaseWatcherOptions options_;
  const OnChange on_change_;

  std::atomic<bool> stop_{false};
  // The cancel flag of this watcher's watch: set by Stop and Refresh; the loop reads the Lease
  // again whenever it finds it set.
  std::atomic<bool> interrupt_{false};
  std::atomic<int64_t> last_refresh_ns_{0};
  std::atomic<bool> synced_{false};
  Mutex stop_mu_;
  CondVar stop_cv_;  // signalled when stopping_ is set
  // Stop() was called: what WaitOrStop waits on (stop_ is its lock-free copy, the streams'
  // cancel flag).
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_LEASE_WATCHER_H_
