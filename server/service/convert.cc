#include "server/service/convert.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fitledger {
namespace {

absl::StatusOr<QuantityList> ListFromProto(const google::protobuf::Map<std::string, std::string>& m,
                                           absl::string_view field) {
  QuantityList out;
  out.reserve(m.size());
  for (const auto& [name, text] : m) {
    absl::StatusOr<Quantity> q = Quantity::Parse(absl::StripAsciiWhitespace(text));
    if (!q.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".", name, ": ", q.status().message()));
    }
    out.emplace_back(name, *q);
  }
  // Map order is unspecified; keep results deterministic.
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

absl::Status ContainersFromProto(const google::protobuf::RepeatedPtrField<v1::Container>& in,
                                 absl::string_view field, std::vector<Container>* out) {
  out->reserve(in.size());
  for (int i = 0; i < in.size(); ++i) {
    const v1::Container& c = in[i];
    Container m;
    m.name = c.name();
    m.restartable = c.restart_policy() == "Always";
    std::string f = absl::StrCat(field, "[", i, "].resources");
    ASSIGN_OR_RETURN(m.requests, ListFromProto(c.resources().requests(), f + ".requests"));
    ASSIGN_OR_RETURN(m.limits, ListFromProto(c.resources().limits(), f + ".limits"));
    out->push_back(std::move(m));
  }
  return absl::OkStatus();
}

