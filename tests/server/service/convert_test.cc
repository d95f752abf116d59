// The gRPC edge's conversions: a model pod through the proto and back is the same pod (what
// fitledger-shim sends is what fitledger-server reads), Preempt's arguments and answer likewise.
#include "server/service/convert.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/objects_json.h"
#include "tests/common/status_matchers.h"

namespace fitledger {
namespace {

using ::fitledger::testing::IsOk;
using ::fitledger::testing::StatusIs;

// Every field PodFromProto reads, each ResourceList in name order (the proto's maps sort).
constexpr char kPod[] = R"({
  "metadata": {"name": "trainer", "namespace": "ml", "uid": "u-1",
               "deletionTimestamp": "2026-11-30T12:10:00Z"},
  "spec": {
    "nodeName": "w1", "schedulerName": "fitledger", "priority": 2000000,
    "initContainers": [
      {"name": "setup", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
      {"name": "proxy", "restartPolicy": "Always",
       "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}}],
    "containers": [
      {"name": "main", "resources": {"requests": {"cpu": "1500m", "example.com/gpu": "2"},
                                     "limits": {"memory": "4Gi"}}},
      {"name": "side"}],
    "overhead": {"cpu": "100m", "memory": "120Mi"},
    "resources": {"requests": {"cpu": "6"}, "limits": {"cpu": "8"}}
  },
  "status": {
    "phase": "Running", "reason": "r", "message": "m",
    "containerStatuses": [
      {"name": "main", "allocatedResources": {"cpu": "1500m"},
       "resources": {"requests": {"cpu": "1"}}},
      {"name": "side", "resources": null}],
    "initContainerStatuses": [{"name": "proxy", "allocatedResources": {"cpu": "250m"}}]
  }
})";

TEST(ConvertTest, APodThroughTheProtoAndBackIsTheSamePod) {
  absl::StatusOr<Pod> pod = ParsePod(kPod);
  ASSERT_THAT(pod.status(), IsOk());
  ASSERT_TRUE(pod->deleting);
  ASSERT_TRUE(pod->container_statuses[0].has_resources);
  ASSERT_FALSE(pod->container_statuses[1].has_resources);
  v1::Pod proto;
  PodToProto(*pod, &proto);
  EXPECT_EQ(proto.spec().containers(0).resources().requests().at("cpu"), "1500m");
  EXPECT_EQ(proto.spec().init_containers(1).restart_policy(), "Always");
  absl::StatusOr<Pod> back = PodFromProto(proto);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_TRUE(*back == *pod);
  // A pod without pod-level resources stays without them.
  Pod plain;
  plain.name = "p";
  v1::Pod plain_proto;
  PodToProto(plain, &plain_proto);
  back = PodFromProto(plain_proto);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_FALSE(back->pod_requests.has_value());
  EXPECT_FALSE(back->deleting);
  EXPECT_TRUE(*back == plain);
}

TEST(ConvertTest, AMalformedQuantityInTheProtoNamesTheField) {
  v1::Pod proto;
  (*proto.mutable_spec()->add_containers()->mutable_resources()->mutable_requests())["cpu"] = "x";
  EXPECT_THAT(PodFromProto(proto).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("spec.containers[0].resources.requests.cpu")));
}

TEST(ConvertTest, PreemptArgsAndAnswerThroughTheProto) {
  PreemptArgs args;
  args.pod.name = "p";
  args.victims["w1"] = Victims{{"u1", "u2"}, 1};
  args.victims["w2"] = Victims{};
  v1::ExtenderPreemptionArgs proto;
  PreemptArgsToProto(args, &proto);
  EXPECT_EQ(proto.node_name_to_victims_size(), 0);
  absl::StatusOr<PreemptArgs> back = PreemptArgsFromProto(proto);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_TRUE(*back == args);

  // Full victims count by their UIDs, only when no MetaVictims are given.
  v1::ExtenderPreemptionArgs full;
  (*full.mutable_node_name_to_victims())["w3"].add_pods()->mutable_metadata()->set_uid("u3");
  (*full.mutable_node_name_to_victims())["w3"].set_num_pdb_violations(2);
  back = PreemptArgsFromProto(full);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_TRUE(back->victims == (NodeVictims{{"w3", Victims{{"u3"}, 2}}}));
  (*full.mutable_node_name_to_meta_victims())["w4"].add_pods()->set_uid("u4");
  back = PreemptArgsFromProto(full);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_TRUE(back->victims == (NodeVictims{{"w4", Victims{{"u4"}, 0}}}));

  v1::ExtenderPreemptionResult result;
  VictimsToProto(args.victims, &result);
  EXPECT_TRUE(VictimsFromProto(result) == args.victims);
}

}  // namespace
}  // namespace fitledger
