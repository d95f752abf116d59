#include "common/json.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fitledger {

namespace {

// The bytes of `v` (in memory order) that are a control character (< 0x20), '"' or '\\': their
// high bit set in the result, and wrongly set only in bytes after a true one (the classic "has a
// zero / smaller byte" word tricks), so the lowest set bit finds the first.
inline uint64_t EscapeMask(uint64_t v) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  const auto has_zero = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  return ((v - kOnes * 0x20) & ~v & kHigh) | has_zero(v ^ (kOnes * '"')) |
         has_zero(v ^ (kOnes * '\\'));
}

inline bool NeedsEscape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

}  // namespace

size_t JsonPlainPrefix(absl::string_view s) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "EscapeMask's first byte is lowest");
  size_t i = 0;
#if defined(__SSE2__)
  // Sixteen bytes at a time (SSE2 is part of x86-64): a node name of 30-40 characters is two
  // or three steps, not five. The words and the bytes below take what is left.
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i last_control = _mm_set1_epi8(0x1f);
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    // Unsigned v <= 0x1f exactly when max(v, 0x1f) is 0x1f (bytes of 0x80 and up are plain).
    const __m128i control = _mm_cmpeq_epi8(_mm_max_epu8(v, last_control), last_control);
    const __m128i escaped =
        _mm_or_si128(control, _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    if (const int mask = _mm_movemask_epi8(escaped); mask != 0) {
      return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    }
  }
#endif
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, s.data() + i, sizeof(word));
    if (const uint64_t mask = EscapeMask(word); mask != 0) {
      return i + static_cast<size_t>(__builtin_ctzll(mask)) / 8;
    }
  }
  while (i < s.size() && !NeedsEscape(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

void AppendJsonString(absl::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (;;) {
    // Names and most values need no escaping at all.
    const size_t plain = JsonPlainPrefix(s);
    out->append(s.data(), plain);
    if (plain == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[plain]);
    s.remove_prefix(plain + 1);
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
  out->push_back('"');
}

std::string JsonString(absl::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

}  // namespace fitledger
