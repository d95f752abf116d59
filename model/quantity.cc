#include "model/quantity.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fitledger {
namespace {

using int128 = __int128;

// The largest magnitude we hold: 2^63-1 units, in nanos. Anything above cannot be an int64 value.
constexpr int128 kMaxNanos =
    static_cast<int128>(std::numeric_limits<int64_t>::max()) * Quantity::kNano;
// Digits beyond this magnitude only matter for rounding (or mean overflow).
constexpr int128 kDigitLimit =
    static_cast<int128>(1'000'000'000'000'000'000LL) * 1'000'000'000'000'000'000LL;

absl::Status Invalid(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("quantity \"", absl::CHexEscape(text), "\": ", why));
}

// Multiplies `v` by 10^n, or returns false on overflow past kMaxNanos.
bool MulPow10(int128& v, int n) {
  for (int i = 0; i < n; ++i) {
    if (v > kMaxNanos / 10) return v == 0;
    v *= 10;
  }
  return true;
}

struct Suffix {
  int base = 10;  // 2 or 10
  int exponent = 0;
};

bool ParseSuffix(absl::string_view s, Suffix& out) {
  if (s.empty()) return true;
  if (s.size() == 2 && s[1] == 'i') {
    static constexpr absl::string_view kBinary = "KMGTPE";
    size_t idx = kBinary.find(s[0]);
    if (idx == absl::string_view::npos) return false;
    out = {2, 10 * static_cast<int>(idx + 1)};
    return true;
  }
  if (s.size() == 1) {
    switch (s[0]) {
      case 'n':
        out = {10, -9};
        return true;
      case 'u':
        out = {10, -6};
        return true;
      case 'm':
        out = {10, -3};
        return true;
      case 'k':
        out = {10, 3};
        return true;
      case 'M':
        out = {10, 6};
        return true;
      case 'G':
        out = {10, 9};
        return true;
      case 'T':
        out = {10, 12};
        return true;
      case 'P':
        out = {10, 15};
        return true;
      case 'E':
        out = {10, 18};
        return true;
      default:
        return false;
    }
  }
  if (s[0] == 'e' || s[0] == 'E') {
    absl::string_view rest = s.substr(1);
    // Kubernetes reads the exponent with strconv.ParseInt: an optional sign, then digits.
    absl::string_view digits = rest;
    if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) digits.remove_prefix(1);
    if (digits.empty() || digits.size() > 6) return false;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
    }
    int exponent = 0;
    if (!absl::SimpleAtoi(rest, &exponent)) return false;
    out = {10, exponent};
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<Quantity> Quantity::Parse(absl::string_view text) {
  if (text.empty()) return Invalid(text, "empty quantity");
  size_t pos = 0;
  bool negative = false;
  if (text[pos] == '+' || text[pos] == '-') {
    negative = text[pos] == '-';
    ++pos;
  }
  // Mantissa digits, kept in `mantissa` while they fit; later integer digits scale it, later
  // fraction digits only set `sticky` (they round up).
  int128 mantissa = 0;
  int scale = 0;  // value = mantissa * 10^scale (before the suffix)
  bool sticky = false;
  int digits = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    int d = text[pos++] - '0';
    ++digits;
    if (mantissa < kDigitLimit) {
      mantissa = mantissa * 10 + d;
    } else {
      ++scale;
      if (d != 0) sticky = true;
    }
  }
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      int d = text[pos++] - '0';
      ++digits;
      if (mantissa < kDigitLimit) {
        mantissa = mantissa * 10 + d;
        --scale;
      } else if (d != 0) {
        sticky = true;
      }
    }
  }
  if (digits == 0) return Invalid(text, "expected a number");
  Suffix suffix;
  if (!ParseSuffix(text.substr(pos), suffix)) {
    return Invalid(text,
                   absl::StrCat("unknown suffix \"", absl::CHexEscape(text.substr(pos)), "\""));
  }

  int128 nanos = 0;
  int pow10 = scale + 9;  // nanos = mantissa * 10^pow10 (* 2^exp for binary suffixes)
  if (suffix.base == 10) {
    pow10 += suffix.exponent;
  } else {
    for (int i = 0; i < suffix.exponent; ++i) {
      if (mantissa > kMaxNanos * 1000) return Invalid(text, "out of range");
      mantissa *= 2;
    }
  }
  if (pow10 >= 0) {
    nanos = mantissa;
    if (!MulPow10(nanos, pow10)) return Invalid(text, "out of range");
    if (sticky) return Invalid(text, "out of range");  // only reachable with a huge mantissa
  } else {
    int128 divisor = 1;
    int n = -pow10;
    bool underflow = false;
    for (int i = 0; i < n; ++i) {
      if (divisor > kDigitLimit * 10) {
        underflow = true;
        break;
      }
      divisor *= 10;
    }
    if (underflow) {
      nanos = (mantissa != 0 || sticky) ? 1 : 0;
    } else {
      nanos = mantissa / divisor;
      if (mantissa % divisor != 0 || sticky) ++nanos;
    }
  }
  if (nanos > kMaxNanos) return Invalid(text, "out of range");
  return Quantity(negative ? -nanos : nanos);
}

namespace {
absl::StatusOr<int64_t> RoundUpDiv(int128 nanos, int64_t divisor) {
  int128 magnitude = nanos < 0 ? -nanos : nanos;
  int128 q = magnitude / divisor + (magnitude % divisor != 0 ? 1 : 0);
  if (q > std::numeric_limits<int64_t>::max()) {
    return absl::InvalidArgumentError("quantity out of range for int64");
  }
  return static_cast<int64_t>(nanos < 0 ? -q : q);
}
}  // namespace

absl::StatusOr<int64_t> Quantity::MilliValue() const { return RoundUpDiv(nanos_, kNano / 1000); }

absl::StatusOr<int64_t> Quantity::Value() const { return RoundUpDiv(nanos_, kNano); }

namespace {
// Decimal digits of a non-negative 128-bit value.
std::string Digits(int128 v) {
  std::string out;
  do {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v > 0);
  return out;
}
}  // namespace

std::string Quantity::ToString() const {
  int128 magnitude = nanos_ < 0 ? -nanos_ : nanos_;
  const char* sign = nanos_ < 0 ? "-" : "";
  if (magnitude % kNano == 0) return absl::StrCat(sign, Digits(magnitude / kNano));
  if (magnitude % (kNano / 1000) == 0)
    return absl::StrCat(sign, Digits(magnitude / (kNano / 1000)), "m");
  if (magnitude % 1000 == 0) return absl::StrCat(sign, Digits(magnitude / 1000), "u");
  return absl::StrCat(sign, Digits(magnitude), "n");
}

}  // namespace fitledger
