// The kubelet-rejection detector end to end: fitledger-sim (whose watches send what the API
// server's watch cache sends: a pod that fails leaves the scheduler's selector as DELETED with its
// previous content), fitledger-server with --no-ledger, and fitledgerctl. The metric, the
// ListRejections RPC and `fitledgerctl rejections` must all equal the pods the API shows Failed
// with reason OutOf*.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using ::testing::HasSubstr;

std::string PairYaml() { return ReadFileOrEmpty(FITLEDGER_SOURCE_DIR "/config/sim/pair.yaml"); }

// The pods the API shows Failed with a reason starting "OutOf" (the kubelet's admission
// rejections), read through the API with the field selector a client would use.
int ApiRejections(E2eCluster& c) {
  HttpResult r = c.Api("GET", "/api/v1/pods?fieldSelector=status.phase%3DFailed");
  if (r.status != 200) return -1;
  int n = 0;
  for (const auto& pod : r.body["items"]) {
    if (absl::StartsWith(pod["status"].value("reason", ""), "OutOf")) ++n;
  }
  return n;
}

// The sum of fitledger_kubelet_rejections_total over its labels (0 when it has no samples yet).
double MetricRejections(int monitor_port) {
  httplib::Client client("127.0.0.1", monitor_port);
  auto r = client.Get("/metrics");
  if (!r || r->status != 200) return -1;
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(r->body, '\n')) {
    if (!absl::StartsWith(line, "fitledger_kubelet_rejections_total{")) continue;
    double v = 0;
    if (!absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return -1;
    sum += v;
  }
  return sum;
}

absl::StatusOr<v1::ListRejectionsResponse> Rejections(E2eCluster& c) {
  grpc::ClientContext ctx;
  v1::ListRejectionsRequest req;
  v1::ListRejectionsResponse resp;
  grpc::Status s = c.extender().introspection->ListRejections(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return resp;
}

std::string CtlRejections(E2eCluster& c) {
  absl::StatusOr<CommandResult> r = RunCommand(
      {FITLEDGER_CTL_PATH, "rejections", "--server", c.extender().socket}, {}, absl::Seconds(30));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  EXPECT_EQ(r->exit_code, 0) << r->output;
  return r->output;
}

// fitledgerctl burst --no-ledger: the server decides from its lagging watch alone, so the
// kubelet rejects some pods.
void BurstWithoutTheLedger(E2eCluster& c, int replicas) {
  std::vector<std::string> argv = {FITLEDGER_CTL_PATH,
                                   "burst",
                                   "--json",
                                   "--kubeconfig",
                                   c.sim().kubeconfig_path(),
                                   "--replicas",
                                   std::to_string(replicas),
                                   "--no-ledger"};
  std::vector<std::string> env = {
      "FITLEDGER_SERVER_NO_LEDGER=" + c.extender().socket,
      absl::StrCat("FITLEDGER_WEBHOOK_NO_LEDGER=http://127.0.0.1:", c.extender().shim_port)};
  absl::StatusOr<CommandResult> r = RunCommand(argv, env, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;
}

// Creates pod `name` already bound to `node` (spec.nodeName set): the kubelet admits or rejects
// it at once.
void CreateBoundPod(E2eCluster& c, const std::string& name, const std::string& cpu,
                    const std::string& node) {
  HttpResult r =
      c.Api("POST", "/api/v1/namespaces/default/pods", PodManifest(name, cpu, "64Mi", node));
  ASSERT_EQ(r.status, 201) << r.raw;
}

// Waits until the metric, the RPC's total and the CLI's count all equal `want`, and the RPC
// lists `listed` entries of which `before_start` are flagged so.
void ExpectAllAgree(E2eCluster& c, int want, int listed, int before_start) {
  double metric = -2;
  int64_t total = -2;
  int entries = -2, flagged = -2;
  bool agreed = E2eCluster::WaitFor(
      [&] {
        metric = MetricRejections(c.extender().monitor_port);
        absl::StatusOr<v1::ListRejectionsResponse> rpc = Rejections(c);
        if (!rpc.ok()) return false;
        total = rpc->total();
        entries = rpc->rejections_size();
        flagged = 0;
        for (const v1::Rejection& r : rpc->rejections()) flagged += r.before_start() ? 1 : 0;
        return metric == want && total == want && entries == listed && flagged == before_start;
      },
      absl::Seconds(30));
  EXPECT_TRUE(agreed) << "metric " << metric << ", RPC total " << total << ", listed " << entries
                      << " (" << flagged << " before start); want " << want << ", " << listed
                      << " (" << before_start << ")";
  const std::string out = CtlRejections(c);
  EXPECT_THAT(out, HasSubstr(absl::StrCat("kubelet rejections seen: ", want, "\n"))) << out;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StrContains(line, "reason=OutOf")) ++lines;
  }
  EXPECT_EQ(lines, listed) << out;
}

TEST(RejectionsE2eTest, MetricRpcAndCliCountExactlyThePodsTheKubeletRejected) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> started = E2eCluster::Start({PairYaml(), "", false});
  ASSERT_TRUE(started.ok()) << started.status();
  E2eCluster& c = **started;
  ASSERT_NO_FATAL_FAILURE(BurstWithoutTheLedger(c, 12));
  const int rejected = ApiRejections(c);
  ASSERT_GE(rejected, 1) << "the burst must make the kubelet reject pods for this test to mean "
                            "anything";
  HttpResult stats = c.Api("GET", "/sim/stats");
  EXPECT_EQ(stats.body["rejections"].value("OutOfcpu", 0), rejected) << stats.raw;
  ExpectAllAgree(c, rejected, rejected, 0);

  // A server restart: the rejected pods still in the API are known (listed, flagged), not counted
  // again; the fresh counter starts at 0 and agrees with the RPC and the CLI.
  ASSERT_TRUE(c.StopServer().ok());
  ASSERT_TRUE(c.StartExtender({PairYaml(), "", false}).ok());
  ExpectAllAgree(c, 0, rejected, rejected);

  // A rejection after the restart is counted once (5 cpu never fit worker-1's 4).
  CreateBoundPod(c, "rejected-after-restart", "5", "worker-1");
  ASSERT_EQ(ApiRejections(c), rejected + 1);
  ExpectAllAgree(c, 1, rejected + 1, rejected);

  // A relist (the API server forgot the watch's resourceVersion) counts nothing twice, and counts
  // a rejection that happened while the watch was away.
  ASSERT_EQ(c.Api("POST", "/sim/faults/bookmarks-only", {{"on", true}}).status, 200);
  CreateBoundPod(c, "rejected-during-outage", "3", "worker-2");
  ASSERT_EQ(c.Api("POST", "/sim/faults/expire").status, 200);
  ASSERT_EQ(c.Api("POST", "/sim/faults/drop-watches").status, 200);
  ASSERT_EQ(c.Api("POST", "/sim/faults/bookmarks-only", {{"on", false}}).status, 200);
  ASSERT_EQ(ApiRejections(c), rejected + 2);
  ExpectAllAgree(c, 2, rejected + 2, rejected);
}

}  // namespace
}  // namespace fitledger::testing
