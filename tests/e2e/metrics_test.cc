// Metrics after a known sequence: the burst's assumed pods rise, then return to 0 as the watch
// confirms them; transitions are counted exactly.
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using ::testing::HasSubstr;

std::string Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  auto r = client.Get("/metrics");
  return r ? r->body : "";
}

// The value of the sample whose line starts with `series` ("name{labels}"), or -1.
double Sample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double v = -1;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &v)) return v;
  }
  return -1;
}

// Every test runs in both layouts: the webhook in fitledger-server (the chart's default) and in
// fitledger-shim in front of the server's gRPC.
class MetricsE2eTest : public ::testing::TestWithParam<Layout> {
 protected:
  ClusterOptions WithLayout(ClusterOptions options) const {
    options.layout = GetParam();
    return options;
  }
};

TEST_P(MetricsE2eTest, AssumedRisesThenReturnsToZeroAndTransitionsAreCounted) {
  // A 3 s watch lag keeps the assumptions visible long enough to scrape them.
  const std::string sim = R"(
nodes:
  - name: w1
    allocatable: {cpu: "4", memory: 8Gi, pods: 110}
watchLag: 3s
kubelet: {enabled: true}
)";
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({sim, ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  const int port = (*c)->extender().monitor_port;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<nlohmann::json> pod = (*c)->CreatePod("m" + std::to_string(i), "500m");
    ASSERT_TRUE(pod.ok());
    ASSERT_EQ((*c)->FilterAndBind(*pod, "w1").value_or("?"), "");
  }
  std::string during = Scrape(port);
  EXPECT_EQ(Sample(during, "fitledger_assumed_pods"), 5) << during;
  EXPECT_EQ(
      Sample(during, "fitledger_node_resource{node=\"w1\",resource=\"cpu\",kind=\"assumed\"}"),
      2500);
  EXPECT_EQ(Sample(during, "fitledger_bind_outcomes_total{reason=\"bound\"}"), 5);
  EXPECT_EQ(Sample(during, "fitledger_server_requests_total{method=\"Bind\",code=\"OK\"}"), 5);
  // In the default layout the server's own webhook counted the requests too.
  EXPECT_EQ(Sample(during, "fitledger_webhook_requests_total{verb=\"bind\",code=\"200\"}"),
            GetParam() == Layout::kInServer ? 5 : -1);
  EXPECT_THAT(
      during,
      HasSubstr(
          "fitledger_server_request_duration_seconds_bucket{method=\"Filter\",le=\"+Inf\"} 5"));
  EXPECT_TRUE(E2eCluster::WaitFor(
      [&] { return Sample(Scrape(port), "fitledger_assumed_pods") == 0; }, absl::Seconds(20)));
  std::string after = Scrape(port);
  EXPECT_EQ(Sample(after, "fitledger_ledger_transitions_total{kind=\"assumed\"}"), 5);
  EXPECT_EQ(Sample(after, "fitledger_ledger_transitions_total{kind=\"confirmed\"}"), 5);
  EXPECT_EQ(Sample(after, "fitledger_ledger_transitions_total{kind=\"forgotten\"}"), 0);
  EXPECT_EQ(
      Sample(after, "fitledger_node_resource{node=\"w1\",resource=\"cpu\",kind=\"confirmed\"}"),
      2500);
  EXPECT_EQ(Sample(after, "fitledger_synced"), 1);
  EXPECT_GE(Sample(after, "fitledger_seconds_since_last_watch_event"), 0);
  // The readiness probe and the liveness probe.
  httplib::Client client("127.0.0.1", port);
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto live = client.Head("/healthz");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  // Anything else is refused with a reason.
  auto unknown = client.Get("/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_THAT(unknown->body, HasSubstr("/healthz, /readyz, /metrics"));
  auto post = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
}

INSTANTIATE_TEST_SUITE_P(Layouts, MetricsE2eTest,
                         ::testing::Values(Layout::kInServer, Layout::kShim), LayoutName);

}  // namespace
}  // namespace fitledger::testing
