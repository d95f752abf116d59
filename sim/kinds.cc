#include "sim/kinds.h"

#include "absl/strings/str_cat.h"

namespace fitledger::sim {

const std::vector<KindInfo>& AllKinds() {
  static const std::vector<KindInfo>* kinds = new std::vector<KindInfo>{
      {Kind::kPod, "Pod", "PodList", "pods", "pod", "", "v1", "v1", true, "po"},
      {Kind::kNode, "Node", "NodeList", "nodes", "node", "", "v1", "v1", false, "no"},
      {Kind::kEvent, "Event", "EventList", "events", "event", "", "v1", "v1", true, "ev"},
      {Kind::kDeployment, "Deployment", "DeploymentList", "deployments", "deployment", "apps", "v1",
       "apps/v1", true, "deploy"},
      {Kind::kReplicaSet, "ReplicaSet", "ReplicaSetList", "replicasets", "replicaset", "apps", "v1",
       "apps/v1", true, "rs"},
      {Kind::kLease, "Lease", "LeaseList", "leases", "lease", "coordination.k8s.io", "v1",
       "coordination.k8s.io/v1", true, ""},
  };
  return *kinds;
}

const KindInfo& InfoOf(Kind kind) { return AllKinds()[static_cast<int>(kind)]; }

std::optional<Kind> KindOfResource(absl::string_view group, absl::string_view resource) {
  for (const KindInfo& info : AllKinds()) {
    if (info.group == group && info.resource == resource) return info.kind;
  }
  return std::nullopt;
}

std::string QualifiedResource(Kind kind) {
  const KindInfo& info = InfoOf(kind);
  return info.group.empty() ? std::string(info.resource)
                            : absl::StrCat(info.resource, ".", info.group);
}

}  // namespace fitledger::sim
