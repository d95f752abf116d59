#include "sim/resource_quantity.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fitledger::sim {
namespace {

using uint128 = unsigned __int128;

constexpr uint64_t kNanosPerUnit = 1'000'000'000;
// maxAllowed (quantity.go): 2^63-1 units.
constexpr uint128 kMaxNanos = uint128{std::numeric_limits<int64_t>::max()} * kNanosPerUnit;

// ParseQuantity's errors (quantity.go ErrFormatWrong, ErrNumeric, ErrSuffix).
absl::Status QuantityFormatWrong() {
  return absl::InvalidArgumentError(
      "quantities must match the regular expression "
      "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
}
absl::Status QuantitySuffixWrong() {
  return absl::InvalidArgumentError("unable to parse quantity's suffix");
}

// suffix.go's tables: base and exponent of a suffix, and whether it is binary (BinarySI).
struct SuffixValue {
  int base = 10;
  int64_t exponent = 0;
  bool binary = false;
};

bool InterpretSuffix(absl::string_view suffix, SuffixValue* out) {
  static constexpr struct {
    const char* text;
    int base;
    int exponent;
  } kTable[] = {{"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0},
                {"k", 10, 3},  {"M", 10, 6},  {"G", 10, 9},  {"T", 10, 12},
                {"P", 10, 15}, {"E", 10, 18}, {"Ki", 2, 10}, {"Mi", 2, 20},
                {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60}};
  for (const auto& s : kTable) {
    if (suffix == s.text) {
      *out = SuffixValue{s.base, s.exponent, s.base == 2};
      return true;
    }
  }
  // "e<int>" / "E<int>" (strconv.ParseInt, then int32(parsed): a huge exponent wraps as upstream).
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int64_t parsed = 0;
    if (!absl::SimpleAtoi(suffix.substr(1), &parsed)) return false;  // takes a sign, as ParseInt
    *out = SuffixValue{10, static_cast<int32_t>(parsed), false};
    return true;
  }
  return false;
}

// `digits` (decimal, no leading zeros, not empty) doubled in place.
void DoubleDigits(std::string* digits) {
  int carry = 0;
  for (auto it = digits->rbegin(); it != digits->rend(); ++it) {
    const int d = (*it - '0') * 2 + carry;
    *it = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  if (carry) digits->insert(digits->begin(), static_cast<char>('0' + carry));
}

// ceil(digits * 10^power), or false if it is above kMaxNanos. `digits` has no leading zeros.
bool ScaleUp(const std::string& digits, int64_t power, uint128* out) {
  std::string whole = digits;
  bool remainder = false;
  if (power < 0) {
    const uint64_t drop = static_cast<uint64_t>(-power);
    if (drop >= whole.size()) {
      whole.clear();
      remainder = true;  // digits is not zero
    } else {
      for (size_t i = whole.size() - drop; i < whole.size(); ++i) remainder |= whole[i] != '0';
      whole.resize(whole.size() - drop);
    }
  } else {
    if (static_cast<uint64_t>(power) + whole.size() > 30) return false;  // > 10^29 > kMaxNanos
    whole.append(static_cast<size_t>(power), '0');
  }
  if (whole.size() > 30) return false;
  uint128 value = 0;
  for (char c : whole) value = value * 10 + static_cast<uint128>(c - '0');
  if (remainder) value += 1;
  if (value > kMaxNanos) return false;
  *out = value;
  return true;
}

}  // namespace

absl::StatusOr<ResourceQuantity> ResourceQuantity::Parse(absl::string_view text) {
  if (text.empty()) return QuantityFormatWrong();
  if (text == "0") return ResourceQuantity();
  // parseQuantityString: sign, leading zeros, numerator, optional ".denominator", suffix.
  size_t pos = 0;
  const size_t end = text.size();
  bool positive = true;
  if (text[0] == '-' || text[0] == '+') {
    positive = text[0] == '+';
    ++pos;
  }
  while (pos < end && text[pos] == '0') ++pos;
  if (pos >= end) return ResourceQuantity();
  auto digits_from = [&](size_t* p) {
    const size_t start = *p;
    while (*p < end && absl::ascii_isdigit(static_cast<unsigned char>(text[*p]))) ++*p;
    return text.substr(start, *p - start);
  };
  const absl::string_view numerator = digits_from(&pos);
  absl::string_view denominator;
  if (pos < end && text[pos] == '.') {
    ++pos;
    denominator = digits_from(&pos);
  }
  const size_t suffix_start = pos;
  while (pos < end &&
         absl::string_view("eEinumkKMGTP").find(text[pos]) != absl::string_view::npos) {
    ++pos;
  }
  if (pos < end && (text[pos] == '-' || text[pos] == '+')) ++pos;
  digits_from(&pos);
  if (pos < end) return QuantityFormatWrong();
  SuffixValue suffix;
  if (!InterpretSuffix(text.substr(suffix_start), &suffix)) return QuantitySuffixWrong();

  std::string digits = absl::StrCat(numerator, denominator);
  digits.erase(0, digits.find_first_not_of('0'));
  if (digits.empty()) return ResourceQuantity();
  if (!positive) {
    return absl::InvalidArgumentError(absl::StrCat(
        "negative quantity \"", text, "\": the API server refuses negative resource amounts"));
  }
  int64_t power = 9 - static_cast<int64_t>(denominator.size());  // to nano-units
  if (suffix.binary) {
    for (int64_t i = 0; i < suffix.exponent; ++i) DoubleDigits(&digits);
  } else {
    power += suffix.exponent;
  }
  uint128 nanos = 0;
  if (!ScaleUp(digits, power, &nanos)) {
    if (!suffix.binary) {
      return absl::InvalidArgumentError(
          absl::StrCat("quantity \"", text, "\" is above 2^63-1 units"));
    }
    nanos = kMaxNanos;  // the cap of a binary quantity
  }
  return ResourceQuantity(nanos);
}

ResourceQuantity ResourceQuantity::FromUnits(int64_t units) {
  return ResourceQuantity(units <= 0 ? 0 : uint128(units) * kNanosPerUnit);
}

int64_t ResourceQuantity::Scaled(uint64_t divisor) const {
  const uint128 scaled = nanos_ / divisor + (nanos_ % divisor != 0 ? 1 : 0);
  constexpr uint128 kMax = std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(scaled > kMax ? kMax : scaled);
}

int64_t ResourceQuantity::Value() const { return Scaled(kNanosPerUnit); }

int64_t ResourceQuantity::MilliValue() const { return Scaled(kNanosPerUnit / 1000); }

}  // namespace fitledger::sim
