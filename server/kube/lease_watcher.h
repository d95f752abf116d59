// One coordination.k8s.io/v1 Lease followed by a Reflector (reflector.h): the scheduler's
// leader-election record, for the leader fence (server/service/leader_fence.h).
#ifndef FITLEDGER_SERVER_KUBE_LEASE_WATCHER_H_
#define FITLEDGER_SERVER_KUBE_LEASE_WATCHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "server/kube/objects.h"

namespace fitledger::kube {

class ApiTransport;
class Reflector;

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

// Follows one Lease and hands every state of it to `on_change`, in order, on its reflector's
// thread: a LIST of the Lease's namespace with fieldSelector metadata.name=NAME and no
// resourceVersion (a consistent read), then a WATCH with the same selector from the LIST's
// resourceVersion, resumed when it ends, a consistent LIST again after a 410 (JSON, no WatchList:
// one small object). Every request names the Lease by that selector, so RBAC can grant get, list
// and watch on it alone (resourceNames): the API server authorizes a list or watch whose
// fieldSelector is metadata.name=NAME as a request for NAME (apiserver
// endpoints/handlers/get.go ListResource). `on_change` gets nullopt while the Lease does not
// exist.
//
// Refresh re-reads the Lease at once (the watch may lag behind the API: a new leader's first
// calls can come before its watch shows the change): Reflector::RequestConsistentList, whose
// LIST is applied on the same thread as the events, so states never arrive out of order.
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
  bool synced() const;

 private:
  class Sink;

  const absl::Duration min_refresh_interval_;
  std::atomic<int64_t> last_refresh_ns_{0};
  std::unique_ptr<Sink> sink_;
  std::unique_ptr<Reflector> reflector_;
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_LEASE_WATCHER_H_
