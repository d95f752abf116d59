#include "server/service/extender.h"

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/reconciler.h"
#include "tests/common/status_matchers.h"

namespace fitledger {
namespace {

using ::fitledger::testing::IsOk;
using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

// A fake API: a table of pods and a scripted outcome for the next bindings.
class FakeBinder : public kube::Binder {
 public:
  kube::BindResult Bind(const std::string& ns, const std::string& name, const std::string& uid,
                        const std::string& node) override {
    MutexLock lock(&mu_);
    ++binds_;
    kube::BindResult r;
    r.outcome = next_outcome_;
    r.node = elsewhere_node_;
    r.message = "scripted";
    if (r.outcome == kube::BindOutcome::kBound) pods_[ns + "/" + name].node_name = node;
    return r;
  }
  absl::StatusOr<Pod> GetPod(const std::string& ns, const std::string& name) override {
    MutexLock lock(&mu_);
    ++gets_;
    if (api_down_) return absl::UnavailableError("down");
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return absl::NotFoundError("gone");
    return it->second;
  }
  void AddPod(const std::string& uid, const std::string& name, const std::string& node,
              int64_t milli_cpu) {
    MutexLock lock(&mu_);
    Pod p;
    p.uid = uid;
    p.namespace_name = "ns";
    p.name = name;
    p.node_name = node;
    Container c;
    c.name = "c";
    c.requests = {{"cpu", Quantity::FromMillis(milli_cpu)}};
    p.containers = {c};
    pods_["ns/" + name] = p;
  }
  void RemovePod(const std::string& name) {
    MutexLock lock(&mu_);
    pods_.erase("ns/" + name);
  }
  void Script(kube::BindOutcome outcome, std::string elsewhere = "") {
    MutexLock lock(&mu_);
    next_outcome_ = outcome;
    elsewhere_node_ = std::move(elsewhere);
  }
  void SetApiDown(bool down) {
    MutexLock lock(&mu_);
    api_down_ = down;
  }
  int binds() {
    MutexLock lock(&mu_);
    return binds_;
  }

 private:
  Mutex mu_;
  std::map<std::string, Pod> pods_ ABSL_GUARDED_BY(mu_);
  kube::BindOutcome next_outcome_ ABSL_GUARDED_BY(mu_) = kube::BindOutcome::kBound;
  std::string elsewhere_node_ ABSL_GUARDED_BY(mu_);
  bool api_down_ ABSL_GUARDED_BY(mu_) = false;
  int binds_ ABSL_GUARDED_BY(mu_) = 0;
  int gets_ ABSL_GUARDED_BY(mu_) = 0;
};

Pod MakePod(const std::string& uid, const std::string& name, int64_t milli_cpu) {
  Pod p;
  p.uid = uid;
  p.namespace_name = "ns";
  p.name = name;
  Container c;
  c.name = "c";
  c.requests = {{"cpu", Quantity::FromMillis(milli_cpu)}};
  p.containers = {c};
  return p;
}

class ExtenderTest : public ::testing::Test {
 protected:
  explicit ExtenderTest(bool ledger_enabled = true,
                        absl::Duration settle_unbound_after = absl::Seconds(60))
      : ledger_(AccountingPolicy{}, ScoringStrategy::kLeastAllocated),
        extender_(&ledger_, &binder_, Options(ledger_enabled, settle_unbound_after),
                  [this] { return synced_.load(); }) {
    NodeRecord n;
    n.name = "w1";
    n.allocatable.milli_cpu = 1000;
    n.allocatable.memory_bytes = 1 << 30;
    n.allocatable.pods = 110;
    ledger_.UpsertNode(n);
    n.name = "w2";
    ledger_.UpsertNode(n);
  }
  static ExtenderOptions Options(bool ledger_enabled, absl::Duration settle_unbound_after) {
    ExtenderOptions o;
    o.ledger_enabled = ledger_enabled;
    o.settle_unbound_after = settle_unbound_after;
    return o;
  }
  // Filters (so the extender remembers the pod's requests), then binds.
  absl::Status FilterAndBind(const std::string& uid, const std::string& name, int64_t milli_cpu,
                             const std::string& node) {
    binder_.AddPod(uid, name, "", milli_cpu);
    absl::StatusOr<FilterResult> f = extender_.Filter(MakePod(uid, name, milli_cpu), {node});
    if (!f.ok()) return f.status();
    return extender_.Bind({"ns", name, uid, node});
  }
  int64_t Assumed(const std::string& node) {
    for (const NodeSummary& n : ledger_.Nodes()) {
      if (n.name == node) return n.assumed.milli_cpu;
    }
    return -1;
  }

