#include "server/ledger/ledger.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger {
namespace {

using ::fitledger::testing::IsOk;
using ::fitledger::testing::IsOkAndHolds;
using ::fitledger::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

constexpr int64_t kMi = 1024 * 1024;
const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

// A pod's requests with cpu and memory set explicitly (so they are also its scoring amounts).
Resources Req(int64_t milli_cpu, int64_t memory_bytes = 0) {
  Resources r;
  r.milli_cpu = milli_cpu;
  r.memory_bytes = memory_bytes;
  r.non_zero_milli_cpu = milli_cpu;
  r.non_zero_memory_bytes = memory_bytes;
  r.pods = 1;
  return r;
}

NodeRecord Node(std::string name, int64_t milli_cpu, int64_t memory_bytes = 64 * 1024 * kMi,
                int64_t pods = 110) {
  NodeRecord n;
  n.name = std::move(name);
  n.allocatable.milli_cpu = milli_cpu;
  n.allocatable.memory_bytes = memory_bytes;
  n.allocatable.pods = pods;
  return n;
}

PodRecord Bound(std::string uid, std::string node, Resources requests) {
  PodRecord p;
  p.uid = uid;
  p.node_name = std::move(node);
  p.requests = std::move(requests);
  return p;
}

// Names of nodes that fit.
std::vector<std::string> Fits(const Ledger& ledger, const Resources& r,
                              const std::vector<std::string>& names) {
  std::vector<absl::string_view> views(names.begin(), names.end());
  FilterResult result = ledger.Filter(r, views);
  std::vector<std::string> out;
  for (size_t i : result.fits) out.push_back(names[i]);
  return out;
}

std::map<std::string, std::string> Failed(const FilterResult& r,
                                          const std::vector<std::string>& names) {
  std::map<std::string, std::string> out;
  for (const auto& [i, why] : r.failed) out[names[i]] = std::string(why);
  return out;
}

NodeSummary Summary(const Ledger& ledger, const std::string& name) {
  for (const NodeSummary& n : ledger.Nodes()) {
    if (n.name == name) return n;
  }
  return NodeSummary{};
}

class LedgerTest : public ::testing::Test {
 protected:
  LedgerTest() : ledger_(AccountingPolicy{}, ScoringStrategy::kLeastAllocated) {
    ledger_.UpsertNode(Node("a", 4000));
    ledger_.UpsertNode(Node("b", 2000));
  }
  absl::StatusOr<AssumeOutcome> Assume(const std::string& uid, const std::string& node, Resources r,
                                       absl::Time now = kT0) {
    return ledger_.TryAssume(uid, "ns", "pod-" + uid, node, r, now);
  }
  Ledger ledger_;
};

TEST_F(LedgerTest, FilterCountsConfirmedPods) {
  ledger_.UpsertPod(Bound("u1", "a", Req(3800)));
  FilterResult r = ledger_.Filter(Req(400), {"a", "b"});
  EXPECT_THAT(r.fits, ElementsAre(1));
  EXPECT_THAT(Failed(r, {"a", "b"}), ElementsAre(Pair("a", "Insufficient cpu")));
  EXPECT_THAT(r.unresolvable, IsEmpty());
}

TEST_F(LedgerTest, AssumedPodsCountUntilConfirmedAndNeverTwice) {
  // The seed's burst: ten 400m pods fit a 4-cpu node, the eleventh does not, though the watch
  // has shown none of them yet.
  for (int i = 0; i < 10; ++i) {
    ASSERT_THAT(Assume("u" + std::to_string(i), "a", Req(400)), IsOk());
  }
  EXPECT_THAT(Fits(ledger_, Req(400), {"a"}), IsEmpty());
  EXPECT_THAT(Assume("u10", "a", Req(400)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("pod ns/pod-u10 no longer fits node a: Insufficient cpu")));
  // The watch confirms them: still counted exactly once.
  for (int i = 0; i < 10; ++i) ledger_.UpsertPod(Bound("u" + std::to_string(i), "a", Req(400)));
  NodeSummary a = Summary(ledger_, "a");
  EXPECT_EQ(a.confirmed.milli_cpu, 4000);
  EXPECT_EQ(a.assumed.milli_cpu, 0);
  EXPECT_EQ(a.confirmed_pods, 10);
  EXPECT_EQ(a.assumed_pods, 0);
  EXPECT_EQ(ledger_.counters().confirmed, 10u);
  // A duplicate watch event changes nothing.
  ledger_.UpsertPod(Bound("u3", "a", Req(400)));
  EXPECT_EQ(Summary(ledger_, "a").confirmed.milli_cpu, 4000);
  EXPECT_EQ(ledger_.pod_count(), 10u);
}

TEST_F(LedgerTest, BindFailureReleasesCapacity) {
  ASSERT_THAT(Assume("u1", "b", Req(2000)), IsOk());
  EXPECT_THAT(Fits(ledger_, Req(100), {"b"}), IsEmpty());
  EXPECT_TRUE(ledger_.Forget("u1"));
  EXPECT_THAT(Fits(ledger_, Req(2000), {"b"}), ElementsAre("b"));
  EXPECT_EQ(ledger_.counters().forgotten, 1u);
  EXPECT_FALSE(ledger_.Forget("u1"));  // already gone
}

TEST_F(LedgerTest, BindAfterForgetAssumesAgain) {
  ASSERT_THAT(Assume("u1", "b", Req(1500)), IsOk());
  ASSERT_TRUE(ledger_.Forget("u1"));
  EXPECT_THAT(Assume("u1", "b", Req(1500)), IsOkAndHolds(AssumeOutcome::kAssumed));
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 1500);
}

