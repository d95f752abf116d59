#include "common/heap_trim.h"

#include <malloc.h>
#include <pthread.h>

#include <chrono>

namespace fitledger {

size_t FreeHeapBytes() { return mallinfo2().fordblks; }

HeapTrimmer::HeapTrimmer(absl::Duration period, size_t min_free_bytes)
    : period_(period), min_free_bytes_(min_free_bytes) {}

HeapTrimmer::~HeapTrimmer() { Stop(); }

void HeapTrimmer::Start() {
  thread_ = std::thread([this] { Run(); });
  pthread_setname_np(thread_.native_handle(), "heap-trim");
}

void HeapTrimmer::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

bool HeapTrimmer::TrimIfWorthIt() {
  MutexLock lock(&trim_mu_);
  struct mallinfo2 info = mallinfo2();
  if (info.fordblks <= min_free_bytes_) return false;
  if (info.fordblks == free_after_trim_ && info.arena == arena_after_trim_) return false;
  malloc_trim(0);
  info = mallinfo2();
  free_after_trim_ = info.fordblks;
  arena_after_trim_ = info.arena;
  trims_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void HeapTrimmer::Run() {
  const auto period = absl::ToChronoNanoseconds(period_);
  while (true) {
    {
      MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + period;
      while (!stop_ && std::chrono::steady_clock::now() < deadline) {
        cv_.WaitFor(&mu_, deadline - std::chrono::steady_clock::now());
      }
      if (stop_) return;
    }
    TrimIfWorthIt();
  }
}

}  // namespace fitledger
