#include "server/service/extender_backend.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fitledger {
namespace {

// kube-scheduler always sends the pod it schedules; a missing or null one (or one without a
// name) is a malformed request, not a pod that requests nothing.
absl::Status CheckPod(const Pod& pod) {
  if (!pod.name.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "Pod: missing, or without metadata.name (kube-scheduler sends the pod being scheduled)");
}

}  // namespace

ExtenderBackend::ExtenderBackend(Extender* extender, WorkerPool* bind_pool, RpcMetrics* metrics,
                                 std::function<absl::Status()> ready)
    : extender_(extender), bind_pool_(bind_pool), metrics_(metrics), ready_(std::move(ready)) {}

void ExtenderBackend::Filter(const Pod& pod, absl::Span<const absl::string_view> candidates,
                             FilterDone done) {
  RpcScope scope(metrics_, "Filter");
  const absl::Status valid = CheckPod(pod);
  absl::StatusOr<FilterResult> result =
      valid.ok() ? extender_->Filter(pod, candidates) : absl::StatusOr<FilterResult>(valid);
  scope.Done(result.status());
  done(std::move(result));
}

void ExtenderBackend::Prioritize(const Pod& pod, absl::Span<const absl::string_view> candidates,
                                 PrioritizeDone done) {
  RpcScope scope(metrics_, "Prioritize");
  webhook::PrioritizeAnswer answer;
  const absl::Status valid = CheckPod(pod);
  absl::StatusOr<std::vector<int64_t>> scores = valid.ok()
                                                    ? extender_->Prioritize(pod, candidates)
                                                    : absl::StatusOr<std::vector<int64_t>>(valid);
  if (scores.ok()) {
    answer.scores.reserve(scores->size());
    for (size_t i = 0; i < scores->size(); ++i) answer.scores.emplace_back(i, (*scores)[i]);
  } else {
    answer.status = scores.status();
  }
  scope.Done(answer.status);
  done(std::move(answer));
}

void ExtenderBackend::Bind(const BindArgs& args, StatusDone done) {
  struct Job {
    BindRequest request;
    StatusDone done;
    RpcScope scope;
  };
  auto job = std::make_shared<Job>(
      Job{BindRequest{args.pod_namespace, args.pod_name, args.pod_uid, args.node, absl::Now()},
          std::move(done), RpcScope(metrics_, "Bind")});
  const bool queued = bind_pool_->Submit([this, job] {
    absl::Status status = extender_->Bind(job->request);
    job->scope.Done(status);
    job->done(std::move(status));
  });
  if (!queued) {
    job->done(job->scope.Done(
        absl::UnavailableError("fitledger-server is shutting down: bind not started")));
  }
}

void ExtenderBackend::Preempt(const PreemptArgs& args, PreemptDone done) {
  RpcScope scope(metrics_, "Preempt");
  if (absl::Status valid = CheckPod(args.pod); !valid.ok()) return done(scope.Done(valid));
  std::map<std::string, std::vector<std::string>> victims;
  for (const auto& [node, v] : args.victims) victims[node] = v.pod_uids;
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> kept =
      extender_->Preempt(args.pod, victims);
  if (!kept.ok()) return done(scope.Done(kept.status()));
  NodeVictims result;
  for (auto& [node, uids] : *kept) {
    Victims& v = result[node];
    v.pod_uids = std::move(uids);
    auto given = args.victims.find(node);
    v.num_pdb_violations = given == args.victims.end() ? 0 : given->second.num_pdb_violations;
  }
  scope.Done(absl::OkStatus());
  done(std::move(result));
}

void ExtenderBackend::CheckReady(StatusDone done) { done(ready_()); }

}  // namespace fitledger
