#include "common/reuse_pool.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace fitledger {
namespace {

TEST(ReusePoolTest, HandsOutNewObjectsUntilOneIsKept) {
  ReusePool<std::vector<int>> pool(2);
  std::unique_ptr<std::vector<int>> a = pool.Take();
  ASSERT_NE(a, nullptr);
  a->reserve(100);
  std::vector<int>* const kept = a.get();
  pool.Keep(std::move(a));
  EXPECT_EQ(pool.idle(), 1u);

  std::unique_ptr<std::vector<int>> b = pool.Take();
  EXPECT_EQ(b.get(), kept);  // the kept object, its capacity with it
  EXPECT_GE(b->capacity(), 100u);
  EXPECT_EQ(pool.idle(), 0u);
  std::unique_ptr<std::vector<int>> c = pool.Take();
  EXPECT_NE(c.get(), kept);
}

TEST(ReusePoolTest, KeepsAtMostMaxIdle) {
  ReusePool<int> pool(2);
  std::vector<std::unique_ptr<int>> taken;
  for (int i = 0; i < 5; ++i) taken.push_back(pool.Take());
  for (auto& object : taken) pool.Keep(std::move(object));
  EXPECT_EQ(pool.idle(), 2u);
}

TEST(ReusePoolTest, TakeUsesTheMakerOnlyWhenNoneIsIdle) {
  ReusePool<int> pool(1);
  int made = 0;
  auto make = [&made] {
    ++made;
    return std::make_unique<int>(7);
  };
  pool.Keep(pool.Take(make));
  EXPECT_EQ(made, 1);
  EXPECT_EQ(*pool.Take(make), 7);
  EXPECT_EQ(made, 1);
}

TEST(ReusePoolTest, ConcurrentTakeAndKeep) {
  ReusePool<std::vector<int>> pool(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool] {
      for (int i = 0; i < 2000; ++i) {
        std::unique_ptr<std::vector<int>> v = pool.Take();
        v->push_back(i);
        v->clear();
        pool.Keep(std::move(v));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_GE(pool.idle(), 1u);
  EXPECT_LE(pool.idle(), 4u);
}

}  // namespace
}  // namespace fitledger
