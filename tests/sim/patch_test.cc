#include "sim/patch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/status_matchers.h"

namespace fitledger::sim {
namespace {

using ::fitledger::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

json Pod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"},
                 "finalizers": ["a", "b"]},
    "spec": {"containers": [
        {"name": "app", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
        {"name": "side", "image": "busybox"}],
      "tolerations": [{"key": "k", "operator": "Exists"}]},
    "status": {"phase": "Pending", "conditions": [
        {"type": "Initialized", "status": "True"},
        {"type": "PodScheduled", "status": "True"}]}
  })");
}

json Apply(PatchType type, Kind kind, const json& original, const std::string& patch) {
  auto result = ApplyPatch(type, kind, original, patch);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : json();
}

TEST(PatchTypeTest, FromContentType) {
  EXPECT_EQ(*PatchTypeOf("application/json-patch+json"), PatchType::kJson);
  EXPECT_EQ(*PatchTypeOf("application/merge-patch+json"), PatchType::kMerge);
  EXPECT_EQ(*PatchTypeOf("application/strategic-merge-patch+json; charset=utf-8"),
            PatchType::kStrategicMerge);
  EXPECT_THAT(PatchTypeOf("application/apply-patch+yaml"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("server-side apply")));
  EXPECT_THAT(PatchTypeOf("application/json"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(StrategicMergeTest, MapsMergeAndNullDeletes) {
  json out = Apply(PatchType::kStrategicMerge, Kind::kPod, Pod(),
                   R"({"metadata": {"labels": {"tier": null, "x": "y"}}})");
  EXPECT_EQ(out["metadata"]["labels"], json({{"app", "web"}, {"x", "y"}}));
  EXPECT_EQ(out["spec"], Pod()["spec"]);
}

TEST(StrategicMergeTest, ContainersMergeByName) {
  json out = Apply(PatchType::kStrategicMerge, Kind::kPod, Pod(),
                   R"({"spec": {"containers": [{"name": "app", "image": "nginx:2",
                                                "env": [{"name": "B", "value": "2"}]}]}})");
  ASSERT_EQ(out["spec"]["containers"].size(), 2u);
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "nginx:2");
  // env merges by name too (core/v1 Container.Env: patchMergeKey name).
  EXPECT_EQ(out["spec"]["containers"][0]["env"],
            json::parse(R"([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])"));
  EXPECT_EQ(out["spec"]["containers"][1]["name"], "side");
}

TEST(StrategicMergeTest, ListWithoutStrategyIsReplaced) {
  json out = Apply(PatchType::kStrategicMerge, Kind::kPod, Pod(),
                   R"({"spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}})");
  EXPECT_EQ(out["spec"]["tolerations"], json::parse(R"([{"key": "other", "operator": "Exists"}])"));
}

TEST(StrategicMergeTest, DeleteDirectiveInList) {
  json out = Apply(PatchType::kStrategicMerge, Kind::kPod, Pod(),
                   R"({"spec": {"containers": [{"name": "side", "$patch": "delete"}]}})");
  ASSERT_EQ(out["spec"]["containers"].size(), 1u);
  EXPECT_EQ(out["spec"]["containers"][0]["name"], "app");
}

TEST(StrategicMergeTest, ReplaceDirective) {
  json out = Apply(PatchType::kStrategicMerge, Kind::kPod, Pod(),
                   R"({"metadata": {"labels": {"$patch": "replace", "only": "this"}}})");
  EXPECT_EQ(out["metadata"]["labels"], json({{"only", "this"}}));
}

