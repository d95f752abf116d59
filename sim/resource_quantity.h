// A Kubernetes resource quantity as the simulated kubelet reads it: the sim's own reading of
// apimachinery pkg/api/resource (quantity.go ParseQuantity / parseQuantityString, suffix.go,
// Quantity.Value / MilliValue), independent of fitledger's (model/quantity.h), so that
// the sim's kubelet does not judge pods with the code it is meant to check.
#ifndef FITLEDGER_SIM_RESOURCE_QUANTITY_H_
#define FITLEDGER_SIM_RESOURCE_QUANTITY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fitledger::sim {

// A non-negative quantity, exact to the nano-unit (1e-9), as ParseQuantity keeps it: digits below
// a nano are rounded up at parse (inf.RoundUp to Nano); sums and maxima are exact (Quantity.Add,
// Cmp); Value() and MilliValue() round up (scale_int.go scaledValue "ALWAYS rounds up").
//
// Grammar (parseQuantityString): [+-] digits [. digits] suffix, the number part possibly empty
// ("" alone is an error; "+", "." and "Ki" read as 0); suffix one of the binary Ki Mi Gi Ti Pi Ei,
// the decimal n u m "" k M G T P E, or an exponent e<int> / E<int>.
//
// Where this differs from upstream, an error instead of a number: a negative quantity (the API
// server refuses negative requests, overhead and allocatable, so the kubelet never sees one); a
// decimal quantity above 2^63-1 units (upstream keeps it as an inf.Dec whose Value() wraps). A
// binary one above is capped at 2^63-1 units as upstream caps it (maxAllowed).
//
// Thread-compatible plain value.
class ResourceQuantity {
 public:
  constexpr ResourceQuantity() = default;

  // Parses `text` (surrounding whitespace is the caller's: Quantity.UnmarshalJSON trims it).
  // InvalidArgument with ParseQuantity's own error text (ErrFormatWrong, ErrNumeric, ErrSuffix)
  // for malformed text, and for the two cases above.
  static absl::StatusOr<ResourceQuantity> Parse(absl::string_view text);

  static ResourceQuantity FromUnits(int64_t units);

  bool IsZero() const { return nanos_ == 0; }
  // The value in units, rounded up; INT64_MAX if larger (a sum of capped quantities).
  int64_t Value() const;
  // The value in thousandths, rounded up; INT64_MAX if larger.
  int64_t MilliValue() const;

  ResourceQuantity& operator+=(const ResourceQuantity& other) {
    nanos_ += other.nanos_;
    return *this;
  }
  friend bool operator==(const ResourceQuantity& a, const ResourceQuantity& b) {
    return a.nanos_ == b.nanos_;
  }
  friend bool operator<(const ResourceQuantity& a, const ResourceQuantity& b) {
    return a.nanos_ < b.nanos_;
  }

 private:
  explicit ResourceQuantity(unsigned __int128 nanos) : nanos_(nanos) {}
  int64_t Scaled(uint64_t divisor) const;

  unsigned __int128 nanos_ = 0;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_RESOURCE_QUANTITY_H_
