// Writing JSON strings: the one escaper shared by the logs and the webhook's encoder.
#ifndef FITLEDGER_COMMON_JSON_H_
#define FITLEDGER_COMMON_JSON_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace fitledger {

// Appends `s` to `out` as a JSON string literal (quotes included): '"', '\\' and control
// characters escaped, everything else (UTF-8 included) copied as is.
void AppendJsonString(absl::string_view s, std::string* out);
// The same, as a new string.
std::string JsonString(absl::string_view s);

// The length of the longest prefix of `s` with no byte a JSON string escapes ('"', '\\',
// control characters); s.size() when it has none.
size_t JsonPlainPrefix(absl::string_view s);

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_JSON_H_
