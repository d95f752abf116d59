// Gives the heap's free pages back to the kernel after a burst of large requests.
//
// glibc's free() returns memory to the kernel only from the top of an arena. A full-Nodes Filter
// (megabytes of request and reply on each I/O thread) or a relist of the pods leaves megabytes of
// freed buffers in the middle of the arenas, where they stay resident until the process exits:
// fitledger-server's RSS after such a burst stayed near its peak. malloc_trim(0) releases the free
// pages of every arena (madvise), which takes a few milliseconds on a heap of 100+ MiB; so it
// runs on its own thread, only when the arenas hold more than a threshold of free memory. Setting
// a fixed mmap threshold instead (big buffers mapped and unmapped per request) made the same
// burst fault every page of every buffer in again: several times the CPU per request.
#ifndef FITLEDGER_COMMON_HEAP_TRIM_H_
#define FITLEDGER_COMMON_HEAP_TRIM_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "absl/time/time.h"
#include "common/mutex.h"

namespace fitledger {

// Free heap bytes in all of glibc's arenas (mallinfo2's fordblks).
size_t FreeHeapBytes();

// Thread-safe. Start() spawns the thread; Stop() (or the destructor) joins it.
class HeapTrimmer {
 public:
  // Every `period`, trims the heap if more than `min_free_bytes` of it are free and the heap
  // changed since the last trim (an idle process is not trimmed again and again: trimmed pages
  // stay counted as free).
  HeapTrimmer(absl::Duration period, size_t min_free_bytes);
  ~HeapTrimmer();
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  void Start();
  void Stop();  // idempotent

  // One check, now, on the caller's thread, by the rule above. True if it trimmed.
  bool TrimIfWorthIt();

  // Trims done since construction.
  int64_t trims() const { return trims_.load(std::memory_order_relaxed); }

 private:
  void Run();

  const absl::Duration period_;
  const size_t min_free_bytes_;
  std::atomic<int64_t> trims_{0};
  Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Mutex trim_mu_;  // one check at a time
  size_t free_after_trim_ ABSL_GUARDED_BY(trim_mu_) = 0;
  size_t arena_after_trim_ ABSL_GUARDED_BY(trim_mu_) = 0;
  std::thread thread_;  // owned by Start/Stop's caller
};

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_HEAP_TRIM_H_
