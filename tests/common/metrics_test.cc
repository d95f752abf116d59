#include "common/metrics.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fitledger {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, CountersAndHistogramsRenderInTheTextFormat) {
  MetricsRegistry registry;
  CounterFamily* requests = registry.Counter("t_requests_total", "Requests.", {"verb", "code"});
  HistogramFamily* latency =
      registry.Histogram("t_latency_seconds", "Latency.", {"verb"}, {0.001, 0.01, 0.1});
  requests->Increment({"filter", "200"});
  requests->Increment({"filter", "200"}, 2);
  requests->Increment({"bind", "200"});
  latency->Observe({"filter"}, 0.005);
  latency->Observe({"filter"}, 0.05);
  latency->Observe({"filter"}, 5);
  EXPECT_EQ(requests->Value({"filter", "200"}), 3u);
  EXPECT_EQ(latency->Count({"filter"}), 3u);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE t_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("t_requests_total{verb=\"filter\",code=\"200\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("t_requests_total{verb=\"bind\",code=\"200\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("t_latency_seconds_bucket{verb=\"filter\",le=\"0.001\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("t_latency_seconds_bucket{verb=\"filter\",le=\"0.01\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("t_latency_seconds_bucket{verb=\"filter\",le=\"0.1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("t_latency_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("t_latency_seconds_sum{verb=\"filter\"} 5.055\n"));
  EXPECT_THAT(text, HasSubstr("t_latency_seconds_count{verb=\"filter\"} 3\n"));
}

// Counting from several threads at once (as the I/O threads do) loses nothing, and a scrape
// meanwhile always shows cumulative buckets.
TEST(MetricsTest, ConcurrentCountingLosesNothing) {
  MetricsRegistry registry;
  CounterFamily* requests = registry.Counter("t_total", "Requests.", {"verb"});
  HistogramFamily* latency = registry.Histogram("t_seconds", "Latency.", {"verb"}, {0.5, 1});
  constexpr int kThreads = 4;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        requests->Increment({t % 2 == 0 ? "filter" : "bind"});
        latency->Observe({"filter"}, i % 2 == 0 ? 0.25 : 2);
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    const std::string text = registry.Render();
    ASSERT_THAT(text, HasSubstr("t_seconds_count"));
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(requests->Value({"filter"}) + requests->Value({"bind"}),
            static_cast<uint64_t>(kThreads * kEach));
  EXPECT_EQ(latency->Count({"filter"}), static_cast<uint64_t>(kThreads * kEach));
  EXPECT_THAT(registry.Render(),
              HasSubstr(absl::StrCat("t_seconds_bucket{verb=\"filter\",le=\"0.5\"} ",
                                     kThreads * kEach / 2, "\n")));
}

}  // namespace
}  // namespace fitledger