TEST_F(LedgerTest, RepeatBindIsIdempotent) {
  ASSERT_THAT(Assume("u1", "b", Req(1500)), IsOkAndHolds(AssumeOutcome::kAssumed));
  EXPECT_THAT(Assume("u1", "b", Req(1500)), IsOkAndHolds(AssumeOutcome::kAlreadyAssumed));
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 1500);
  EXPECT_THAT(Assume("u1", "a", Req(1500)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already assumed on node b")));
  ledger_.UpsertPod(Bound("u1", "b", Req(1500)));
  EXPECT_THAT(Assume("u1", "b", Req(1500)), IsOkAndHolds(AssumeOutcome::kAlreadyConfirmed));
  EXPECT_THAT(Assume("u1", "a", Req(1500)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already bound to node b")));
}

// The bind's next step (settling the earlier bind) works from the entry TryAssume decided on,
// read under the same lock: a second read could find it dropped meanwhile and take the pod for
// one confirmed elsewhere.
TEST_F(LedgerTest, AssumeElsewhereHandsBackTheEntryItDecidedOn) {
  ASSERT_THAT(Assume("u1", "b", Req(1500)), IsOkAndHolds(AssumeOutcome::kAssumed));
  ledger_.MarkBindUnknown("u1");
  std::optional<AssumedPod> elsewhere;
  EXPECT_THAT(ledger_.TryAssume("u1", "ns", "pod-u1", "a", Req(1500), kT0, &elsewhere),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already assumed on node b")));
  ASSERT_TRUE(elsewhere.has_value());
  EXPECT_EQ(elsewhere->uid, "u1");
  EXPECT_EQ(elsewhere->node_name, "b");
  EXPECT_TRUE(elsewhere->outcome_unknown);
  EXPECT_FALSE(elsewhere->bind_in_flight);
  EXPECT_EQ(elsewhere->requests.milli_cpu, 1500);
  std::optional<AssumedPod> now = ledger_.AssumedEntry("u1");
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(elsewhere->epoch, now->epoch);
  // Nothing on "a" was counted by the refused call.
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 0);

  // Confirmed on b by the watch: AlreadyExists, and no assumption handed back.
  ledger_.UpsertPod(Bound("u1", "b", Req(1500)));
  EXPECT_THAT(ledger_.TryAssume("u1", "ns", "pod-u1", "a", Req(1500), kT0, &elsewhere),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already bound to node b")));
  EXPECT_FALSE(elsewhere.has_value());
}

// Filter's common case reads each node's room (allocatable - confirmed - assumed), kept by the
// node's mutators, and words its reasons from it; Explain takes the full check from the sums
// themselves. Through a long seeded mix of every change the ledger takes, both must agree with
// the sums Nodes() reports, and a node that does not fit gets the same reasons from both. (A room
// left too large would pass pods that do not fit: this fails. One left too small only sends the
// node to the full check, which still answers right.)
TEST(LedgerRoomTest, FiltersQuickCheckAgreesWithTheSumsThroughEveryKindOfChange) {
  Ledger ledger(AccountingPolicy{}, ScoringStrategy::kLeastAllocated);
  const std::vector<std::string> names = {"n0", "n1", "n2", "n3"};
  std::mt19937 rng(20261202);
  auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  auto requests = [&]() {
    Resources r = Req(250 * pick(9), 256 * kMi * pick(9));
    r.ephemeral_storage_bytes = pick(3) == 0 ? 512 * kMi * pick(5) : 0;
    return r;
  };
  auto node = [&](const std::string& name) {
    NodeRecord n = Node(name, 1000 * (1 + pick(4)), 1024 * kMi * (1 + pick(4)), 2 + pick(4));
    n.allocatable.ephemeral_storage_bytes = 1024 * kMi * (1 + pick(3));
    return n;
  };
  for (const std::string& name : names) ledger.UpsertNode(node(name));
  std::vector<uint64_t> epochs(16, 0);
  int checked = 0;
  int reasons_checked = 0;
  std::set<std::string> texts_seen;
  for (int step = 0; step < 4000; ++step) {
    const std::string uid = absl::StrCat("u", pick(16));
    const std::string where = names[pick(4)];
    switch (pick(10)) {
      case 0:
      case 1:
        (void)ledger.TryAssume(uid, "ns", "pod-" + uid, where, requests(), kT0);
        break;
      case 2:
        ledger.Forget(uid);
        break;
      case 3:
        ledger.MarkBound(uid, where);
        break;
      case 4:
        ledger.MarkBindUnknown(uid);
        if (std::optional<AssumedPod> a = ledger.AssumedEntry(uid); a.has_value()) {
          (void)ledger.MoveAssumption(uid, a->epoch, where, a->requests, kT0);
        }
        break;
      case 5:
        ledger.UpsertPod(Bound(uid, where, requests()));  // confirm, move or resize
        break;
      case 6:
        ledger.DeletePod(uid);
        break;
      case 7:
        ledger.UpsertNode(node(where));  // a new allocatable
        break;
      case 8:
        if (pick(4) == 0) {
          ledger.DeleteNode(where);
        } else {
          ledger.ForgetGone(uid);
        }
        break;
      default:
        if (pick(8) == 0) {
          std::vector<NodeRecord> nodes;
          for (const std::string& name : names) {
            if (pick(5) != 0) nodes.push_back(node(name));
          }
          ledger.ReplaceNodes(nodes);
        }
        break;
    }
    const Resources want = requests();
    const std::vector<absl::string_view> views(names.begin(), names.end());
    const FilterResult result = ledger.Filter(want, views);
    std::vector<std::string> fits;
    for (size_t i : result.fits) fits.push_back(names[i]);
    std::map<std::string, std::string> failed;
    std::map<std::string, std::string> unresolvable;
    for (const auto& [i, why] : result.failed) failed[names[i]] = std::string(why);
    for (const auto& [i, why] : result.unresolvable) unresolvable[names[i]] = std::string(why);
    for (const NodeSummary& n : ledger.Nodes()) {
      if (!n.known) continue;
      auto room = [&](int64_t a, int64_t c, int64_t s) { return a - c - s; };
      const bool expected =
          room(n.allocatable.pods, n.confirmed.pods, n.assumed.pods) >= 1 &&
          (want.milli_cpu <= 0 ||
           want.milli_cpu <=
               room(n.allocatable.milli_cpu, n.confirmed.milli_cpu, n.assumed.milli_cpu)) &&
          (want.memory_bytes <= 0 ||
           want.memory_bytes <= room(n.allocatable.memory_bytes, n.confirmed.memory_bytes,
                                     n.assumed.memory_bytes)) &&
          (want.ephemeral_storage_bytes <= 0 ||
           want.ephemeral_storage_bytes <= room(n.allocatable.ephemeral_storage_bytes,
                                                n.confirmed.ephemeral_storage_bytes,
                                                n.assumed.ephemeral_storage_bytes));
      const bool filtered = std::find(fits.begin(), fits.end(), n.name) != fits.end();
      absl::StatusOr<Explanation> explained = ledger.Explain(want, n.name);
      ASSERT_THAT(explained, IsOk());
      ASSERT_EQ(filtered, expected)
          << "step " << step << " node " << n.name << " " << ToString(want) << " alloc "
          << ToString(n.allocatable) << " confirmed " << ToString(n.confirmed) << " assumed "
          << ToString(n.assumed);
      ASSERT_EQ(explained->fit.fits, expected) << "step " << step << " node " << n.name;
      // A node that does not fit: Filter's reasons (decided from the room) are the full
      // check's, word for word, in the same list (unresolvable or not).
      if (!expected) {
        const auto& list = explained->fit.unresolvable ? unresolvable : failed;
        const auto& other = explained->fit.unresolvable ? failed : unresolvable;
        ASSERT_TRUE(list.count(n.name) == 1 && other.count(n.name) == 0)
            << "step " << step << " node " << n.name << ": " << explained->fit.reasons;
        ASSERT_EQ(list.at(n.name), explained->fit.reasons) << "step " << step;
        texts_seen.insert(explained->fit.reasons);
        ++reasons_checked;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 4000);  // most steps had known nodes to check
  EXPECT_GT(reasons_checked, 1000);
  // Every combination of the four reasons came up (pods, cpu, memory, ephemeral-storage).
  EXPECT_EQ(texts_seen.size(), 15u) << absl::StrJoin(texts_seen, " | ");
}

TEST_F(LedgerTest, ConfirmOnAnotherNodeMovesTheCount) {
  ASSERT_THAT(Assume("u1", "a", Req(1000)), IsOk());
  ledger_.UpsertPod(Bound("u1", "b", Req(1000)));
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 0);
  EXPECT_EQ(Summary(ledger_, "a").confirmed.milli_cpu, 0);
  EXPECT_EQ(Summary(ledger_, "b").confirmed.milli_cpu, 1000);
}

TEST_F(LedgerTest, DeleteBeforeConfirmForgets) {
  ASSERT_THAT(Assume("u1", "b", Req(2000)), IsOk());
  ledger_.DeletePod("u1");
  EXPECT_THAT(Fits(ledger_, Req(2000), {"b"}), ElementsAre("b"));
  // A late ADDED for the deleted pod would be a new bound pod; a late MODIFIED after the
  // DELETED cannot happen on one watch stream.
}

TEST_F(LedgerTest, DeletionTimestampOnUnboundAssumedPodForgets) {
  ASSERT_THAT(Assume("u1", "b", Req(2000)), IsOk());
  PodRecord p = Bound("u1", "", Req(2000));
  p.deleting = true;
  ledger_.UpsertPod(p);
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 0);
  EXPECT_EQ(ledger_.pod_count(), 0u);
}

TEST_F(LedgerTest, UnboundWatchEventKeepsTheAssumption) {
  ASSERT_THAT(Assume("u1", "b", Req(2000)), IsOk());
  ledger_.UpsertPod(Bound("u1", "", Req(2000)));  // the watch lags behind the binding
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 2000);
}

TEST_F(LedgerTest, TerminatingBoundPodsStillCount) {
  PodRecord p = Bound("u1", "b", Req(2000));
  p.deleting = true;
  ledger_.UpsertPod(p);
  EXPECT_EQ(Summary(ledger_, "b").confirmed.milli_cpu, 2000);
}

TEST_F(LedgerTest, TerminalPodStopsCounting) {
  ledger_.UpsertPod(Bound("u1", "b", Req(2000)));
  PodRecord done = Bound("u1", "b", Req(2000));
  done.terminal = true;
  ledger_.UpsertPod(done);
  EXPECT_THAT(Fits(ledger_, Req(2000), {"b"}), ElementsAre("b"));
  // Terminal before confirmation forgets an assumption too.
  ASSERT_THAT(Assume("u2", "b", Req(2000)), IsOk());
  PodRecord failed = Bound("u2", "b", Req(2000));
  failed.terminal = true;
  ledger_.UpsertPod(failed);
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 0);
  EXPECT_EQ(ledger_.pod_count(), 0u);
}

TEST_F(LedgerTest, ResizeIsReaccounted) {
  ledger_.UpsertPod(Bound("u1", "b", Req(500)));
  ledger_.UpsertPod(Bound("u1", "b", Req(1500)));
  EXPECT_EQ(Summary(ledger_, "b").confirmed.milli_cpu, 1500);
  ledger_.UpsertPod(Bound("u1", "b", Req(200)));
  EXPECT_EQ(Summary(ledger_, "b").confirmed.milli_cpu, 200);
}

TEST_F(LedgerTest, NodeDeletedWithPodsOnIt) {
  ledger_.UpsertPod(Bound("u1", "b", Req(500)));
  ledger_.DeleteNode("b");
  FilterResult r = ledger_.Filter(Req(100), {"a", "b"});
  EXPECT_THAT(Failed(r, {"a", "b"}), ElementsAre(Pair("b", "node not found")));
  EXPECT_FALSE(Summary(ledger_, "b").known);
  EXPECT_EQ(Summary(ledger_, "b").confirmed.milli_cpu, 500);
  EXPECT_THAT(Assume("u2", "b", Req(100)), StatusIs(absl::StatusCode::kNotFound, HasSubstr("b")));
  // The node comes back: its pods still count.
  ledger_.UpsertNode(Node("b", 2000));
  EXPECT_THAT(Fits(ledger_, Req(1600), {"b"}), IsEmpty());
  // The pod goes, then the node: nothing left.
  ledger_.DeletePod("u1");
  ledger_.DeleteNode("b");
  for (const NodeSummary& n : ledger_.Nodes()) EXPECT_NE(n.name, "b");
}

TEST_F(LedgerTest, PodOnUnknownNodeIsCountedWhenTheNodeArrives) {
  ledger_.UpsertPod(Bound("u1", "c", Req(900)));
  ledger_.UpsertNode(Node("c", 1000));
  EXPECT_THAT(Fits(ledger_, Req(200), {"c"}), IsEmpty());
  EXPECT_THAT(Fits(ledger_, Req(100), {"c"}), ElementsAre("c"));
}

TEST_F(LedgerTest, UnknownNodesAreReportedNotDropped) {
  FilterResult r = ledger_.Filter(Req(100), {"nope", "a"});
  EXPECT_THAT(r.fits, ElementsAre(1));
  EXPECT_THAT(Failed(r, {"nope", "a"}), ElementsAre(Pair("nope", "node not found")));
}

TEST_F(LedgerTest, ReasonsFollowNodeResourcesFitOrder) {
  Ledger ledger(AccountingPolicy{}, ScoringStrategy::kLeastAllocated);
  NodeRecord n = Node("n", 1000, 1 * kMi, 1);
  n.allocatable.ephemeral_storage_bytes = 100;
  n.allocatable.Set("example.com/gpu", 1);
  ledger.UpsertNode(n);
  ledger.UpsertPod(Bound("u1", "n", Req(500, kMi / 2)));
  Resources r = Req(600, kMi);
  r.ephemeral_storage_bytes = 10;
  r.Set("example.com/gpu", 2);
  r.Set("example.com/fpga", 1);
  FilterResult result = ledger.Filter(r, {"n"});
  ASSERT_EQ(result.unresolvable.size(), 1u);
  EXPECT_EQ(result.unresolvable[0].second,
            "Too many pods, Insufficient cpu, Insufficient memory, Insufficient example.com/fpga, "
            "Insufficient example.com/gpu");
}

TEST_F(LedgerTest, RequestLargerThanAllocatableIsUnresolvable) {
  FilterResult r = ledger_.Filter(Req(3000), {"a", "b"});
  EXPECT_THAT(r.fits, ElementsAre(0));
  ASSERT_EQ(r.unresolvable.size(), 1u);
  EXPECT_EQ(r.unresolvable[0].first, 1u);
  EXPECT_EQ(r.unresolvable[0].second, "Insufficient cpu");
  EXPECT_THAT(r.failed, IsEmpty());
}

// Hundreds of failing nodes share a few distinct texts: each is stored once, every node's
// reasons are a view of it, and the views survive moving the result.
TEST_F(LedgerTest, FailingNodesShareOneTextPerDistinctReason) {
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    names.push_back(absl::StrCat("n-", i));
    NodeRecord node = Node(names.back(), i % 3 == 0 ? 100 : 1000, 4 * kMi);
    node.allocatable.scalars = {{"example.com/dongle", 8}};
    ledger_.UpsertNode(node);
    if (i % 3 == 1) ledger_.UpsertPod(Bound(absl::StrCat("u", i), names.back(), Req(0, 3 * kMi)));
  }
  std::vector<absl::string_view> views(names.begin(), names.end());
  // The common case (no scalar resource asked) words its reasons from static text; a pod that
  // asks for one takes the full check, whose texts the result stores, each once.
  Resources with_scalar = Req(500, 2 * kMi);
  with_scalar.scalars = {{"example.com/dongle", 1}};
  for (const Resources& want : {Req(500, 2 * kMi), with_scalar}) {
    SCOPED_TRACE(ToString(want));
    FilterResult moved = ledger_.Filter(want, views);
    FilterResult r = std::move(moved);
    EXPECT_THAT(r.fits, SizeIs(100));
    EXPECT_THAT(r.failed, SizeIs(100));        // n-1, n-4, ...: memory
    EXPECT_THAT(r.unresolvable, SizeIs(100));  // n-0, n-3, ...: cpu over allocatable
    EXPECT_EQ(r.texts.size(), want.scalars.empty() ? 0u : 2u);
    for (const auto& [i, why] : r.failed) {
      EXPECT_EQ(i % 3, 1u);
      EXPECT_EQ(why, "Insufficient memory");
      EXPECT_EQ(why.data(), r.failed[0].second.data());  // one text
    }
    for (const auto& [i, why] : r.unresolvable) {
      EXPECT_EQ(i % 3, 0u);
      EXPECT_EQ(why, "Insufficient cpu");
      EXPECT_EQ(why.data(), r.unresolvable[0].second.data());
    }
  }
}

// The node map keeps names of up to 48 characters in its own slots and longer ones apart; names
// on either side of that, and up to the 253 a DNS subdomain allows, are distinct nodes whose
// accounting is found again by any string form of the name.
TEST_F(LedgerTest, NodeNamesOfEveryLengthKeepTheirOwnAccounting) {
  std::vector<std::string> names;
  for (size_t length : {1, 15, 16, 47, 48, 49, 64, 253}) {
    names.push_back(std::string(length - 1, 'a') + "b");
    names.push_back(std::string(length, 'a'));
  }
  for (const std::string& name : names) ledger_.UpsertNode(Node(name, 1000));
  // Each node's own pod, sized by its index: a name mixed up with another shows.
  for (size_t i = 0; i < names.size(); ++i) {
    ledger_.UpsertPod(Bound(absl::StrCat("u", i), names[i], Req(100 + static_cast<int64_t>(i))));
  }
  const std::vector<NodeSummary> nodes = ledger_.Nodes();
  ASSERT_THAT(nodes, SizeIs(names.size()));
  for (const NodeSummary& n : nodes) {
    const size_t i = std::find(names.begin(), names.end(), n.name) - names.begin();
    ASSERT_LT(i, names.size()) << n.name;
    EXPECT_EQ(n.confirmed.milli_cpu, 100 + static_cast<int64_t>(i)) << n.name;
  }
  // 895m fits beside a node's own pod of (100 + i)m on 1000m only for i <= 5.
  FilterResult r =
      ledger_.Filter(Req(895), std::vector<absl::string_view>(names.begin(), names.end()));
  EXPECT_THAT(r.fits, ElementsAre(0, 1, 2, 3, 4, 5));
  ledger_.DeletePod("u15");
  ledger_.DeleteNode(names[15]);
  EXPECT_THAT(ledger_.Nodes(), SizeIs(names.size() - 1));
  EXPECT_THAT(Fits(ledger_, Req(1), {names[14], names[15]}), ElementsAre(names[14]));
}

TEST_F(LedgerTest, ZeroRequestsAreNeverCheckedButPodsAre) {
  ledger_.UpsertNode(Node("tiny", 0, 0, 1));
  Resources nothing = Req(0);
  EXPECT_THAT(Fits(ledger_, nothing, {"tiny"}), ElementsAre("tiny"));
  ledger_.UpsertPod(Bound("u1", "tiny", nothing));
  FilterResult r = ledger_.Filter(nothing, {"tiny"});
  EXPECT_THAT(Failed(r, {"tiny"}), ElementsAre(Pair("tiny", "Too many pods")));
}

TEST_F(LedgerTest, ManagedResourcesOnlyChecksThoseNames) {
  AccountingPolicy policy;
  policy.all = false;
  policy.managed = {"example.com/gpu-mem"};
  Ledger ledger(policy, ScoringStrategy::kLeastAllocated);
  NodeRecord n = Node("g", 100, 1, 0);
  n.allocatable.Set("example.com/gpu-mem", 16);
  ledger.UpsertNode(n);
  Resources r = Req(5000, 5 * kMi);  // cpu, memory and pods are the scheduler's business
  r.Set("example.com/gpu-mem", 10);
  EXPECT_THAT(Fits(ledger, r, {"g"}), ElementsAre("g"));
  ASSERT_THAT(ledger.TryAssume("u1", "ns", "p1", "g", r, kT0), IsOk());
  FilterResult second = ledger.Filter(r, {"g"});
  EXPECT_THAT(Failed(second, {"g"}), ElementsAre(Pair("g", "Insufficient example.com/gpu-mem")));
}

TEST_F(LedgerTest, PrioritizeSpreadsOrPacksCountingAssumedPods) {
  ledger_.UpsertNode(Node("c", 4000, 4 * 1024 * kMi));
  ledger_.UpsertNode(Node("d", 4000, 4 * 1024 * kMi));
  ASSERT_THAT(Assume("u1", "c", Req(2000, 2048 * kMi)), IsOk());
  // c: cpu (4000-3000)*100/4000 = 25, memory 25 -> 25; d: 75, 75 -> 75. Scaled to 0..10 at the
  // end, rounded: 3 and 8 (kube-scheduler multiplies by 10 again).
  EXPECT_THAT(ledger_.NodeScores(Req(1000, 1024 * kMi), {"c", "d", "nope"}),
              ElementsAre(25, 75, 0));
  EXPECT_THAT(ledger_.Prioritize(Req(1000, 1024 * kMi), {"c", "d", "nope"}), ElementsAre(3, 8, 0));
  Ledger packer(AccountingPolicy{}, ScoringStrategy::kMostAllocated);
  packer.UpsertNode(Node("c", 4000, 4 * 1024 * kMi));
  packer.UpsertNode(Node("d", 4000, 4 * 1024 * kMi));
  ASSERT_THAT(packer.TryAssume("u1", "ns", "p", "c", Req(2000, 2048 * kMi), kT0), IsOk());
  EXPECT_THAT(packer.Prioritize(Req(1000, 1024 * kMi), {"c", "d"}), ElementsAre(8, 3));
}

TEST_F(LedgerTest, NodesAtDifferentUtilisationScoreDifferently) {
  // Truncating each resource to 0..10 before averaging gave both nodes 7 (7900 and 7000 of
  // 10000 free). Upstream's integer math on 0..100, scaled once at the end, tells them apart.
  ledger_.UpsertNode(Node("c", 10000, 10000 * kMi));
  ledger_.UpsertNode(Node("d", 10000, 10000 * kMi));
  ledger_.UpsertPod(Bound("x", "c", Req(2000, 2000 * kMi)));
  ledger_.UpsertPod(Bound("y", "d", Req(2900, 2900 * kMi)));
  Resources want = Req(100, 100 * kMi);
  EXPECT_THAT(ledger_.NodeScores(want, {"c", "d"}), ElementsAre(79, 70));
  EXPECT_THAT(ledger_.Prioritize(want, {"c", "d"}), ElementsAre(8, 7));
}

TEST_F(LedgerTest, PreemptKeepsNodesWhereVictimsMakeRoom) {
  ledger_.UpsertPod(Bound("v1", "a", Req(3000)));
  ledger_.UpsertPod(Bound("v2", "b", Req(500)));
  ASSERT_THAT(Assume("u9", "b", Req(1500)), IsOk());
  auto kept = ledger_.Preempt(Req(2000), {{"a", {"v1"}}, {"b", {"v2"}}, {"nope", {"x"}}});
  // a: 4000 - 3000 + 3000 freed = 4000 free: fits. b: 2000 - 500 - 1500 + 500 = 500: no.
  EXPECT_THAT(kept, ElementsAre(Pair("a", ElementsAre("v1"))));
}

TEST_F(LedgerTest, PreemptCountsAVictimListedTwiceOnce) {
  ledger_.UpsertPod(Bound("v1", "a", Req(1000)));
  ledger_.UpsertPod(Bound("v2", "a", Req(1700)));
  // a: 4000 - 2700 + 1000 freed = 2300 free: 3000 does not fit, however often v1 is listed.
  EXPECT_THAT(ledger_.Preempt(Req(3000), {{"a", {"v1", "v1"}}}), IsEmpty());
  // Both victims: 4000 free, and the list comes back as it was given.
  EXPECT_THAT(ledger_.Preempt(Req(3000), {{"a", {"v1", "v2", "v1"}}}),
              ElementsAre(Pair("a", ElementsAre("v1", "v2", "v1"))));
}

TEST_F(LedgerTest, SettleOldAssumptionsWithTheApisAnswer) {
  ASSERT_THAT(Assume("bound", "a", Req(100), kT0), IsOk());
  ASSERT_THAT(Assume("gone", "a", Req(100), kT0), IsOk());
  ASSERT_THAT(Assume("unbound", "a", Req(100), kT0), IsOk());
  ASSERT_THAT(Assume("young", "a", Req(100), kT0 + absl::Seconds(50)), IsOk());
  ASSERT_THAT(Assume("inflight", "a", Req(100), kT0), IsOk());
  for (const char* uid : {"bound", "gone", "unbound", "young"}) ledger_.MarkBindUnknown(uid);
  std::vector<AssumedPod> old = ledger_.AssumedOlderThan(kT0 + absl::Seconds(30));
  std::vector<std::string> uids;
  for (const AssumedPod& p : old) uids.push_back(p.uid);
  EXPECT_THAT(uids, UnorderedElementsAre("bound", "gone", "unbound"));
  for (const AssumedPod& p : old) {
    if (p.uid == "bound") {
      PodRecord api = Bound("bound", "b", Req(100));
      EXPECT_TRUE(ledger_.Settle(p.uid, p.epoch, ApiPodState::kBound, &api));
    } else if (p.uid == "gone") {
      EXPECT_TRUE(ledger_.Settle(p.uid, p.epoch, ApiPodState::kGone, nullptr));
    } else {
      EXPECT_TRUE(ledger_.Settle(p.uid, p.epoch, ApiPodState::kUnbound, nullptr));
    }
  }
  EXPECT_EQ(Summary(ledger_, "b").confirmed.milli_cpu, 100);
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 200);  // young + inflight
  EXPECT_EQ(ledger_.counters().reconcile_confirmed, 1u);
  EXPECT_EQ(ledger_.counters().reconcile_forgotten, 2u);
}

