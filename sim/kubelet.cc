#include "sim/kubelet.h"

#include "absl/strings/str_cat.h"

namespace fitledger::sim {
namespace {

Admission Reject(absl::string_view resource, int64_t requested, int64_t used, int64_t capacity) {
  Admission a;
  a.admitted = false;
  a.reason = absl::StrCat("OutOf", resource);
  a.message = absl::StrCat("Pod was rejected: Node didn't have enough resource: ", resource,
                           ", requested: ", requested, ", used: ", used, ", capacity: ", capacity);
  return a;
}

}  // namespace

Admission CheckAdmission(const Resources& allocatable, const Resources& used,
                         const Resources& request) {
  if (used.pods + 1 > allocatable.pods) {
    return Reject(kResourcePods, 1, used.pods, allocatable.pods);
  }
  // Extended resources the node does not know are dropped (removeMissingExtendedResources).
  Resources effective = request;
  effective.scalars.clear();
  for (const auto& [name, amount] : request.scalars) {
    if (IsExtendedResourceName(name) && allocatable.Get(name) == 0) continue;
    effective.scalars.emplace_back(name, amount);
  }
  if (effective.milli_cpu == 0 && effective.memory_bytes == 0 &&
      effective.ephemeral_storage_bytes == 0 && effective.scalars.empty()) {
    return Admission{};
  }
  if (effective.milli_cpu > 0 && effective.milli_cpu > allocatable.milli_cpu - used.milli_cpu) {
    return Reject(kResourceCpu, effective.milli_cpu, used.milli_cpu, allocatable.milli_cpu);
  }
  if (effective.memory_bytes > 0 &&
      effective.memory_bytes > allocatable.memory_bytes - used.memory_bytes) {
    return Reject(kResourceMemory, effective.memory_bytes, used.memory_bytes,
                  allocatable.memory_bytes);
  }
  if (effective.ephemeral_storage_bytes > 0 &&
      effective.ephemeral_storage_bytes >
          allocatable.ephemeral_storage_bytes - used.ephemeral_storage_bytes) {
    return Reject(kResourceEphemeralStorage, effective.ephemeral_storage_bytes,
                  used.ephemeral_storage_bytes, allocatable.ephemeral_storage_bytes);
  }
  for (const auto& [name, amount] : effective.scalars) {  // sorted by name
    if (amount > 0 && amount > allocatable.Get(name) - used.Get(name)) {
      return Reject(name, amount, used.Get(name), allocatable.Get(name));
    }
  }
  return Admission{};
}

void KubeletAccounting::SetNode(absl::string_view node, const Resources& allocatable) {
  nodes_[node].allocatable = allocatable;
}

bool KubeletAccounting::HasNode(absl::string_view node) const { return nodes_.contains(node); }

Admission KubeletAccounting::Admit(absl::string_view node, absl::string_view uid,
                                   const Resources& request) {
  if (pods_.contains(uid)) return Admission{};
  NodeState& state = nodes_[node];
  Admission admission = CheckAdmission(state.allocatable, state.used, request);
  if (admission.admitted) AddAdmitted(node, uid, request);
  return admission;
}

void KubeletAccounting::AddAdmitted(absl::string_view node, absl::string_view uid,
                                    const Resources& request) {
  auto [it, inserted] = pods_.try_emplace(uid, PodEntry{std::string(node), request});
  if (!inserted) return;
  Resources counted = request;
  counted.pods = 1;
  nodes_[node].used.Add(counted);
}

void KubeletAccounting::Release(absl::string_view uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  Resources counted = it->second.request;
  counted.pods = 1;
  auto node = nodes_.find(it->second.node);
  if (node != nodes_.end()) node->second.used.Subtract(counted);
  pods_.erase(it);
}

Resources KubeletAccounting::Used(absl::string_view node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? Resources{} : it->second.used;
}

}  // namespace fitledger::sim
