// A generation counter that watchers block on: every store mutation and every fault switch bumps
// it, and waiters wake when it moves.
#ifndef FITLEDGER_SIM_CHANGE_SIGNAL_H_
#define FITLEDGER_SIM_CHANGE_SIGNAL_H_

#include <condition_variable>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace fitledger::sim {

// Thread-safe.
class ChangeSignal {
 public:
  uint64_t generation() const {
    MutexLock lock(&mu_);
    return generation_;
  }

  // Bumps the generation and wakes every waiter.
  void Notify() {
    {
      MutexLock lock(&mu_);
      ++generation_;
    }
    cv_.notify_all();
  }

  // Blocks until the generation differs from `seen` or `deadline` passes; returns the generation.
  uint64_t WaitForChange(uint64_t seen, absl::Time deadline) {
    MutexLock lock(&mu_);
    LockAdapter adapter{&mu_};
    while (generation_ == seen) {
      absl::Time now = absl::Now();
      if (now >= deadline) break;
      cv_.wait_for(adapter, absl::ToChronoNanoseconds(deadline - now));
    }
    return generation_;
  }

 private:
  // std::condition_variable_any needs lock()/unlock(); the caller already holds mu_ through a
  // MutexLock, so the analysis sees the lock held across the wait.
  struct LockAdapter {
    Mutex* mu;
    void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu->Lock(); }
    void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu->Unlock(); }
  };

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_CHANGE_SIGNAL_H_