TEST_F(LedgerTest, SettleIgnoresAStaleSnapshot) {
  ASSERT_THAT(Assume("u1", "a", Req(100), kT0), IsOk());
  ledger_.MarkBindUnknown("u1");
  std::vector<AssumedPod> old = ledger_.AssumedOlderThan(kT0);
  ASSERT_EQ(old.size(), 1u);
  // A retry of the bind starts and succeeds while the reconciler was asking the API.
  ASSERT_THAT(Assume("u1", "a", Req(100)), IsOkAndHolds(AssumeOutcome::kAlreadyAssumed));
  ledger_.MarkBound("u1", "a");
  EXPECT_FALSE(ledger_.Settle("u1", old[0].epoch, ApiPodState::kUnbound, nullptr));
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 100);
}

TEST_F(LedgerTest, MarkBoundOnAnotherNodeMovesTheAssumption) {
  ASSERT_THAT(Assume("u1", "a", Req(700)), IsOk());
  ledger_.MarkBound("u1", "b");  // 409: the API says the pod is already on b
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 0);
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 700);
}

TEST_F(LedgerTest, APodsOwnAssumptionNeverCountsAgainstIt) {
  // The first bind's outcome was lost: the pod is assumed on b, and kube-scheduler retries it.
  ASSERT_THAT(Assume("u1", "b", Req(1500)), IsOk());
  ledger_.MarkBindUnknown("u1");
  FilterResult self = ledger_.Filter(Req(1500), {"a", "b"}, "u1");
  EXPECT_THAT(self.fits, ElementsAre(0, 1));
  // Another pod still sees b taken.
  EXPECT_THAT(Fits(ledger_, Req(1500), {"a", "b"}), ElementsAre("a"));
  FilterResult other = ledger_.Filter(Req(1500), {"b"}, "u2");
  EXPECT_THAT(Failed(other, {"b"}), ElementsAre(Pair("b", "Insufficient cpu")));
  // The score of b leaves the pod's own entry out too: as if b were empty.
  std::vector<int64_t> scores = ledger_.NodeScores(Req(1500), {"b"}, "u1");
  Ledger empty(AccountingPolicy{}, ScoringStrategy::kLeastAllocated);
  empty.UpsertNode(Node("b", 2000));
  EXPECT_EQ(scores, empty.NodeScores(Req(1500), {"b"}));
  EXPECT_NE(scores, ledger_.NodeScores(Req(1500), {"b"}));
  // Binding to b again counts it once.
  EXPECT_THAT(Assume("u1", "b", Req(1500)), IsOkAndHolds(AssumeOutcome::kAlreadyAssumed));
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 1500);
  EXPECT_EQ(Summary(ledger_, "b").assumed_pods, 1);
}

