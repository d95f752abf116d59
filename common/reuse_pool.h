// ReusePool<T>: a bounded free list of objects that cost allocations to build and little to reset
// (protobuf messages: Clear() keeps their strings and sub-messages allocated for the next parse).
//
// Take() hands out an idle object, or a new one when none is idle; Keep() takes one back for later
// when fewer than `max_idle` are idle, and destroys it otherwise. The caller resets an object
// (and decides whether it is worth keeping) before Keep(), outside the pool's lock. Thread-safe.
#ifndef FITLEDGER_COMMON_REUSE_POOL_H_
#define FITLEDGER_COMMON_REUSE_POOL_H_

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace fitledger {

template <typename T>
class ReusePool {
 public:
  explicit ReusePool(size_t max_idle) : max_idle_(max_idle) {}
  ReusePool(const ReusePool&) = delete;
  ReusePool& operator=(const ReusePool&) = delete;

  // An idle object, or `make()` when none is idle.
  template <typename Make>
  std::unique_ptr<T> Take(Make make) {
    {
      MutexLock lock(&mu_);
      if (!idle_.empty()) {
        std::unique_ptr<T> object = std::move(idle_.back());
        idle_.pop_back();
        return object;
      }
    }
    return make();
  }
  std::unique_ptr<T> Take() {
    return Take([] { return std::make_unique<T>(); });
  }

  void Keep(std::unique_ptr<T> object) {
    {
      MutexLock lock(&mu_);
      if (idle_.size() < max_idle_) {
        idle_.push_back(std::move(object));
        return;
      }
    }
    // destroyed here, outside the lock
  }

  size_t idle() const {
    MutexLock lock(&mu_);
    return idle_.size();
  }

 private:
  const size_t max_idle_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<T>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_REUSE_POOL_H_
