// Time as an argument: code that reads the time reads it from a Clock, so tests advance a
// FakeClock (tests/common/fake_clock.h) instead of waiting on the wall clock.
#ifndef FITLEDGER_COMMON_CLOCK_H_
#define FITLEDGER_COMMON_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fitledger {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The wall clock (absl::Now()); lives for the whole program.
  static const Clock& Real();
};

namespace clock_internal {
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};
}  // namespace clock_internal

inline const Clock& Clock::Real() {
  static const clock_internal::RealClock clock;
  return clock;
}

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_CLOCK_H_
