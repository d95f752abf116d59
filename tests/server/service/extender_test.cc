#include "server/service/extender.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/reconciler.h"
#include "tests/common/fake_clock.h"
#include "tests/common/status_matchers.h"

namespace fitledger {
namespace {

using ::fitledger::testing::FakeClock;
using ::fitledger::testing::IsOk;
using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

// A fake API: a table of pods and a scripted outcome for the next bindings. In hang mode a
// binding POST blocks until Release() (ignoring its deadline, as a stuck API would be, so the
// tests see that nothing else waits on it).
class FakeBinder : public kube::Binder {
 public:
  kube::BindResult Bind(const std::string& ns, const std::string& name, const std::string& uid,
                        const std::string& node, absl::Time deadline) override {
    {
      std::unique_lock<std::mutex> hang_lock(hang_mu_);
      if (hang_) {
        ++hanging_;
        hang_cv_.notify_all();
        hang_cv_.wait(hang_lock, [this] { return !hang_; });
        --hanging_;
      }
    }
    MutexLock lock(&mu_);
    ++binds_;
    last_deadline_ = deadline;
    kube::BindResult r;
    r.outcome = next_outcome_;
    r.node = elsewhere_node_;
    r.message = "scripted";
    if (r.outcome == kube::BindOutcome::kBound) pods_[ns + "/" + name].node_name = node;
    return r;
  }
  absl::StatusOr<Pod> GetPod(const std::string& ns, const std::string& name,
                             absl::Time deadline) override {
    std::function<void()> before;
    {
      MutexLock lock(&mu_);
      before = std::exchange(before_get_, nullptr);
    }
    if (before) before();
    MutexLock lock(&mu_);
    ++gets_;
    last_deadline_ = deadline;
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
  void SetPod(const Pod& pod) {
    MutexLock lock(&mu_);
    pods_[pod.namespace_name + "/" + pod.name] = pod;
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
  // Runs once, at the start of the next GetPod (as another thread acting while the API is asked).
  void BeforeNextGet(std::function<void()> f) {
    MutexLock lock(&mu_);
    before_get_ = std::move(f);
  }
  void SetApiDown(bool down) {
    MutexLock lock(&mu_);
    api_down_ = down;
  }
  void Hang() {
    std::lock_guard<std::mutex> lock(hang_mu_);
    hang_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(hang_mu_);
      hang_ = false;
    }
    hang_cv_.notify_all();
  }
  // Waits (up to a generous minute) until `n` binding POSTs are hanging.
  bool WaitForHanging(int n) {
    std::unique_lock<std::mutex> lock(hang_mu_);
    return hang_cv_.wait_for(lock, std::chrono::minutes(1), [&] { return hanging_ >= n; });
  }
  int binds() {
    MutexLock lock(&mu_);
    return binds_;
  }
  int gets() {
    MutexLock lock(&mu_);
    return gets_;
  }
  absl::Time last_deadline() {
    MutexLock lock(&mu_);
    return last_deadline_;
  }

 private:
  Mutex mu_;
  std::map<std::string, Pod> pods_ ABSL_GUARDED_BY(mu_);
  kube::BindOutcome next_outcome_ ABSL_GUARDED_BY(mu_) = kube::BindOutcome::kBound;
  std::string elsewhere_node_ ABSL_GUARDED_BY(mu_);
  bool api_down_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> before_get_ ABSL_GUARDED_BY(mu_);
  std::mutex hang_mu_;  // for hang_cv_, hang_ and hanging_
  std::condition_variable hang_cv_;
  bool hang_ = false;
  int hanging_ = 0;
  int binds_ ABSL_GUARDED_BY(mu_) = 0;
  int gets_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_deadline_ ABSL_GUARDED_BY(mu_);
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
                        absl::Duration settle_unbound_after = absl::Seconds(60),
                        absl::Duration bind_budget = absl::Seconds(4))
      : ledger_(AccountingPolicy{}, ScoringStrategy::kLeastAllocated),
        extender_(&ledger_, &binder_,
                  Options(ledger_enabled, settle_unbound_after, bind_budget, &clock_),
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
  static ExtenderOptions Options(bool ledger_enabled, absl::Duration settle_unbound_after,
                                 absl::Duration bind_budget, const Clock* clock) {
    ExtenderOptions o;
    o.clock = clock;
    o.ledger_enabled = ledger_enabled;
    o.settle_unbound_after = settle_unbound_after;
    o.bind_budget = bind_budget;
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
  FakeClock clock_;  // the extender's: tests move it, nothing waits on the wall clock
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
  EXPECT_THAT(
      FilterAndBind("u1", "p1", 600, "w1"),
      StatusIs(absl::StatusCode::kUnavailable,
               HasSubstr("fitledger keeps pod ns/p1 assumed on w1 until the API shows it")));
  EXPECT_EQ(Assumed("w1"), 600);
  // The reconciler, much later, finds the pod was bound after all.
  binder_.AddPod("u1", "p1", "w1", 600);
  Reconciler reconciler(&extender_, absl::Seconds(10), absl::Seconds(30), &clock_);
  clock_.Advance(absl::Seconds(29));
  EXPECT_EQ(reconciler.RunOnce(clock_.Now()), 0);  // too young
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(reconciler.RunOnce(clock_.Now()), 1);
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(ledger_.Nodes()[0].confirmed.milli_cpu, 600);
}

TEST_F(SettledExtenderTest, ReconcilerForgetsUnboundAndGoneKeepsWhenApiDown) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 300, "w1").ok());
  ASSERT_FALSE(FilterAndBind("u2", "p2", 300, "w1").ok());
  binder_.RemovePod("p2");  // gone; p1 stays unbound
  Reconciler reconciler(&extender_, absl::Seconds(10), absl::Seconds(30), &clock_);
  binder_.SetApiDown(true);
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(reconciler.RunOnce(clock_.Now()), 0);
  EXPECT_EQ(Assumed("w1"), 600);  // never dropped on a timer alone
  binder_.SetApiDown(false);
  EXPECT_EQ(reconciler.RunOnce(clock_.Now()), 2);
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

TEST_F(ExtenderTest, ARetryElsewhereAfterAnUnknownOutcomeMovesTheAssumptionWhenTheApiSaysUnbound) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  // kube-scheduler retries the pod on w2 at once. The API says "unbound": the assumption moves
  // (counted once, on w2), and if the first binding still lands the API refuses one of the two.
  binder_.Script(kube::BindOutcome::kBound);
  const int gets = binder_.gets();
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}), IsOk());
  EXPECT_EQ(binder_.gets(), gets + 1);  // settled with the API first
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(Assumed("w2"), 600);
  EXPECT_EQ(extender_.bind_counters().outcomes["moved"], 1u);
}

