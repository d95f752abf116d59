#include "server/service/convert.h"

#include <algorithm>

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

void ToProto(const Resources& r, v1::ResourceAmounts* out) {
  auto& m = *out->mutable_amounts();
  if (r.milli_cpu != 0) m["cpu"] = r.milli_cpu;
  if (r.memory_bytes != 0) m["memory"] = r.memory_bytes;
  if (r.ephemeral_storage_bytes != 0) m["ephemeral-storage"] = r.ephemeral_storage_bytes;
  if (r.pods != 0) m["pods"] = r.pods;
  for (const auto& [name, value] : r.scalars) m[name] = value;
}

}  // namespace fitledger
