// Issue 22 end to end, through fitledger-sim, fitledger-server and fitledger-shim as processes:
// a pod whose binding outcome was unknown is placed on the next attempt (part 2), Bind keeps
// kube-scheduler's clock (part 5), and a pod bound then deleted while the watch was down gives
// its room back at the relist (part 4).
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"
#include "tests/e2e/view_check.h"

namespace fitledger::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kTwoNodes[] = R"(
nodes:
  - name: n1
    allocatable: {cpu: "2", memory: 4Gi, pods: 110}
  - name: n2
    allocatable: {cpu: "2", memory: 4Gi, pods: 110}
watchLag: 0s
bookmarkInterval: 200ms
kubelet: {enabled: true}
)";

// The bind budget (1.5 s) is far below the binding POST's own timeout (10 s) and the sim's hang
// (3 s): only the budget can end Bind in time. The reconciler looks only at assumptions a minute
// old, so it cannot be what settles anything here.
constexpr char kBudgetServer[] = R"(
kubernetes: {bindTimeout: 10s, bindBudget: 1500ms}
ledger: {reconcilePeriod: 200ms, assumedReconcileAge: 60s}
)";

constexpr absl::Duration kConverge = absl::Seconds(30);

nlohmann::json MustCreate(E2eCluster& c, const nlohmann::json& manifest) {
  HttpResult r = c.Api("POST", "/api/v1/namespaces/default/pods", manifest);
  EXPECT_EQ(r.status, 201) << r.raw;
  return r.body;
}

void MustAdmin(E2eCluster& c, const std::string& path, const nlohmann::json& body = nullptr) {
  HttpResult r = c.Api("POST", path, body.is_null() ? nlohmann::json::object() : body);
  ASSERT_EQ(r.status, 200) << path << ": " << r.raw;
}

// A binding POST for `pod` that the sim holds `seconds`, then answers 504 without binding.
void HangThenFail(E2eCluster& c, const std::string& pod, double seconds) {
  MustAdmin(c, "/sim/faults/binding",
            {{"names", {"default/" + pod}},
             {"mode", "hang"},
             {"seconds", seconds},
             {"thenBind", false},
             {"times", 1}});
}

std::string ShimBindError(E2eCluster& c, const nlohmann::json& pod, const std::string& node) {
  HttpResult r = c.Shim("bind", {{"PodName", pod["metadata"]["name"]},
                                 {"PodNamespace", "default"},
                                 {"PodUID", pod["metadata"]["uid"]},
                                 {"Node", node}});
  EXPECT_EQ(r.status, 200) << r.raw;
  return r.body.value("Error", "<no Error field>");
}

std::vector<std::string> Passing(E2eCluster& c, const nlohmann::json& pod) {
  HttpResult f = c.Shim("filter", {{"Pod", pod}, {"NodeNames", {"n1", "n2"}}});
  EXPECT_EQ(f.status, 200) << f.raw;
  std::vector<std::string> out;
  for (const auto& n : f.body.value("NodeNames", nlohmann::json::array())) out.push_back(n);
  return out;
}

int64_t AssumedCount(E2eCluster& c) {
  absl::StatusOr<v1::ListAssumedResponse> a = c.Assumed();
  return a.ok() ? a->assumed_size() : -1;
}

v1::NodeView NodeOf(E2eCluster& c, const std::string& node) {
  absl::StatusOr<v1::NodeView> v = c.Node(node);
  return v.ok() ? *v : v1::NodeView();
}

std::string NodeNameOf(E2eCluster& c, const std::string& pod) {
  return c.Api("GET", "/api/v1/namespaces/default/pods/" + pod).body["spec"].value("nodeName", "");
}