// The reconciler and a retried bind settle the same unknown outcome at once: while the bind asks
// the API, the reconciler finds the pod unbound and drops the assumption. The bind then decides
// again on what the ledger holds (nothing: it assumes afresh and POSTs) rather than answering
// "retry shortly" (the e2e fault test met this under ASan in CI).
TEST_F(ExtenderTest, ARetriedBindThatLosesTheSettleToTheReconcilerDecidesAgain) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  std::optional<AssumedPod> entry = ledger_.AssumedEntry("u1");
  ASSERT_TRUE(entry.has_value());
  bool settled = false;
  binder_.BeforeNextGet(
      [&] { settled = ledger_.Settle("u1", entry->epoch, ApiPodState::kUnbound, nullptr); });
  binder_.Script(kube::BindOutcome::kBound);
  const int binds = binder_.binds();
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}), IsOk());
  EXPECT_TRUE(settled);
  EXPECT_EQ(binder_.binds(), binds + 1);
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(Assumed("w2"), 600);
  EXPECT_EQ(ledger_.pod_count(), 1u);
  EXPECT_EQ(extender_.bind_counters().outcomes["bind_in_flight"], 0u);
}

// Another bind of the same pod starts while this one asks the API: that one holds the entry, and
// this one answers "retry shortly" without a POST of its own.
TEST_F(ExtenderTest, ARetriedBindThatMeetsAnotherBindInFlightAsksForARetry) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  absl::StatusOr<AssumeOutcome> other;
  binder_.BeforeNextGet([&] {
    // As a concurrent bind to w1 would: its TryAssume marks the entry in flight (the requests
    // of the pod's own entry on its own node are not compared again).
    other = ledger_.TryAssume("u1", "ns", "p1", "w1", Resources(), clock_.Now());
  });
  const int binds = binder_.binds();
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("retry shortly")));
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(*other, AssumeOutcome::kAlreadyAssumed);
  EXPECT_EQ(binder_.binds(), binds);
  EXPECT_EQ(Assumed("w1"), 600);
  EXPECT_EQ(Assumed("w2"), 0);
}

