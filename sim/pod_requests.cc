#include "sim/pod_requests.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json_access.h"
#include "common/status_macros.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

// Sums of rounded amounts saturate rather than overflow (upstream's int64 would wrap; no real
// node comes near).
int64_t SaturatingAdd(int64_t a, int64_t b) {
  if (b > 0 && a > std::numeric_limits<int64_t>::max() - b) {
    return std::numeric_limits<int64_t>::max();
  }
  if (b < 0 && a < std::numeric_limits<int64_t>::min() - b) {
    return std::numeric_limits<int64_t>::min();
  }
  return a + b;
}

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// apimachinery validation.IsDNS1123Subdomain: at most 253 characters, dot-separated labels of
// [a-z0-9-] that start and end with [a-z0-9].
bool IsDns1123Subdomain(absl::string_view value) {
  if (value.empty() || value.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(value, '.')) {
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
            absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-')) {
        return false;
      }
    }
  }
  return true;
}

// apimachinery validation.IsQualifiedName: [prefix/]name, the prefix a DNS subdomain, the name
// at most 63 characters of [-A-Za-z0-9_.] that start and end alphanumeric.
bool IsQualifiedName(absl::string_view value) {
  std::vector<absl::string_view> parts = absl::StrSplit(value, '/');
  absl::string_view name;
  if (parts.size() == 1) {
    name = parts[0];
  } else if (parts.size() == 2) {
    if (parts[0].empty() || !IsDns1123Subdomain(parts[0])) return false;
    name = parts[1];
  } else {
    return false;
  }
  if (name.empty() || name.size() > 63 || !IsAlnum(name.front()) || !IsAlnum(name.back())) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

absl::Status PodFieldError(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::StatusOr<KubeletContainer> ParseContainer(const json& c, const std::string& path, bool init) {
  if (!c.is_object()) return PodFieldError(path, "must be an object");
  KubeletContainer out;
  const json& name = JsonMember(c, "name");
  if (!name.is_null() && !name.is_string())
    return PodFieldError(path + ".name", "must be a string");
  out.name = JsonStr(c, "name");
  const json& resources = JsonMember(c, "resources");
  if (!resources.is_null() && !resources.is_object()) {
    return PodFieldError(path + ".resources", "must be an object");
  }
  ASSIGN_OR_RETURN(out.requests, ParseResourceList(JsonMember(resources, "requests"),
                                                   path + ".resources.requests"));
  ASSIGN_OR_RETURN(out.limits,
                   ParseResourceList(JsonMember(resources, "limits"), path + ".resources.limits"));
  out.restartable = init && JsonStr(c, "restartPolicy") == "Always";
  return out;
}

absl::StatusOr<std::vector<KubeletContainer>> ParseContainers(const json& spec, const char* key) {
  std::vector<KubeletContainer> out;
  const json& list = JsonMember(spec, key);
  const std::string path = absl::StrCat("spec.", key);
  if (list.is_null()) return out;
  if (!list.is_array()) return PodFieldError(path, "must be a list");
  for (size_t i = 0; i < list.size(); ++i) {
    ASSIGN_OR_RETURN(KubeletContainer c,
                     ParseContainer(list[i], absl::StrCat(path, "[", i, "]"),
                                    absl::string_view(key) == "initContainers"));
    out.push_back(std::move(c));
  }
  return out;
}

void AddList(ResourceList* to, const ResourceList& from) {
  for (const auto& [name, q] : from) (*to)[name] += q;
}

void MaxList(ResourceList* to, const ResourceList& from) {
  for (const auto& [name, q] : from) {
    auto it = to->find(name);
    if (it == to->end()) {
      to->emplace(name, q);
    } else if (it->second < q) {
      it->second = q;
    }
  }
}

bool IsSupportedPodLevelResource(absl::string_view name) {
  return name == "cpu" || name == "memory" || absl::StartsWith(name, "hugepages-");
}

}  // namespace

absl::StatusOr<ResourceList> ParseResourceList(const json& list, absl::string_view path) {
  ResourceList out;
  if (list.is_null()) return out;
  if (!list.is_object()) return PodFieldError(path, "must be an object of quantities");
  for (const auto& [name, value] : list.items()) {
    const std::string field = absl::StrCat(path, ".", name);
    std::string text;
    if (value.is_string()) {
      text = std::string(absl::StripAsciiWhitespace(value.get<std::string>()));
    } else if (value.is_number()) {
      text = value.dump();
    } else {
      return PodFieldError(field, "must be a quantity (a string or a number)");
    }
    absl::StatusOr<ResourceQuantity> q = ResourceQuantity::Parse(text);
    if (!q.ok()) return PodFieldError(field, q.status().message());
    out.emplace(name, *q);
  }
  return out;
}

bool IsExtendedResourceName(absl::string_view name) {
  const bool native = !absl::StrContains(name, '/') || absl::StrContains(name, "kubernetes.io/");
  if (native || absl::StartsWith(name, "requests.")) return false;
  return IsQualifiedName(absl::StrCat("requests.", name));
}

bool IsScalarResourceName(absl::string_view name) {
  return IsExtendedResourceName(name) || absl::StartsWith(name, "hugepages-") ||
         absl::StrContains(name, "kubernetes.io/") || absl::StartsWith(name, "attachable-volumes-");
}

absl::StatusOr<KubeletPod> ParseKubeletPod(const json& pod) {
  if (!pod.is_object()) return absl::InvalidArgumentError("a pod must be a JSON object");
  KubeletPod out;
  const json& metadata = JsonMember(pod, "metadata");
  if (!metadata.is_null() && !metadata.is_object()) {
    return PodFieldError("metadata", "must be an object");
  }
  out.name = JsonStr(metadata, "name");
  const json& spec = JsonMember(pod, "spec");
  if (!spec.is_null() && !spec.is_object()) return PodFieldError("spec", "must be an object");
  ASSIGN_OR_RETURN(out.containers, ParseContainers(spec, "containers"));
  ASSIGN_OR_RETURN(out.init_containers, ParseContainers(spec, "initContainers"));
  ASSIGN_OR_RETURN(out.overhead, ParseResourceList(JsonMember(spec, "overhead"), "spec.overhead"));
  const json& resources = JsonMember(spec, "resources");
  if (!resources.is_null() && !resources.is_object()) {
    return PodFieldError("spec.resources", "must be an object");
  }
  ASSIGN_OR_RETURN(out.pod_requests,
                   ParseResourceList(JsonMember(resources, "requests"), "spec.resources.requests"));
  const json& mappings = JsonMember(
      JsonMember(JsonMember(pod, "status"), "extendedResourceClaimStatus"), "requestMappings");
  if (mappings.is_array()) {
    for (const json& m : mappings) {
      const std::string container = JsonStr(m, "containerName");
      const std::string resource = JsonStr(m, "resourceName");
      for (auto* list : {&out.init_containers, &out.containers}) {
        for (KubeletContainer& c : *list) {
          if (c.name == container) c.dra_backed.push_back(resource);
        }
      }
    }
  }
  return out;
}

ResourceList PodRequests(const KubeletPod& pod) {
  // aggregateContainerResourcesByFn: app containers summed; each init container needs itself
  // plus the sidecars started before it; a sidecar also runs beside the app containers.
  ResourceList result;
  for (const KubeletContainer& c : pod.containers) AddList(&result, c.requests);
  ResourceList sidecars;
  ResourceList init_peak;
  for (const KubeletContainer& c : pod.init_containers) {
    if (c.restartable) {
      AddList(&result, c.requests);
      AddList(&sidecars, c.requests);
      MaxList(&init_peak, sidecars);
    } else {
      ResourceList combined = c.requests;
      AddList(&combined, sidecars);
      MaxList(&init_peak, combined);
    }
  }
  MaxList(&result, init_peak);
  // IsPodLevelRequestsSet / applyPodLevelResources.
  const bool pod_level =
      std::any_of(pod.pod_requests.begin(), pod.pod_requests.end(),
                  [](const auto& r) { return IsSupportedPodLevelResource(r.first); });
  if (pod_level) {
    for (const auto& [name, q] : pod.pod_requests) {
      if (IsSupportedPodLevelResource(name)) result[name] = q;
    }
  }
  AddList(&result, pod.overhead);
  return result;
}

void ResourceAmounts::Add(const ResourceList& list) {
  for (const auto& [name, q] : list) {
    if (name == "cpu") {
      milli_cpu = SaturatingAdd(milli_cpu, q.MilliValue());
    } else if (name == "memory") {
      memory_bytes = SaturatingAdd(memory_bytes, q.Value());
    } else if (name == "pods") {
      pods = SaturatingAdd(pods, q.Value());
    } else if (name == "ephemeral-storage") {
      ephemeral_storage_bytes = SaturatingAdd(ephemeral_storage_bytes, q.Value());
    } else if (IsScalarResourceName(name)) {
      int64_t& amount = scalars[name];
      amount = SaturatingAdd(amount, q.Value());
    }
  }
}

void ResourceAmounts::SetMax(const ResourceList& list) {
  for (const auto& [name, q] : list) {
    if (name == "memory") {
      memory_bytes = std::max(memory_bytes, q.Value());
    } else if (name == "cpu") {
      milli_cpu = std::max(milli_cpu, q.MilliValue());
    } else if (name == "ephemeral-storage") {
      ephemeral_storage_bytes = std::max(ephemeral_storage_bytes, q.Value());
    } else if (IsScalarResourceName(name)) {
      int64_t& amount = scalars[name];
      amount = std::max(amount, q.Value());
    }
  }
}

void ResourceAmounts::Add(const ResourceAmounts& other, int64_t sign) {
  milli_cpu = SaturatingAdd(milli_cpu, sign * other.milli_cpu);
  memory_bytes = SaturatingAdd(memory_bytes, sign * other.memory_bytes);
  ephemeral_storage_bytes =
      SaturatingAdd(ephemeral_storage_bytes, sign * other.ephemeral_storage_bytes);
  pods = SaturatingAdd(pods, sign * other.pods);
  for (const auto& [name, amount] : other.scalars) {
    int64_t& mine = scalars[name];
    mine = SaturatingAdd(mine, sign * amount);
  }
}

int64_t ResourceAmounts::Get(absl::string_view name) const {
  if (name == "cpu") return milli_cpu;
  if (name == "memory") return memory_bytes;
  if (name == "ephemeral-storage") return ephemeral_storage_bytes;
  if (name == "pods") return pods;
  auto it = scalars.find(name);
  return it == scalars.end() ? 0 : it->second;
}

}  // namespace fitledger::sim
