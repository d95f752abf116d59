#include "server/service/grpc_services.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/service/convert.h"
#include "server/service/extender_wire.h"

namespace fitledger {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

RpcMetrics::RpcMetrics(MetricsRegistry* registry)
    : requests(registry->Counter("fitledger_server_requests_total",
                                 "gRPC requests by method and status code.", {"method", "code"})),
      latency(registry->Histogram("fitledger_server_request_duration_seconds",
                                  "gRPC request latency in seconds by method.", {"method"},
                                  LatencyBuckets())) {}

void RpcMetrics::Record(const char* method, const absl::Status& status, absl::Duration elapsed) {
  requests->Increment({method, absl::StatusCodeToString(status.code())});
  latency->Observe({method}, absl::ToDoubleSeconds(elapsed));
}

namespace {

// Records the rpc's outcome and latency when it returns.
class RpcScope {
 public:
  RpcScope(RpcMetrics* metrics, const char* method)
      : metrics_(metrics), method_(method), start_(absl::Now()) {}
  grpc::Status Done(const absl::Status& status) {
    metrics_->Record(method_, status, absl::Now() - start_);
    return ToGrpcStatus(status);
  }

 private:
  RpcMetrics* metrics_;
  const char* method_;
  absl::Time start_;
};

// Views into `args`, which must outlive them.
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

ExtenderService::ExtenderService(Extender* extender, RpcMetrics* metrics)
    : extender_(extender), metrics_(metrics) {
  SetMessageAllocatorFor_Filter(&filter_messages_);
  SetMessageAllocatorFor_Prioritize(&prioritize_messages_);
}

bool ExtenderService::KeepPooled(const v1::ExtenderArgs& args) {
  return !args.has_nodes() && args.node_names_size() <= kPooledCandidateNames;
}

grpc::ServerUnaryReactor* ExtenderService::Filter(grpc::CallbackServerContext* context,
                                                  const v1::ExtenderArgs* args,
                                                  v1::ExtenderFilterResult* result) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(DoFilter(args, result));
  return reactor;
}

grpc::ServerUnaryReactor* ExtenderService::Prioritize(grpc::CallbackServerContext* context,
                                                      const v1::ExtenderArgs* args,
                                                      v1::HostPriorityList* result) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(DoPrioritize(args, result));
  return reactor;
}

grpc::Status ExtenderService::DoFilter(const v1::ExtenderArgs* args,
                                       v1::ExtenderFilterResult* result) {
  RpcScope scope(metrics_, "Filter");
  absl::StatusOr<Pod> pod = RequirePod(args->pod());
  if (!pod.ok()) return scope.Done(pod.status());
  std::vector<absl::string_view> names = CandidateNames(*args);
  absl::StatusOr<FilterResult> filtered = extender_->Filter(*pod, names);
  if (!filtered.ok()) return scope.Done(filtered.status());
  const bool by_index = args->reply_node_indexes() && !args->has_nodes();
  if (by_index) {
    result->mutable_node_indexes()->Reserve(static_cast<int>(filtered->fits.size()));
  } else {
    result->mutable_node_names()->Reserve(static_cast<int>(filtered->fits.size()));
  }
  for (size_t i : filtered->fits) {
    if (by_index) {
      result->add_node_indexes(static_cast<uint32_t>(i));
    } else {
      result->add_node_names(names[i].data(), names[i].size());
    }
    if (args->has_nodes())
      *result->mutable_nodes()->add_items() = args->nodes().items(static_cast<int>(i));
  }
  if (args->has_nodes()) result->mutable_nodes();  // present, even if empty
  for (const auto& [i, why] : filtered->failed)
    (*result->mutable_failed_nodes())[std::string(names[i])] = why;
  for (const auto& [i, why] : filtered->unresolvable) {
    (*result->mutable_failed_and_unresolvable_nodes())[std::string(names[i])] = why;
  }
  return scope.Done(absl::OkStatus());
}

grpc::Status ExtenderService::DoPrioritize(const v1::ExtenderArgs* args,
                                           v1::HostPriorityList* result) {
  RpcScope scope(metrics_, "Prioritize");
  absl::StatusOr<Pod> pod = RequirePod(args->pod());
  if (!pod.ok()) return scope.Done(pod.status());
  std::vector<absl::string_view> names = CandidateNames(*args);
  absl::StatusOr<std::vector<int64_t>> scores = extender_->Prioritize(*pod, names);
  if (!scores.ok()) return scope.Done(scores.status());
  for (size_t i = 0; i < names.size(); ++i) {
    v1::HostPriority* host = result->add_items();
    host->set_host(names[i].data(), names[i].size());
    host->set_score((*scores)[i]);
  }
  return scope.Done(absl::OkStatus());
}

grpc::Status ExtenderService::FilterToWire(const v1::Pod& pod_proto,
                                           absl::Span<const absl::string_view> names, bool by_index,
                                           std::string* out) {
  RpcScope scope(metrics_, "Filter");
  absl::StatusOr<Pod> pod = RequirePod(pod_proto);
  if (!pod.ok()) return scope.Done(pod.status());
  absl::StatusOr<FilterResult> filtered = extender_->Filter(*pod, names);
  if (!filtered.ok()) return scope.Done(filtered.status());
  WriteFilterResult(names, *filtered, by_index, out);
  return scope.Done(absl::OkStatus());
}