TEST_F(LedgerTest, AnUnknownOutcomeMovesToTheRetrysNodeOnceTheApiSaysUnbound) {
  ASSERT_THAT(Assume("u1", "a", Req(1500)), IsOk());
  ledger_.MarkBindUnknown("u1");
  std::optional<AssumedPod> before = ledger_.AssumedEntry("u1");
  ASSERT_TRUE(before.has_value());
  EXPECT_TRUE(before->outcome_unknown);
  EXPECT_FALSE(before->bind_in_flight);
  // b has room for it only: the move re-checks the fit there.
  ledger_.UpsertPod(Bound("busy", "b", Req(1000)));
  EXPECT_THAT(ledger_.MoveAssumption("u1", before->epoch, "b", Req(1500), kT0),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("pod ns/pod-u1 no longer fits node b: Insufficient cpu")));
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 1500);
  ledger_.DeletePod("busy");
  EXPECT_THAT(ledger_.MoveAssumption("u1", before->epoch, "nope", Req(1500), kT0),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
  ASSERT_THAT(ledger_.MoveAssumption("u1", before->epoch, "b", Req(1500), kT0), IsOk());
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 0);
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 1500);
  EXPECT_EQ(ledger_.pod_count(), 1u);
  std::optional<AssumedPod> after = ledger_.AssumedEntry("u1");
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE(after->bind_in_flight);
  EXPECT_TRUE(after->outcome_unknown);  // the first POST may still land on a
  EXPECT_EQ(ledger_.counters().moved, 1u);
  // A stale snapshot cannot move it again.
  EXPECT_THAT(ledger_.MoveAssumption("u1", before->epoch, "a", Req(1500), kT0),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("u1")));
  // The retry's POST fails definitely: the earlier outcome is still unknown, so it stays.
  EXPECT_FALSE(ledger_.Forget("u1"));
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 1500);
  // The watch shows where the pod really is (the first POST did land): counted once, there.
  ledger_.UpsertPod(Bound("u1", "a", Req(1500)));
  EXPECT_EQ(Summary(ledger_, "a").confirmed.milli_cpu, 1500);
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 0);
  EXPECT_EQ(ledger_.pod_count(), 1u);
}

