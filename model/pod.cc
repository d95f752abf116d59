#include "model/pod.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fitledger {
namespace {

// An exact ResourceList accumulator, sorted by name. The names are views: every list lives within
// one PodRequests call, and its names are the pod's own or constants. A pod requests a handful of
// resources, so the entries sit inline (a sync computes this for every pod it reads; vectors of
// owned strings were most of the cost).
class ExactList {
 public:
  using Entry = std::pair<absl::string_view, Quantity>;

  Quantity Get(absl::string_view name) const {
    auto it = Find(name);
    return it != entries_.end() && it->first == name ? it->second : Quantity();
  }
  // Present, even with a zero amount (an explicit "cpu: 0" is a request).
  bool Has(absl::string_view name) const {
    auto it = Find(name);
    return it != entries_.end() && it->first == name;
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
  const absl::InlinedVector<Entry, 4>& entries() const { return entries_; }

 private:
  static bool Before(const Entry& e, absl::string_view name) { return e.first < name; }
  absl::InlinedVector<Entry, 4>::const_iterator Find(absl::string_view name) const {
    return std::lower_bound(entries_.begin(), entries_.end(), name, Before);
  }
  Quantity& Slot(absl::string_view name) {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), name, Before);
    if (it == entries_.end() || it->first != name)
      it = entries_.insert(it, Entry(name, Quantity()));
    return it->second;
  }
  absl::InlinedVector<Entry, 4> entries_;
};

bool Contains(const QuantityList& list, absl::string_view name) {
  for (const auto& entry : list) {
    if (entry.first == name) return true;
  }
  return false;
}

// Requests after API defaulting: a resource with a limit but no request requests its limit.
ExactList EffectiveRequests(const QuantityList& requests, const QuantityList& limits) {
  ExactList out;
  for (const auto& [name, q] : requests) out.Set(name, q);
  for (const auto& [name, q] : limits) {
    if (!Contains(requests, name)) out.Set(name, q);
  }
  return out;
}

ExactList ToExact(const QuantityList& list) {
  ExactList out;
  for (const auto& [name, q] : list) out.Set(name, q);
  return out;
}

// The status of container `name`: component-helpers keys one map by name, with the init
// containers' statuses entered after the regular ones.
const ContainerStatus* FindStatus(const Pod& pod, absl::string_view name) {
  for (auto it = pod.init_container_statuses.rbegin(); it != pod.init_container_statuses.rend();
       ++it) {
    if (it->name == name) return &*it;
  }
  for (auto it = pod.container_statuses.rbegin(); it != pod.container_statuses.rend(); ++it) {
    if (it->name == name) return &*it;
  }
  return nullptr;
}

// How one PodRequests pass counts containers (component-helpers PodResourcesOptions).
struct Options {
  bool use_status = false;                 // UseStatusResources
  const ExactList* non_missing = nullptr;  // NonMissingContainerRequests
};

// One container's requests (AggregateContainerRequests' containerReqs): the spec, or, when
// `status_applies` and its status carries resources, determineContainerReqs; then the
// NonMissingContainerRequests defaults for what it lacks (an explicit zero is kept).
ExactList ContainerRequests(const Pod& pod, const Container& c, bool status_applies,
                            bool infeasible, const Options& options) {
  ExactList reqs = EffectiveRequests(c.requests, c.limits);
  if (status_applies) {
    const ContainerStatus* s = FindStatus(pod, c.name);
    if (s != nullptr && s->has_resources) {
      if (infeasible) {
        reqs = ToExact(s->status_requests);  // max(status requests, allocated): not the spec
      }
      for (const auto& [name, q] : s->status_requests) reqs.Max(name, q);
      for (const auto& [name, q] : s->allocated_resources) reqs.Max(name, q);
    }
  }
  if (options.non_missing != nullptr) {
    for (const auto& [name, q] : options.non_missing->entries()) {
      if (!reqs.Has(name)) reqs.Set(name, q);
    }
  }
  return reqs;
}