grpc::Status ExtenderService::PrioritizeToWire(const v1::Pod& pod_proto,
                                               absl::Span<const absl::string_view> names,
                                               std::string* out) {
  RpcScope scope(metrics_, "Prioritize");
  absl::StatusOr<Pod> pod = RequirePod(pod_proto);
  if (!pod.ok()) return scope.Done(pod.status());
  absl::StatusOr<std::vector<int64_t>> scores = extender_->Prioritize(*pod, names);
  if (!scores.ok()) return scope.Done(scores.status());
  WriteHostPriorityList(names, *scores, out);
  return scope.Done(absl::OkStatus());
}

grpc::Status ExtenderService::Bind(grpc::ServerContext*, const v1::ExtenderBindingArgs* args,
                                   v1::ExtenderBindingResult*) {
  RpcScope scope(metrics_, "Bind");
  return scope.Done(
      extender_->Bind({args->pod_namespace(), args->pod_name(), args->pod_uid(), args->node()}));
}

grpc::Status ExtenderService::Preempt(grpc::ServerContext*, const v1::ExtenderPreemptionArgs* args,
                                      v1::ExtenderPreemptionResult* result) {
  RpcScope scope(metrics_, "Preempt");
  absl::StatusOr<Pod> pod = RequirePod(args->pod());
  if (!pod.ok()) return scope.Done(pod.status());
  std::map<std::string, std::vector<std::string>> victims;
  std::map<std::string, int64_t> pdb_violations;
  if (!args->node_name_to_meta_victims().empty()) {
    for (const auto& [node, meta] : args->node_name_to_meta_victims()) {
      auto& uids = victims[node];
      for (const v1::MetaPod& p : meta.pods()) uids.push_back(p.uid());
      pdb_violations[node] = meta.num_pdb_violations();
    }
  } else {
    for (const auto& [node, full] : args->node_name_to_victims()) {
      auto& uids = victims[node];
      for (const v1::Pod& p : full.pods()) uids.push_back(p.metadata().uid());
      pdb_violations[node] = full.num_pdb_violations();
    }
  }
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> kept =
      extender_->Preempt(*pod, victims);
  if (!kept.ok()) return scope.Done(kept.status());
  for (const auto& [node, uids] : *kept) {
    v1::MetaVictims& meta = (*result->mutable_node_name_to_meta_victims())[node];
    for (const std::string& uid : uids) meta.add_pods()->set_uid(uid);
    meta.set_num_pdb_violations(pdb_violations[node]);
  }
  return scope.Done(absl::OkStatus());
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

grpc::Status IntrospectionService::ListNodes(grpc::ServerContext*,
                                             const v1::ListNodesRequest* request,
                                             v1::ListNodesResponse* response) {
  RpcScope scope(metrics_, "ListNodes");
  std::set<std::string> wanted(request->names().begin(), request->names().end());
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
  return scope.Done(absl::OkStatus());
}

grpc::Status IntrospectionService::ListAssumed(grpc::ServerContext*, const v1::ListAssumedRequest*,
                                               v1::ListAssumedResponse* response) {
  RpcScope scope(metrics_, "ListAssumed");
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
  return scope.Done(absl::OkStatus());
}

grpc::Status IntrospectionService::Explain(grpc::ServerContext*, const v1::ExplainRequest* request,
                                           v1::ExplainResponse* response) {
  RpcScope scope(metrics_, "Explain");
  if (request->node().empty()) return scope.Done(absl::InvalidArgumentError("node is required"));
  absl::StatusOr<Pod> pod = RequirePod(request->pod());
  if (!pod.ok()) return scope.Done(pod.status());
  absl::StatusOr<Resources> requests = PodRequests(*pod, RequestBasis::kSpec);
  if (!requests.ok()) return scope.Done(requests.status());
  // A pod that is already counted on the node is judged against the node without itself.
  const std::string& uid = pod->uid;
  absl::StatusOr<FitResult> fit = ledger_->Fit(*requests, request->node(), uid);
  if (!fit.ok()) return scope.Done(fit.status());
  response->set_fits(fit->fits);
  response->set_unresolvable(fit->unresolvable);
  for (const std::string& reason : fit->reasons) response->add_reasons(reason);
  NodeSummary node;
  for (NodeSummary& n : ledger_->Nodes()) {
    if (n.name == request->node()) node = std::move(n);
  }
  if (!uid.empty()) {
    // Leave the pod's own counted requests out of the numbers as well.
    auto [own, assumed] = ledger_->CountedRequests(uid, request->node());
    (assumed ? node.assumed : node.confirmed).Subtract(own);
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
  return scope.Done(absl::OkStatus());
}

grpc::Status IntrospectionService::ListRejections(grpc::ServerContext*,
                                                  const v1::ListRejectionsRequest*,
                                                  v1::ListRejectionsResponse* response) {
  RpcScope scope(metrics_, "ListRejections");
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
  return scope.Done(absl::OkStatus());
}

}  // namespace fitledger