TEST(LedgerRulesE2eTest, APodWhoseBindHungThenFailedIsPlacedOnTheNextAttempt) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> started =
      E2eCluster::Start({kTwoNodes, kBudgetServer});
  ASSERT_TRUE(started.ok()) << started.status();
  E2eCluster& c = **started;

  // The first binding POST hangs past kube-scheduler's clock. Bind answers within the budget,
  // well before kube-scheduler's 5 s extender timeout, saying the outcome is unknown.
  nlohmann::json p = MustCreate(c, PodManifest("p", "1500m"));
  HangThenFail(c, "p", 3);
  ASSERT_THAT(Passing(c, p), ElementsAre("n1", "n2"));
  absl::Time start = absl::Now();
  std::string error = ShimBindError(c, p, "n1");
  const absl::Duration took = absl::Now() - start;
  EXPECT_THAT(error, HasSubstr("binding outcome unknown after"));
  EXPECT_THAT(error, HasSubstr("fitledger keeps pod default/p assumed on n1 until the API shows it"));
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_GE(took, absl::Seconds(1));
  EXPECT_EQ(AssumedCount(c), 1);
  EXPECT_EQ(Amount(NodeOf(c, "n1").assumed(), "cpu"), 1500);

  // kube-scheduler retries within its backoff. The pod's own assumption does not keep it off
  // n1, and another node is open to it too.
  EXPECT_THAT(Passing(c, p), ElementsAre("n1", "n2"));
  // A pod of the same size does not fit n1 (the assumption counts for everyone else).
  nlohmann::json q = MustCreate(c, PodManifest("q", "1500m"));
  EXPECT_THAT(Passing(c, q), ElementsAre("n2"));

  // The retry goes to n2: the earlier outcome is settled with a GET (unbound), the assumption
  // moves, the POST binds. Counted once, on n2.
  EXPECT_EQ(ShimBindError(c, p, "n2"), "");
  EXPECT_EQ(NodeNameOf(c, "p"), "n2");
  EXPECT_EQ(Amount(NodeOf(c, "n1").assumed(), "cpu"), 0);
  EXPECT_EQ(Amount(NodeOf(c, "n1").free(), "cpu"), 2000);
  EXPECT_EQ(WaitForViewToMatchApi(c, kConverge), "");

  // The retry to the same node: binds, counted once.
  ASSERT_EQ(c.Api("DELETE", "/api/v1/namespaces/default/pods/q").status, 200);
  nlohmann::json r = MustCreate(c, PodManifest("r", "1500m"));
  HangThenFail(c, "r", 3);
  EXPECT_THAT(ShimBindError(c, r, "n1"), HasSubstr("binding outcome unknown"));
  EXPECT_THAT(Passing(c, r), ElementsAre("n1"));  // n2 holds p
  EXPECT_EQ(ShimBindError(c, r, "n1"), "");
  EXPECT_EQ(NodeNameOf(c, "r"), "n1");
  EXPECT_EQ(WaitForViewToMatchApi(c, kConverge), "");
  EXPECT_EQ(Amount(NodeOf(c, "n1").free(), "cpu"), 500);
  EXPECT_EQ(KubeletRejections(c), 0);
}

TEST(LedgerRulesE2eTest, ABoundPodDeletedWhileTheWatchWasDownGivesItsRoomBackAtTheRelist) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> started =
      E2eCluster::Start({kTwoNodes, kBudgetServer});
  ASSERT_TRUE(started.ok()) << started.status();
  E2eCluster& c = **started;
  nlohmann::json a = MustCreate(c, PodManifest("a", "1500m"));
  nlohmann::json u = MustCreate(c, PodManifest("u", "1"));
  ASSERT_EQ(WaitForViewToMatchApi(c, kConverge), "");

  // The watch goes quiet: events are held (only bookmarks flow).
  MustAdmin(c, "/sim/faults/bookmarks-only", {{"on", true}});
  // a is bound (the POST returned 201); the watch does not show it.
  EXPECT_EQ(c.FilterAndBind(a, "n1").value_or("?"), "");
  // u's binding outcome is unknown.
  HangThenFail(c, "u", 3);
  EXPECT_THAT(c.FilterAndBind(u, "n2").value_or("?"), HasSubstr("binding outcome unknown"));
  EXPECT_EQ(AssumedCount(c), 2);
  // Both are deleted while the watch is away, at once (gracePeriodSeconds=0: a bound pod's
  // graceful deletion would keep it, terminating and still counted, until its kubelet is done).
  ASSERT_EQ(c.Api("DELETE", "/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0").status, 200);
  ASSERT_EQ(c.Api("DELETE", "/api/v1/namespaces/default/pods/u?gracePeriodSeconds=0").status, 200);
  EXPECT_EQ(AssumedCount(c), 2);
  EXPECT_EQ(Amount(NodeOf(c, "n1").assumed(), "cpu"), 1500);

  // The watch comes back too late to resume (410): the server relists.
  const double relists = Metric(c.extender().monitor_port, "fitledger_watch_total{kind=\"relists_gone\"}");
  MustAdmin(c, "/sim/faults/expire");
  MustAdmin(c, "/sim/faults/drop-watches");
  MustAdmin(c, "/sim/faults/bookmarks-only", {{"on", false}});
  ASSERT_TRUE(E2eCluster::WaitFor(
      [&] {
        return Metric(c.extender().monitor_port, "fitledger_watch_total{kind=\"relists_gone\"}") >
               relists;
      },
      kConverge));
  // a was known bound before the LIST started, and the LIST lacks it: its room is back at once
  // (not after the reconciler's minute). u's outcome is unknown: it waits for the reconciler.
  ASSERT_TRUE(E2eCluster::WaitFor(
      [&] { return Amount(NodeOf(c, "n1").free(), "cpu") == 2000; }, kConverge));
  EXPECT_EQ(Amount(NodeOf(c, "n1").assumed(), "cpu"), 0);
  EXPECT_EQ(AssumedCount(c), 1);
  EXPECT_EQ(Amount(NodeOf(c, "n2").assumed(), "cpu"), 1000);
  absl::StatusOr<v1::ListAssumedResponse> assumed = c.Assumed();
  ASSERT_TRUE(assumed.ok());
  ASSERT_EQ(assumed->assumed_size(), 1);
  EXPECT_EQ(assumed->assumed(0).name(), "u");
  EXPECT_EQ(Metric(c.extender().monitor_port,
                   "fitledger_ledger_transitions_total{kind=\"released_at_relist\"}"),
            1);
  EXPECT_EQ(KubeletRejections(c), 0);
}

}  // namespace
}  // namespace fitledger::testing