TEST_F(LedgerTest, ForgetDropsOnlyWhatCannotStillLand) {
  ASSERT_THAT(Assume("plain", "a", Req(100)), IsOk());
  EXPECT_TRUE(ledger_.Forget("plain"));
  ASSERT_THAT(Assume("unknown", "a", Req(100)), IsOk());
  ledger_.MarkBindUnknown("unknown");
  ASSERT_THAT(Assume("unknown", "a", Req(100)), IsOkAndHolds(AssumeOutcome::kAlreadyAssumed));
  EXPECT_FALSE(ledger_.Forget("unknown"));     // the retry failed; the first may still land
  EXPECT_TRUE(ledger_.ForgetGone("unknown"));  // the pod is gone: nothing can land
  ASSERT_THAT(Assume("bound", "a", Req(100)), IsOk());
  ledger_.MarkBound("bound", "a");
  EXPECT_FALSE(ledger_.Forget("bound"));
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 100);
}

TEST_F(LedgerTest, ARelistReleasesBoundPodsItLacksAndKeepsUnknownOutcomes) {
  // Bound (the POST returned 201), then deleted while the watch was down.
  ASSERT_THAT(Assume("bound", "a", Req(1000)), IsOk());
  ledger_.MarkBound("bound", "a");
  // The API showed it bound on b after a 409 / 5xx.
  ASSERT_THAT(Assume("bound-409", "a", Req(300)), IsOk());
  ledger_.MarkBound("bound-409", "b");
  // Outcome unknown: the binding may still land after the LIST was taken.
  ASSERT_THAT(Assume("unknown", "a", Req(200)), IsOk());
  ledger_.MarkBindUnknown("unknown");
  ASSERT_THAT(Assume("in-flight", "a", Req(400)), IsOk());
  const uint64_t list_started = ledger_.BeginPodList();
  // Known bound only after the LIST was sent: the LIST may predate the binding.
  ASSERT_THAT(Assume("late", "a", Req(500)), IsOk());
  ledger_.MarkBound("late", "a");
  ledger_.ReplacePods({Bound("other", "b", Req(100))}, list_started);
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 200 + 400 + 500);
  EXPECT_EQ(Summary(ledger_, "b").assumed.milli_cpu, 0);
  EXPECT_EQ(Summary(ledger_, "b").confirmed.milli_cpu, 100);
  EXPECT_EQ(ledger_.counters().released_at_relist, 2u);
  EXPECT_FALSE(ledger_.AssumedEntry("bound").has_value());
  // A LIST whose start is unknown releases nothing.
  ledger_.ReplacePods({}, 0);
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 200 + 400 + 500);
  // The next LIST, started after "late" was bound, releases it.
  ledger_.ReplacePods({}, ledger_.BeginPodList());
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 200 + 400);
}

