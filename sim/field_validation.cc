#include "sim/field_validation.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace fitledger::sim {

namespace {

using ordered_json = nlohmann::ordered_json;

// Type name -> its fields' types ("" scalar or kept whole, "T", "[]T", "{}T").
using FieldTable = std::map<std::string, std::map<std::string, std::string>, std::less<>>;

const FieldTable& KnownFields() {
  static const auto* table = new FieldTable{
#include "sim/known_fields.inc"
  };
  return *table;
}

// The Go type the API server decodes a body of `kind` into (k8s.io/api), as its OpenAPI name.
absl::string_view TypeOf(Kind kind) {
  switch (kind) {
    case Kind::kPod:
      return "io.k8s.api.core.v1.Pod";
    case Kind::kNode:
      return "io.k8s.api.core.v1.Node";
    case Kind::kDeployment:
      return "io.k8s.api.apps.v1.Deployment";
    case Kind::kReplicaSet:
      return "io.k8s.api.apps.v1.ReplicaSet";
    case Kind::kLease:
      return "io.k8s.api.coordination.v1.Lease";
    case Kind::kEvent:
      return "";
  }
  return "";
}

// Walks `value` as a `type` at `path` (sigs.k8s.io/json's strict field stack: "a.b", "a[0].b",
// a map's key as ".key"), appending each unknown field once.
void Walk(const ordered_json& value, absl::string_view type, const std::string& path,
          std::vector<std::string>* errors, std::set<std::string>* seen) {
  if (type.empty()) return;
  if (absl::ConsumePrefix(&type, "[]")) {
    if (!value.is_array()) return;
    for (size_t i = 0; i < value.size(); ++i) {
      Walk(value[i], type, absl::StrCat(path, "[", i, "]"), errors, seen);
    }
    return;
  }
  auto join = [&](absl::string_view key) {
    return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
  };
  if (absl::ConsumePrefix(&type, "{}")) {
    if (!value.is_object()) return;
    for (const auto& [key, item] : value.items()) Walk(item, type, join(key), errors, seen);
    return;
  }
  auto fields = KnownFields().find(type);
  if (fields == KnownFields().end() || !value.is_object()) return;  // kept whole
  for (const auto& [key, item] : value.items()) {
    // Field names match case-sensitively (the API server's decoder is CaseSensitive).
    auto field = fields->second.find(key);
    if (field == fields->second.end()) {
      std::string error = absl::StrCat("unknown field \"", join(key), "\"");
      if (seen->insert(error).second) errors->push_back(std::move(error));
      continue;
    }
    Walk(item, field->second, join(key), errors, seen);
  }
}

}  // namespace

absl::StatusOr<FieldValidation> ParseFieldValidation(absl::string_view value,
                                                     absl::string_view options_kind) {
  // apiserver handlers/rest.go fieldValidation; apimachinery pkg/apis/meta/v1/validation
  // ValidateFieldValidation (NotSupported with the sorted allowed values).
  if (value.empty() || value == "Warn") return FieldValidation::kWarn;
  if (value == "Strict") return FieldValidation::kStrict;
  if (value == "Ignore") return FieldValidation::kIgnore;
  return absl::FailedPreconditionError(
      absl::StrCat(options_kind, ".meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"",
                   value, "\": supported values: \"Ignore\", \"Strict\", \"Warn\""));
}

std::vector<std::string> StrictDecodingErrors(Kind kind, absl::string_view body) {
  std::vector<std::string> errors;
  const absl::string_view type = TypeOf(kind);
  if (type.empty()) return errors;
  const ordered_json parsed = ordered_json::parse(body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return errors;
  std::set<std::string> seen;
  Walk(parsed, type, "", &errors, &seen);
  // sigs.k8s.io/json keeps at most 100 (kubernetes_patch.go saveStrictError).
  if (errors.size() > 100) errors.resize(100);
  return errors;
}

absl::Status ApplyFieldValidation(FieldValidation validation, absl::string_view kind,
                                  absl::string_view version, const std::vector<std::string>& errors,
                                  std::vector<std::string>* warnings) {
  if (errors.empty() || validation == FieldValidation::kIgnore) return absl::OkStatus();
  if (validation == FieldValidation::kWarn) {
    // handlers/rest.go addStrictDecodingWarnings: one warning per error.
    warnings->insert(warnings->end(), errors.begin(), errors.end());
    return absl::OkStatus();
  }
  // apimachinery pkg/runtime/error.go strictDecodingError.Error, in handlers/rest.go
  // transformDecodeError.
  return absl::InvalidArgumentError(absl::StrCat(kind, " in version \"", version,
                                                 "\" cannot be handled as a ", kind,
                                                 ": strict decoding error: ",
                                                 absl::StrJoin(errors, ", ")));
}

std::string WarningHeader(absl::string_view text) {
  // util/net/http.go NewWarningHeader and makeQuotedString.
  std::string out = "299 - \"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace fitledger::sim
