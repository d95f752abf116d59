// Kubernetes resource quantities (apimachinery's resource.Quantity), parsed exactly.
#ifndef FITLEDGER_MODEL_QUANTITY_H_
#define FITLEDGER_MODEL_QUANTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fitledger {

// An exact quantity held as a signed count of nano-units (1e-9). Sums of quantities are exact;
// rounding happens once, when a sum is turned into millis or units (both round up, away from
// zero, as Kubernetes' MilliValue() and Value() do).
//
// Grammar (case-sensitive, no whitespace): [+-] <digits>[.<digits>] | <digits>. | .<digits>
// followed by one suffix: binary Ki Mi Gi Ti Pi Ei; decimal n u m "" k M G T P E; or a decimal
// exponent e<int> / E<int>. Digits below one nano are rounded up at parse, as Kubernetes does.
// Unlike Kubernetes, which silently caps a value above 2^63-1 units, such a value is rejected.
//
// Thread-compatible plain value.
class Quantity {
 public:
  constexpr Quantity() = default;

  // Parses `text`. Returns InvalidArgument naming `text` for any malformed or out-of-range input.
  static absl::StatusOr<Quantity> Parse(absl::string_view text);

  static Quantity FromNanos(__int128 nanos) { return Quantity(nanos); }
  static Quantity FromUnits(int64_t units) {
    return Quantity(static_cast<__int128>(units) * kNano);
  }
  static Quantity FromMillis(int64_t millis) {
    return Quantity(static_cast<__int128>(millis) * (kNano / 1000));
  }

  __int128 nanos() const { return nanos_; }
  bool IsZero() const { return nanos_ == 0; }
  bool IsNegative() const { return nanos_ < 0; }

  // The value in thousandths, rounded up (away from zero). InvalidArgument if it overflows int64.
  absl::StatusOr<int64_t> MilliValue() const;
  // The value in units, rounded up (away from zero). InvalidArgument if it overflows int64.
  absl::StatusOr<int64_t> Value() const;

  Quantity& operator+=(Quantity other) {
    nanos_ += other.nanos_;
    return *this;
  }
  friend Quantity operator+(Quantity a, Quantity b) { return a += b; }
  friend bool operator==(Quantity a, Quantity b) { return a.nanos_ == b.nanos_; }
  friend bool operator<(Quantity a, Quantity b) { return a.nanos_ < b.nanos_; }

  // A canonical decimal rendering ("1500m", "2", "128974848") for messages and tests.
  std::string ToString() const;

  static constexpr int64_t kNano = 1'000'000'000;

 private:
  explicit constexpr Quantity(__int128 nanos) : nanos_(nanos) {}
  __int128 nanos_ = 0;
};

}  // namespace fitledger

#endif  // FITLEDGER_MODEL_QUANTITY_H_