TEST_F(LedgerTest, AKnownBoundPodIsNotForgottenOnAStaleUnboundAnswer) {
  ASSERT_THAT(Assume("u1", "a", Req(100), kT0), IsOk());
  ledger_.MarkBound("u1", "a");
  std::vector<AssumedPod> old = ledger_.AssumedOlderThan(kT0);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_TRUE(old[0].bound_known);
  EXPECT_FALSE(ledger_.Settle("u1", old[0].epoch, ApiPodState::kUnbound, nullptr));
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 100);
  EXPECT_TRUE(ledger_.Settle("u1", old[0].epoch, ApiPodState::kGone, nullptr));
}

TEST_F(LedgerTest, ReplacePodsRemovesVanishedConfirmedKeepsAssumed) {
  ledger_.UpsertPod(Bound("stay", "a", Req(100)));
  ledger_.UpsertPod(Bound("vanish", "a", Req(200)));
  ASSERT_THAT(Assume("assumed", "a", Req(400)), IsOk());
  ledger_.ReplacePods({Bound("stay", "a", Req(100)), Bound("new", "b", Req(300))});
  EXPECT_EQ(Summary(ledger_, "a").confirmed.milli_cpu, 100);
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 400);
  EXPECT_EQ(Summary(ledger_, "b").confirmed.milli_cpu, 300);
}