  std::atomic<bool> synced_{true};
  FakeBinder binder_;
  Ledger ledger_;
  Extender extender_;
};

// The reconciler's age rule switched off, so tests can settle at once.
class SettledExtenderTest : public ExtenderTest {
 protected:
  SettledExtenderTest() : ExtenderTest(true, absl::ZeroDuration()) {}
};

TEST_F(ExtenderTest, NotSyncedIsUnavailable) {
  synced_ = false;
  EXPECT_THAT(extender_.Filter(MakePod("u", "p", 100), {"w1"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not synced")));
  EXPECT_THAT(extender_.Bind({"ns", "p", "u", "w1"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not synced")));
}

TEST_F(ExtenderTest, SuccessfulBindStaysAssumedUntilTheWatch) {
  ASSERT_THAT(FilterAndBind("u1", "p1", 600, "w1"), IsOk());
  EXPECT_EQ(Assumed("w1"), 600);
  EXPECT_THAT(FilterAndBind("u2", "p2", 600, "w1"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("pod ns/p2 no longer fits node w1: Insufficient cpu")));
  EXPECT_EQ(binder_.binds(), 1);  // the misfit never reached the API
}

TEST_F(ExtenderTest, DefiniteBindFailureReleasesCapacity) {
  binder_.Script(kube::BindOutcome::kRejected);
  EXPECT_THAT(FilterAndBind("u1", "p1", 600, "w1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("scripted")));
  EXPECT_EQ(Assumed("w1"), 0);
  binder_.Script(kube::BindOutcome::kPodGone);
  EXPECT_THAT(FilterAndBind("u2", "p2", 600, "w1"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("scripted")));
  EXPECT_EQ(Assumed("w1"), 0);
  binder_.Script(kube::BindOutcome::kUnreachable);
  EXPECT_THAT(FilterAndBind("u3", "p3", 600, "w1"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("scripted")));
  EXPECT_EQ(Assumed("w1"), 0);
}

TEST_F(SettledExtenderTest, UnknownOutcomeKeepsTheAssumptionUntilSettled) {
  binder_.Script(kube::BindOutcome::kUnknown);
  EXPECT_THAT(FilterAndBind("u1", "p1", 600, "w1"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("stays assumed on w1")));
  EXPECT_EQ(Assumed("w1"), 600);
  // The reconciler, much later, finds the pod was bound after all.
  binder_.AddPod("u1", "p1", "w1", 600);
  Reconciler reconciler(&extender_, absl::Seconds(10), absl::Seconds(30));
  EXPECT_EQ(reconciler.RunOnce(absl::Now()), 0);  // too young
  EXPECT_EQ(reconciler.RunOnce(absl::Now() + absl::Minutes(1)), 1);
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(ledger_.Nodes()[0].confirmed.milli_cpu, 600);
}

TEST_F(SettledExtenderTest, ReconcilerForgetsUnboundAndGoneKeepsWhenApiDown) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 300, "w1").ok());
  ASSERT_FALSE(FilterAndBind("u2", "p2", 300, "w1").ok());
  binder_.RemovePod("p2");  // gone; p1 stays unbound
  Reconciler reconciler(&extender_, absl::Seconds(10), absl::Seconds(30));
  binder_.SetApiDown(true);
  EXPECT_EQ(reconciler.RunOnce(absl::Now() + absl::Minutes(1)), 0);
  EXPECT_EQ(Assumed("w1"), 600);  // never dropped on a timer alone
  binder_.SetApiDown(false);
  EXPECT_EQ(reconciler.RunOnce(absl::Now() + absl::Minutes(1)), 2);
  EXPECT_EQ(Assumed("w1"), 0);
}

TEST_F(ExtenderTest, AlreadyBoundSameNodeIsSuccessElsewhereMovesTheCount) {
  binder_.Script(kube::BindOutcome::kAlreadyBound);
  EXPECT_THAT(FilterAndBind("u1", "p1", 300, "w1"), IsOk());
  EXPECT_EQ(Assumed("w1"), 300);
  binder_.Script(kube::BindOutcome::kBoundElsewhere, "w2");
  EXPECT_THAT(
      FilterAndBind("u2", "p2", 300, "w1"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already bound to node w2")));
  EXPECT_EQ(Assumed("w1"), 300);
  EXPECT_EQ(Assumed("w2"), 300);
}

TEST_F(ExtenderTest, RepeatBindIsIdempotent) {
  ASSERT_THAT(FilterAndBind("u1", "p1", 600, "w1"), IsOk());
  binder_.Script(kube::BindOutcome::kAlreadyBound);
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w1"}), IsOk());
  EXPECT_EQ(Assumed("w1"), 600);
}

TEST_F(ExtenderTest, ARetryElsewhereSoonAfterAnUnknownOutcomeWaitsForSettlement) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  // The scheduler retries the pod on w2 at once. The API says "unbound", but the first binding
  // may still be applied: the assumption on w1 stays, and the retry is refused for now.
  binder_.Script(kube::BindOutcome::kBound);
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("outcome is unknown")));
  EXPECT_EQ(Assumed("w1"), 600);
  EXPECT_EQ(Assumed("w2"), 0);
}

TEST_F(SettledExtenderTest, RetryOnAnotherNodeAfterAnUnknownOutcomeAsksTheApi) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  // Old enough: the API says the first bind never happened, so the retry on w2 proceeds.
  binder_.Script(kube::BindOutcome::kBound);
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}), IsOk());
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(Assumed("w2"), 600);
}

TEST_F(ExtenderTest, RetryElsewhereWhenTheFirstBindDidHappenFails) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  binder_.AddPod("u1", "p1", "w1", 600);  // it did bind, the answer was lost
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("bound to node w1")));
  EXPECT_EQ(Assumed("w2"), 0);
}

