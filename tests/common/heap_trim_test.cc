#include "common/heap_trim.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace fitledger {
namespace {

constexpr size_t kMiB = 1 << 20;

size_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// 64 MiB in 64 KiB blocks (below glibc's mmap threshold, so on the heap), written, then freed
// but for one more block allocated after them, so that free() cannot give them back from the top
// of the heap: the shape a burst of large requests leaves. Returns that block.
void* LeaveFreedMemoryInTheHeap() {
  std::vector<void*> blocks;
  for (int i = 0; i < 1024; ++i) {
    void* p = malloc(64 << 10);
    memset(p, 0x5a, 64 << 10);
    blocks.push_back(p);
  }
  void* fence = malloc(64 << 10);  // as large as the others: carved from the top, after them
  for (void* p : blocks) free(p);
  return fence;
}

TEST(HeapTrimTest, FreedMemoryInTheMiddleOfTheHeapGoesBackToTheKernel) {
  void* fence = LeaveFreedMemoryInTheHeap();
  ASSERT_GT(FreeHeapBytes(), 48 * kMiB);
  const size_t before = RssBytes();
  HeapTrimmer trimmer(absl::Hours(1), 32 * kMiB);
  EXPECT_TRUE(trimmer.TrimIfWorthIt());
  EXPECT_LT(RssBytes() + 32 * kMiB, before);
  EXPECT_EQ(trimmer.trims(), 1);
  // Nothing changed since: not trimmed again, though the trimmed pages still count as free.
  EXPECT_FALSE(trimmer.TrimIfWorthIt());
  EXPECT_EQ(trimmer.trims(), 1);
  free(fence);
}

TEST(HeapTrimTest, LittleFreeMemoryIsLeftAlone) {
  HeapTrimmer trimmer(absl::Hours(1), size_t{1} << 40);
  EXPECT_FALSE(trimmer.TrimIfWorthIt());
  EXPECT_EQ(trimmer.trims(), 0);
}

TEST(HeapTrimTest, TheThreadTrimsEachPeriodAndStops) {
  HeapTrimmer trimmer(absl::Milliseconds(20), 32 * kMiB);
  trimmer.Start();
  void* fence = LeaveFreedMemoryInTheHeap();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (trimmer.trims() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_GE(trimmer.trims(), 1);
  trimmer.Stop();
  trimmer.Stop();  // idempotent
  free(fence);
}

}  // namespace
}  // namespace fitledger
