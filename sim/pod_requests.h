// What the simulated kubelet reads of a pod and a node for admission, and the sums upstream
// makes of it: resource lists, resource-name classes (pkg/apis/core/v1/helper, pkg/scheduler/
// util), a pod's effective request (k8s.io/component-helpers resource/helpers.go PodRequests)
// and the scheduler framework's Resource (pkg/scheduler/framework/types.go) that
// noderesources.Fits compares. The sim's own code: nothing here comes from fitledger's server/.
// Plain functions and values.
#ifndef FITLEDGER_SIM_POD_REQUESTS_H_
#define FITLEDGER_SIM_POD_REQUESTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sim/resource_quantity.h"

namespace fitledger::sim {

// A v1.ResourceList, in name order.
using ResourceList = std::map<std::string, ResourceQuantity, std::less<>>;

// A v1.ResourceList from JSON: an object of quantities, each a string (trimmed, as
// Quantity.UnmarshalJSON does) or a number (read as its JSON text). Null: empty.
// InvalidArgument naming `path` and the resource for anything else or a bad quantity.
absl::StatusOr<ResourceList> ParseResourceList(const nlohmann::json& list, absl::string_view path);

// v1helper.IsExtendedResourceName: a name with a '/' outside kubernetes.io/, not "requests."-
// prefixed, and a qualified name once prefixed with "requests." (example.com/gpu).
bool IsExtendedResourceName(absl::string_view name);
// schedutil.IsScalarResourceName: extended, hugepages-*, *kubernetes.io/*, attachable-volumes-*:
// the names framework.Resource keeps in ScalarResources. Any other name but cpu, memory,
// ephemeral-storage and pods is dropped by it.
bool IsScalarResourceName(absl::string_view name);

// One container of a pod, as admission reads it.
struct KubeletContainer {
  std::string name;
  ResourceList requests;  // resources.requests
  ResourceList limits;    // resources.limits: what the device manager allocates
  // An init container with restartPolicy Always: a sidecar (helpers.go isRestartableInitContainer).
  bool restartable = false;
  // Resources of this container backed by DRA (status.extendedResourceClaimStatus.
  // requestMappings): removeMissingExtendedResources drops their requests and the device manager
  // skips them (predicate.go, devicemanager/manager.go isDRAExtendedResource).
  std::vector<std::string> dra_backed;
};

// A pod as the kubelet's admission reads it.
struct KubeletPod {
  std::string name;  // metadata.name
  std::vector<KubeletContainer> init_containers;
  std::vector<KubeletContainer> containers;
  ResourceList overhead;      // spec.overhead
  ResourceList pod_requests;  // spec.resources.requests (pod-level resources)
};

// Reads `pod` (a v1.Pod as JSON). Absent lists and fields are empty. InvalidArgument naming the
// field for a wrong JSON type or a bad quantity.
absl::StatusOr<KubeletPod> ParseKubeletPod(const nlohmann::json& pod);

// PodRequests with the options the kubelet's admission uses (noderesources
// computePodResourceRequest with PodLevelResources on, its default since 1.34; no status resources,
// no DRA claim allocations): the sum of the app containers and the sidecars, at least each init
// container with the sidecars started before it; pod-level requests (cpu, memory, hugepages-*)
// replace that sum for their resources when set; plus spec.overhead. Exact: rounding comes later.
ResourceList PodRequests(const KubeletPod& pod);

// framework.Resource: amounts in the units Fits compares, cpu in millicores (MilliValue), the
// rest in units (Value), each rounded up.
struct ResourceAmounts {
  int64_t milli_cpu = 0;
  int64_t memory_bytes = 0;
  int64_t ephemeral_storage_bytes = 0;
  int64_t pods = 0;  // AllowedPodNumber
  // ScalarResources: present even at 0 when listed (removeMissingExtendedResources asks whether a
  // name is listed, not whether it is positive).
  std::map<std::string, int64_t, std::less<>> scalars;

  // Resource.Add: adds each listed resource (cpu, memory, ephemeral-storage, pods, scalars).
  void Add(const ResourceList& list);
  // Resource.SetMaxResource: the larger of each (cpu, memory, ephemeral-storage, scalars; not
  // pods).
  void SetMax(const ResourceList& list);
  // Adds (sign 1) or subtracts (sign -1) every amount of `other`, pods included (NodeInfo.update).
  void Add(const ResourceAmounts& other, int64_t sign = 1);
  // One resource by its API name ("cpu" in millicores); 0 when not listed.
  int64_t Get(absl::string_view name) const;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_POD_REQUESTS_H_
