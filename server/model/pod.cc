#include "server/model/pod.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fitledger {
namespace {

// An exact ResourceList accumulator, sorted by name.
class ExactList {
 public:
  Quantity Get(absl::string_view name) const {
    auto it = Find(name);
    return it != entries_.end() && it->first == name ? it->second : Quantity();
  }
  void Add(absl::string_view name, Quantity q) { Slot(name) += q; }
  void Max(absl::string_view name, Quantity q) {
    Quantity& slot = Slot(name);
    if (slot < q) slot = q;
  }
  void Set(absl::string_view name, Quantity q) { Slot(name) = q; }
  void AddAll(const ExactList& other) {
    for (const auto& [name, q] : other.entries_) Add(name, q);
  }
  void MaxAll(const ExactList& other) {
    for (const auto& [name, q] : other.entries_) Max(name, q);
  }
  const std::vector<std::pair<std::string, Quantity>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Quantity>>::const_iterator Find(absl::string_view name) const {
    return std::lower_bound(entries_.begin(), entries_.end(), name,
                            [](const auto& e, absl::string_view n) { return e.first < n; });
  }
  Quantity& Slot(absl::string_view name) {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                               [](const auto& e, absl::string_view n) { return e.first < n; });
    if (it == entries_.end() || it->first != name)
      it = entries_.insert(it, {std::string(name), Quantity()});
    return it->second;
  }
  std::vector<std::pair<std::string, Quantity>> entries_;
};

const QuantityList* FindList(const QuantityList& list, absl::string_view name, Quantity* out) {
  for (const auto& [n, q] : list) {
    if (n == name) {
      *out = q;
      return &list;
    }
  }
  return nullptr;
}

// Requests after API defaulting: a resource with a limit but no request requests its limit.
ExactList EffectiveRequests(const QuantityList& requests, const QuantityList& limits) {
  ExactList out;
  for (const auto& [name, q] : requests) out.Set(name, q);
  for (const auto& [name, q] : limits) {
    Quantity ignored;
    if (FindList(requests, name, &ignored) == nullptr) out.Set(name, q);
  }
  return out;
}

const ContainerStatus* FindStatus(const std::vector<ContainerStatus>& statuses,
                                  absl::string_view name) {
  for (const auto& s : statuses) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

ExactList ContainerRequests(const Container& c, const std::vector<ContainerStatus>& statuses,
                            RequestBasis basis) {
  ExactList reqs = EffectiveRequests(c.requests, c.limits);
  if (basis == RequestBasis::kSpecAndStatus) {
    if (const ContainerStatus* s = FindStatus(statuses, c.name)) {
      for (const auto& [name, q] : s->allocated_resources) reqs.Max(name, q);
      for (const auto& [name, q] : s->status_requests) reqs.Max(name, q);
    }
  }
  return reqs;
}

bool IsPodLevelResource(absl::string_view name) {
  return name == kResourceCpu || name == kResourceMemory || IsHugePagesResourceName(name);
}

}  // namespace

absl::StatusOr<Resources> PodRequests(const Pod& pod, RequestBasis basis) {
  ExactList total;
  for (const Container& c : pod.containers) {
    total.AddAll(ContainerRequests(c, pod.container_statuses, basis));
  }
  ExactList sidecars;   // running sum of restartable init containers so far
  ExactList init_peak;  // max over init steps
  for (const Container& c : pod.init_containers) {
    ExactList reqs = ContainerRequests(c, pod.init_container_statuses, basis);
    if (c.restartable) {
      total.AddAll(reqs);
      sidecars.AddAll(reqs);
      init_peak.MaxAll(sidecars);
    } else {
      reqs.AddAll(sidecars);
      init_peak.MaxAll(reqs);
    }
  }
  total.MaxAll(init_peak);
  if (pod.pod_requests.has_value() || pod.pod_limits.has_value()) {
    ExactList pod_level = EffectiveRequests(pod.pod_requests.value_or(QuantityList()),
                                            pod.pod_limits.value_or(QuantityList()));
    for (const auto& [name, q] : pod_level.entries()) {
      if (IsPodLevelResource(name)) total.Set(name, q);
    }
  }
  for (const auto& [name, q] : pod.overhead) total.Add(name, q);

  Resources out;
  out.pods = 1;
  for (const auto& [name, q] : total.entries()) {
    if (q.IsNegative()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pod ", pod.namespace_name, "/", pod.name, ": negative request for ", name));
    }
    if (name == kResourcePods) continue;  // a pod always counts as exactly one pod
    int64_t value = 0;
    if (name == kResourceCpu) {
      ASSIGN_OR_RETURN(value, q.MilliValue());
    } else {
      ASSIGN_OR_RETURN(value, q.Value());
    }
    out.Set(name, value);  // names the scheduler does not compare are ignored, as upstream
  }
  return out;
}

}  // namespace fitledger
