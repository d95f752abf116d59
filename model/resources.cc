#include "model/resources.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fitledger {

bool IsHugePagesResourceName(absl::string_view name) {
  return absl::StartsWith(name, "hugepages-");
}

bool IsPrefixedNativeResource(absl::string_view name) {
  return absl::StrContains(name, "kubernetes.io/");
}

namespace {

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

}  // namespace

bool IsDns1123Subdomain(absl::string_view s) {
  return s.size() <= 253 && MatchesDns1123SubdomainPattern(s);
}

bool MatchesDns1123SubdomainPattern(absl::string_view s) {
  if (s.empty()) return false;
  for (absl::string_view label : absl::StrSplit(s, '.')) {
    if (label.empty()) return false;
    for (char c : label) {
      if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
            absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-')) {
        return false;
      }
    }
    if (label.front() == '-' || label.back() == '-') return false;
  }
  return true;
}

bool IsQualifiedName(absl::string_view s) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, '/');
  absl::string_view name;
  if (parts.size() == 1) {
    name = parts[0];
  } else if (parts.size() == 2) {
    if (!IsDns1123Subdomain(parts[0])) return false;
    name = parts[1];
  } else {
    return false;
  }
  if (name.empty() || name.size() > 63 || !IsAlnum(name.front()) || !IsAlnum(name.back())) {
    return false;
  }
  for (char c : name) {
    if (!(IsAlnum(c) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

bool IsExtendedResourceName(absl::string_view name) {
  // Native: unprefixed ("cpu") or in *kubernetes.io/ (IsNativeResource).
  if (!absl::StrContains(name, "/") || IsPrefixedNativeResource(name)) return false;
  // Quota names such as "requests.example.com/gpu" are not resources a pod can request.
  if (absl::StartsWith(name, "requests.")) return false;
  return IsQualifiedName(absl::StrCat("requests.", name));
}

bool IsScalarResourceName(absl::string_view name) {
  return IsExtendedResourceName(name) || IsHugePagesResourceName(name) ||
         IsPrefixedNativeResource(name) || absl::StartsWith(name, "attachable-volumes-");
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
  non_zero_milli_cpu += other.non_zero_milli_cpu;
  non_zero_memory_bytes += other.non_zero_memory_bytes;
  for (const auto& [name, value] : other.scalars) AddScalar(scalars, name, value);
}

void Resources::Subtract(const Resources& other) {
  milli_cpu -= other.milli_cpu;
  memory_bytes -= other.memory_bytes;
  ephemeral_storage_bytes -= other.ephemeral_storage_bytes;
  pods -= other.pods;
  non_zero_milli_cpu -= other.non_zero_milli_cpu;
  non_zero_memory_bytes -= other.non_zero_memory_bytes;
  for (const auto& [name, value] : other.scalars) AddScalar(scalars, name, -value);
}

bool Resources::IsZero() const {
  return milli_cpu == 0 && memory_bytes == 0 && ephemeral_storage_bytes == 0 && pods == 0 &&
         scalars.empty() && non_zero_milli_cpu == 0 && non_zero_memory_bytes == 0;
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
