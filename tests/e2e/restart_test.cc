// fitledger-server killed while binds are in flight (issue 6): after a restart the new server
// re-lists, the scheduler retries, and nothing is double-booked.
#include <signal.h>

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"
#include "tests/e2e/view_check.h"

namespace fitledger::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kTwoNodes[] = R"(
nodes:
  - name: n1
    allocatable: {cpu: "2", memory: 4Gi, pods: 110}
  - name: n2
    allocatable: {cpu: "2", memory: 4Gi, pods: 110}
watchLag: 200ms
kubelet: {enabled: true}
)";

// The bind timeout is longer than the sim's hang, so both binds are still in flight (inside the
// server) when it is killed.
constexpr char kServer[] = R"(
kubernetes: {bindTimeout: 10s}
ledger: {reconcilePeriod: 200ms, assumedReconcileAge: 20s}
)";

constexpr absl::Duration kConverge = absl::Seconds(30);

// What kube-scheduler does with a pod whose bind failed: filter all nodes again, bind to the
// first that passes; repeat while it is unbound (at most `attempts` times). Returns the node the
// API shows the pod on ("" if none).
std::string Reschedule(E2eCluster& c, const nlohmann::json& pod, int attempts) {
  const std::string path =
      absl::StrCat("/api/v1/namespaces/default/pods/", pod["metadata"]["name"].get<std::string>());
  for (int i = 0; i < attempts; ++i) {
    HttpResult now = c.Api("GET", path);
    std::string node = now.body["spec"].value("nodeName", "");
    if (!node.empty()) return node;
    HttpResult f = c.Shim("filter", {{"Pod", pod}, {"NodeNames", {"n1", "n2"}}});
    for (const auto& candidate : f.body.value("NodeNames", nlohmann::json::array())) {
      c.Shim("bind", {{"PodName", pod["metadata"]["name"]},
                      {"PodNamespace", "default"},
                      {"PodUID", pod["metadata"]["uid"]},
                      {"Node", candidate}});
      break;
    }
  }
  return c.Api("GET", path).body["spec"].value("nodeName", "");
}

// Every test runs in both layouts: the webhook in fitledger-server (the chart's default) and in
// fitledger-shim in front of the server's gRPC.
class RestartE2eTest : public ::testing::TestWithParam<Layout> {
 protected:
  ClusterOptions WithLayout(ClusterOptions options) const {
    options.layout = GetParam();
    return options;
  }
};

TEST_P(RestartE2eTest, AServerKilledWithBindsInFlightDoubleBooksNothingAfterRestart) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> started =
      E2eCluster::Start(WithLayout({kTwoNodes, kServer}));
  ASSERT_TRUE(started.ok()) << started.status();
  E2eCluster& c = **started;
  HttpResult r1 = c.Api("POST", "/api/v1/namespaces/default/pods", PodManifest("r1", "2"));
  HttpResult r2 = c.Api("POST", "/api/v1/namespaces/default/pods", PodManifest("r2", "2"));
  ASSERT_EQ(r1.status, 201);
  ASSERT_EQ(r2.status, 201);
  // r1's binding POST is held 3 s and then applied (the bind succeeds after its client died);
  // r2's is held and then dropped.
  ASSERT_EQ(c.Api("POST", "/sim/faults/binding",
                  {{"names", {"default/r1"}},
                   {"mode", "hang"},
                   {"seconds", 3},
                   {"thenBind", true},
                   {"times", 1}})
                .status,
            200);
  ASSERT_EQ(c.Api("POST", "/sim/faults/binding",
                  {{"names", {"default/r2"}},
                   {"mode", "hang"},
                   {"seconds", 3},
                   {"thenBind", false},
                   {"times", 1}})
                .status,
            200);
  // The sim answers the held POSTs 3 s from now (to connections nobody reads any more).
  const absl::Time holds_end = absl::Now() + absl::Seconds(3);
  std::string error1, error2;
  std::thread b1([&] { error1 = c.FilterAndBind(r1.body, "n1").value_or("?"); });
  std::thread b2([&] { error2 = c.FilterAndBind(r2.body, "n2").value_or("?"); });
  bool in_flight = E2eCluster::WaitFor(
      [&] {
        absl::StatusOr<v1::ListAssumedResponse> a = c.Assumed();
        if (!a.ok() || a->assumed_size() != 2) return false;
        for (const auto& e : a->assumed()) {
          if (!e.bind_in_flight()) return false;
        }
        return true;
      },
      kConverge);
  // The crash: no graceful shutdown, the ledger is gone.
  c.extender().server->Signal(SIGKILL);
  b1.join();
  b2.join();
  ASSERT_TRUE(in_flight);
  if (GetParam() == Layout::kShim) {
    // The shim names the component that failed.
    EXPECT_THAT(error1, HasSubstr("fitledger-server at"));
    EXPECT_THAT(error2, HasSubstr("fitledger-server at"));
  } else {
    // The webhook died with the server: the HTTP request failed (value_or's "?").
    EXPECT_EQ(error1, "?");
    EXPECT_EQ(error2, "?");
  }

  // A new server on the same socket (the shim reconnects); the scheduler retries both pods.
  ASSERT_TRUE(SpawnServer(c, c.extender().socket, kServer, "after-crash").ok());
  ASSERT_TRUE(E2eCluster::WaitFor(
      [&] { return HttpGetStatus(c.extender().shim_port, "/readyz") == 200; }, kConverge));
  std::string node1 = Reschedule(c, r1.body, 50);
  std::string node2 = Reschedule(c, r2.body, 50);
  // Each pod on exactly one node, one per node (each fills a node), the view equal to the API,
  // and the kubelet never saw an overcommitted node.
  EXPECT_THAT((std::vector<std::string>{node1, node2}), UnorderedElementsAre("n1", "n2"));
  // Once the held POSTs are answered (r1's now conflicts, r2's is dropped), still the same.
  ASSERT_TRUE(E2eCluster::WaitFor([&] { return absl::Now() > holds_end; }, kConverge));
  EXPECT_EQ(WaitForViewToMatchApi(c, kConverge), "");
  EXPECT_EQ(c.Api("GET", "/api/v1/namespaces/default/pods/r1").body["spec"].value("nodeName", ""),
            node1);
  EXPECT_EQ(c.Api("GET", "/api/v1/namespaces/default/pods/r2").body["spec"].value("nodeName", ""),
            node2);
  for (const char* node : {"n1", "n2"}) {
    absl::StatusOr<v1::NodeView> n = c.Node(node);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(Amount(n->free(), "cpu"), 0) << node;
    EXPECT_EQ(n->confirmed_pods(), 1) << node;
  }
  EXPECT_EQ(KubeletRejections(c), 0);
  HttpResult stats = c.Api("GET", "/sim/stats");
  EXPECT_EQ(stats.body["pods"].value("Running", 0), 2) << stats.raw;
}

INSTANTIATE_TEST_SUITE_P(Layouts, RestartE2eTest,
                         ::testing::Values(Layout::kInServer, Layout::kShim), LayoutName);

}  // namespace
}  // namespace fitledger::testing
