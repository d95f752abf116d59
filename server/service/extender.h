// The extender verbs on plain values: the ledger, the binding POST and its outcomes.
#ifndef FITLEDGER_SERVER_SERVICE_EXTENDER_H_
#define FITLEDGER_SERVER_SERVICE_EXTENDER_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "model/pod.h"
#include "server/kube/binder.h"
#include "server/ledger/ledger.h"
#include "server/service/leader_fence.h"

namespace fitledger {

struct ExtenderOptions {
  // false: decide from the watch alone and never assume (demonstrates the burst bug).
  bool ledger_enabled = true;
  // Requests remembered from Filter calls, for Bind (by pod UID), oldest dropped first; a pod's
  // entry is dropped when its Bind succeeds. A Bind whose pod is not remembered reads the
  // watch's view, else GETs the pod (ledger.filterCacheSize).
  size_t filter_cache_size = 10000;
  // An assumption whose bind outcome is unknown is forgotten on the API's word "unbound" only
  // once it is this old: the API server may still apply a binding the client gave up on.
  absl::Duration settle_unbound_after = absl::Seconds(60);
  // The whole Bind verb (a GET of a pod neither Filter nor the watch showed, the settling GET of
  // an earlier unknown outcome, the binding POST and its follow-up GET) ends within this, below
  // kube-scheduler's extender httpTimeout (5 s by default). Past it, Bind answers "outcome
  // unknown" and the pod stays assumed for the watch or the reconciler to settle.
  absl::Duration bind_budget = absl::Seconds(4);
  // Where the verbs read the time (the fence's checks, assumption times, the bind budget); it
  // must outlive the Extender.
  const Clock* clock = &Clock::Real();
};

struct BindRequest {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::string node;
  // When kube-scheduler's request arrived (the bind budget runs from then, also while the bind
  // waits for a thread of the bind pool); InfinitePast: when Bind is called.
  absl::Time received = absl::InfinitePast();
};

struct BindCounters {
  std::map<std::string, uint64_t> outcomes;  // by reason, e.g. "bound", "no_longer_fits"
};

// Thread-safe. Bind runs concurrently (kube-scheduler's binding cycles); each Bind holds the
// ledger's lock only inside its short ledger calls, and this object's own lock only to read or
// update the Filter cache and the counters, never across an API call, so Filter and Prioritize
// never wait on a bind's I/O.
class Extender {
 public:
  // `ledger` and `binder` must outlive this. `synced` says whether the view is complete.
  // `fence` (may be null: no Lease configured; else it must outlive this) says whether this
  // server's scheduler leads: every verb is refused (Unavailable) while it does not, or before the
  // pods were re-listed after it became the leader (leader_fence.h).
  Extender(Ledger* ledger, kube::Binder* binder, ExtenderOptions options,
           std::function<bool()> synced, LeaderFence* fence = nullptr);

  // Unavailable until synced (and, with a fence, while it refuses); InvalidArgument for a pod with
  // bad requests. The pod's own assumption (by UID) never counts against it.
  absl::StatusOr<FilterResult> Filter(const Pod& pod,
                                      absl::Span<const absl::string_view> node_names);
  absl::StatusOr<std::vector<int64_t>> Prioritize(const Pod& pod,
                                                  absl::Span<const absl::string_view> node_names);
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> Preempt(
      const Pod& pod, const std::map<std::string, std::vector<std::string>>& victims);

  // Re-checks fit and assumes (one locked step), POSTs the binding, then keeps or forgets per
  // the ledger's rules, all within options.bind_budget. A pod assumed on another node by an
  // earlier bind whose outcome is unknown is settled with a GET first: bound there -> that is
  // the answer; unbound -> the assumption moves to this node; gone -> NotFound. OK when bound
  // (or already bound to that node). Errors: FailedPrecondition (no longer fits, or bound
  // elsewhere), NotFound (pod or node unknown), Unavailable (API unreachable: nothing assumed;
  // an earlier bind still in flight; or the outcome is unknown: kept assumed), InvalidArgument
  // (bad request). With a fence, a new Bind is refused (Unavailable, "refusing new binds") once
  // this server's scheduler no longer holds the Lease; a Bind past that check finishes.
  absl::Status Bind(const BindRequest& request);

  // Settles one assumption against the API (used by the reconciler): bound -> confirmed; gone ->
  // forgotten; unbound -> forgotten only if it was assumed at least settle_unbound_after before
  // `now` and was never known bound. Returns true if the ledger changed.
  bool SettleWithApi(const AssumedPod& assumed, absl::Time now);

  // Graceful shutdown: new binds are refused (Unavailable); WaitForBinds blocks until the
  // in-flight ones finish.
  void BeginShutdown();
  void WaitForBinds();

  BindCounters bind_counters() const;
  // Pods whose requests are remembered from Filter (at most options.filter_cache_size).
  size_t filter_cache_entries() const;
  const Ledger& ledger() const { return *ledger_; }

 private:
  absl::StatusOr<Resources> RequestsFor(const BindRequest& request, absl::Time deadline);
  absl::Status BindAssumed(const BindRequest& request, absl::Time start, absl::Time deadline);
  absl::Status BindWithoutLedger(const BindRequest& request, absl::Time deadline);
  // The pod is counted on another node (TryAssume said `elsewhere`; `previous` is its
  // assumption there as TryAssume read it, nullopt if the watch confirmed it there): settles that
  // earlier bind with the API. true: the assumption now sits on request.node with a bind in
  // flight (POST next); false: the pod is already bound to request.node (answer OK). Errors are
  // the answer, except Aborted: the entry changed while the API was asked (decide again).
  absl::StatusOr<bool> SettleEarlierBind(const BindRequest& request, const Resources& requests,
                                         const absl::Status& elsewhere,
                                         const std::optional<AssumedPod>& previous,
                                         absl::Time deadline);
  void Count(const std::string& outcome);
  void Remember(const std::string& uid, const Resources& requests);
  void Forget(const std::string& uid);

  // Constant after construction.
  Ledger* const ledger_;
  kube::Binder* const binder_;
  const ExtenderOptions options_;
  const std::function<bool()> synced_;
  LeaderFence* const fence_;

  mutable Mutex mu_;
  // The Filter cache: UIDs oldest first, and each UID's requests with its place in that order.
  struct Filtered {
    Resources requests;
    std::list<std::string>::iterator order;
  };
  absl::flat_hash_map<std::string, Filtered> filtered_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> filtered_order_ ABSL_GUARDED_BY(mu_);
  BindCounters counters_ ABSL_GUARDED_BY(mu_);

  Mutex binds_mu_;
  CondVar binds_cv_;  // signalled when binds_in_flight_ drops
  int binds_in_flight_ ABSL_GUARDED_BY(binds_mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(binds_mu_) = false;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_EXTENDER_H_