// AggregateContainerRequests: the containers' sum, and init containers in order with a running
// sum of restartable sidecars (KEP-753); the larger of the two per resource.
ExactList AggregateContainerRequests(const Pod& pod, const Options& options) {
  const bool infeasible = options.use_status && IsPodResizeInfeasible(pod);
  ExactList total;
  for (const Container& c : pod.containers) {
    total.AddAll(ContainerRequests(pod, c, options.use_status, infeasible, options));
  }
  ExactList sidecars;   // running sum of restartable init containers so far
  ExactList init_peak;  // max over init steps
  for (const Container& c : pod.init_containers) {
    // Only restartable sidecars count their status; other init containers cannot be resized.
    ExactList reqs =
        ContainerRequests(pod, c, options.use_status && c.restartable, infeasible, options);
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
  return total;
}

// component-helpers IsSupportedPodLevelResource: cpu, memory and hugepages-*.
bool IsPodLevelResource(absl::string_view name) {
  return name == kResourceCpu || name == kResourceMemory || IsHugePagesResourceName(name);
}

// The pod-level requests after the API server's defaulting (Kubernetes commit a2ddde87,
// "default pod-level request"): a pod-level limit without a pod-level request defaults the request
// to the containers' aggregate when some container requests that resource, else to the limit.
// Only supported resources; empty when the pod has none (IsPodLevelRequestsSet is false).
ExactList PodLevelRequests(const Pod& pod) {
  ExactList out;
  if (pod.pod_requests.has_value()) {
    for (const auto& [name, q] : *pod.pod_requests) {
      if (IsPodLevelResource(name)) out.Set(name, q);
    }
  }
  if (pod.pod_limits.has_value()) {
    std::optional<ExactList> aggregate;
    for (const auto& [name, q] : *pod.pod_limits) {
      if (!IsPodLevelResource(name) ||
          (pod.pod_requests.has_value() && Contains(*pod.pod_requests, name))) {
        continue;
      }
      bool container_requests = false;
      for (const auto* list : {&pod.containers, &pod.init_containers}) {
        for (const Container& c : *list) {
          if (EffectiveRequests(c.requests, c.limits).Has(name)) container_requests = true;
        }
      }
      if (container_requests) {
        if (!aggregate.has_value()) aggregate = AggregateContainerRequests(pod, Options());
        out.Set(name, aggregate->Get(name));
      } else {
        out.Set(name, q);
      }
    }
  }
  return out;
}

// component-helpers PodRequests: the aggregate, pod-level requests over it, then the overhead.
ExactList Requests(const Pod& pod, const ExactList& pod_level, const Options& options) {
  ExactList total = AggregateContainerRequests(pod, options);
  for (const auto& [name, q] : pod_level.entries()) total.Set(name, q);
  for (const auto& [name, q] : pod.overhead) total.Add(name, q);
  return total;
}

// "pod NAMESPACE/NAME", or what there is of it, for errors.
std::string PodLabel(const Pod& pod) {
  if (pod.name.empty()) return "the pod (it has no metadata.name)";
  if (pod.namespace_name.empty()) return absl::StrCat("pod ", pod.name);
  return absl::StrCat("pod ", pod.namespace_name, "/", pod.name);
}

// cpu in millicores, the rest in units; a sum past int64 names the pod, the resource and the sum.
absl::StatusOr<int64_t> Amount(const Pod& pod, absl::string_view name, Quantity q) {
  absl::StatusOr<int64_t> amount = name == kResourceCpu ? q.MilliValue() : q.Value();
  if (!amount.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(PodLabel(pod), ": the request for ", name, " (",
                                                   q.ToString(), ") is out of range: more than ",
                                                   std::numeric_limits<int64_t>::max(),
                                                   name == kResourceCpu ? " millicores" : ""));
  }
  return amount;
}

}  // namespace

bool IsPodResizeInfeasible(const Pod& pod) {
  return pod.resize_pending_reason == "Infeasible" || pod.resize == "Infeasible";
}

absl::StatusOr<Resources> PodRequests(const Pod& pod, RequestBasis basis) {
  Options options;
  options.use_status = basis == RequestBasis::kSpecAndStatus;
  const ExactList pod_level = PodLevelRequests(pod);
  const ExactList total = Requests(pod, pod_level, options);

  Resources out;
  out.pods = 1;
  for (const auto& [name, q] : total.entries()) {
    if (q.IsNegative()) {
      return absl::InvalidArgumentError(
          absl::StrCat(PodLabel(pod), ": negative request for ", name));
    }
    if (name == kResourcePods) continue;  // a pod always counts as exactly one pod
    ASSIGN_OR_RETURN(int64_t value, Amount(pod, name, q));
    out.Set(name, value);  // names the scheduler does not compare are ignored, as upstream
  }

  // The scoring amounts: the same sum with the per-container defaults for missing cpu / memory.
  ExactList non_missing;
  const bool pod_level_set = !pod_level.entries().empty();
  for (const auto& [name, q] : {std::pair<absl::string_view, Quantity>{
                                    kResourceCpu, Quantity::FromMillis(kDefaultMilliCpuRequest)},
                                {kResourceMemory, Quantity::FromUnits(kDefaultMemoryRequest)}}) {
    // An incoming pod gets the defaults for every container that lacks the request; a pod on a
    // node with pod-level requests only for the resources its requests lack.
    if (basis == RequestBasis::kSpec || !pod_level_set || !total.Has(name)) {
      non_missing.Set(name, q);
    }
  }
  if (non_missing.entries().empty()) {
    out.non_zero_milli_cpu = out.milli_cpu;
    out.non_zero_memory_bytes = out.memory_bytes;
    return out;
  }
  options.non_missing = &non_missing;
  const ExactList non_zero = Requests(pod, pod_level, options);
  ASSIGN_OR_RETURN(out.non_zero_milli_cpu, Amount(pod, kResourceCpu, non_zero.Get(kResourceCpu)));
  ASSIGN_OR_RETURN(out.non_zero_memory_bytes,
                   Amount(pod, kResourceMemory, non_zero.Get(kResourceMemory)));
  return out;
}

}  // namespace fitledger
