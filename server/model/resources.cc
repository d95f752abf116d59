#include "server/model/resources.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fitledger {

bool IsHugePagesResourceName(absl::string_view name) {
  return absl::StartsWith(name, "hugepages-");
}

bool IsExtendedResourceName(absl::string_view name) {
  size_t slash = name.find('/');
  if (slash == absl::string_view::npos || slash == 0 || slash + 1 == name.size()) return false;
  absl::string_view domain = name.substr(0, slash);
  if (domain == "kubernetes.io" || absl::EndsWith(domain, ".kubernetes.io")) return false;
  // Quota names such as "requests.example.com/gpu" are not resources a pod can request.
  if (absl::StartsWith(name, "requests.")) return false;
  return true;
}

bool IsScalarResourceName(absl::string_view name) {
  return IsExtendedResourceName(name) || IsHugePagesResourceName(name) ||
         absl::StartsWith(name, "attachable-volumes-");
}

namespace {
using Scalars = std::vector<std::pair<std::string, int64_t>>;

Scalars::iterator FindScalar(Scalars& scalars, absl::string_view name) {
  return std::lower_bound(scalars.begin(), scalars.end(), name,
                          [](const auto& entry, absl::string_view n) { return entry.first < n; });
}

void AddScalar(Scalars& scalars, absl::string_view name, int64_t delta) {
  if (delta == 0) return;
  auto it = FindScalar(scalars, name);
  if (it != scalars.end() && it->first == name) {
    it->second += delta;
    if (it->second == 0) scalars.erase(it);
  } else {
    scalars.insert(it, {std::string(name), delta});
  }
}
}  // namespace

int64_t Resources::Get(absl::string_view name) const {
  if (name == kResourceCpu) return milli_cpu;
  if (name == kResourceMemory) return memory_bytes;
  if (name == kResourceEphemeralStorage) return ephemeral_storage_bytes;
  if (name == kResourcePods) return pods;
  auto it =
      std::lower_bound(scalars.begin(), scalars.end(), name,
                       [](const auto& entry, absl::string_view n) { return entry.first < n; });
  return (it != scalars.end() && it->first == name) ? it->second : 0;
}

bool Resources::Set(absl::string_view name, int64_t value) {
  if (name == kResourceCpu) {
    milli_cpu = value;
  } else if (name == kResourceMemory) {
    memory_bytes = value;
  } else if (name == kResourceEphemeralStorage) {
    ephemeral_storage_bytes = value;
  } else if (name == kResourcePods) {
    pods = value;
  } else if (IsScalarResourceName(name)) {
    auto it = FindScalar(scalars, name);
    bool present = it != scalars.end() && it->first == name;
    if (value == 0) {
      if (present) scalars.erase(it);
    } else if (present) {
      it->second = value;
    } else {
      scalars.insert(it, {std::string(name), value});
    }
  } else {
    return false;
  }
  return true;
}

void Resources::Add(const Resources& other) {
  milli_cpu += other.milli_cpu;
  memory_bytes += other.memory_bytes;
  ephemeral_storage_bytes += other.ephemeral_storage_bytes;
  pods += other.pods;
  for (const auto& [name, value] : other.scalars) AddScalar(scalars, name, value);
}

void Resources::Subtract(const Resources& other) {
  milli_cpu -= other.milli_cpu;
  memory_bytes -= other.memory_bytes;
  ephemeral_storage_bytes -= other.ephemeral_storage_bytes;
  pods -= other.pods;
  for (const auto& [name, value] : other.scalars) AddScalar(scalars, name, -value);
}

bool Resources::IsZero() const {
  return milli_cpu == 0 && memory_bytes == 0 && ephemeral_storage_bytes == 0 && pods == 0 &&
         scalars.empty();
}

std::string ToString(const Resources& r) {
  std::string out = absl::StrCat("cpu=", r.milli_cpu, "m memory=", r.memory_bytes);
  if (r.ephemeral_storage_bytes != 0) {
    absl::StrAppend(&out, " ephemeral-storage=", r.ephemeral_storage_bytes);
  }
  if (r.pods != 0) absl::StrAppend(&out, " pods=", r.pods);
  for (const auto& [name, value] : r.scalars) absl::StrAppend(&out, " ", name, "=", value);
  return out;
}

}  // namespace fitledger
