#include "sim/kubelet.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fitledger::sim {
namespace {

bool Contains(const std::vector<std::string>& list, absl::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

int64_t CountOf(const DeviceCounts& counts, absl::string_view name) {
  auto it = counts.find(name);
  return it == counts.end() ? 0 : it->second;
}

// The device manager's allocation for `pod` (manager.go Allocate per container, init containers
// first), given each resource's healthy devices and those admitted pods hold. Fills `allocated`
// with the devices the pod holds in all (its containers' and its init containers'), or returns
// the device manager's error. With `check` false nothing is refused (pre-populated pods).
std::optional<std::string> AllocateDevices(const KubeletPod& pod, const DeviceCounts& healthy,
                                           const DeviceCounts& in_use, bool check,
                                           DeviceCounts* allocated) {
  DeviceCounts reusable;  // devicesToReuse: held by finished (non-restartable) init containers
  auto allocate = [&](const KubeletContainer& c, bool init) -> std::optional<std::string> {
    for (const auto& [name, limit] : c.limits) {   // allocateContainerResources: limits only
      if (Contains(c.dra_backed, name)) continue;  // isDRAExtendedResource
      auto device = healthy.find(name);
      if (device == healthy.end()) continue;  // !isDevicePluginResource
      // devicesToAllocate.
      if (check && device->second == 0) {
        return absl::StrCat("no healthy devices present; cannot allocate unhealthy devices ", name);
      }
      int64_t needed = limit.Value();
      if (needed == 0) continue;
      const int64_t from_reuse = std::min(needed, CountOf(reusable, name));
      needed -= from_reuse;
      const int64_t available = device->second - CountOf(in_use, name) - CountOf(*allocated, name);
      if (check && needed > 0 && available < needed) {
        return absl::StrCat("requested number of devices unavailable for ", name,
                            ". Requested: ", needed, ", Available: ", available);
      }
      (*allocated)[name] += needed;
      // Allocate: a non-restartable init container's devices become reusable by the containers
      // after it (addContainerAllocatedResources); a sidecar's or an app container's do not
      // (removeContainerAllocatedResources).
      if (init && !c.restartable) {
        reusable[name] += needed;
      } else {
        reusable[name] -= from_reuse;
      }
    }
    return std::nullopt;
  };
  for (const KubeletContainer& c : pod.init_containers) {
    if (auto error = allocate(c, /*init=*/true)) return error;
  }
  for (const KubeletContainer& c : pod.containers) {
    if (auto error = allocate(c, /*init=*/false)) return error;
  }
  return std::nullopt;
}

// predicate.go removeMissingExtendedResources: the containers' requests without the extended
// resources the node does not list, nor those backed by DRA.
KubeletPod WithoutMissingExtendedResources(const KubeletPod& pod,
                                           const ResourceAmounts& allocatable) {
  KubeletPod out = pod;
  for (auto* list : {&out.containers, &out.init_containers}) {
    for (KubeletContainer& c : *list) {
      for (auto it = c.requests.begin(); it != c.requests.end();) {
        const std::string& name = it->first;
        const bool dra_name = IsExtendedResourceName(name) ||
                              absl::StartsWith(name, "deviceclass.resource.kubernetes.io/");
        const bool drop = (dra_name && Contains(c.dra_backed, name)) ||
                          (IsExtendedResourceName(name) && !allocatable.scalars.contains(name));
        it = drop ? c.requests.erase(it) : std::next(it);
      }
    }
  }
  return out;
}

Admission Refuse(std::string reason, std::string message) {
  return Admission{.admitted = false, .reason = std::move(reason), .message = std::move(message)};
}

// InsufficientResourceError, with the predicate handler's reason (OutOf + the resource name:
// OutOfcpu, OutOfmemory, OutOfephemeral-storage, OutOfpods, OutOf<extended>).
Admission Insufficient(absl::string_view resource, int64_t requested, int64_t used,
                       int64_t capacity) {
  return Refuse(absl::StrCat("OutOf", resource),
                absl::StrCat("Node didn't have enough resource: ", resource, ", requested: ",
                             requested, ", used: ", used, ", capacity: ", capacity));
}

// fit.go fitsRequest, reporting only the first insufficient resource.
Admission Fits(const ResourceAmounts& request, const ResourceAmounts& allocatable,
               const ResourceAmounts& requested) {
  if (requested.pods + 1 > allocatable.pods) {
    return Insufficient("pods", 1, requested.pods, allocatable.pods);
  }
  if (request.milli_cpu == 0 && request.memory_bytes == 0 && request.ephemeral_storage_bytes == 0 &&
      request.scalars.empty()) {
    return Admission{};
  }
  if (request.milli_cpu > 0 && request.milli_cpu > allocatable.milli_cpu - requested.milli_cpu) {
    return Insufficient("cpu", request.milli_cpu, requested.milli_cpu, allocatable.milli_cpu);
  }
  if (request.memory_bytes > 0 &&
      request.memory_bytes > allocatable.memory_bytes - requested.memory_bytes) {
    return Insufficient("memory", request.memory_bytes, requested.memory_bytes,
                        allocatable.memory_bytes);
  }
  if (request.ephemeral_storage_bytes > 0 &&
      request.ephemeral_storage_bytes >
          allocatable.ephemeral_storage_bytes - requested.ephemeral_storage_bytes) {
    return Insufficient("ephemeral-storage", request.ephemeral_storage_bytes,
                        requested.ephemeral_storage_bytes, allocatable.ephemeral_storage_bytes);
  }
  for (const auto& [name, amount] : request.scalars) {  // by name (upstream: map order)
    if (amount == 0) continue;
    const int64_t capacity = allocatable.Get(name);
    const int64_t used = requested.Get(name);
    if (amount > capacity - used) return Insufficient(name, amount, used, capacity);
  }
  return Admission{};
}

}  // namespace

void KubeletAccounting::SetNode(absl::string_view node, const ResourceList& allocatable,
                                DeviceCounts devices) {
  NodeState& state = nodes_[node];
  state.allocatable = ResourceAmounts{};
  state.allocatable.Add(allocatable);  // NodeInfo.SetNode: NewResource(status.allocatable)
  state.devices = std::move(devices);
}

bool KubeletAccounting::HasNode(absl::string_view node) const { return nodes_.contains(node); }

Admission KubeletAccounting::Admit(absl::string_view node, absl::string_view uid,
                                   const KubeletPod& pod) {
  if (pods_.contains(uid)) return Admission{};
  NodeState& state = nodes_[node];
  // 1. The device manager.
  DeviceCounts devices;
  if (std::optional<std::string> error =
          AllocateDevices(pod, state.devices, state.devices_in_use, /*check=*/true, &devices)) {
    return Refuse("UnexpectedAdmissionError",
                  absl::StrCat("Allocate failed due to ", *error, ", which is unexpected"));
  }
  // 2. The predicate handler.
  ResourceAmounts allocatable = state.allocatable;
  const bool has_devices =
      std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d.second > 0; });
  if (has_devices) {  // UpdatePluginResources -> sanitizeNodeAllocatable
    for (const auto& [name, healthy] : state.devices) {
      const int64_t allocated = CountOf(state.devices_in_use, name) + CountOf(devices, name);
      if (allocated == 0) continue;
      auto it = allocatable.scalars.find(name);
      if (it == allocatable.scalars.end() || it->second < allocated) {
        allocatable.scalars[name] = allocated;
      }
    }
  }
  ResourceAmounts request;  // computePodResourceRequest: SetMaxResource(PodRequests)
  request.SetMax(PodRequests(WithoutMissingExtendedResources(pod, allocatable)));
  Admission admission = Fits(request, allocatable, state.requested);
  if (admission.admitted) Record(state, node, uid, pod, std::move(devices));
  return admission;
}