TEST_F(ExtenderTest, AfterAnUnknownOutcomeThePodStillPassesFilterEverywhere) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  EXPECT_EQ(Assumed("w1"), 600);
  // Its own assumption does not keep it off w1 (1000m, 600m of it its own)...
  absl::StatusOr<FilterResult> own = extender_.Filter(MakePod("u1", "p1", 600), {"w1", "w2"});
  ASSERT_THAT(own, IsOk());
  EXPECT_THAT(own->fits, ::testing::ElementsAre(0, 1));
  // ...while another pod of the same size does not fit there.
  absl::StatusOr<FilterResult> other = extender_.Filter(MakePod("u2", "p2", 600), {"w1", "w2"});
  ASSERT_THAT(other, IsOk());
  EXPECT_THAT(other->fits, ::testing::ElementsAre(1));
  // Prioritize scores w1 for it as if the pod were not there yet.
  absl::StatusOr<std::vector<int64_t>> scores =
      extender_.Prioritize(MakePod("u1", "p1", 600), {"w1", "w2"});
  ASSERT_THAT(scores, IsOk());
  EXPECT_EQ((*scores)[0], (*scores)[1]);
  // The retry on the same node binds, counted once.
  binder_.Script(kube::BindOutcome::kBound);
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w1"}), IsOk());
  EXPECT_EQ(Assumed("w1"), 600);
  EXPECT_EQ(ledger_.pod_count(), 1u);
}

TEST_F(ExtenderTest, RetryElsewhereWhenTheFirstBindDidHappenFails) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  binder_.AddPod("u1", "p1", "w1", 600);  // it did bind, the answer was lost
  const int binds = binder_.binds();
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("pod ns/p1 is already bound to node w1")));
  EXPECT_EQ(binder_.binds(), binds);  // no second POST
  EXPECT_EQ(Assumed("w2"), 0);
  // Counted once, on w1, confirmed by the API's answer.
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(ledger_.Nodes()[0].confirmed.milli_cpu, 600);
  // The same node is the answer: success.
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w1"}), IsOk());
}

TEST_F(ExtenderTest, RetryElsewhereAfterAnUnknownOutcomeWhenThePodIsGoneIsNotFound) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  binder_.RemovePod("p1");
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("pod ns/p1 not found")));
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(ledger_.pod_count(), 0u);
}

TEST_F(ExtenderTest, RetryElsewhereKeepsTheAssumptionWhenTheApiCannotBeAsked) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  binder_.SetApiDown(true);
  EXPECT_THAT(
      extender_.Bind({"ns", "p1", "u1", "w2"}),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("assumed on node w1 by an earlier bind")));
  EXPECT_EQ(Assumed("w1"), 600);
  EXPECT_EQ(Assumed("w2"), 0);
}

