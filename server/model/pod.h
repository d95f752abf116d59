// The part of a Kubernetes Pod that fitledger reads, and its resource requests as
// NodeResourcesFit computes them (k8s.io/component-helpers/resource PodRequests).
#ifndef FITLEDGER_SERVER_MODEL_POD_H_
#define FITLEDGER_SERVER_MODEL_POD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/quantity.h"
#include "server/model/resources.h"

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
};

// status.containerStatuses[]: what the kubelet has actually allocated (in-place resize).
struct ContainerStatus {
  std::string name;
  QuantityList allocated_resources;  // status.containerStatuses[].allocatedResources
  QuantityList status_requests;      // status.containerStatuses[].resources.requests
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
  std::optional<QuantityList> pod_limits;    // spec.resources.limits
  std::vector<ContainerStatus> container_statuses;
  std::vector<ContainerStatus> init_container_statuses;

  // Succeeded or Failed: the pod no longer holds resources on its node.
  bool IsTerminal() const { return phase == "Succeeded" || phase == "Failed"; }
};

enum class RequestBasis {
  // The pod as specified: the incoming pod being scheduled.
  kSpec,
  // A pod already on a node: per container, the max of spec, allocatedResources and
  // status resources.requests (in-place resize), as the scheduler counts assigned pods.
  kSpecAndStatus,
};

// The pod's effective requests: max(sum of containers, init-time peak) + overhead, where init
// containers run in order with a running sum of restartable sidecars; pod-level
// spec.resources.requests replace the aggregate for cpu, memory and hugepages. A container
// request missing but its limit set defaults to the limit (the API server's defaulting). Sums are
// exact and rounded up once. `pods` is 1. Returns InvalidArgument for a negative request or an
// amount that overflows int64.
absl::StatusOr<Resources> PodRequests(const Pod& pod, RequestBasis basis);

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_MODEL_POD_H_
