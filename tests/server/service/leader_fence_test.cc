#include "server/service/leader_fence.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/kube/lease_watcher.h"
#include "tests/common/status_matchers.h"

namespace fitledger {
namespace {

using ::fitledger::testing::IsOk;
using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

TEST(HolderIsIdentityTest, MatchesKubeSchedulersHostnameUnderscoreUuid) {
  struct Case {
    const char* name;
    const char* holder;
    const char* hostname;
    bool matches;
  };
  const Case cases[] = {
      {"hostname_uuid", "fitledger-7d9f-x2k4_0c3e9f0a-1b2c-4d5e-8f90-a1b2c3d4e5f6",
       "fitledger-7d9f-x2k4", true},
      {"bare hostname", "fitledger-7d9f-x2k4", "fitledger-7d9f-x2k4", true},
      {"another pod of the same Deployment", "fitledger-7d9f-b8m1_0c3e9f0a", "fitledger-7d9f-x2k4",
       false},
      {"a longer hostname with ours as prefix", "fitledger-7d9f-x2k45_0c3e", "fitledger-7d9f-x2k4",
       false},
      {"hostname then a dash", "node-1-2_0c3e", "node-1", false},
      {"underscore with nothing after", "fitledger-a_", "fitledger-a", false},
      {"ours after another prefix", "other_fitledger-a", "fitledger-a", false},
      {"released (empty holder)", "", "fitledger-a", false},
      {"no hostname", "fitledger-a_0c3e", "", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(HolderIsIdentity(c.holder, c.hostname), c.matches);
  }
}

// A fence over a scripted Lease, a relist that completes when the test says, and a count of
// the re-reads asked for.
class LeaderFenceTest : public ::testing::Test {
 protected:
  explicit LeaderFenceTest(absl::Duration handover_wait = absl::ZeroDuration())
      : fence_(
            {"fitledger", "fitledger-scheduler", "pod-a", handover_wait},
            [this](std::function<void(const kube::ConsistentPodList&)> done) {
              relists_.push_back(std::move(done));
            },
            [this] { ++refreshes_; }) {}

  kube::LeaseRecord Lease(const std::string& holder, absl::Time renew, int64_t transitions,
                          absl::Time acquired) {
    kube::LeaseRecord l;
    l.namespace_name = "fitledger";
    l.name = "fitledger-scheduler";
    l.holder_identity = holder;
    l.lease_duration_seconds = 15;
    l.acquire_time = acquired;
    l.renew_time = renew;
    l.lease_transitions = transitions;
    return l;
  }
  // The last relist asked for completes.
  void FinishRelist(size_t pods = 7) {
    ASSERT_FALSE(relists_.empty());
    relists_.back()(kube::ConsistentPodList{pods, "99"});
  }

  const absl::Time t0_ = absl::FromUnixSeconds(1'800'000'000);
  std::vector<std::function<void(const kube::ConsistentPodList&)>> relists_;
  int refreshes_ = 0;
  LeaderFence fence_;
};

TEST_F(LeaderFenceTest, WithoutTheLeaseNothingIsServedAndTheLeaseIsReadAgain) {
  fence_.OnLease(std::nullopt, t0_);
  EXPECT_THAT(
      fence_.CheckServing(t0_),
      StatusIs(absl::StatusCode::kUnavailable,
               HasSubstr("not synced: this fitledger-server's scheduler (pod-a_*) does not "
                         "hold the Lease fitledger/fitledger-scheduler (it does not exist)")));
  EXPECT_THAT(fence_.CheckBind(t0_),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("refusing new binds")));
  EXPECT_EQ(refreshes_, 2);
  EXPECT_TRUE(relists_.empty());
}

TEST_F(LeaderFenceTest, BecomingTheHolderServesOnlyAfterTheConsistentList) {
  fence_.OnLease(Lease("pod-b_1", t0_, 1, t0_), t0_);
  EXPECT_THAT(fence_.CheckServing(t0_),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("(holder: pod-b_1)")));
  EXPECT_TRUE(relists_.empty());

  const absl::Time t1 = t0_ + absl::Seconds(20);
  fence_.OnLease(Lease("pod-a_77", t1, 2, t1), t1);
  ASSERT_EQ(relists_.size(), 1u);
  EXPECT_THAT(fence_.CheckServing(t1 + absl::Milliseconds(5)),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("not synced: this fitledger-server's scheduler became the leader "
                                 "(Lease fitledger/fitledger-scheduler); re-listing the pods")));
  EXPECT_THAT(fence_.CheckBind(t1),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("re-listing the pods")));
  const int refreshes = refreshes_;
  FinishRelist(150000);
  EXPECT_THAT(fence_.CheckServing(t1 + absl::Seconds(1)), IsOk());
  EXPECT_THAT(fence_.CheckBind(t1 + absl::Seconds(1)), IsOk());
  EXPECT_EQ(refreshes_, refreshes);  // holding: nothing to re-read
  LeaderFenceStats stats = fence_.stats();
  EXPECT_TRUE(stats.serving);
  EXPECT_EQ(stats.resyncs, 1u);
  EXPECT_EQ(stats.last_resync_pods, 150000u);

