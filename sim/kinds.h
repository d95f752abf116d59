// The kinds fitledger-sim serves and where each lives in the API: group, version, resource
// name, scope. One table, read by discovery, the OpenAPI documents, the HTTP routes and errors.
#ifndef FITLEDGER_SIM_KINDS_H_
#define FITLEDGER_SIM_KINDS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/selectors.h"

namespace fitledger::sim {

struct KindInfo {
  Kind kind;
  absl::string_view name;           // "Pod"
  absl::string_view list_kind;      // "PodList"
  absl::string_view resource;       // "pods"
  absl::string_view singular;       // "pod"
  absl::string_view group;          // "" (core), "apps" or "coordination.k8s.io"
  absl::string_view version;        // "v1"
  absl::string_view group_version;  // "v1", "apps/v1" or "coordination.k8s.io/v1"
  bool namespaced;
  absl::string_view short_name;  // "po"; empty if none
};

// Every kind, in Kind order, served by SimServer and ObjectApi from ClusterStore.
const std::vector<KindInfo>& AllKinds();
const KindInfo& InfoOf(Kind kind);
// The kind served as `resource` in `group` ("" for core). nullopt if none.
std::optional<Kind> KindOfResource(absl::string_view group, absl::string_view resource);
// The resource as the API server names it in messages: "pods", "deployments.apps".
std::string QualifiedResource(Kind kind);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_KINDS_H_
