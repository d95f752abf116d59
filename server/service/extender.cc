#include "server/service/extender.h"

#include <iterator>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/kube/objects.h"

namespace fitledger {
namespace {

absl::Status NotSynced() {
  return absl::UnavailableError(
      "fitledger has not finished listing the cluster yet (not synced); retry shortly");
}

std::string PodName(const BindRequest& r) { return absl::StrCat(r.namespace_name, "/", r.name); }

}  // namespace

Extender::Extender(Ledger* ledger, kube::Binder* binder, ExtenderOptions options,
                   std::function<bool()> synced, LeaderFence* fence)
    : ledger_(ledger),
      binder_(binder),
      options_(options),
      synced_(std::move(synced)),
      fence_(fence) {}

void Extender::Remember(const std::string& uid, const Resources& requests) {
  if (uid.empty() || options_.filter_cache_size == 0) return;
  MutexLock lock(&mu_);
  auto it = filtered_.find(uid);
  if (it != filtered_.end()) {
    it->second.requests = requests;
    return;
  }
  while (filtered_order_.size() >= options_.filter_cache_size) {
    filtered_.erase(filtered_order_.front());
    filtered_order_.pop_front();
  }
  filtered_order_.push_back(uid);
  filtered_.emplace(uid, Filtered{requests, std::prev(filtered_order_.end())});
}

void Extender::Forget(const std::string& uid) {
  MutexLock lock(&mu_);
  auto it = filtered_.find(uid);
  if (it == filtered_.end()) return;
  filtered_order_.erase(it->second.order);
  filtered_.erase(it);
}

size_t Extender::filter_cache_entries() const {
  MutexLock lock(&mu_);
  return filtered_.size();
}

absl::StatusOr<FilterResult> Extender::Filter(const Pod& pod,
                                              absl::Span<const absl::string_view> node_names) {
  if (!synced_()) return NotSynced();
  if (fence_ != nullptr) RETURN_IF_ERROR(fence_->CheckServing(options_.clock->Now()));
  ASSIGN_OR_RETURN(Resources requests, PodRequests(pod, RequestBasis::kSpec));
  if (pod.pod_requests.has_value()) {
    // Bind assumes the pod on a node, where kube-scheduler's cache counts it on NodeInfo's basis:
    // with pod-level requests, its scoring amounts default only what the pod's requests lack
    // (RequestBasis), unlike the incoming pod's. Its fit amounts are the same.
    ASSIGN_OR_RETURN(Resources on_node, PodRequests(pod, RequestBasis::kSpecAndStatus));
    Remember(pod.uid, on_node);
  } else {
    Remember(pod.uid, requests);
  }
  FilterResult result = ledger_->Filter(requests, node_names, pod.uid);
  if (LogEnabled(LogLevel::kDebug)) {
    LogDebug("filtered", {{"verb", "filter"},
                          {"pod", absl::StrCat(pod.namespace_name, "/", pod.name)},
                          {"requests", ToString(requests)},
                          {"candidates", absl::StrCat(node_names.size())},
                          {"fit", absl::StrCat(result.fits.size())},
                          {"failed", absl::StrCat(result.failed.size())},
                          {"unresolvable", absl::StrCat(result.unresolvable.size())}});
  }
  return result;
}

absl::StatusOr<std::vector<int64_t>> Extender::Prioritize(
    const Pod& pod, absl::Span<const absl::string_view> node_names) {
  if (!synced_()) return NotSynced();
  if (fence_ != nullptr) RETURN_IF_ERROR(fence_->CheckServing(options_.clock->Now()));
  ASSIGN_OR_RETURN(Resources requests, PodRequests(pod, RequestBasis::kSpec));
  return ledger_->Prioritize(requests, node_names, pod.uid);
}

absl::StatusOr<std::map<std::string, std::vector<std::string>>> Extender::Preempt(
    const Pod& pod, const std::map<std::string, std::vector<std::string>>& victims) {
  if (!synced_()) return NotSynced();
  if (fence_ != nullptr) RETURN_IF_ERROR(fence_->CheckServing(options_.clock->Now()));
  ASSIGN_OR_RETURN(Resources requests, PodRequests(pod, RequestBasis::kSpec));
  return ledger_->Preempt(requests, victims);
}

absl::StatusOr<Resources> Extender::RequestsFor(const BindRequest& request, absl::Time deadline) {
  {
    MutexLock lock(&mu_);
    auto it = filtered_.find(request.uid);
    if (it != filtered_.end()) return it->second.requests;
  }
  absl::StatusOr<Resources> pending = ledger_->PendingPodRequests(request.uid);
  if (pending.ok()) return pending;
  // Neither Filter nor the watch has shown this pod yet: ask the API.
  absl::StatusOr<Pod> pod = binder_->GetPod(request.namespace_name, request.name, deadline);
  if (!pod.ok()) {
    if (absl::IsNotFound(pod.status())) {
      return absl::NotFoundError(absl::StrCat("pod ", PodName(request), " not found"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot read pod ", PodName(request), ": ", pod.status().message()));
  }
  if (pod->uid != request.uid) {
    return absl::NotFoundError(absl::StrCat("pod ", PodName(request), " with UID ", request.uid,
                                            " not found (the pod by that name has UID ", pod->uid,
                                            ")"));
  }
  return PodRequests(*pod, RequestBasis::kSpecAndStatus);  // as it will count on its node
}

void Extender::Count(const std::string& outcome) {
  MutexLock lock(&mu_);
  ++counters_.outcomes[outcome];
}

BindCounters Extender::bind_counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

absl::Status Extender::Bind(const BindRequest& request) {
  if (request.name.empty() || request.namespace_name.empty() || request.uid.empty() ||
      request.node.empty()) {
    Count("invalid");
    std::vector<absl::string_view> empty;
    if (request.name.empty()) empty.push_back("PodName");
    if (request.namespace_name.empty()) empty.push_back("PodNamespace");
    if (request.uid.empty()) empty.push_back("PodUID");
    if (request.node.empty()) empty.push_back("Node");
    return absl::InvalidArgumentError(absl::StrCat(
        "bind needs PodName, PodNamespace, PodUID and Node; empty: ", absl::StrJoin(empty, ", ")));
  }
  {
    MutexLock lock(&binds_mu_);
    if (shutting_down_) {
      return absl::UnavailableError("fitledger-server is shutting down");
    }
    ++binds_in_flight_;
  }
  const absl::Time now = options_.clock->Now();
  const absl::Time start = request.received == absl::InfinitePast() ? now : request.received;
  absl::Status status =
      now >= start + options_.bind_budget
          ? absl::UnavailableError(absl::StrCat(
                "bind of pod ", PodName(request), " not started: it waited ",
                absl::FormatDuration(absl::Trunc(now - start, absl::Milliseconds(1))),
                " for a bind thread, past the bind budget (",
                absl::FormatDuration(options_.bind_budget),
                "); nothing was assumed (too many binds at once: kubernetes.bindThreads)"))
          : BindAssumed(request, start, start + options_.bind_budget);
  {
    MutexLock lock(&binds_mu_);
    --binds_in_flight_;
  }
  binds_cv_.SignalAll();
  if (status.ok()) {
    // Bound: the ledger counts the pod now; a new Filter of it (another cycle) remembers again.
    Forget(request.uid);
    LogInfo("bound", {{"verb", "bind"}, {"pod", PodName(request)}, {"node", request.node}});
  } else {
    LogInfo("bind failed", {{"verb", "bind"},
                            {"pod", PodName(request)},
                            {"node", request.node},
                            {"error", std::string(status.message())}});
  }
  return status;
}

absl::Status Extender::BindWithoutLedger(const BindRequest& request, absl::Time deadline) {
  // Decide from the watch alone, as a scheduler without assume does: Filter judged the node
  // on a view that may lag, and nothing is reserved here, so a burst overcommits.
  kube::BindResult result =
      binder_->Bind(request.namespace_name, request.name, request.uid, request.node, deadline);
  switch (result.outcome) {
    case kube::BindOutcome::kBound:
    case kube::BindOutcome::kAlreadyBound:
      Count("bound");
      return absl::OkStatus();
    default:
      Count("api_error");
      return absl::UnavailableError(result.message);
  }
}

absl::StatusOr<bool> Extender::SettleEarlierBind(const BindRequest& request,
                                                 const Resources& requests,
                                                 const absl::Status& elsewhere,
                                                 const std::optional<AssumedPod>& previous,
                                                 absl::Time deadline) {
  // `previous` is the entry TryAssume decided on, not read again: between the two reads the
  // reconciler could drop the assumption (settled unbound), and the pod would look confirmed
  // elsewhere. A change after TryAssume is caught by the epoch (MoveAssumption, Settle).
  if (!previous.has_value()) {
    // Confirmed on another node by the watch: the API's answer is known.
    Count("bound_elsewhere");
    return absl::FailedPreconditionError(elsewhere.message());
  }
  if (previous->bind_in_flight) {
    Count("bind_in_flight");
    return absl::UnavailableError(absl::StrCat("pod ", PodName(request),
                                               ": an earlier bind to node ", previous->node_name,
                                               " is still in flight; retry shortly"));
  }
  if (previous->bound_known) {
    // The binding POST succeeded there; the watch has not shown it yet.
    Count("bound_elsewhere");
    return absl::FailedPreconditionError(
        absl::StrCat("pod ", PodName(request), " is already bound to node ", previous->node_name));
  }
  // The earlier outcome is unknown: the API says what became of it.
  absl::StatusOr<Pod> pod = binder_->GetPod(request.namespace_name, request.name, deadline);
  if (!pod.ok()) {
    if (absl::IsNotFound(pod.status())) {
      ledger_->ForgetGone(request.uid);
      Count("pod_not_found");
      return absl::NotFoundError(absl::StrCat("pod ", PodName(request), " not found"));
    }
    Count("api_error");
    return absl::UnavailableError(absl::StrCat(
        "pod ", PodName(request), " is assumed on node ", previous->node_name,
        " by an earlier bind, and the API could not be asked about it: ", pod.status().message()));
  }
  if (pod->uid != request.uid) {
    ledger_->ForgetGone(request.uid);
    Count("pod_not_found");
    return absl::NotFoundError(absl::StrCat("pod ", PodName(request), " with UID ", request.uid,
                                            " not found (the pod by that name has UID ", pod->uid,
                                            ")"));
  }
  if (pod->IsTerminal()) {
    ledger_->ForgetGone(request.uid);
    Count("pod_finished");
    return absl::FailedPreconditionError(
        absl::StrCat("pod ", PodName(request), " has finished (phase ", pod->phase, ")"));
  }
  if (!pod->node_name.empty()) {
    // The earlier bind (or someone) bound it: that node is the answer.
    absl::StatusOr<PodRecord> record = kube::ToPodRecord(*pod);
    if (record.ok()) {
      ledger_->Settle(request.uid, previous->epoch, ApiPodState::kBound, &*record);
    } else {
      ledger_->MarkBound(request.uid, pod->node_name);
    }
    if (pod->node_name == request.node) {
      Count("already_bound");
      return false;
    }
    Count("bound_elsewhere");
    return absl::FailedPreconditionError(
        absl::StrCat("pod ", PodName(request), " is already bound to node ", pod->node_name));
  }
  // Unbound: move the assumption (one locked step: re-check the fit there). It is counted once,
  // on the new node; if the earlier POST still lands, the API refuses one of the two bindings
  // and the watch moves the count to where the pod really is.
  absl::Status moved = ledger_->MoveAssumption(request.uid, previous->epoch, request.node, requests,
                                               options_.clock->Now());
  if (moved.ok()) {
    Count("moved");
    return true;
  }
  if (absl::IsFailedPrecondition(moved)) {
    Count("no_longer_fits");
  } else if (absl::IsNotFound(moved)) {
    Count("node_not_found");
  }
  return moved;  // Aborted: the entry changed meanwhile (BindAssumed decides again)
}

absl::Status Extender::BindAssumed(const BindRequest& request, absl::Time start,
                                   absl::Time deadline) {
  if (!synced_()) {
    Count("not_synced");
    return NotSynced();
  }
  if (fence_ != nullptr) {
    if (absl::Status fenced = fence_->CheckBind(options_.clock->Now()); !fenced.ok()) {
      Count("not_leader");
      return fenced;
    }
  }
  absl::StatusOr<Resources> requests = RequestsFor(request, deadline);
  if (!requests.ok()) {
    Count(absl::IsNotFound(requests.status()) ? "pod_not_found" : "api_error");
    return requests.status();
  }
  if (!options_.ledger_enabled) return BindWithoutLedger(request, deadline);

  // An earlier bind's assumption can change while SettleEarlierBind asks the API about it: the
  // reconciler settles the same entry with the API at the same moment (after an outage, both
  // find the pod unbound, and the reconciler drops the assumption first). The decision is then
  // taken again on what the ledger holds now, a few times, before the scheduler is asked to
  // retry.
  constexpr int kAttempts = 3;
  absl::StatusOr<AssumeOutcome> assumed;
  std::optional<AssumedPod> previous;
  for (int attempt = 1;; ++attempt) {
    assumed = ledger_->TryAssume(request.uid, request.namespace_name, request.name, request.node,
                                 *requests, options_.clock->Now(), &previous);
    if (!absl::IsAlreadyExists(assumed.status())) break;
    absl::StatusOr<bool> post =
        SettleEarlierBind(request, *requests, assumed.status(), previous, deadline);
    if (post.ok()) {
      if (!*post) return absl::OkStatus();
      assumed = AssumeOutcome::kAlreadyAssumed;
      break;
    }
    if (!absl::IsAborted(post.status())) return post.status();
    if (attempt == kAttempts) {
      Count("bind_in_flight");
      return absl::UnavailableError(absl::StrCat(post.status().message(), "; retry shortly"));
    }
  }
  if (!assumed.ok()) {
    Count(absl::IsFailedPrecondition(assumed.status()) ? "no_longer_fits" : "node_not_found");
    return assumed.status();
  }
  if (*assumed == AssumeOutcome::kAlreadyConfirmed) {
    Count("already_bound");
    return absl::OkStatus();
  }

  // The API call, outside every lock.
  kube::BindResult result =
      binder_->Bind(request.namespace_name, request.name, request.uid, request.node, deadline);
  switch (result.outcome) {
    case kube::BindOutcome::kBound:
      ledger_->MarkBound(request.uid, request.node);
      Count("bound");
      return absl::OkStatus();
    case kube::BindOutcome::kAlreadyBound:
      ledger_->MarkBound(request.uid, request.node);
      Count("already_bound");
      return absl::OkStatus();
    case kube::BindOutcome::kBoundElsewhere:
      ledger_->MarkBound(request.uid, result.node);
      Count("bound_elsewhere");
      return absl::FailedPreconditionError(
          absl::StrCat("pod ", PodName(request), " is already bound to node ", result.node));
    case kube::BindOutcome::kPodGone:
      ledger_->ForgetGone(request.uid);
      Count("pod_gone");
      return absl::NotFoundError(result.message);
    case kube::BindOutcome::kRejected:
    case kube::BindOutcome::kUnreachable: {
      const bool rejected = result.outcome == kube::BindOutcome::kRejected;
      Count(rejected ? "rejected" : "api_unreachable");
      std::string message = result.message;
      if (!ledger_->Forget(request.uid)) {
        // Kept: an earlier bind of this pod has an unknown outcome (or it was bound).
        absl::StrAppend(&message, "; an earlier bind's outcome is still unknown: pod ",
                        PodName(request), " stays assumed until the API shows it");
      }
      return rejected ? absl::FailedPreconditionError(message) : absl::UnavailableError(message);
    }
    case kube::BindOutcome::kUnknown: {
      ledger_->MarkBindUnknown(request.uid);
      Count("outcome_unknown");
      const absl::Duration elapsed =
          absl::Trunc(options_.clock->Now() - start, absl::Milliseconds(100));
      return absl::UnavailableError(
          absl::StrCat("binding outcome unknown after ", absl::FormatDuration(elapsed), " (",
                       result.message, "); fitledger keeps pod ", PodName(request), " assumed on ",
                       request.node, " until the API shows it"));
    }
  }
  return absl::InternalError("unreachable");
}

bool Extender::SettleWithApi(const AssumedPod& assumed, absl::Time now) {
  absl::StatusOr<Pod> pod =
      binder_->GetPod(assumed.namespace_name, assumed.name, absl::InfiniteFuture());
  if (!pod.ok()) {
    if (absl::IsNotFound(pod.status())) {
      return ledger_->Settle(assumed.uid, assumed.epoch, ApiPodState::kGone, nullptr);
    }
    return false;  // the API cannot answer: keep the assumption
  }
  if (pod->uid != assumed.uid || pod->IsTerminal()) {
    return ledger_->Settle(assumed.uid, assumed.epoch, ApiPodState::kGone, nullptr);
  }
  if (pod->node_name.empty()) {
    // Known bound: "unbound" is a stale read. Unknown: the binding may still be applied.
    if (assumed.bound_known || now - assumed.assumed_at < options_.settle_unbound_after) {
      return false;
    }
    return ledger_->Settle(assumed.uid, assumed.epoch, ApiPodState::kUnbound, nullptr);
  }
  absl::StatusOr<PodRecord> record = kube::ToPodRecord(*pod);
  if (!record.ok()) return false;
  return ledger_->Settle(assumed.uid, assumed.epoch, ApiPodState::kBound, &*record);
}

void Extender::BeginShutdown() {
  MutexLock lock(&binds_mu_);
  shutting_down_ = true;
}

void Extender::WaitForBinds() {
  MutexLock lock(&binds_mu_);
  while (binds_in_flight_ != 0) binds_cv_.Wait(&binds_mu_);
}

}  // namespace fitledger
