// Resource names and per-pod / per-node resource amounts in the units the scheduler compares.
#ifndef FITLEDGER_SERVER_MODEL_RESOURCES_H_
#define FITLEDGER_SERVER_MODEL_RESOURCES_H_

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

// True for `hugepages-<size>` names.
bool IsHugePagesResourceName(absl::string_view name);
// True for extended resources: a domain-prefixed name (`example.com/gpu`) outside the
// `kubernetes.io/` namespace and not a `requests.` quota name (Kubernetes' IsExtendedResourceName).
bool IsExtendedResourceName(absl::string_view name);
// True for names NodeResourcesFit keeps as "scalar resources": extended, hugepages and
// `attachable-volumes-*`.
bool IsScalarResourceName(absl::string_view name);

// Resource amounts as NodeResourcesFit compares them: cpu in millicores, everything else in
// units (bytes for memory, ephemeral-storage and hugepages). `scalars` holds the extended and
// hugepages resources, sorted by name, without zero entries. A plain value; thread-compatible.
struct Resources {
  int64_t milli_cpu = 0;
  int64_t memory_bytes = 0;
  int64_t ephemeral_storage_bytes = 0;
  int64_t pods = 0;  // allowed pod count (for allocatable); a pod's own request counts as 1 pod
  std::vector<std::pair<std::string, int64_t>> scalars;

  // The amount of `name` (0 when absent). `name` is a canonical resource name.
  int64_t Get(absl::string_view name) const;
  // Sets `name` to `value`; returns false for a name the scheduler does not compare.
  bool Set(absl::string_view name, int64_t value);
  // Element-wise sum / difference (scalars merged by name; zero entries dropped).
  void Add(const Resources& other);
  void Subtract(const Resources& other);
  // True when every amount is zero (pods included).
  bool IsZero() const;

  friend bool operator==(const Resources& a, const Resources& b) {
    return a.milli_cpu == b.milli_cpu && a.memory_bytes == b.memory_bytes &&
           a.ephemeral_storage_bytes == b.ephemeral_storage_bytes && a.pods == b.pods &&
           a.scalars == b.scalars;
  }
};

// A human-readable form ("cpu=400m memory=134217728 example.com/gpu=1") for logs and tests.
std::string ToString(const Resources& r);

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_MODEL_RESOURCES_H_
