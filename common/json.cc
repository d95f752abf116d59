#include "common/json.h"

#include <cstdint>
#include <cstring>

namespace fitledger {

namespace {

// True if a byte of `v` is a control character (< 0x20), '"' or '\\': the bytes JSON escapes.
// Exact (no false positives): the classic "has a zero / smaller byte" word tricks.
inline bool AnyNeedsEscape(uint64_t v) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  const auto has_zero = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  return ((v - kOnes * 0x20) & ~v & kHigh) | has_zero(v ^ (kOnes * '"')) |
         has_zero(v ^ (kOnes * '\\'));
}

}  // namespace

void AppendJsonString(absl::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the pending run of characters that need no escaping
  size_t i = 0;
  while (i < s.size()) {
    // Names and most values need no escaping at all: skip eight bytes at a time.
    if (i + 8 <= s.size()) {
      uint64_t word;
      std::memcpy(&word, s.data() + i, sizeof(word));
      if (!AnyNeedsEscape(word)) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    out->append(s.data() + run, i - run);
    run = ++i;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xf]);
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

std::string JsonString(absl::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

}  // namespace fitledger