TEST_F(ExtenderTest, BindWithoutFilterReadsThePodFromTheApi) {
  binder_.AddPod("u9", "p9", "", 700);
  EXPECT_THAT(extender_.Bind({"ns", "p9", "u9", "w2"}), IsOk());
  EXPECT_EQ(Assumed("w2"), 700);
  EXPECT_THAT(extender_.Bind({"ns", "nope", "u10", "w2"}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("ns/nope")));
  EXPECT_THAT(extender_.Bind({"ns", "", "u", "w2"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("PodName")));
}

TEST_F(ExtenderTest, ConcurrentBindsForTheLastSlotOneWins) {
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    binder_.AddPod("c" + std::to_string(i), "c" + std::to_string(i), "", 600);
    ASSERT_THAT(
        extender_.Filter(MakePod("c" + std::to_string(i), "c" + std::to_string(i), 600), {"w1"}),
        IsOk());
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      if (extender_.Bind({"ns", "c" + std::to_string(i), "c" + std::to_string(i), "w1"}).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(Assumed("w1"), 600);
}

TEST_F(ExtenderTest, BadPodRequestsAreInvalidArgument) {
  Pod p = MakePod("u", "p", 100);
  p.containers[0].requests = {{"cpu", Quantity::FromMillis(-5)}};
  EXPECT_THAT(extender_.Filter(p, {"w1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative")));
}

TEST_F(ExtenderTest, ShutdownRefusesNewBinds) {
  extender_.BeginShutdown();
  extender_.WaitForBinds();
  EXPECT_THAT(FilterAndBind("u1", "p1", 100, "w1"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
}

class NoLedgerTest : public ExtenderTest {
 protected:
  NoLedgerTest() : ExtenderTest(false) {}
};

TEST_F(NoLedgerTest, WithoutTheLedgerBindsOvercommit) {
  EXPECT_THAT(FilterAndBind("u1", "p1", 600, "w1"), IsOk());
  EXPECT_THAT(FilterAndBind("u2", "p2", 600, "w1"), IsOk());  // the bug, on purpose
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(binder_.binds(), 2);
}

}  // namespace
}  // namespace fitledger