TEST_F(LedgerTest, PendingPodsAreRememberedForBind) {
  PodRecord p = Bound("u1", "", Req(250));
  ledger_.UpsertPod(p);
  absl::StatusOr<Resources> r = ledger_.PendingPodRequests("u1");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->milli_cpu, 250);
  ledger_.UpsertPod(Bound("u1", "a", Req(250)));
  EXPECT_THAT(ledger_.PendingPodRequests("u1"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("u1")));
}

TEST_F(LedgerTest, ReplaceNodesDropsMissingNodes) {
  ledger_.ReplaceNodes({Node("a", 1000)});
  EXPECT_THAT(Fits(ledger_, Req(100), {"a", "b"}), ElementsAre("a"));
  EXPECT_EQ(ledger_.Nodes().size(), 1u);
}

}  // namespace
}  // namespace fitledger

namespace fitledger {
namespace {

TEST_F(LedgerTest, FilterReservesNothing) {
  // kube-scheduler never says when a filtered pod is rejected: Filter must leave no trace.
  for (int i = 0; i < 100; ++i) ledger_.Filter(Req(2000), {"a", "b"});
  EXPECT_EQ(ledger_.pod_count(), 0u);
  EXPECT_EQ(Summary(ledger_, "a").assumed.milli_cpu, 0);
  EXPECT_THAT(Assume("u1", "b", Req(2000)), IsOk());
}

TEST_F(LedgerTest, FitLeavesThePodsOwnCountOut) {
  ASSERT_THAT(Assume("u1", "b", Req(1500)), IsOk());
  // Explain: the same verdict, and the node's numbers without the pod's own 1500m assumed.
  absl::StatusOr<Explanation> explained = ledger_.Explain(Req(1500), "b", "u1");
  ASSERT_THAT(explained, IsOk());
  EXPECT_TRUE(explained->fit.fits);
  EXPECT_EQ(explained->node.assumed.milli_cpu, 0);
  explained = ledger_.Explain(Req(1500), "b");
  ASSERT_THAT(explained, IsOk());
  EXPECT_FALSE(explained->fit.fits);
  EXPECT_EQ(explained->node.assumed.milli_cpu, 1500);
  EXPECT_THAT(ledger_.Explain(Req(1), "nope").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("node nope not found")));
}

// The full check of one node (Explain's verdict).
absl::StatusOr<FitResult> Fit(const Ledger& ledger, const Resources& requests,
                              const std::string& node) {
  absl::StatusOr<Explanation> explained = ledger.Explain(requests, node);
  if (!explained.ok()) return explained.status();
  return explained->fit;
}

// Filter decides the common case (everything accounted, no extended resources, it fits) on a
// short path; it must agree with the full check (Fit) on every node, fitting or not. Amounts
// are coarse so that requests often equal what is left exactly.
TEST(LedgerFilterTest, AgreesWithTheFullCheckOnRandomNodes) {
  std::mt19937 rng(42);
  for (int policy = 0; policy < 2; ++policy) {
    AccountingPolicy accounting;
    if (policy == 1) {
      accounting.all = false;
      accounting.managed = {"example.com/gpu"};
    }
    Ledger ledger(accounting, ScoringStrategy::kLeastAllocated);
    std::vector<std::string> names;
    for (int n = 0; n < 40; ++n) {
      NodeRecord node = Node(absl::StrCat("n", n), 1000 + 500 * (rng() % 8),
                             (1 + rng() % 8) * 1024 * kMi, 1 + rng() % 4);
      node.allocatable.ephemeral_storage_bytes = rng() % 3 == 0 ? 0 : 10 * 1024 * kMi;
      if (n % 3 == 0) node.allocatable.Set("example.com/gpu", rng() % 3);
      ledger.UpsertNode(node);
      names.push_back(node.name);
      for (int p = 0, count = rng() % 4; p < count; ++p) {
        Resources r = Req(250 * (rng() % 6), (rng() % 3) * 1024 * kMi);
        if (rng() % 4 == 0) r.Set("example.com/gpu", 1);
        const std::string uid = absl::StrCat("u", n, "-", p);
        if (rng() % 2 == 0) {
          ledger.UpsertPod(Bound(uid, node.name, r));
        } else {
          (void)ledger.TryAssume(uid, "ns", uid, node.name, r, kT0);
        }
      }
    }
    names.push_back("absent");
    for (int trial = 0; trial < 200; ++trial) {
      Resources want = Req(250 * (rng() % 12), (rng() % 4) * 1024 * kMi);
      if (trial % 5 == 0) want = Resources();  // requests nothing (the pod still counts)
      if (trial % 7 == 0) want.ephemeral_storage_bytes = (rng() % 20) * 1024 * kMi;
      if (trial % 4 == 0) want.Set("example.com/gpu", 1 + rng() % 2);
      std::vector<absl::string_view> views(names.begin(), names.end());
      FilterResult result = ledger.Filter(want, views);
      std::set<size_t> fits(result.fits.begin(), result.fits.end());
      for (size_t i = 0; i + 1 < names.size(); ++i) {
        absl::StatusOr<FitResult> full = Fit(ledger, want, names[i]);
        ASSERT_TRUE(full.ok()) << full.status();
        EXPECT_EQ(fits.count(i) == 1, full->fits)
            << "policy " << policy << ", trial " << trial << ", node " << names[i];
      }
      EXPECT_EQ(fits.count(names.size() - 1), 0u);
    }
  }
}

}  // namespace
}  // namespace fitledger
