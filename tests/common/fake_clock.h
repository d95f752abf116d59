// A Clock that moves only when a test moves it. Thread-safe.
#ifndef FITLEDGER_TESTS_COMMON_FAKE_CLOCK_H_
#define FITLEDGER_TESTS_COMMON_FAKE_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "common/clock.h"

namespace fitledger::testing {

class FakeClock : public Clock {
 public:
  // Starts at a fixed, arbitrary instant (2026-01-01 00:00:00 UTC).
  FakeClock() : FakeClock(absl::FromUnixSeconds(1767225600)) {}
  explicit FakeClock(absl::Time start) : nanos_(absl::ToUnixNanos(start)) {}

  absl::Time Now() const override { return absl::FromUnixNanos(nanos_.load()); }
  void Advance(absl::Duration d) { nanos_ += absl::ToInt64Nanoseconds(d); }

 private:
  std::atomic<int64_t> nanos_;
};

}  // namespace fitledger::testing

#endif  // FITLEDGER_TESTS_COMMON_FAKE_CLOCK_H_
