// Concurrency: binding cycles run in parallel in kube-scheduler; the ledger must never let two
// of them take the same capacity. Run these under ThreadSanitizer too (the test command does).
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/ledger/ledger.h"

namespace fitledger {
namespace {

Resources Req(int64_t milli_cpu) {
  Resources r;
  r.milli_cpu = milli_cpu;
  r.pods = 1;
  return r;
}

NodeRecord Node(std::string name, int64_t milli_cpu) {
  NodeRecord n;
  n.name = std::move(name);
  n.allocatable.milli_cpu = milli_cpu;
  n.allocatable.memory_bytes = int64_t{1} << 40;
  n.allocatable.pods = 1000;
  return n;
}

TEST(LedgerRaceTest, TwoBindsRacingForTheLastSlotExactlyOneWins) {
  for (int round = 0; round < 200; ++round) {
    Ledger ledger(AccountingPolicy{}, ScoringStrategy::kLeastAllocated);
    ledger.UpsertNode(Node("n", 1000));
    ledger.UpsertPod({"existing", "n", false, false, Req(600)});
    std::atomic<int> wins{0};
    std::atomic<bool> go{false};
    auto bind = [&](const std::string& uid) {
      while (!go.load()) {
      }
      if (ledger.TryAssume(uid, "ns", uid, "n", Req(400), absl::Now()).ok()) ++wins;
    };
    std::thread t1(bind, "p1");
    std::thread t2(bind, "p2");
    go = true;
    t1.join();
    t2.join();
    ASSERT_EQ(wins.load(), 1) << "round " << round;
  }
}

TEST(LedgerRaceTest, ManyConcurrentBindsNeverOvercommit) {
  Ledger ledger(AccountingPolicy{}, ScoringStrategy::kLeastAllocated);
  constexpr int kNodes = 4;
  for (int n = 0; n < kNodes; ++n) ledger.UpsertNode(Node("n" + std::to_string(n), 4000));
  constexpr int kThreads = 8;
  constexpr int kPodsPerThread = 200;
  std::atomic<int> wins{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kPodsPerThread; ++i) {
        std::string uid = "t" + std::to_string(t) + "-" + std::to_string(i);
        std::string node = "n" + std::to_string(rng() % kNodes);
        if (!ledger.TryAssume(uid, "ns", uid, node, Req(400), absl::Now()).ok()) continue;
        ++wins;
        switch (rng() % 3) {
          case 0:  // the bind failed: released
            ledger.Forget(uid);
            --wins;
            break;
          case 1:  // the watch confirms it
            ledger.MarkBound(uid, node);
            ledger.UpsertPod({uid, node, false, false, Req(400)});
            break;
          default:  // still assumed
            ledger.MarkBound(uid, node);
        }
        ledger.Filter(Req(400), {"n0", "n1", "n2", "n3"});
      }
    });
  }
  for (auto& t : threads) t.join();
  int64_t counted = 0;
  for (const NodeSummary& n : ledger.Nodes()) {
    EXPECT_LE(n.confirmed.milli_cpu + n.assumed.milli_cpu, n.allocatable.milli_cpu) << n.name;
    counted += n.confirmed_pods + n.assumed_pods;
  }
  EXPECT_EQ(counted, wins.load());
  EXPECT_EQ(counted, kNodes * 10);  // every node ends exactly full: 10 x 400m
  EXPECT_EQ(static_cast<int64_t>(ledger.pod_count()), counted);
}

}  // namespace
}  // namespace fitledger
