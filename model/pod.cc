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

// The status of container `name` (component-helpers findContainerStatus): the first of the
// regular containers' statuses by that name, else the first of the init containers'.
const ContainerStatus* FindStatus(const Pod& pod, absl::string_view name) {
  for (const auto* list : {&pod.container_statuses, &pod.init_container_statuses}) {
    for (const ContainerStatus& s : *list) {
      if (s.name == name) return &s;
    }
  }
  return nullptr;
}

// Which of a container's lists one aggregate counts (component-helpers containerSpecRequests,
// containerAllocatedRequests, containerActuatedRequests).
enum class Source { kSpec, kAllocated, kActuated };

// One container's requests from `source`. A map kube-scheduler reads empty is nil to it (the
// protobuf it decodes has no empty maps), so an empty list is an absent one. When the resize is
// infeasible the status falls back to nothing rather than to the spec.
ExactList ContainerRequests(const Pod& pod, const Container& c, Source source, bool infeasible) {
  const ContainerStatus* s = source == Source::kSpec ? nullptr : FindStatus(pod, c.name);
  if (s != nullptr) {
    if (source == Source::kActuated && s->has_resources && !s->status_requests.empty()) {
      return ToExact(s->status_requests);
    }
    if (!s->allocated_resources.empty()) return ToExact(s->allocated_resources);
  }
  if (source != Source::kSpec && infeasible) return ExactList();
  return EffectiveRequests(c.requests, c.limits);
}

// component-helpers aggregateContainerResourcesByFn: the containers' sum, and init containers in
// order with a running sum of restartable sidecars (KEP-753); the larger of the two per
// resource. `non_missing` (NonMissingContainerRequests) fills what a container lacks (an
// explicit zero is kept).
ExactList Aggregate(const Pod& pod, Source source, bool infeasible, const ExactList* non_missing) {
  const auto requests = [&](const Container& c) {
    ExactList reqs = ContainerRequests(pod, c, source, infeasible);
    if (non_missing != nullptr) {
      for (const auto& [name, q] : non_missing->entries()) {
        if (!reqs.Has(name)) reqs.Set(name, q);
      }
    }
    return reqs;
  };
  ExactList total;
  for (const Container& c : pod.containers) total.AddAll(requests(c));
  ExactList sidecars;   // running sum of restartable init containers so far
  ExactList init_peak;  // max over init steps
  for (const Container& c : pod.init_containers) {
    ExactList reqs = requests(c);
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

// How one PodRequests pass counts (component-helpers PodResourcesOptions; with UseStatusResources
// kube-scheduler 1.37 also sets InPlacePodLevelResourcesVerticalScalingEnabled, beta and on).
struct Options {
  bool use_status = false;                 // UseStatusResources
  const ExactList* non_missing = nullptr;  // NonMissingContainerRequests
};

// component-helpers AggregateContainerRequests (1.37): the spec's aggregate, or, using the status,
// max(spec, actuated, allocated) of aggregates (a max of sums, not a sum of maxes), where the
// actuated and allocated amounts are the pod-level status's when it carries both
// (status.allocatedResources and status.resources.requests), else the containers' statuses'.
// When the resize is infeasible, the spec does not count.
ExactList AggregateContainerRequests(const Pod& pod, const Options& options) {
  if (!options.use_status) return Aggregate(pod, Source::kSpec, false, options.non_missing);
  const bool infeasible = IsPodResizeInfeasible(pod);
  ExactList allocated, actuated;
  if (!pod.status_allocated_resources.empty() && pod.has_status_resources &&
      !pod.status_pod_requests.empty()) {
    allocated = ToExact(pod.status_allocated_resources);
    actuated = ToExact(pod.status_pod_requests);
  } else {
    allocated = Aggregate(pod, Source::kAllocated, infeasible, options.non_missing);
    actuated = Aggregate(pod, Source::kActuated, infeasible, options.non_missing);
  }
  ExactList out =
      infeasible ? ExactList() : Aggregate(pod, Source::kSpec, infeasible, options.non_missing);
  out.MaxAll(actuated);
  out.MaxAll(allocated);
  return out;
}

// component-helpers IsSupportedPodLevelResource: cpu, memory and hugepages-*.
bool IsPodLevelResource(absl::string_view name) {
  return name == kResourceCpu || name == kResourceMemory || IsHugePagesResourceName(name);
}

// The pod-level requests as stored: spec.resources.requests of the supported resources; empty
// when the pod has none (IsPodLevelRequestsSet is false). A pod-level limit without a request is
// defaulted by the API server when the pod is created (1.37: PrepareForCreate,
// pkg/api/pod DefaultPodLevelResources; 1.34-1.36: SetDefaults_Pod, defaultPodRequests), so the
// stored pod that kube-scheduler counts carries the result; counting it again here would differ
// from kube-scheduler wherever the releases' rules differ.
ExactList PodLevelRequests(const Pod& pod) {
  ExactList out;
  if (pod.pod_requests.has_value()) {
    for (const auto& [name, q] : *pod.pod_requests) {
      if (IsPodLevelResource(name)) out.Set(name, q);
    }
  }
  return out;
}

// The pod-level requests a pod on a node counts (component-helpers PodRequests with
// UseStatusResources and InPlacePodLevelResourcesVerticalScalingEnabled, 1.36+): when the spec
// sets pod-level requests and the status carries pod-level resources, max(spec, unless the resize
// is infeasible; status.resources.requests; status.allocatedResources) per supported resource.
ExactList EffectivePodLevelRequests(const Pod& pod, const ExactList& spec, RequestBasis basis) {
  if (basis != RequestBasis::kSpecAndStatus || spec.entries().empty() ||
      !pod.has_status_resources) {
    return spec;
  }
  ExactList out;
  if (!IsPodResizeInfeasible(pod)) out = spec;
  for (const QuantityList* list : {&pod.status_pod_requests, &pod.status_allocated_resources}) {
    for (const auto& [name, q] : *list) {
      if (IsPodLevelResource(name)) out.Max(name, q);
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
  const ExactList spec_pod_level = PodLevelRequests(pod);
  const ExactList pod_level = EffectivePodLevelRequests(pod, spec_pod_level, basis);
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
  const bool pod_level_set = !spec_pod_level.entries().empty();  // IsPodLevelRequestsSet
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
