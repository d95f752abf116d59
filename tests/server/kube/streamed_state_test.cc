// StreamedState: a WatchList's initial state as events arrive: objects by key in arrival order,
// a later event for a key replacing or removing the earlier one, each key held once.
#include "server/kube/streamed_state.h"

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fitledger::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Object {
  std::string key;
  int version = 0;
  bool operator==(const Object& o) const { return key == o.key && version == o.version; }
};
struct ObjectKey {
  const std::string& operator()(const Object& o) const { return o.key; }
};
using State = StreamedState<Object, ObjectKey>;

TEST(StreamedStateTest, KeepsArrivalOrderAndReplacesInPlace) {
  State state;
  state.Put({"b", 1});
  state.Put({"a", 1});
  state.Put({"c", 1});
  state.Put({"b", 2});  // MODIFIED before the end bookmark: same place, new content
  EXPECT_THAT(state.Take(), ElementsAre(Object{"b", 2}, Object{"a", 1}, Object{"c", 1}));
}

TEST(StreamedStateTest, RemovedKeysAreDroppedAndMayComeBack) {
  State state;
  state.Put({"a", 1});
  state.Put({"b", 1});
  state.Put({"c", 1});
  state.Remove("b");
  state.Remove("missing");  // a DELETED for an object the state never had
  state.Remove("a");
  state.Put({"a", 2});  // re-added after its deletion
  EXPECT_THAT(state.Take(), ElementsAre(Object{"a", 2}, Object{"c", 1}));
}

TEST(StreamedStateTest, ShortKeysSurviveTheVectorGrowing) {
  // Keys short enough to live inside std::string itself move with their object when the vector
  // grows: the index must find them by position, not by a pointer to the old copy.
  State state;
  for (int i = 0; i < 5000; ++i) state.Put({absl::StrCat(i % 1000), i});
  std::vector<Object> taken = state.Take();
  ASSERT_EQ(taken.size(), 1000u);
  for (int k = 0; k < 1000; ++k) EXPECT_EQ(taken[k], (Object{absl::StrCat(k), 4000 + k}));
}

// Random events against an ordered model, for either sequence the state may use. An object new to
// the state arrives as Add (an ADDED event), one it holds as Put (MODIFIED); the first 500 steps
// only add, as a WatchList's initial state does, so the index is built from a long prefix.
template <typename S>
void MatchesAnOrderedModel() {
  std::mt19937 rng(20261203);
  S state;
  std::vector<std::string> order;   // first arrival of each key
  std::map<std::string, int> live;  // key -> version, for keys present
  for (int step = 0; step < 20000; ++step) {
    // Short and long keys alike (16 characters and more leave the string's inline buffer).
    const int n = static_cast<int>(rng() % 300);
    const std::string key =
        n % 2 == 0 ? absl::StrCat("k", n) : absl::StrCat("a-longer-key-of-a-pod-", n, "-uid");
    const bool quiet = step < 500;
    if (!quiet && rng() % 4 == 0) {
      state.Remove(key);
      live.erase(key);
    } else if (!quiet || !live.contains(key)) {
      if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
      if (live.contains(key)) {
        state.Put({key, step});
      } else {
        state.Add({key, step});
      }
      live[key] = step;
    }
  }
  std::vector<Object> want;
  for (const std::string& key : order) {
    auto it = live.find(key);
    if (it != live.end()) want.push_back({key, it->second});
  }
  auto taken = state.Take();
  EXPECT_EQ(std::vector<Object>(taken.begin(), taken.end()), want);
}

TEST(StreamedStateTest, MatchesAnOrderedModelUnderRandomEvents) { MatchesAnOrderedModel<State>(); }

// The pods' state is a deque (Ledger::ReplacePods frees it as it goes).
TEST(StreamedStateTest, ADequeOfItemsMatchesTheSameModel) {
  MatchesAnOrderedModel<StreamedState<Object, ObjectKey, std::deque<Object>>>();
}

TEST(StreamedStateTest, AddsAreIndexedAtTheFirstPutOrRemove) {
  State state;
  state.Add({"a", 1});
  state.Add({"b", 1});
  state.Add({"c", 1});
  state.Put({"b", 2});  // finds the added b: replaced in its place
  state.Remove("a");
  state.Add({"d", 1});  // after the index exists, an Add is a Put
  state.Put({"d", 2});
  EXPECT_THAT(state.Take(), ElementsAre(Object{"b", 2}, Object{"c", 1}, Object{"d", 2}));
}

TEST(StreamedStateTest, ARepeatedAddKeepsBothUntilIndexedThenTheLaterOne) {
  // Not what the API server sends (one ADDED per object); kept in order, the later one last, so
  // that applying the state in order ends with the later object.
  State repeated;
  repeated.Add({"a", 1});
  repeated.Add({"a", 2});
  EXPECT_THAT(repeated.Take(), ElementsAre(Object{"a", 1}, Object{"a", 2}));
  // Indexing (at a Put or Remove) keeps the later one, in its place.
  State indexed;
  indexed.Add({"a", 1});
  indexed.Add({"b", 1});
  indexed.Add({"a", 2});
  indexed.Put({"c", 1});
  EXPECT_THAT(indexed.Take(), ElementsAre(Object{"b", 1}, Object{"a", 2}, Object{"c", 1}));
}

TEST(StreamedStateTest, TakeEmptiesTheState) {
  State state;
  state.Put({"a", 1});
  EXPECT_THAT(state.Take(), ElementsAre(Object{"a", 1}));
  EXPECT_THAT(state.Take(), IsEmpty());
}

}  // namespace
}  // namespace fitledger::kube
