// In-place edits of the compact JSON the store keeps for each object, without parsing the whole
// document: the store rewrites a few members of a ~5 KB pod on every bind and admission, and a
// full nlohmann parse + dump of it was most of the simulated API server's CPU per bound pod.
#ifndef FITLEDGER_SIM_JSON_EDIT_H_
#define FITLEDGER_SIM_JSON_EDIT_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace fitledger::sim {

// The text of member `key`'s value in the JSON object `object` (the first such member); nullopt
// when `object` has no such member, or is not a well-formed JSON object.
std::optional<absl::string_view> FindMember(absl::string_view object, absl::string_view key);

// One member to set: its key, and its new value (JSON text) computed from the current one (nullopt
// when the member is absent).
struct MemberEdit {
  absl::string_view key;
  std::function<std::string(std::optional<absl::string_view> current)> value;
};

// `object` (a JSON object's text) with each edit applied in one pass: an existing member's value
// is replaced where it stands, a missing one is appended (in `edits` order). Other members and
// their order are kept. A malformed or non-object `object` counts as `{}`.
// REQUIRES: every value an edit returns is well-formed JSON.
std::string EditMembers(absl::string_view object, const std::vector<MemberEdit>& edits);

// `object` (a JSON object's text) with each of `members` (key, value as JSON text) set: an
// existing member's value is replaced where it stands, a missing one is appended. Other members
// and their order are kept. A malformed or non-object `object` counts as `{}`.
// REQUIRES: each value is well-formed JSON.
std::string SetMembers(absl::string_view object,
                       const std::vector<std::pair<absl::string_view, std::string>>& members);

// True if `text` (after leading whitespace) starts a JSON object.
bool IsObjectText(absl::string_view text);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_JSON_EDIT_H_
