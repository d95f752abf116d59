// The seed burst, end to end: fitledger-sim (2 s watch lag, a kubelet that rejects overcommit),
// fitledger-server (serving the webhook, or behind fitledger-shim), and fitledgerctl burst as
// real processes.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string PairYaml() { return ReadFileOrEmpty(FITLEDGER_SOURCE_DIR "/config/sim/pair.yaml"); }

// Runs fitledgerctl burst against the cluster and returns its JSON report.
nlohmann::json Burst(E2eCluster& c, int replicas, bool no_ledger) {
  std::string server = c.extender().socket;
  std::string webhook = absl::StrCat("http://127.0.0.1:", c.extender().shim_port);
  std::vector<std::string> argv = {FITLEDGER_CTL_PATH,
                                   "burst",
                                   "--json",
                                   "--kubeconfig",
                                   c.sim().kubeconfig_path(),
                                   "--replicas",
                                   std::to_string(replicas)};
  std::vector<std::string> env;
  if (no_ledger) {
    argv.push_back("--no-ledger");
    env = {"FITLEDGER_SERVER_NO_LEDGER=" + server, "FITLEDGER_WEBHOOK_NO_LEDGER=" + webhook};
  } else {
    argv.insert(argv.end(), {"--server", server, "--webhook", webhook});
  }
  absl::StatusOr<CommandResult> r = RunCommand(argv, env, absl::Seconds(120));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return nullptr;
  EXPECT_EQ(r->exit_code, 0) << r->output;
  // The report is the last line of output.
  std::string out = r->output;
  size_t start = out.rfind("\n{");
  nlohmann::json report = nlohmann::json::parse(
      start == std::string::npos ? out : out.substr(start + 1), nullptr, false);
  EXPECT_FALSE(report.is_discarded()) << out;
  return report;
}

// Every test runs in both layouts: the webhook in fitledger-server (the chart's default) and in
// fitledger-shim in front of the server's gRPC.
class BurstE2eTest : public ::testing::TestWithParam<Layout> {
 protected:
  ClusterOptions WithLayout(ClusterOptions options) const {
    options.layout = GetParam();
    return options;
  }
};

TEST_P(BurstE2eTest, WithTheLedgerNothingIsRejectedAndNoNodeIsOvercommitted) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({PairYaml(), ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  nlohmann::json report = Burst(**c, 12, false);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["rejected"], 0) << report.dump();
  EXPECT_EQ(report["bound"], 12);
  EXPECT_EQ(report["running"], 12);
  EXPECT_EQ(report["pending"], 0);
  for (const auto& node : report["nodes"]) {
    EXPECT_LE(node["runningMilliCpu"].get<int64_t>(), node["allocatableMilliCpu"].get<int64_t>())
        << node.dump();
    EXPECT_EQ(node["failed"], 0);
  }
  // The same webhook answers errors the protocol's way.
  EXPECT_EQ((*c)->ShimRaw("filter", "{not json").status, 400);
  EXPECT_EQ((*c)->ShimRaw("nope", "{}").status, 404);
}

TEST_P(BurstE2eTest, WithTheLedgerPodsThatFitArePlacedTheRestStayPending) {
  // 4 + 2 cpu hold 15 pods of 400m; 20 are submitted.
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({PairYaml(), ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  nlohmann::json report = Burst(**c, 20, false);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["rejected"], 0) << report.dump();
  EXPECT_EQ(report["bound"], 15);
  EXPECT_EQ(report["running"], 15);
  EXPECT_EQ(report["pending"], 5);
  for (const auto& pod : report["pods"]) {
    if (pod["node"] == "") {
      EXPECT_THAT(pod["pendingReason"].get<std::string>(), HasSubstr("Insufficient cpu"));
    }
  }
}

TEST_P(BurstE2eTest, WithoutTheLedgerTheKubeletRejectsPods) {
  // The test proves it can see the bug: the server decides from its lagging watch alone.
  absl::StatusOr<std::unique_ptr<E2eCluster>> c =
      E2eCluster::Start(WithLayout({PairYaml(), "", false}));
  ASSERT_TRUE(c.ok()) << c.status();
  nlohmann::json report = Burst(**c, 12, true);
  ASSERT_TRUE(report.is_object());
  int rejected = report["rejected"];
  EXPECT_GE(rejected, 1) << report.dump();
  int failed = 0;
  for (const auto& pod : report["pods"]) {
    if (pod["phase"] != "Failed") continue;
    ++failed;
    EXPECT_EQ(pod["reason"], "OutOfcpu");
    EXPECT_THAT(
        pod["message"].get<std::string>(),
        StartsWith(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 400, used: "));
  }
  EXPECT_EQ(failed, rejected);
  // The server's kubelet-rejection detector counts exactly those (after the 2 s watch lag).
  EXPECT_TRUE(E2eCluster::WaitFor(
      [&] {
        grpc::ClientContext ctx;
        v1::ListRejectionsRequest req;
        v1::ListRejectionsResponse resp;
        return (*c)->extender().introspection->ListRejections(&ctx, req, &resp).ok() &&
               resp.total() == rejected;
      },
      absl::Seconds(20)));
}

INSTANTIATE_TEST_SUITE_P(Layouts, BurstE2eTest, ::testing::Values(Layout::kInServer, Layout::kShim),
                         LayoutName);

}  // namespace
}  // namespace fitledger::testing
