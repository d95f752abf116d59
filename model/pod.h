// The part of a Kubernetes Pod that fitledger reads, and its resource requests as
// NodeResourcesFit computes them (k8s.io/component-helpers/resource PodRequests).
#ifndef FITLEDGER_MODEL_POD_H_
#define FITLEDGER_MODEL_POD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/quantity.h"
#include "model/resources.h"

namespace fitledger {

// A Kubernetes ResourceList (`{"cpu": "500m", ...}`) with its quantities parsed exactly.
using QuantityList = std::vector<std::pair<std::string, Quantity>>;

struct Container {
  std::string name;
  // An init container with `restartPolicy: Always` (a sidecar): it keeps running, so it adds to
  // the steady-state sum as well as to the init-time peak.
  bool restartable = false;
  QuantityList requests;
  QuantityList limits;

  bool operator==(const Container&) const = default;
};

// status.containerStatuses[] / initContainerStatuses[]: what the kubelet has allocated and
// applied (in-place resize).
struct ContainerStatus {
  std::string name;
  QuantityList allocated_resources;  // .allocatedResources
  // .resources is present (not null). Only then does the status count (component-helpers
  // AggregateContainerRequests: `found && cs.Resources != nil`).
  bool has_resources = false;
  QuantityList status_requests;  // .resources.requests

  bool operator==(const ContainerStatus&) const = default;
};

struct Pod {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::string node_name;       // spec.nodeName; empty while unbound
  std::string scheduler_name;  // spec.schedulerName
  std::string phase;           // status.phase: Pending, Running, Succeeded, Failed, Unknown
  std::string status_reason;   // status.reason, e.g. "OutOfcpu" from a kubelet rejection
  std::string status_message;  // status.message
  bool deleting = false;       // metadata.deletionTimestamp is set
  int32_t priority = 0;
  std::vector<Container> containers;
  std::vector<Container> init_containers;
  QuantityList overhead;                     // spec.overhead
  std::optional<QuantityList> pod_requests;  // spec.resources.requests (pod-level resources)
  std::optional<QuantityList> pod_limits;    // spec.resources.limits (not counted: see PodRequests)
  std::vector<ContainerStatus> container_statuses;
  std::vector<ContainerStatus> init_container_statuses;
  // status.resize (Kubernetes 1.32 and earlier): "Proposed", "InProgress", "Deferred",
  // "Infeasible"; empty when absent.
  std::string resize;
  // The reason of the first status.conditions[] entry of type PodResizePending (Kubernetes
  // 1.33+): "Deferred" or "Infeasible"; empty when there is none.
  std::string resize_pending_reason;
  // The pod-level status of in-place resize (Kubernetes 1.35+, InPlacePodLevelResourcesVertical-
  // Scaling): status.resources is present (not null), its requests, and status.allocatedResources.
  bool has_status_resources = false;
  QuantityList status_pod_requests;
  QuantityList status_allocated_resources;

  // Succeeded or Failed: the pod no longer holds resources on its node.
  bool IsTerminal() const { return phase == "Succeeded" || phase == "Failed"; }

  bool operator==(const Pod&) const = default;
};

// True when the kubelet marked the pod's in-place resize infeasible: condition PodResizePending
// with reason Infeasible (component-helpers IsPodResizeInfeasible, 1.33+), or status.resize
// "Infeasible" (1.32 and earlier; a pod carries one or the other).
bool IsPodResizeInfeasible(const Pod& pod);

enum class RequestBasis {
  // The pod as specified: the incoming pod being scheduled (NodeResourcesFit's
  // computePodResourceRequest, and the scoring's calculatePodResourceRequest).
  kSpec,
  // A pod already on a node, as kube-scheduler 1.37's NodeInfo counts it (framework/types.go
  // CalculateResource: UseStatusResources, with InPlacePodLevelResourcesVerticalScaling, beta
  // and on by default since 1.36). The containers count max(spec, actuated, allocated), each an
  // aggregate of its own (a max of sums): actuated and allocated are the pod-level status's
  // (status.resources.requests and status.allocatedResources) when it carries both, else each
  // container's status's (actuated: status resources.requests, else allocatedResources, else
  // the spec; allocated: allocatedResources, else the spec). When the resize is infeasible
  // (condition PodResizePending, reason Infeasible) the spec does not count, and a container
  // without status counts nothing. Pod-level requests in the spec, when the status carries
  // pod-level resources, count max(spec (not when infeasible), status.resources.requests,
  // status.allocatedResources) for the pod-level resources.
  kSpecAndStatus,
};

// The pod's effective requests, as k8s.io/component-helpers/resource PodRequests computes them
// (helpers.go, Kubernetes 1.37; docs/how-it-works.md says where earlier releases differ):
// max(sum of containers, init-time peak) + overhead, where init containers run in order with a
// running sum of restartable sidecars; pod-level spec.resources.requests replace the aggregate
// for cpu, memory and hugepages. A container request missing but its limit set defaults to the
// limit (the API server's defaulting, done again here for a pod that was not stored; pod-level
// limits are not read: the API server defaults a pod-level request from them when it stores the
// pod, and kube-scheduler counts what is stored). Sums are exact and rounded up once (cpu in
// millicores). `pods` is 1.
//
// Also fills the scoring amounts `non_zero_milli_cpu` / `non_zero_memory_bytes`: the same sum
// with each container missing a cpu (memory) request counted at 100m (200Mi)
// (NonMissingContainerRequests). For kSpec the defaults apply to every container that misses the
// request (resource_allocation.go calculatePodResourceRequest); for kSpecAndStatus, when the pod
// has pod-level requests, only to resources the pod's requests lack (framework/types.go
// calculateResource, getNonMissingContainerRequests).
//
// tests/upstream/suite/e2e/requests_test.go holds both bases equal to upstream's own code on a
// corpus of generated pods.
//
// Returns InvalidArgument for a negative request or an amount that overflows int64.
absl::StatusOr<Resources> PodRequests(const Pod& pod, RequestBasis basis);

}  // namespace fitledger

#endif  // FITLEDGER_MODEL_POD_H_
