#include "common/worker_pool.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace fitledger {
namespace {

TEST(WorkerPoolTest, RunsWorkInOrderOnOneThread) {
  WorkerPool pool("test", 1);
  pool.Start();
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(pool.Submit([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    }));
  }
  pool.Stop();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

// A worker that waits (a binding POST) holds only itself: the others go on.
TEST(WorkerPoolTest, ABlockedWorkerLeavesTheOthersRunning) {
  WorkerPool pool("test", 3);
  pool.Start();
  absl::Notification release;
  absl::Notification started;
  ASSERT_TRUE(pool.Submit([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(20)));
  std::atomic<int> done{0};
  absl::Notification all;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(pool.Submit([&] {
      if (++done == 10) all.Notify();
    }));
  }
  EXPECT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(20)));
  // The last of them may still be counted for a moment after it ran; then only the blocked one.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (pool.pending() != 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(pool.pending(), 1);
  release.Notify();
  pool.Stop();
  EXPECT_EQ(pool.pending(), 0);
}

TEST(WorkerPoolTest, StopRunsWhatIsQueuedThenRefusesMore) {
  WorkerPool pool("test", 2);
  pool.Start();
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(pool.Submit([&] { ++ran; }));
  pool.Stop();
  EXPECT_EQ(ran.load(), 50);
  auto token = std::make_shared<int>(0);
  EXPECT_FALSE(pool.Submit([token] {}));
  EXPECT_EQ(token.use_count(), 1);  // the refused work was dropped, not kept
  pool.Stop();                      // idempotent
}

}  // namespace
}  // namespace fitledger
