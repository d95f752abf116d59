// The leader fence: fitledger-server answers kube-scheduler's verbs only while the kube-scheduler
// of its own pod holds the scheduler's Lease, and only after it re-listed the pods from the API
// once its scheduler became the holder.
#ifndef FITLEDGER_SERVER_SERVICE_LEADER_FENCE_H_
#define FITLEDGER_SERVER_SERVICE_LEADER_FENCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "server/kube/objects.h"
#include "server/kube/watcher.h"

namespace fitledger {

// True if `holder` (a Lease's spec.holderIdentity) is the kube-scheduler of the host named
// `hostname`: kube-scheduler's identity is "<hostname>_<uuid>" (cmd/kube-scheduler/app/options/
// options.go, makeLeaderElectionConfig: os.Hostname() + "_" + uuid.NewUUID(), a new uuid per
// process), so the holder is `hostname` followed by "_" and a non-empty rest; `holder` equal to
// `hostname` also matches (a leader elector whose identity is the bare hostname). Empty never
// matches.
bool HolderIsIdentity(absl::string_view holder, absl::string_view hostname);

struct LeaderFenceOptions {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // the hostname part of this pod's kube-scheduler identity
  // How long after it sees its scheduler take a new term the fence waits before it asks for the
  // LIST: a bind the previous leader's server had in flight then lands before the LIST, so the
  // LIST counts it. fitledger-server sets the bind budget (the longest a bind takes) plus a
  // second for the two servers' views of the Lease and their clocks. Zero: at once.
  absl::Duration handover_wait = absl::ZeroDuration();
};

struct LeaderFenceStats {
  bool serving = false;         // holds the Lease (as last read) and has re-listed since
  uint64_t resyncs = 0;         // re-lists completed after becoming the holder
  absl::Duration last_resync;   // how long the last one took (holder seen -> state applied)
  size_t last_resync_pods = 0;  // pods in its LIST
  std::string holder;           // the Lease's holderIdentity as last read
};

// Decides, per call, whether this server may answer kube-scheduler now.
//
// The Lease, as the LeaseWatcher last read it, says who leads. This server's scheduler holds it
// when its holderIdentity is this pod's (HolderIsIdentity) and it has not expired by this
// server's clock (renewTime + leaseDurationSeconds > now: the renewTime was written by the
// kube-scheduler of the same pod, on the same node's clock). A term is one holding: holder,
// acquireTime and leaseTransitions (client-go leaderelection.go tryAcquireOrRenew writes a new
// acquireTime and transitions + 1 on every acquisition and keeps both on a renewal). When the
// Lease shows this server's scheduler holding a term it has not re-listed for, the fence waits
// `handover_wait`, then asks for a consistent LIST of pods (`relist`,
// Watcher::RequestConsistentPodList), and refuses every verb ("not synced", Unavailable:
// kube-scheduler retries) until that LIST is applied: then every bind the previous leader
// completed is counted. The wait is for the binds the previous leader's server had already
// accepted when the Lease moved (a planned handover releases the Lease at once, while they still
// run): each ends within the bind budget, so it lands before the LIST. It ends at the first
// OnLease or check after it (kube-scheduler renews every retryPeriod and retries refused calls). A
// renewal of the same term changes nothing; a Lease that showed the term expired and then renewed
// (this server's view lagged; no one else acquired it, or the term would differ) needs no new LIST.
//
// When this server's scheduler does not hold the Lease, the verbs are refused too, and a new
// Bind with "this fitledger-server's scheduler no longer holds the Lease NS/NAME (holder: X);
// refusing new binds": a deposed leader adds no bind the new one has not listed. Binds already
// past the check finish as before. Each refusal for not holding asks for the Lease to be read
// again (`refresh`, LeaseWatcher::Refresh, rate-limited there): kube-scheduler calls its
// extender only while it leads, so a call is news the watch may not have delivered yet.
//
// Time is an argument. Thread-safe: the checks read one atomic on the fast path (holding and
// re-listed) and take mu_ otherwise; `relist` and `refresh` are called without mu_ held.
class LeaderFence {
 public:
  // `relist(done)` must call done once a consistent LIST sent after the call has been applied.
  LeaderFence(LeaderFenceOptions options,
              std::function<void(std::function<void(const kube::ConsistentPodList&)>)> relist,
              std::function<void()> refresh);
  LeaderFence(const LeaderFence&) = delete;
  LeaderFence& operator=(const LeaderFence&) = delete;

  // The Lease as just read (nullopt: it does not exist), at `now`.
  void OnLease(const std::optional<kube::LeaseRecord>& lease, absl::Time now);

  // OK when Filter, Prioritize and Preempt may be answered at `now`; else Unavailable with the
  // reason ("not synced: ...").
  absl::Status CheckServing(absl::Time now);
  // The same for a new Bind: Unavailable, and "refusing new binds" when this server's scheduler
  // does not hold the Lease.
  absl::Status CheckBind(absl::Time now);

  LeaderFenceStats stats() const;
  const LeaderFenceOptions& options() const { return options_; }

 private:
  enum class Resync { kNone, kWaiting, kListing, kDone };
  // Asks for the LIST if the term's wait is over at `now`; true if it did (call StartList).
  bool ListDueLocked(absl::Time now, uint64_t* generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartList(uint64_t generation);
  // The consistent LIST asked for term `generation` has been applied.
  void OnPodList(uint64_t generation, const kube::ConsistentPodList& list, absl::Time now);
  // Why the verbs are refused at `now` (REQUIRES: they are), and whether the Lease should be read
  // again (this server's scheduler does not hold it).
  absl::Status RefusalLocked(absl::Time now, bool bind, bool* refresh) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool HoldsLocked(absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Sets serving_until_ns_ from the state.
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Check(absl::Time now, bool bind);
  std::string LeaseName() const;

  // Constant after construction.
  const LeaderFenceOptions options_;
  const std::function<void(std::function<void(const kube::ConsistentPodList&)>)> relist_;
  const std::function<void()> refresh_;

  // Unix nanoseconds until which the verbs may be answered without taking mu_: the held term's
  // expiry once its LIST is applied, else 0. Written under mu_.
  std::atomic<int64_t> serving_until_ns_{0};

  mutable SharedMutex mu_;
  std::optional<kube::LeaseRecord> lease_ ABSL_GUARDED_BY(mu_);
  // The term this server's scheduler holds or held last ("" when another holds the Lease), and
  // where its re-list is.
  std::string term_ ABSL_GUARDED_BY(mu_);
  Resync resync_ ABSL_GUARDED_BY(mu_) = Resync::kNone;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;    // one per term
  absl::Time resync_started_ ABSL_GUARDED_BY(mu_);  // the term seen
  absl::Time list_after_ ABSL_GUARDED_BY(mu_);      // resync_started_ + handover_wait
  bool ever_held_ ABSL_GUARDED_BY(mu_) = false;
  LeaderFenceStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_LEADER_FENCE_H_
