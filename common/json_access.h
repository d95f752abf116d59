// Reading members of a parsed JSON document (nlohmann::json) without exceptions: a member that
// is absent, or of another type, reads as null / "" / 0. For the objects of the Kubernetes API,
// where an absent field and its zero value mean the same.
#ifndef FITLEDGER_COMMON_JSON_ACCESS_H_
#define FITLEDGER_COMMON_JSON_ACCESS_H_

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"

namespace fitledger {

// j[key], or null when `j` is no object or has no `key`.
inline const nlohmann::json& JsonMember(const nlohmann::json& j, const char* key) {
  static const nlohmann::json* const null = new nlohmann::json();
  if (!j.is_object()) return *null;
  auto it = j.find(key);
  return it == j.end() ? *null : *it;
}

// j[key] if it is a string, else "".
inline std::string JsonStr(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = JsonMember(j, key);
  return v.is_string() ? v.get<std::string>() : "";
}

// j[key] if it is an integer, else 0.
inline int64_t JsonInt(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = JsonMember(j, key);
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_JSON_ACCESS_H_