// What kube-scheduler sends to set PodScheduled=False (CreateTwoWayMergePatch of two statuses).
TEST(StrategicMergeTest, ConditionsMergeByTypeWithElementOrder) {
  json out = Apply(PatchType::kStrategicMerge, Kind::kPod, Pod(), R"({"status": {
      "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Initialized"}],
      "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": "0/2 nodes are available: 2 Insufficient cpu."}]}})");
  ASSERT_EQ(out["status"]["conditions"].size(), 2u);
  EXPECT_EQ(out["status"]["conditions"][0]["type"], "PodScheduled");
  EXPECT_EQ(out["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(out["status"]["conditions"][0]["reason"], "Unschedulable");
  EXPECT_EQ(out["status"]["conditions"][1]["type"], "Initialized");
}

TEST(StrategicMergeTest, FinalizersAreASet) {
  json out = Apply(PatchType::kStrategicMerge, Kind::kPod, Pod(),
                   R"({"metadata": {"finalizers": ["b", "c"]}})");
  EXPECT_EQ(out["metadata"]["finalizers"], json::parse(R"(["a", "b", "c"])"));
  out = Apply(PatchType::kStrategicMerge, Kind::kPod, Pod(),
              R"({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})");
  EXPECT_EQ(out["metadata"]["finalizers"], json::parse(R"(["b"])"));
}

TEST(StrategicMergeTest, CordonPatch) {
  json node = {{"kind", "Node"}, {"metadata", {{"name", "n"}}}, {"spec", json::object()}};
  json out =
      Apply(PatchType::kStrategicMerge, Kind::kNode, node, R"({"spec":{"unschedulable":true}})");
  EXPECT_EQ(out["spec"]["unschedulable"], true);
  out = Apply(PatchType::kStrategicMerge, Kind::kNode, out, R"({"spec":{"unschedulable":null}})");
  EXPECT_FALSE(out["spec"].contains("unschedulable"));
}

TEST(StrategicMergeTest, DeploymentTemplateUsesPodMetadata) {
  EXPECT_EQ(ListMetaOf(Kind::kDeployment, "spec.template.spec.containers").merge_key, "name");
  EXPECT_EQ(ListMetaOf(Kind::kReplicaSet, "spec.template.spec.containers[].ports").merge_key,
            "containerPort");
  EXPECT_FALSE(ListMetaOf(Kind::kPod, "spec.tolerations").merge);
  json d = json::parse(R"({"spec": {"strategy": {"type": "RollingUpdate",
                                                 "rollingUpdate": {"maxSurge": 1}}}})");
  // DeploymentSpec.Strategy is retainKeys: kubectl sends $retainKeys when the type changes.
  json out = Apply(PatchType::kStrategicMerge, Kind::kDeployment, d,
                   R"({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})");
  EXPECT_EQ(out["spec"]["strategy"], json({{"type", "Recreate"}}));
}

TEST(StrategicMergeTest, Errors) {
  EXPECT_THAT(ApplyPatch(PatchType::kStrategicMerge, Kind::kPod, Pod(), "[1]"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(ApplyPatch(PatchType::kStrategicMerge, Kind::kPod, Pod(), "{"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(ApplyPatch(PatchType::kStrategicMerge, Kind::kPod, Pod(),
                         R"({"metadata": {"$patch": "explode"}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Unknown patch type")));
  EXPECT_THAT(ApplyPatch(PatchType::kStrategicMerge, Kind::kPod, Pod(),
                         R"({"spec": {"containers": [{"image": "no-name"}]}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("merge key: name")));
}

TEST(MergePatchTest, Rfc7386) {
  json out = Apply(PatchType::kMerge, Kind::kPod, Pod(),
                   R"({"metadata": {"labels": {"app": null, "new": "1"}},
                       "spec": {"containers": [{"name": "only"}]}})");
  EXPECT_EQ(out["metadata"]["labels"], json({{"tier", "front"}, {"new", "1"}}));
  // A merge patch replaces lists whole.
  EXPECT_EQ(out["spec"]["containers"], json::parse(R"([{"name": "only"}])"));
  EXPECT_THAT(ApplyPatch(PatchType::kMerge, Kind::kPod, Pod(), "[]"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(JsonPatchTest, Rfc6902) {
  json out = Apply(PatchType::kJson, Kind::kPod, Pod(),
                   R"([{"op": "add", "path": "/metadata/labels/z", "value": "1"},
                       {"op": "remove", "path": "/metadata/labels/tier"},
                       {"op": "replace", "path": "/spec/containers/0/image", "value": "x"},
                       {"op": "test", "path": "/metadata/name", "value": "web"}])");
  EXPECT_EQ(out["metadata"]["labels"], json({{"app", "web"}, {"z", "1"}}));
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "x");
  // An operation that cannot apply is 422, a malformed patch 400.
  EXPECT_THAT(ApplyPatch(PatchType::kJson, Kind::kPod, Pod(),
                         R"([{"op": "remove", "path": "/metadata/nope"}])"),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(ApplyPatch(PatchType::kJson, Kind::kPod, Pod(),
                         R"([{"op": "test", "path": "/metadata/name", "value": "other"}])"),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(ApplyPatch(PatchType::kJson, Kind::kPod, Pod(), R"({"op": "add"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(ApplyPatch(PatchType::kJson, Kind::kPod, Pod(), R"([{"path": "/a"}])"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

}  // namespace
}  // namespace fitledger::sim