  // A renewal of the same term asks for nothing more.
  const absl::Time t2 = t1 + absl::Seconds(2);
  fence_.OnLease(Lease("pod-a_77", t2, 2, t1), t2);
  EXPECT_EQ(relists_.size(), 1u);
  EXPECT_THAT(fence_.CheckServing(t2 + absl::Seconds(14)), IsOk());
}

TEST_F(LeaderFenceTest, ABindIsRefusedOnceAnotherHolderHasTheLease) {
  fence_.OnLease(Lease("pod-a_77", t0_, 1, t0_), t0_);
  FinishRelist();
  ASSERT_THAT(fence_.CheckBind(t0_ + absl::Seconds(1)), IsOk());
  const absl::Time t1 = t0_ + absl::Seconds(3);
  fence_.OnLease(Lease("pod-b_12", t1, 2, t1), t1);
  EXPECT_THAT(fence_.CheckBind(t1),
              StatusIs(absl::StatusCode::kUnavailable,
                       "this fitledger-server's scheduler (pod-a_*) no longer holds the Lease "
                       "fitledger/fitledger-scheduler (holder: pod-b_12); refusing new binds"));
  EXPECT_THAT(fence_.CheckServing(t1),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("does not hold")));
  EXPECT_FALSE(fence_.stats().serving);
  EXPECT_GE(refreshes_, 2);

  // Taking it back is a new term: a new consistent LIST first.
  const absl::Time t2 = t1 + absl::Seconds(20);
  fence_.OnLease(Lease("pod-a_78", t2, 3, t2), t2);
  ASSERT_EQ(relists_.size(), 2u);
  EXPECT_THAT(fence_.CheckBind(t2),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("re-listing")));
  FinishRelist();
  EXPECT_THAT(fence_.CheckBind(t2), IsOk());
}

TEST_F(LeaderFenceTest, AnExpiredLeaseRefusesBindsByThisServersClock) {
  fence_.OnLease(Lease("pod-a_77", t0_, 1, t0_), t0_);
  FinishRelist();
  EXPECT_THAT(fence_.CheckBind(t0_ + absl::Milliseconds(14999)), IsOk());
  EXPECT_THAT(fence_.CheckBind(t0_ + absl::Seconds(15)),
              StatusIs(absl::StatusCode::kUnavailable,
                       "this fitledger-server's scheduler (pod-a_*) no longer holds the Lease "
                       "fitledger/fitledger-scheduler (it expired at 2027-01-15T08:00:15.000Z); "
                       "refusing new binds"));
  // The same term renewed (this server's view lagged; nobody else acquired it): serving again
  // without a new LIST.
  const absl::Time t1 = t0_ + absl::Seconds(16);
  fence_.OnLease(Lease("pod-a_77", t1, 1, t0_), t1);
  EXPECT_EQ(relists_.size(), 1u);
  EXPECT_THAT(fence_.CheckBind(t1), IsOk());
}

TEST_F(LeaderFenceTest, AReleasedLeaseIsNotHeld) {
  fence_.OnLease(Lease("pod-a_77", t0_, 1, t0_), t0_);
  FinishRelist();
  // kube-scheduler's ReleaseOnCancel: holderIdentity "", leaseDurationSeconds 1
  // (leaderelection.go release).
  kube::LeaseRecord released = Lease("", t0_ + absl::Seconds(1), 1, t0_ + absl::Seconds(1));
  released.lease_duration_seconds = 1;
  fence_.OnLease(released, t0_ + absl::Seconds(1));
  EXPECT_THAT(fence_.CheckBind(t0_ + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("(holder: none)")));
}

