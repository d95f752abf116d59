#include "server/service/extender_backend.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fitledger/v1/extender.pb.h"
#include "server/service/convert.h"

namespace fitledger {
namespace {

absl::StatusOr<Pod> PodArg(const v1::Pod& pod) {
  // kube-scheduler always sends the pod it schedules; a missing or null one (or one without a
  // name) is a malformed request, not a pod that requests nothing.
  if (pod.metadata().name().empty()) {
    return absl::InvalidArgumentError(
        "Pod: missing, or without metadata.name (kube-scheduler sends the pod being scheduled)");
  }
  absl::StatusOr<Pod> out = PodFromProto(pod);
  if (!out.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Pod: ", out.status().message()));
  }
  return out;
}

}  // namespace

ExtenderBackend::ExtenderBackend(Extender* extender, WorkerPool* bind_pool, RpcMetrics* metrics,
                                 std::function<absl::Status()> ready)
    : extender_(extender), bind_pool_(bind_pool), metrics_(metrics), ready_(std::move(ready)) {}

void ExtenderBackend::Filter(const v1::Pod& pod, absl::Span<const absl::string_view> candidates,
                             FilterDone done) {
  RpcScope scope(metrics_, "Filter");
  absl::StatusOr<Pod> p = PodArg(pod);
  absl::StatusOr<FilterResult> result =
      p.ok() ? extender_->Filter(*p, candidates) : absl::StatusOr<FilterResult>(p.status());
  scope.Done(result.status());
  done(std::move(result));
}

void ExtenderBackend::Prioritize(const v1::Pod& pod, absl::Span<const absl::string_view> candidates,
                                 PrioritizeDone done) {
  RpcScope scope(metrics_, "Prioritize");
  webhook::PrioritizeAnswer answer;
  absl::StatusOr<Pod> p = PodArg(pod);
  absl::StatusOr<std::vector<int64_t>> scores =
      p.ok() ? extender_->Prioritize(*p, candidates)
             : absl::StatusOr<std::vector<int64_t>>(p.status());
  if (scores.ok()) {
    answer.scores.reserve(scores->size());
    for (size_t i = 0; i < scores->size(); ++i) answer.scores.emplace_back(i, (*scores)[i]);
  } else {
    answer.status = scores.status();
  }
  scope.Done(answer.status);
  done(std::move(answer));
}

void ExtenderBackend::Bind(const webhook::BindArgs& args, StatusDone done) {
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

void ExtenderBackend::Preempt(const v1::ExtenderPreemptionArgs& args, PreemptDone done) {
  RpcScope scope(metrics_, "Preempt");
  absl::StatusOr<Pod> pod = PodArg(args.pod());
  if (!pod.ok()) return done(scope.Done(pod.status()));
  // kube-scheduler sends victims as UIDs (nodeCacheCapable) or as full pods.
  std::map<std::string, std::vector<std::string>> victims;
  std::map<std::string, int64_t> pdb_violations;
  if (!args.node_name_to_meta_victims().empty()) {
    for (const auto& [node, meta] : args.node_name_to_meta_victims()) {
      std::vector<std::string>& uids = victims[node];
      for (const v1::MetaPod& p : meta.pods()) uids.push_back(p.uid());
      pdb_violations[node] = meta.num_pdb_violations();
    }
  } else {
    for (const auto& [node, full] : args.node_name_to_victims()) {
      std::vector<std::string>& uids = victims[node];
      for (const v1::Pod& p : full.pods()) uids.push_back(p.metadata().uid());
      pdb_violations[node] = full.num_pdb_violations();
    }
  }
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> kept =
      extender_->Preempt(*pod, victims);
  if (!kept.ok()) return done(scope.Done(kept.status()));
  v1::ExtenderPreemptionResult result;
  for (const auto& [node, uids] : *kept) {
    v1::MetaVictims& meta = (*result.mutable_node_name_to_meta_victims())[node];
    for (const std::string& uid : uids) meta.add_pods()->set_uid(uid);
    meta.set_num_pdb_violations(pdb_violations[node]);
  }
  scope.Done(absl::OkStatus());
  done(std::move(result));
}

void ExtenderBackend::CheckReady(StatusDone done) { done(ready_()); }

}  // namespace fitledger
