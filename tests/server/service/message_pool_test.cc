#include "server/service/message_pool.h"

#include <string>
#include <thread>
#include <vector>

#include "fitledger/v1/extender.pb.h"
#include "gtest/gtest.h"

namespace fitledger {
namespace {

using FilterPool = MessagePool<v1::ExtenderArgs, v1::ExtenderFilterResult>;

void Fill(v1::ExtenderArgs* args, v1::ExtenderFilterResult* result, const std::string& tag) {
  args->mutable_pod()->mutable_metadata()->set_name("pod-" + tag);
  for (int i = 0; i < 3; ++i) args->add_node_names("node-" + tag + "-" + std::to_string(i));
  args->mutable_nodes()->add_items()->mutable_metadata()->set_name("full-" + tag);
  result->add_node_names("node-" + tag + "-0");
  (*result->mutable_failed_nodes())["node-" + tag + "-1"] = "Insufficient cpu";
  result->set_error("error-" + tag);
}

TEST(MessagePoolTest, AReleasedPairComesBackEmpty) {
  FilterPool pool;
  auto* first = pool.AllocateMessages();
  Fill(first->request(), first->response(), "a");
  first->Release();
  EXPECT_EQ(pool.idle(), 1u);
  auto* second = pool.AllocateMessages();
  EXPECT_EQ(second, first) << "the idle pair is reused";
  EXPECT_EQ(pool.idle(), 0u);
  EXPECT_EQ(second->request()->ByteSizeLong(), 0u) << second->request()->DebugString();
  EXPECT_EQ(second->response()->ByteSizeLong(), 0u) << second->response()->DebugString();
  EXPECT_FALSE(second->request()->has_pod());
  EXPECT_FALSE(second->request()->has_nodes());
  second->Release();
}

TEST(MessagePoolTest, PairsInUseAreDistinct) {
  FilterPool pool;
  auto* a = pool.AllocateMessages();
  auto* b = pool.AllocateMessages();
  EXPECT_NE(a, b);
  EXPECT_NE(a->request(), b->request());
  EXPECT_NE(a->response(), b->response());
  a->Release();
  b->Release();
  EXPECT_EQ(pool.idle(), 2u);
}

TEST(MessagePoolTest, ALargeRequestIsFreedNotPooled) {
  FilterPool pool(/*max_pooled=*/8, /*keep_limit=*/1000);
  auto* large = pool.AllocateMessages();
  for (int i = 0; i < 100; ++i)
    large->request()->add_node_names("a-rather-long-node-name-" + std::to_string(i));
  ASSERT_GT(large->request()->ByteSizeLong(), 1000u);
  large->Release();
  EXPECT_EQ(pool.idle(), 0u);
  auto* small = pool.AllocateMessages();
  small->request()->add_node_names("n1");
  small->Release();
  EXPECT_EQ(pool.idle(), 1u);
}

TEST(MessagePoolTest, AKeepRuleDecidesWhatIsPooled) {
  FilterPool pool(/*max_pooled=*/8, [](const v1::ExtenderArgs& args) { return !args.has_nodes(); });
  auto* full = pool.AllocateMessages();
  full->request()->mutable_nodes()->add_items();
  full->Release();
  EXPECT_EQ(pool.idle(), 0u);
  auto* names = pool.AllocateMessages();
  names->request()->add_node_names("n1");
  names->Release();
  EXPECT_EQ(pool.idle(), 1u);
}

TEST(MessagePoolTest, KeepsAtMostMaxPooledIdlePairs) {
  FilterPool pool(/*max_pooled=*/2);
  std::vector<grpc::MessageHolder<v1::ExtenderArgs, v1::ExtenderFilterResult>*> held;
  for (int i = 0; i < 5; ++i) held.push_back(pool.AllocateMessages());
  for (auto* holder : held) holder->Release();
  EXPECT_EQ(pool.idle(), 2u);
}

TEST(MessagePoolTest, ConcurrentCallsNeverShareOrInheritAPair) {
  FilterPool pool(/*max_pooled=*/4);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, &bad, t] {
      for (int i = 0; i < 2000; ++i) {
        auto* holder = pool.AllocateMessages();
        if (holder->request()->ByteSizeLong() != 0 || holder->response()->ByteSizeLong() != 0) {
          ++bad[t];
        }
        const std::string tag = std::to_string(t) + "-" + std::to_string(i);
        Fill(holder->request(), holder->response(), tag);
        if (holder->request()->pod().metadata().name() != "pod-" + tag) ++bad[t];
        holder->Release();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
  EXPECT_LE(pool.idle(), 4u);
}

}  // namespace
}  // namespace fitledger