TEST_F(LeaderFenceTest, AListForAnEarlierTermDoesNotServeALaterOne) {
  fence_.OnLease(Lease("pod-a_77", t0_, 1, t0_), t0_);
  ASSERT_EQ(relists_.size(), 1u);
  auto first = relists_[0];
  const absl::Time t1 = t0_ + absl::Seconds(2);
  fence_.OnLease(Lease("pod-b_1", t1, 2, t1), t1);
  const absl::Time t2 = t1 + absl::Seconds(2);
  fence_.OnLease(Lease("pod-a_78", t2, 3, t2), t2);
  ASSERT_EQ(relists_.size(), 2u);
  first(kube::ConsistentPodList{3, "10"});  // the first term's LIST lands late
  EXPECT_THAT(fence_.CheckServing(t2),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("re-listing")));
  FinishRelist();
  EXPECT_THAT(fence_.CheckServing(t2), IsOk());
}

// fitledger-server's fence waits the bind budget and a second (here 5 s) after its scheduler takes
// a term before it asks for the LIST: a bind the previous leader's server had in flight (a
// planned handover releases the Lease while they run) lands before the LIST, so it is counted.
class HandoverWaitTest : public LeaderFenceTest {
 protected:
  HandoverWaitTest() : LeaderFenceTest(absl::Seconds(5)) {}
};

TEST_F(HandoverWaitTest, TheListIsAskedForOnlyOnceTheWaitIsOverThenServes) {
  fence_.OnLease(Lease("pod-b_1", t0_, 1, t0_), t0_);
  const absl::Time t1 = t0_ + absl::Seconds(1);
  fence_.OnLease(Lease("pod-a_77", t1, 2, t1), t1);
  EXPECT_TRUE(relists_.empty());
  EXPECT_THAT(fence_.CheckServing(t1 + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("not synced: this fitledger-server's scheduler became the leader "
                                 "(Lease fitledger/fitledger-scheduler); waiting 4s more for the "
                                 "binds the previous leader had in flight")));
  EXPECT_THAT(fence_.CheckBind(t1 + absl::Milliseconds(4999)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("waiting 1ms more")));
  EXPECT_TRUE(relists_.empty());
  // The first refused call after the wait asks for the LIST (no Lease event came meanwhile).
  EXPECT_THAT(fence_.CheckServing(t1 + absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  ASSERT_EQ(relists_.size(), 1u);
  EXPECT_THAT(fence_.CheckServing(t1 + absl::Seconds(6)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("re-listing the pods")));
  EXPECT_EQ(relists_.size(), 1u);
  FinishRelist();
  EXPECT_THAT(fence_.CheckBind(t1 + absl::Seconds(6)), IsOk());
  EXPECT_EQ(fence_.stats().resyncs, 1u);
}

TEST_F(HandoverWaitTest, ARenewalAfterTheWaitAsksForTheList) {
  fence_.OnLease(Lease("pod-a_77", t0_, 1, t0_), t0_);
  fence_.OnLease(Lease("pod-a_77", t0_ + absl::Seconds(2), 1, t0_), t0_ + absl::Seconds(2));
  EXPECT_TRUE(relists_.empty());
  fence_.OnLease(Lease("pod-a_77", t0_ + absl::Seconds(6), 1, t0_), t0_ + absl::Seconds(6));
  ASSERT_EQ(relists_.size(), 1u);
  fence_.OnLease(Lease("pod-a_77", t0_ + absl::Seconds(8), 1, t0_), t0_ + absl::Seconds(8));
  EXPECT_EQ(relists_.size(), 1u);  // one LIST per term
  FinishRelist();
  EXPECT_THAT(fence_.CheckServing(t0_ + absl::Seconds(8)), IsOk());
}

TEST_F(HandoverWaitTest, ATermLostDuringTheWaitAsksForNoList) {
  fence_.OnLease(Lease("pod-a_77", t0_, 1, t0_), t0_);
  const absl::Time t1 = t0_ + absl::Seconds(3);
  fence_.OnLease(Lease("pod-b_1", t1, 2, t1), t1);
  EXPECT_THAT(fence_.CheckBind(t0_ + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("refusing new binds")));
  EXPECT_TRUE(relists_.empty());
  // Holding again is a new term, with its own wait.
  const absl::Time t2 = t0_ + absl::Seconds(20);
  fence_.OnLease(Lease("pod-a_78", t2, 3, t2), t2);
  EXPECT_THAT(fence_.CheckServing(t2 + absl::Seconds(4)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("waiting 1s more")));
  EXPECT_TRUE(relists_.empty());
  EXPECT_THAT(fence_.CheckServing(t2 + absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  EXPECT_EQ(relists_.size(), 1u);
}

}  // namespace
}  // namespace fitledger
