#include "common/worker_pool.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fitledger {

WorkerPool::WorkerPool(std::string name, int threads)
    : name_(std::move(name)), thread_count_(std::max(1, threads)) {}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Start() {
  MutexLock lock(&mu_);
  if (!threads_.empty() || stopping_) return;
  for (int i = 0; i < thread_count_; ++i) {
    threads_.emplace_back([this, i] {
      // Linux limits thread names to 15 characters.
      pthread_setname_np(pthread_self(), absl::StrCat(name_, "-", i).substr(0, 15).c_str());
      Run();
    });
  }
}

bool WorkerPool::Submit(absl::AnyInvocable<void()> work) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(work));
  }
  cv_.Signal();
  return true;
}

void WorkerPool::Run() {
  for (;;) {
    absl::AnyInvocable<void()> work;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stopping, and nothing left
      work = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    work();
    work = nullptr;  // destroy what it captured outside the lock
    MutexLock lock(&mu_);
    --running_;
  }
}

void WorkerPool::Stop() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.SignalAll();
  for (std::thread& t : threads) t.join();
  // Never started: the queued work is dropped unrun (as Submit after Stop).
  std::deque<absl::AnyInvocable<void()>> rest;
  {
    MutexLock lock(&mu_);
    rest.swap(queue_);
  }
}

int WorkerPool::pending() const {
  MutexLock lock(&mu_);
  return static_cast<int>(queue_.size()) + running_;
}

}  // namespace fitledger
