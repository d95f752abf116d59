// The simulated kubelet's admission of the pods bound to its nodes: the sim's own implementation
// of what kubelet v1.37 does (each rule names its upstream file; sim/README.md "The kubelet's
// admission" lists them with the tests that check them). The kubelet runs its admit handlers in
// order and stops at the first refusal (pkg/kubelet/kubelet.go NewMainKubelet registers the
// resource allocator before the predicate handler; allocation/allocation_manager.go canAdmitPod):
//
//  1. The device manager (pkg/kubelet/cm/devicemanager/manager.go Allocate,
//     allocateContainerResources, devicesToAllocate; called per container, init containers first,
//     by cm/topologymanager/scope_container.go Admit). For each device-plugin resource in a
//     container's limits: a registered resource with no healthy device is refused; otherwise the
//     devices an earlier non-restartable init container of the pod held are reused first, and the
//     rest must be free (healthy, not allocated to an admitted pod nor to this pod already).
//     A refusal is reason UnexpectedAdmissionError, message "Allocate failed due to <error>,
//     which is unexpected" (cm/admission/errors.go GetPodAdmitResult).
//  2. The predicate handler (pkg/kubelet/lifecycle/predicate.go Admit): the node's allocatable
//     raised to the devices allocated, when this pod got some (manager.go UpdatePluginResources,
//     sanitizeNodeAllocatable); the extended resources the node does not list, and DRA-backed
//     ones, dropped from the containers' requests (removeMissingExtendedResources); then
//     noderesources.Fits (pkg/scheduler/framework/plugins/noderesources/fit.go fitsRequest, via
//     scheduler.AdmissionCheck): pods count, cpu, memory, ephemeral-storage, then the scalar
//     resources, each against allocatable minus the admitted pods' requests (NodeInfo.Requested,
//     not the non-zero defaults the scheduler scores with). Only the first failure is reported:
//     reason OutOfcpu, OutOfmemory, OutOfephemeral-storage, OutOfpods or OutOf<name>, message
//     "Node didn't have enough resource: <name>, requested: <n>, used: <n>, capacity: <n>".
//
// Not modelled: the other admit handlers (eviction, sysctls, AppArmor, pod features, OS and
// node-affinity / node-name / host-port / NoExecute-taint predicates) and critical pods'
// preemption of others at admission; devices are counted, not named (no NUMA alignment, no
// GetPreferredAllocation); status resources of resized pods. Upstream checks several failing
// scalar resources, and a container's device resources, in Go map order (at random); the sim
// checks them by name.
#ifndef FITLEDGER_SIM_KUBELET_H_
#define FITLEDGER_SIM_KUBELET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "sim/pod_requests.h"

namespace fitledger::sim {

// The kubelet's verdict (lifecycle.PodAdmitResult). When refused, `reason` and `message` are the
// handler's; the pod's status.message is "Pod was rejected: " + message (kubelet.go rejectPod).
struct Admission {
  bool admitted = true;
  std::string reason;
  std::string message;
};

// Healthy devices per device-plugin resource name on one node (what the device plugins report).
using DeviceCounts = std::map<std::string, int64_t, std::less<>>;

// Per-node accounting of admitted, non-terminal pods, keyed by pod UID.
// Thread-compatible: the owner (ClusterStore, or the admit command) serializes access.
class KubeletAccounting {
 public:
  // Registers a node with its status.allocatable and its device-plugin resources (or replaces
  // them). The devices are the device manager's; the node's allocatable should list them too, as
  // the kubelet reports them.
  void SetNode(absl::string_view node, const ResourceList& allocatable, DeviceCounts devices = {});
  bool HasNode(absl::string_view node) const;

  // Runs the admission above for `pod` with `uid` on `node` and records it when admitted. A UID
  // already admitted is admitted again without being counted twice. REQUIRES: HasNode(node).
  Admission Admit(absl::string_view node, absl::string_view uid, const KubeletPod& pod);
  // Records `uid` as admitted without checking (pre-populated clusters), with the devices the
  // device manager would give it. REQUIRES: HasNode(node).
  void AddAdmitted(absl::string_view node, absl::string_view uid, const KubeletPod& pod);
  // Frees what `uid` holds (deleted or terminal). No-op for an unknown UID.
  void Release(absl::string_view uid);

  // The node's allocatable and its admitted pods' requests of `resource` ("cpu" in millicores,
  // "pods": the count), 0 for an unknown node or resource.
  int64_t Allocatable(absl::string_view node, absl::string_view resource) const;
  int64_t Requested(absl::string_view node, absl::string_view resource) const;

 private:
  struct NodeState {
    ResourceAmounts allocatable;
    DeviceCounts devices;
    ResourceAmounts requested;  // `pods` is the number of admitted pods
    DeviceCounts devices_in_use;
  };
  struct PodEntry {
    std::string node;
    ResourceAmounts counted;
    DeviceCounts devices;
  };
  void Record(NodeState& state, absl::string_view node, absl::string_view uid,
              const KubeletPod& pod, DeviceCounts devices);

  absl::flat_hash_map<std::string, NodeState> nodes_;
  absl::flat_hash_map<std::string, PodEntry> pods_;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_KUBELET_H_