absl::Status StatusesFromProto(const google::protobuf::RepeatedPtrField<v1::ContainerStatus>& in,
                               absl::string_view field, std::vector<ContainerStatus>* out) {
  for (int i = 0; i < in.size(); ++i) {
    ContainerStatus s;
    s.name = in[i].name();
    s.has_resources = in[i].has_resources();
    std::string f = absl::StrCat(field, "[", i, "]");
    ASSIGN_OR_RETURN(s.allocated_resources,
                     ListFromProto(in[i].allocated_resources(), f + ".allocatedResources"));
    ASSIGN_OR_RETURN(s.status_requests,
                     ListFromProto(in[i].resources().requests(), f + ".resources.requests"));
    out->push_back(std::move(s));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Pod> PodFromProto(const v1::Pod& in) {
  Pod pod;
  pod.uid = in.metadata().uid();
  pod.namespace_name = in.metadata().namespace_();
  pod.name = in.metadata().name();
  pod.deleting = !in.metadata().deletion_timestamp().empty();
  pod.node_name = in.spec().node_name();
  pod.scheduler_name = in.spec().scheduler_name();
  pod.priority = in.spec().priority();
  pod.phase = in.status().phase();
  pod.status_reason = in.status().reason();
  pod.status_message = in.status().message();
  RETURN_IF_ERROR(ContainersFromProto(in.spec().containers(), "spec.containers", &pod.containers));
  RETURN_IF_ERROR(ContainersFromProto(in.spec().init_containers(), "spec.initContainers",
                                      &pod.init_containers));
  ASSIGN_OR_RETURN(pod.overhead, ListFromProto(in.spec().overhead(), "spec.overhead"));
  if (in.spec().has_resources()) {
    if (!in.spec().resources().requests().empty()) {
      ASSIGN_OR_RETURN(pod.pod_requests,
                       ListFromProto(in.spec().resources().requests(), "spec.resources.requests"));
    }
    if (!in.spec().resources().limits().empty()) {
      ASSIGN_OR_RETURN(pod.pod_limits,
                       ListFromProto(in.spec().resources().limits(), "spec.resources.limits"));
    }
  }
  RETURN_IF_ERROR(StatusesFromProto(in.status().container_statuses(), "status.containerStatuses",
                                    &pod.container_statuses));
  RETURN_IF_ERROR(StatusesFromProto(in.status().init_container_statuses(),
                                    "status.initContainerStatuses", &pod.init_container_statuses));
  return pod;
}

namespace {

void ListToProto(const QuantityList& list, google::protobuf::Map<std::string, std::string>* out) {
  for (const auto& [name, q] : list) (*out)[name] = q.ToString();
}

void ContainersToProto(const std::vector<Container>& in,
                       google::protobuf::RepeatedPtrField<v1::Container>* out) {
  out->Reserve(static_cast<int>(in.size()));
  for (const Container& c : in) {
    v1::Container* p = out->Add();
    p->set_name(c.name);
    if (c.restartable) p->set_restart_policy("Always");
    ListToProto(c.requests, p->mutable_resources()->mutable_requests());
    ListToProto(c.limits, p->mutable_resources()->mutable_limits());
  }
}

void StatusesToProto(const std::vector<ContainerStatus>& in,
                     google::protobuf::RepeatedPtrField<v1::ContainerStatus>* out) {
  for (const ContainerStatus& s : in) {
    v1::ContainerStatus* p = out->Add();
    p->set_name(s.name);
    ListToProto(s.allocated_resources, p->mutable_allocated_resources());
    if (s.has_resources) ListToProto(s.status_requests, p->mutable_resources()->mutable_requests());
  }
}

using MetaVictimsMap = google::protobuf::Map<std::string, v1::MetaVictims>;

void MetaVictimsToProto(const NodeVictims& victims, MetaVictimsMap* out) {
  for (const auto& [node, v] : victims) {
    v1::MetaVictims& meta = (*out)[node];
    for (const std::string& uid : v.pod_uids) meta.add_pods()->set_uid(uid);
    meta.set_num_pdb_violations(v.num_pdb_violations);
  }
}

NodeVictims MetaVictimsFromProto(const MetaVictimsMap& victims) {
  NodeVictims out;
  for (const auto& [node, meta] : victims) {
    Victims& v = out[node];
    for (const v1::MetaPod& p : meta.pods()) v.pod_uids.push_back(p.uid());
    v.num_pdb_violations = meta.num_pdb_violations();
  }
  return out;
}

}  // namespace

void PodToProto(const Pod& pod, v1::Pod* out) {
  v1::ObjectMeta* meta = out->mutable_metadata();
  meta->set_uid(pod.uid);
  meta->set_namespace_(pod.namespace_name);
  meta->set_name(pod.name);
  if (pod.deleting) meta->set_deletion_timestamp("1970-01-01T00:00:00Z");
  v1::PodSpec* spec = out->mutable_spec();
  spec->set_node_name(pod.node_name);
  spec->set_scheduler_name(pod.scheduler_name);
  spec->set_priority(pod.priority);
  ContainersToProto(pod.containers, spec->mutable_containers());
  ContainersToProto(pod.init_containers, spec->mutable_init_containers());
  ListToProto(pod.overhead, spec->mutable_overhead());
  if (pod.pod_requests)
    ListToProto(*pod.pod_requests, spec->mutable_resources()->mutable_requests());
  if (pod.pod_limits) ListToProto(*pod.pod_limits, spec->mutable_resources()->mutable_limits());
  v1::PodStatus* status = out->mutable_status();
  status->set_phase(pod.phase);
  status->set_reason(pod.status_reason);
  status->set_message(pod.status_message);
  StatusesToProto(pod.container_statuses, status->mutable_container_statuses());
  StatusesToProto(pod.init_container_statuses, status->mutable_init_container_statuses());
}

absl::StatusOr<PreemptArgs> PreemptArgsFromProto(const v1::ExtenderPreemptionArgs& args) {
  PreemptArgs out;
  ASSIGN_OR_RETURN(out.pod, PodFromProto(args.pod()));
  if (!args.node_name_to_meta_victims().empty()) {
    out.victims = MetaVictimsFromProto(args.node_name_to_meta_victims());
  } else {
    for (const auto& [node, full] : args.node_name_to_victims()) {
      Victims& v = out.victims[node];
      for (const v1::Pod& p : full.pods()) v.pod_uids.push_back(p.metadata().uid());
      v.num_pdb_violations = full.num_pdb_violations();
    }
  }
  return out;
}

void PreemptArgsToProto(const PreemptArgs& args, v1::ExtenderPreemptionArgs* out) {
  PodToProto(args.pod, out->mutable_pod());
  MetaVictimsToProto(args.victims, out->mutable_node_name_to_meta_victims());
}

void VictimsToProto(const NodeVictims& victims, v1::ExtenderPreemptionResult* out) {
  MetaVictimsToProto(victims, out->mutable_node_name_to_meta_victims());
}

NodeVictims VictimsFromProto(const v1::ExtenderPreemptionResult& result) {
  return MetaVictimsFromProto(result.node_name_to_meta_victims());
}

void ToProto(const Resources& r, v1::ResourceAmounts* out) {
  auto& m = *out->mutable_amounts();
  if (r.milli_cpu != 0) m["cpu"] = r.milli_cpu;
  if (r.memory_bytes != 0) m["memory"] = r.memory_bytes;
  if (r.ephemeral_storage_bytes != 0) m["ephemeral-storage"] = r.ephemeral_storage_bytes;
  if (r.pods != 0) m["pods"] = r.pods;
  for (const auto& [name, value] : r.scalars) m[name] = value;
}

}  // namespace fitledger