void KubeletAccounting::AddAdmitted(absl::string_view node, absl::string_view uid,
                                    const KubeletPod& pod) {
  if (pods_.contains(uid)) return;
  NodeState& state = nodes_[node];
  DeviceCounts devices;
  AllocateDevices(pod, state.devices, state.devices_in_use, /*check=*/false, &devices);
  Record(state, node, uid, pod, std::move(devices));
}

void KubeletAccounting::Record(NodeState& state, absl::string_view node, absl::string_view uid,
                               const KubeletPod& pod, DeviceCounts devices) {
  PodEntry entry{.node = std::string(node), .counted = {}, .devices = std::move(devices)};
  entry.counted.Add(PodRequests(pod));  // PodInfo.CalculateResource: the full requests
  entry.counted.pods = 1;
  state.requested.Add(entry.counted);
  for (const auto& [name, count] : entry.devices) state.devices_in_use[name] += count;
  pods_.emplace(uid, std::move(entry));
}

void KubeletAccounting::Release(absl::string_view uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  auto node = nodes_.find(it->second.node);
  if (node != nodes_.end()) {
    node->second.requested.Add(it->second.counted, -1);
    for (const auto& [name, count] : it->second.devices) {
      node->second.devices_in_use[name] -= count;
    }
  }
  pods_.erase(it);
}

int64_t KubeletAccounting::Allocatable(absl::string_view node, absl::string_view resource) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : it->second.allocatable.Get(resource);
}

int64_t KubeletAccounting::Requested(absl::string_view node, absl::string_view resource) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : it->second.requested.Get(resource);
}

}  // namespace fitledger::sim