TEST_F(ExtenderTest, AFailedRetryAfterAMoveKeepsTheAssumption) {
  binder_.Script(kube::BindOutcome::kUnknown);
  ASSERT_FALSE(FilterAndBind("u1", "p1", 600, "w1").ok());
  // Moved to w2, and that POST is rejected: the first one (to w1) may still land, so the pod
  // stays counted (on w2) for the API to settle.
  binder_.Script(kube::BindOutcome::kRejected);
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w2"}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("an earlier bind's outcome is still unknown")));
  EXPECT_EQ(Assumed("w1") + Assumed("w2"), 600);
  EXPECT_EQ(ledger_.pod_count(), 1u);
}

TEST_F(ExtenderTest, ServerErrorsOnTheBindingPostKeepTheAssumption) {
  // The binder classifies 500 / 503 / 504 with the pod still unbound as kUnknown (issue 22,
  // part 3; tests/server/kube/client_test.cc pins that against the sim).
  binder_.Script(kube::BindOutcome::kUnknown);
  EXPECT_THAT(FilterAndBind("u1", "p1", 600, "w1"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("binding outcome unknown")));
  EXPECT_EQ(Assumed("w1"), 600);
  std::optional<AssumedPod> entry = ledger_.AssumedEntry("u1");
  ASSERT_TRUE(entry.has_value());
  EXPECT_TRUE(entry->outcome_unknown);
  EXPECT_FALSE(entry->bind_in_flight);
}

