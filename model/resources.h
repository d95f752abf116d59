// Resource names and per-pod / per-node resource amounts in the units the scheduler compares.
#ifndef FITLEDGER_MODEL_RESOURCES_H_
#define FITLEDGER_MODEL_RESOURCES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace fitledger {

inline constexpr absl::string_view kResourceCpu = "cpu";
inline constexpr absl::string_view kResourceMemory = "memory";
inline constexpr absl::string_view kResourceEphemeralStorage = "ephemeral-storage";
inline constexpr absl::string_view kResourcePods = "pods";

// What a container that requests no cpu / memory counts for scoring (pkg/scheduler/util:
// DefaultMilliCPURequest = 100, DefaultMemoryRequest = 200 * 1024 * 1024).
inline constexpr int64_t kDefaultMilliCpuRequest = 100;
inline constexpr int64_t kDefaultMemoryRequest = 200 * 1024 * 1024;

// Resource name classes, as Kubernetes' pkg/apis/core/v1/helper (helpers.go) and the scheduler's
// pkg/scheduler/util (IsScalarResourceName) define them.
//
// apimachinery validation.IsDNS1123Subdomain (object names): at most 253 characters, lowercase
// alphanumeric labels of [-a-z0-9] separated by '.', each starting and ending alphanumeric.
bool IsDns1123Subdomain(absl::string_view name);
// IsDNS1123Subdomain's pattern alone, at any length (its two errors are reported apart).
bool MatchesDns1123SubdomainPattern(absl::string_view name);
// apimachinery validation.IsQualifiedName (label names): an optional DNS-1123 subdomain prefix
// and "/", then 1-63 characters of [-A-Za-z0-9_.] starting and ending alphanumeric.
bool IsQualifiedName(absl::string_view name);
// True for `hugepages-<size>` names (IsHugePageResourceName).
bool IsHugePagesResourceName(absl::string_view name);
// True for names in the `*kubernetes.io/` namespace, e.g. `kubernetes.io/something` or
// `subdomain.kubernetes.io/something` (IsPrefixedNativeResource: the name contains
// "kubernetes.io/").
bool IsPrefixedNativeResource(absl::string_view name);
// True for extended resources: not native (a name without "/" or in `*kubernetes.io/`), not a
// `requests.` quota name, and `requests.<name>` is a qualified name (IsExtendedResourceName).
bool IsExtendedResourceName(absl::string_view name);
// True for names NodeResourcesFit keeps as "scalar resources" and checks: extended, hugepages,
// prefixed native (`kubernetes.io/...`) and `attachable-volumes-*` (IsScalarResourceName).
bool IsScalarResourceName(absl::string_view name);

// Resource amounts as NodeResourcesFit compares them: cpu in millicores, everything else in
// units (bytes for memory, ephemeral-storage and hugepages). `scalars` holds the scalar resources
// (extended, hugepages, `kubernetes.io/...`), sorted by name, without zero entries. A plain
// value; thread-compatible.
struct Resources {
  int64_t milli_cpu = 0;
  int64_t memory_bytes = 0;
  int64_t ephemeral_storage_bytes = 0;
  int64_t pods = 0;  // allowed pod count (for allocatable); a pod's own request counts as 1 pod
  std::vector<std::pair<std::string, int64_t>> scalars;
  // For scoring only: cpu and memory as the scheduler's NonZeroRequested counts them, with each
  // container that requests none counting 100m cpu / 200Mi memory (pkg/scheduler/util
  // DefaultMilliCPURequest, DefaultMemoryRequest). Zero for allocatable. Summed like the rest.
  int64_t non_zero_milli_cpu = 0;
  int64_t non_zero_memory_bytes = 0;

  // The amount of `name` (0 when absent). `name` is a canonical resource name.
  int64_t Get(absl::string_view name) const;
  // Sets `name` to `value`; returns false for a name the scheduler does not compare.
  bool Set(absl::string_view name, int64_t value);
  // Element-wise sum / difference (scalars merged by name; zero entries dropped).
  void Add(const Resources& other);
  void Subtract(const Resources& other);
  // True when every amount is zero (pods and the non-zero scoring amounts included).
  bool IsZero() const;

  friend bool operator==(const Resources& a, const Resources& b) {
    return a.milli_cpu == b.milli_cpu && a.memory_bytes == b.memory_bytes &&
           a.ephemeral_storage_bytes == b.ephemeral_storage_bytes && a.pods == b.pods &&
           a.scalars == b.scalars && a.non_zero_milli_cpu == b.non_zero_milli_cpu &&
           a.non_zero_memory_bytes == b.non_zero_memory_bytes;
  }
};

// A human-readable form ("cpu=400m memory=134217728 example.com/gpu=1") for logs and tests.
std::string ToString(const Resources& r);

}  // namespace fitledger

#endif  // FITLEDGER_MODEL_RESOURCES_H_
