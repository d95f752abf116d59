#include "server/service/grpc_services.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "proto/fitledger/v1/api_conventions.h"
#include "server/service/convert.h"

namespace fitledger {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {

// The call's reactor, its reply marked as the server's (api_conventions.h).
grpc::ServerUnaryReactor* Reactor(grpc::CallbackServerContext* context) {
  context->AddTrailingMetadata(v1::kServerOriginMetadata, "fitledger-server");
  return context->DefaultReactor();
}

// Finishes `context`'s call at once with `status`.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = Reactor(context);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The candidates of a Filter or Prioritize: NodeNames, or the names of the full Nodes. Views into
// `args`, which must outlive them.
std::vector<absl::string_view> CandidateNames(const v1::ExtenderArgs& args) {
  std::vector<absl::string_view> names;
  if (args.has_nodes()) {
    names.reserve(args.nodes().items_size());
    for (const v1::Node& node : args.nodes().items()) names.push_back(node.metadata().name());
  } else {
    names.reserve(args.node_names_size());
    for (const std::string& name : args.node_names()) names.push_back(name);
  }
  return names;
}

absl::StatusOr<Pod> RequirePod(const v1::Pod& pod) {
  absl::StatusOr<Pod> out = PodFromProto(pod);
  if (!out.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Pod: ", out.status().message()));
  }
  return out;
}

}  // namespace

ExtenderService::ExtenderService(webhook::Backend* backend) : backend_(backend) {
  SetMessageAllocatorFor_Filter(&filter_messages_);
  SetMessageAllocatorFor_Prioritize(&prioritize_messages_);
}

bool ExtenderService::KeepPooled(const v1::ExtenderArgs& args) {
  return !args.has_nodes() && args.node_names_size() <= kPooledCandidateNames;
}

grpc::ServerUnaryReactor* ExtenderService::Filter(grpc::CallbackServerContext* context,
                                                  const v1::ExtenderArgs* args,
                                                  v1::ExtenderFilterResult* result) {
  grpc::ServerUnaryReactor* reactor = Reactor(context);
  absl::StatusOr<Pod> pod = RequirePod(args->pod());
  if (!pod.ok()) {
    reactor->Finish(ToGrpcStatus(pod.status()));
    return reactor;
  }
  std::vector<absl::string_view> names = CandidateNames(*args);
  backend_->Filter(*pod, names, [reactor, args, result](absl::StatusOr<FilterResult> answer) {
    if (!answer.ok()) return reactor->Finish(ToGrpcStatus(answer.status()));
    // `args` lives until Finish: the names are read from it again here.
    const std::vector<absl::string_view> names = CandidateNames(*args);
    const size_t n = names.size();
    result->mutable_node_names()->Reserve(static_cast<int>(answer->fits.size()));
    for (size_t i : answer->fits) {
      if (i >= n) continue;
      result->add_node_names(names[i].data(), names[i].size());
      if (args->has_nodes()) {
        *result->mutable_nodes()->add_items() = args->nodes().items(static_cast<int>(i));
      }
    }
    if (args->has_nodes()) result->mutable_nodes();  // present, even if empty
    for (const auto& [i, why] : answer->failed) {
      if (i < n) (*result->mutable_failed_nodes())[std::string(names[i])] = std::string(why);
    }
    for (const auto& [i, why] : answer->unresolvable) {
      if (i < n) {
        (*result->mutable_failed_and_unresolvable_nodes())[std::string(names[i])] =
            std::string(why);
      }
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExtenderService::Prioritize(grpc::CallbackServerContext* context,
                                                      const v1::ExtenderArgs* args,
                                                      v1::HostPriorityList* result) {
  grpc::ServerUnaryReactor* reactor = Reactor(context);
  absl::StatusOr<Pod> pod = RequirePod(args->pod());
  if (!pod.ok()) {
    reactor->Finish(ToGrpcStatus(pod.status()));
    return reactor;
  }
  std::vector<absl::string_view> names = CandidateNames(*args);
  backend_->Prioritize(*pod, names, [reactor, args, result](webhook::PrioritizeAnswer answer) {
    if (!answer.status.ok()) {
      return reactor->Finish(ToGrpcStatus(answer.status));
    }
    const std::vector<absl::string_view> names = CandidateNames(*args);
    for (const auto& [i, score] : answer.scores) {
      if (i >= names.size()) continue;
      v1::HostPriority* host = result->add_items();
      host->set_host(names[i].data(), names[i].size());
      host->set_score(score);
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExtenderService::Bind(grpc::CallbackServerContext* context,
                                                const v1::ExtenderBindingArgs* args,
                                                v1::ExtenderBindingResult*) {
  grpc::ServerUnaryReactor* reactor = Reactor(context);
  backend_->Bind({args->pod_namespace(), args->pod_name(), args->pod_uid(), args->node()},
                 [reactor](absl::Status status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerUnaryReactor* ExtenderService::Preempt(grpc::CallbackServerContext* context,
                                                   const v1::ExtenderPreemptionArgs* args,
                                                   v1::ExtenderPreemptionResult* result) {
  grpc::ServerUnaryReactor* reactor = Reactor(context);
  absl::StatusOr<PreemptArgs> preempt = PreemptArgsFromProto(*args);
  if (!preempt.ok()) {
    reactor->Finish(ToGrpcStatus(
        absl::InvalidArgumentError(absl::StrCat("Pod: ", preempt.status().message()))));
    return reactor;
  }
  backend_->Preempt(*preempt, [reactor, result](absl::StatusOr<NodeVictims> r) {
    if (!r.ok()) return reactor->Finish(ToGrpcStatus(r.status()));
    VictimsToProto(*r, result);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

IntrospectionService::IntrospectionService(const Ledger* ledger, bool ledger_enabled,
                                           std::function<bool()> synced,
                                           std::function<std::string()> pods_resource_version,
                                           RejectionSource rejections, RpcMetrics* metrics)
    : ledger_(ledger),
      ledger_enabled_(ledger_enabled),
      synced_(std::move(synced)),
      pods_resource_version_(std::move(pods_resource_version)),
      rejections_(std::move(rejections)),
      metrics_(metrics) {}

grpc::ServerUnaryReactor* IntrospectionService::ListNodes(grpc::CallbackServerContext* context,
                                                          const v1::ListNodesRequest* request,
                                                          v1::ListNodesResponse* response) {
  RpcScope scope(metrics_, "ListNodes");
  return FinishNow(context, scope.Done(DoListNodes(*request, response)));
}

grpc::ServerUnaryReactor* IntrospectionService::ListAssumed(grpc::CallbackServerContext* context,
                                                            const v1::ListAssumedRequest*,
                                                            v1::ListAssumedResponse* response) {
  RpcScope scope(metrics_, "ListAssumed");
  return FinishNow(context, scope.Done(DoListAssumed(response)));
}

grpc::ServerUnaryReactor* IntrospectionService::Explain(grpc::CallbackServerContext* context,
                                                        const v1::ExplainRequest* request,
                                                        v1::ExplainResponse* response) {
  RpcScope scope(metrics_, "Explain");
  return FinishNow(context, scope.Done(DoExplain(*request, response)));
}

grpc::ServerUnaryReactor* IntrospectionService::ListRejections(
    grpc::CallbackServerContext* context, const v1::ListRejectionsRequest*,
    v1::ListRejectionsResponse* response) {
  RpcScope scope(metrics_, "ListRejections");
  return FinishNow(context, scope.Done(DoListRejections(response)));
}

absl::Status IntrospectionService::DoListNodes(const v1::ListNodesRequest& request,
                                               v1::ListNodesResponse* response) {
  std::set<std::string> wanted(request.names().begin(), request.names().end());
  for (const NodeSummary& n : ledger_->Nodes()) {
    if (!wanted.empty() && wanted.count(n.name) == 0) continue;
    v1::NodeView* view = response->add_nodes();
    view->set_name(n.name);
    view->set_known(n.known);
    ToProto(n.allocatable, view->mutable_allocatable());
    ToProto(n.confirmed, view->mutable_confirmed());
    ToProto(n.assumed, view->mutable_assumed());
    Resources free = n.allocatable;
    free.Subtract(n.confirmed);
    free.Subtract(n.assumed);
    ToProto(free, view->mutable_free());
    view->set_confirmed_pods(n.confirmed_pods);
    view->set_assumed_pods(n.assumed_pods);
  }
  response->set_synced(synced_());
  response->set_ledger_enabled(ledger_enabled_);
  response->set_pods_resource_version(pods_resource_version_());
  if (!ledger_->policy().all) {
    for (const std::string& name : ledger_->policy().managed) response->add_managed_resources(name);
  }
  return absl::OkStatus();
}

absl::Status IntrospectionService::DoListAssumed(v1::ListAssumedResponse* response) {
  absl::Time now = absl::Now();
  for (const AssumedPod& a : ledger_->Assumed()) {
    v1::AssumedEntry* e = response->add_assumed();
    e->set_uid(a.uid);
    e->set_namespace_(a.namespace_name);
    e->set_name(a.name);
    e->set_node(a.node_name);
    ToProto(a.requests, e->mutable_requests());
    e->set_age_seconds(absl::ToDoubleSeconds(now - a.assumed_at));
    e->set_bind_in_flight(a.bind_in_flight);
  }
  return absl::OkStatus();
}

absl::Status IntrospectionService::DoExplain(const v1::ExplainRequest& request,
                                             v1::ExplainResponse* response) {
  if (request.node().empty()) return absl::InvalidArgumentError("node is required");
  absl::StatusOr<Pod> pod = RequirePod(request.pod());
  if (!pod.ok()) return pod.status();
  absl::StatusOr<Resources> requests = PodRequests(*pod, RequestBasis::kSpec);
  if (!requests.ok()) return requests.status();
  // A pod that is already counted on the node is judged against the node without itself, and
  // the numbers leave it out too: both from one snapshot of the ledger.
  absl::StatusOr<Explanation> explained = ledger_->Explain(*requests, request.node(), pod->uid);
  if (!explained.ok()) return explained.status();
  const FitResult& fit = explained->fit;
  const NodeSummary& node = explained->node;
  response->set_fits(fit.fits);
  response->set_unresolvable(fit.unresolvable);
  if (!fit.reasons.empty()) {
    for (absl::string_view reason : absl::StrSplit(fit.reasons, ", ")) {
      response->add_reasons(reason.data(), reason.size());
    }
  }
  std::vector<std::string> names = {"pods", "cpu", "memory", "ephemeral-storage"};
  for (const auto& [name, value] : requests->scalars) names.push_back(name);
  for (const std::string& name : names) {
    int64_t requested = requests->Get(name);
    if (requested == 0 && name != "pods") continue;
    v1::ResourceExplanation* e = response->add_resources();
    e->set_resource(name);
    e->set_requested(requested);
    e->set_confirmed(node.confirmed.Get(name));
    e->set_assumed(node.assumed.Get(name));
    e->set_allocatable(node.allocatable.Get(name));
    int64_t free = node.allocatable.Get(name) - node.confirmed.Get(name) - node.assumed.Get(name);
    e->set_free(free);
    e->set_fits(requested <= free);
    e->set_accounted(name == "pods" ? ledger_->policy().all : ledger_->policy().Accounts(name));
  }
  return absl::OkStatus();
}

absl::Status IntrospectionService::DoListRejections(v1::ListRejectionsResponse* response) {
  auto [rejections, total] = rejections_();
  for (const kube::KubeletRejection& r : rejections) {
    v1::Rejection* out = response->add_rejections();
    out->set_namespace_(r.namespace_name);
    out->set_name(r.name);
    out->set_uid(r.uid);
    out->set_node(r.node);
    out->set_reason(r.reason);
    out->set_message(r.message);
    out->set_before_start(r.before_start);
  }
  response->set_total(static_cast<int64_t>(total));
  return absl::OkStatus();
}

}  // namespace fitledger