TEST_F(ExtenderTest, BindWithoutFilterReadsThePodFromTheApi) {
  binder_.AddPod("u9", "p9", "", 700);
  EXPECT_THAT(extender_.Bind({"ns", "p9", "u9", "w2"}), IsOk());
  EXPECT_EQ(Assumed("w2"), 700);
  EXPECT_THAT(extender_.Bind({"ns", "nope", "u10", "w2"}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("ns/nope")));
  EXPECT_THAT(extender_.Bind({"ns", "", "u", "w2"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("; empty: PodName")));
  // Each empty field is named.
  EXPECT_THAT(extender_.Bind({"", "p9", "", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("; empty: PodNamespace, PodUID, Node")));
}

// A pod with pod-level requests is assumed as kube-scheduler's cache counts it on a node
// (framework/types.go calculateResource): its scoring memory defaults only when the pod's
// requests lack memory, so a container without requests adds no 200Mi here. Filter and Prioritize
// still see it as the incoming pod. Both ways to the requests: Filter's, and the API's.
TEST_F(ExtenderTest, APodWithPodLevelRequestsIsAssumedAsOnItsNode) {
  Pod p = MakePod("u1", "p1", 0);
  p.pod_requests = QuantityList{{"cpu", Quantity::FromMillis(500)}};
  p.containers[0].requests = {{"memory", *Quantity::Parse("100Mi")}};
  Container bare;
  bare.name = "bare";
  p.containers.push_back(bare);
  ASSERT_THAT(extender_.Filter(p, {"w1"}), IsOk());
  ASSERT_THAT(extender_.Bind({"ns", "p1", "u1", "w1"}), IsOk());
  auto assumed = [this](const std::string& node) {
    for (const NodeSummary& n : ledger_.Nodes()) {
      if (n.name == node) return n.assumed;
    }
    return Resources();
  };
  EXPECT_EQ(assumed("w1").milli_cpu, 500);
  EXPECT_EQ(assumed("w1").non_zero_memory_bytes, int64_t{100} << 20);

  // Without Filter, the requests come from the API's copy of the pod.
  p.uid = "u2";
  p.name = "p2";
  binder_.SetPod(p);
  ASSERT_THAT(extender_.Bind({"ns", "p2", "u2", "w2"}), IsOk());
  EXPECT_EQ(assumed("w2").milli_cpu, 500);
  EXPECT_EQ(assumed("w2").non_zero_memory_bytes, int64_t{100} << 20);
}

TEST_F(ExtenderTest, ASuccessfulBindForgetsWhatFilterRemembered) {
  ASSERT_THAT(FilterAndBind("u1", "p1", 300, "w1"), IsOk());
  EXPECT_EQ(binder_.gets(), 0);  // the bind used the requests Filter remembered
  EXPECT_EQ(extender_.filter_cache_entries(), 0u);
  // A bind that failed keeps them: kube-scheduler's next cycle filters and binds again.
  binder_.Script(kube::BindOutcome::kRejected);
  EXPECT_THAT(FilterAndBind("u2", "p2", 300, "w1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("scripted")));
  EXPECT_EQ(extender_.filter_cache_entries(), 1u);
}

TEST_F(ExtenderTest, TheFilterCacheKeepsTheNewestPodsUpToItsSize) {
  ExtenderOptions options;
  options.filter_cache_size = 2;
  Extender small(&ledger_, &binder_, options, [] { return true; });
  for (const char* n : {"1", "2", "3"}) {
    binder_.AddPod(absl::StrCat("u", n), absl::StrCat("p", n), "", 100);
    ASSERT_THAT(small.Filter(MakePod(absl::StrCat("u", n), absl::StrCat("p", n), 100), {"w1"}),
                IsOk());
  }
  EXPECT_EQ(small.filter_cache_entries(), 2u);
  // Filtering a remembered pod again takes no second place.
  ASSERT_THAT(small.Filter(MakePod("u3", "p3", 100), {"w1"}), IsOk());
  EXPECT_EQ(small.filter_cache_entries(), 2u);
  ASSERT_THAT(small.Bind({"ns", "p3", "u3", "w1"}), IsOk());
  ASSERT_THAT(small.Bind({"ns", "p2", "u2", "w1"}), IsOk());
  EXPECT_EQ(binder_.gets(), 0);
  // The oldest was dropped: its bind reads the pod from the API.
  ASSERT_THAT(small.Bind({"ns", "p1", "u1", "w1"}), IsOk());
  EXPECT_EQ(binder_.gets(), 1);
  EXPECT_EQ(Assumed("w1"), 300);
  EXPECT_EQ(small.filter_cache_entries(), 0u);
}

TEST_F(ExtenderTest, AFilterCacheOfSizeZeroRemembersNothing) {
  ExtenderOptions options;
  options.filter_cache_size = 0;
  Extender none(&ledger_, &binder_, options, [] { return true; });
  binder_.AddPod("u1", "p1", "", 200);
  ASSERT_THAT(none.Filter(MakePod("u1", "p1", 200), {"w1"}), IsOk());
  EXPECT_EQ(none.filter_cache_entries(), 0u);
  ASSERT_THAT(none.Bind({"ns", "p1", "u1", "w1"}), IsOk());
  EXPECT_EQ(binder_.gets(), 1);
  EXPECT_EQ(Assumed("w1"), 200);
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

class BudgetTest : public ExtenderTest {
 protected:
  BudgetTest() : ExtenderTest(true, absl::Seconds(60), absl::Milliseconds(1500)) {}
};

TEST_F(BudgetTest, EveryApiCallOfABindGetsTheBudgetsDeadline) {
  binder_.AddPod("u9", "p9", "", 100);  // not filtered: Bind reads it from the API
  ASSERT_THAT(extender_.Bind({"ns", "p9", "u9", "w1"}), IsOk());
  EXPECT_EQ(binder_.last_deadline(), clock_.Now() + absl::Milliseconds(1500));
}

TEST_F(BudgetTest, PastTheBudgetTheOutcomeIsUnknownAndThePodStaysAssumed) {
  // The binder gave up at the deadline (as ApiBinder does): kUnknown.
  binder_.Script(kube::BindOutcome::kUnknown);
  absl::Status status = FilterAndBind("u1", "p1", 300, "w1");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr("binding outcome unknown after ")));
  EXPECT_THAT(status.message(), HasSubstr("fitledger keeps pod ns/p1 assumed on w1"));
  EXPECT_EQ(Assumed("w1"), 300);
}

// A bind that waited for a thread of the bind pool past its budget (counted from when
// kube-scheduler's request arrived) is not started: no POST, nothing assumed, a clear error.
TEST_F(BudgetTest, ABindQueuedPastTheBudgetIsNotStartedAndAssumesNothing) {
  ASSERT_THAT(extender_.Filter(MakePod("u1", "p1", 300), {"w1"}), IsOk());
  BindRequest request{"ns", "p1", "u1", "w1", clock_.Now() - absl::Seconds(2)};
  EXPECT_THAT(extender_.Bind(request),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("for a bind thread, past the bind budget (1.5s); nothing was "
                                 "assumed")));
  EXPECT_EQ(Assumed("w1"), 0);
  EXPECT_EQ(binder_.binds(), 0);
  // Within the budget it binds, the budget running from when it arrived.
  request.received = clock_.Now() - absl::Milliseconds(500);
  ASSERT_THAT(extender_.Bind(request), IsOk());
  EXPECT_EQ(binder_.last_deadline(), request.received + absl::Milliseconds(1500));
}

// Binds never starve Filter: with 200 binding POSTs stuck in a hung API, Filter and Prioritize
// still answer. The bound is generous (1 s each, where they take microseconds); nothing else is
// timed.
TEST(ExtenderConcurrencyTest, FilterAndPrioritizeAnswerWhile200BindsHang) {
  constexpr int kBinds = 200;
  FakeBinder binder;
  Ledger ledger(AccountingPolicy{}, ScoringStrategy::kLeastAllocated);
  NodeRecord node;
  node.name = "big";
  node.allocatable.milli_cpu = 1'000'000;
  node.allocatable.memory_bytes = int64_t{1} << 40;
  node.allocatable.pods = 1000;
  ledger.UpsertNode(node);
  node.name = "small";
  ledger.UpsertNode(node);
  Extender extender(&ledger, &binder, ExtenderOptions{}, [] { return true; });
  for (int i = 0; i < kBinds; ++i) {
    binder.AddPod(absl::StrCat("b", i), absl::StrCat("b", i), "", 100);
  }
  binder.Hang();
  std::vector<std::thread> binds;
  for (int i = 0; i < kBinds; ++i) {
    binds.emplace_back([&, i] {
      (void)extender.Bind({"ns", absl::StrCat("b", i), absl::StrCat("b", i), "big"});
    });
  }
  ASSERT_TRUE(binder.WaitForHanging(kBinds));
  for (int i = 0; i < 20; ++i) {
    Pod pod = MakePod(absl::StrCat("f", i), absl::StrCat("f", i), 500);
    absl::Time start = absl::Now();
    absl::StatusOr<FilterResult> filtered = extender.Filter(pod, {"big", "small"});
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    ASSERT_THAT(filtered, IsOk());
    EXPECT_EQ(filtered->fits.size(), 2u);
    start = absl::Now();
    absl::StatusOr<std::vector<int64_t>> scores = extender.Prioritize(pod, {"big", "small"});
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    ASSERT_THAT(scores, IsOk());
  }
  // The 200 assumptions are counted while their POSTs hang.
  EXPECT_EQ(ledger.pod_count(), static_cast<size_t>(kBinds));
  binder.Release();
  for (std::thread& t : binds) t.join();
  EXPECT_EQ(binder.binds(), kBinds);
}

// The leader fence in the verbs: with a Lease configured, nothing is answered before this pod's
// scheduler holds it and the pods were re-listed, and a new Bind is refused once it lost it (a
// deposed leader adds no bind the new one has not listed).
// A ledger with node w1, a leader fence for pod-a on the Lease kube-system/sched, and an
// extender behind it, all on the test's clock.
class ExtenderFenceTest : public ::testing::Test {
 protected:
  ExtenderFenceTest()
      : ledger_(AccountingPolicy{}, ScoringStrategy::kLeastAllocated),
        fence_(
            {"kube-system", "sched", "pod-a"},
            [this](std::function<void(const kube::ConsistentPodList&)> done) {
              relisted_ = std::move(done);
            },
            [] {}),
        extender_(
            &ledger_, &binder_, Options(&clock_), [] { return true; }, &fence_) {
    NodeRecord n;
    n.name = "w1";
    n.allocatable.milli_cpu = 1000;
    n.allocatable.pods = 110;
    ledger_.UpsertNode(n);
  }
  static ExtenderOptions Options(const Clock* clock) {
    ExtenderOptions o;
    o.clock = clock;
    return o;
  }
  // A Lease held by `holder`, renewed now by the test's clock, for `seconds`.
  kube::LeaseRecord Lease(const std::string& holder, int64_t transitions, int seconds = 3600) {
    kube::LeaseRecord l;
    l.holder_identity = holder;
    l.lease_duration_seconds = seconds;
    l.renew_time = clock_.Now();
    l.acquire_time = clock_.Now();
    l.lease_transitions = transitions;
    return l;
  }

  FakeClock clock_;
  FakeBinder binder_;
  Ledger ledger_;
  std::function<void(const kube::ConsistentPodList&)> relisted_;
  LeaderFence fence_;
  Extender extender_;
};

TEST_F(ExtenderFenceTest, VerbsWaitForTheResyncAndABindIsRefusedAfterTheLeaseIsLost) {
  fence_.OnLease(Lease("pod-a_1", 1), clock_.Now());
  binder_.AddPod("u1", "p1", "", 100);
  EXPECT_THAT(extender_.Filter(MakePod("u1", "p1", 100), {"w1"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("re-listing the pods")));
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w1"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("re-listing the pods")));
  ASSERT_TRUE(relisted_);
  relisted_(kube::ConsistentPodList{0, "1"});
  ASSERT_TRUE(extender_.Filter(MakePod("u1", "p1", 100), {"w1"}).ok());
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w1"}), IsOk());
  EXPECT_EQ(binder_.binds(), 1);

  fence_.OnLease(Lease("pod-b_9", 2), clock_.Now());
  binder_.AddPod("u2", "p2", "", 100);
  EXPECT_THAT(extender_.Bind({"ns", "p2", "u2", "w1"}),
              StatusIs(absl::StatusCode::kUnavailable,
                       "this fitledger-server's scheduler (pod-a_*) no longer holds the Lease "
                       "kube-system/sched (holder: pod-b_9); refusing new binds"));
  EXPECT_EQ(binder_.binds(), 1);  // nothing was posted
  EXPECT_FALSE(ledger_.AssumedEntry("u2").has_value());
  EXPECT_EQ(extender_.bind_counters().outcomes["not_leader"], 2u);  // the resync, the lost Lease
}

// The verbs read the Lease's expiry by the extender's clock: a Lease not renewed within its
// duration stops the verbs, with no wall-clock wait.
TEST_F(ExtenderFenceTest, AnExpiredLeaseStopsTheVerbs) {
  fence_.OnLease(Lease("pod-a_1", 1, 15), clock_.Now());
  ASSERT_TRUE(relisted_);
  relisted_(kube::ConsistentPodList{0, "1"});
  clock_.Advance(absl::Seconds(14));
  EXPECT_THAT(extender_.Filter(MakePod("u1", "p1", 100), {"w1"}), IsOk());
  clock_.Advance(absl::Seconds(2));
  EXPECT_THAT(extender_.Filter(MakePod("u1", "p1", 100), {"w1"}),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("does not hold the Lease kube-system/sched (it expired at "
                                 "2026-01-01T00:00:15.000Z)")));
  binder_.AddPod("u1", "p1", "", 100);
  EXPECT_THAT(extender_.Bind({"ns", "p1", "u1", "w1"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("(it expired at ")));
  EXPECT_EQ(binder_.binds(), 0);
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
