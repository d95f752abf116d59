// The simulated kubelet's admission: the kubelet's own accounting of the pods it admitted on each
// node, checked the way pkg/kubelet/lifecycle/predicate.go does (NodeResourcesFit's fitsRequest
// order: pods, cpu, memory, ephemeral-storage, then extended / hugepages by name; only the first
// failing resource is reported).
#ifndef FITLEDGER_SIM_KUBELET_H_
#define FITLEDGER_SIM_KUBELET_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "server/model/resources.h"

namespace fitledger::sim {

// The kubelet's verdict. When rejected, `reason` is `OutOfcpu`, `OutOfmemory`, `OutOfpods`,
// `OutOfephemeral-storage` or `OutOf<resource name>`, and `message` is the pod's
// status.message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 400,
// used: 3800, capacity: 4000" (cpu in millicores, everything else in units).
struct Admission {
  bool admitted = true;
  std::string reason;
  std::string message;
};

// Checks `request` against `allocatable` with `used` already admitted (`used.pods` is the number
// of admitted pods). Extended resources the node does not advertise are ignored, as the kubelet
// drops them before checking; hugepages it does not advertise have capacity 0.
Admission CheckAdmission(const Resources& allocatable, const Resources& used,
                         const Resources& request);

// Per-node accounting of admitted, non-terminal pods, keyed by pod UID.
// Thread-compatible: the owner (ClusterStore) serializes access.
class KubeletAccounting {
 public:
  // Registers a node (or replaces its allocatable).
  void SetNode(absl::string_view node, const Resources& allocatable);
  bool HasNode(absl::string_view node) const;

  // Checks `uid` with `request` on `node` and records it when admitted. A UID already admitted
  // is admitted again without being counted twice. REQUIRES: HasNode(node).
  Admission Admit(absl::string_view node, absl::string_view uid, const Resources& request);
  // Records `uid` as admitted without checking (pre-populated clusters). REQUIRES: HasNode(node).
  void AddAdmitted(absl::string_view node, absl::string_view uid, const Resources& request);
  // Frees the capacity of `uid` (deleted or terminal). No-op for an unknown UID.
  void Release(absl::string_view uid);

  // What is admitted on `node` (zero for an unknown node).
  Resources Used(absl::string_view node) const;

 private:
  struct NodeState {
    Resources allocatable;
    Resources used;
  };
  struct PodEntry {
    std::string node;
    Resources request;
  };
  absl::flat_hash_map<std::string, NodeState> nodes_;
  absl::flat_hash_map<std::string, PodEntry> pods_;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_KUBELET_H_
