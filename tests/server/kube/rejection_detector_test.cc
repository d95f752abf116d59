// The rejection detector fed directly, as its Reflector would feed it.
#include "server/kube/rejection_detector.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace fitledger::kube {
namespace {

Pod FailedPod(const std::string& name, const std::string& reason,
              const std::string& scheduler = "fitledger") {
  Pod pod;
  pod.name = name;
  pod.namespace_name = "default";
  pod.uid = "u-" + name;
  pod.node_name = "node-1";
  pod.phase = "Failed";
  pod.status_reason = reason;
  pod.scheduler_name = scheduler;
  return pod;
}

WatchEvent Event(WatchEvent::Type type, Pod pod) {
  WatchEvent event;
  event.type = type;
  event.pod = std::move(pod);
  return event;
}

// Reads a state of `pods` (each an ADDED event) into the detector.
void ReadState(RejectionDetector* detector, const std::vector<Pod>& pods) {
  std::unique_ptr<ReflectorState> state = detector->NewState();
  for (const Pod& pod : pods) {
    WatchEvent event = Event(WatchEvent::Type::kAdded, pod);
    ASSERT_TRUE(state->Add(event));
  }
  state->Commit(0);
}

TEST(RejectionDetectorTest, TheFirstStateIsListedNotCountedAndLaterOnesAreCountedOnce) {
  RejectionDetector detector({"fitledger"});
  ReadState(&detector, {FailedPod("old", "OutOfcpu"), FailedPod("evicted", "Evicted"),
                        FailedPod("other", "OutOfcpu", "default-scheduler")});
  RejectionStats stats = detector.stats();
  EXPECT_EQ(stats.total, 0u);
  EXPECT_EQ(stats.in_api, 1u);
  ASSERT_EQ(detector.rejections().size(), 1u);
  EXPECT_TRUE(detector.rejections()[0].before_start);

  WatchEvent added = Event(WatchEvent::Type::kAdded, FailedPod("new", "OutOfmemory"));
  EXPECT_TRUE(detector.Apply(added));
  WatchEvent again = Event(WatchEvent::Type::kModified, FailedPod("new", "OutOfmemory"));
  EXPECT_TRUE(detector.Apply(again));  // the same UID: counted once
  stats = detector.stats();
  EXPECT_EQ(stats.total, 1u);
  EXPECT_EQ((stats.by_reason_node[{"OutOfmemory", "node-1"}]), 1u);
  EXPECT_EQ(stats.in_api, 2u);

  // A relist (the watch was away): "new" is still there (not counted again), "gone" appeared
  // meanwhile (counted), "old" was deleted meanwhile (forgotten).
  ReadState(&detector,
            {FailedPod("new", "OutOfmemory"), FailedPod("gone", "UnexpectedAdmissionError")});
  stats = detector.stats();
  EXPECT_EQ(stats.total, 2u);
  EXPECT_EQ(stats.in_api, 2u);

  WatchEvent deleted;
  deleted.type = WatchEvent::Type::kDeleted;
  deleted.deleted_key = "u-gone";  // an undecodable DELETED still removes by UID
  EXPECT_TRUE(detector.Apply(deleted));
  EXPECT_EQ(detector.stats().in_api, 1u);
  EXPECT_EQ(detector.stats().total, 2u);  // monotonic
}

TEST(RejectionDetectorTest, AWatchListStateKeepsOnlyWhatIsStillARejection) {
  RejectionDetector detector({});
  std::unique_ptr<ReflectorState> state = detector.NewState();
  WatchEvent a = Event(WatchEvent::Type::kAdded, FailedPod("a", "OutOfcpu"));
  WatchEvent b = Event(WatchEvent::Type::kAdded, FailedPod("b", "OutOfpods"));
  WatchEvent b_deleted = Event(WatchEvent::Type::kDeleted, FailedPod("b", "OutOfpods"));
  ASSERT_TRUE(state->Add(a));
  ASSERT_TRUE(state->Add(b));
  ASSERT_TRUE(state->Add(b_deleted));
  EXPECT_EQ(state->Commit(0), 1u);
  EXPECT_EQ(detector.stats().in_api, 1u);
  EXPECT_EQ(detector.rejections().back().name, "a");
}

}  // namespace
}  // namespace fitledger::kube
