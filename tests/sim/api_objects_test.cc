#include "sim/api_objects.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/status_matchers.h"

namespace fitledger::sim {
namespace {

using ::fitledger::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

json Deployment() {
  return json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "app", "image": "nginx",
                                   "resources": {"requests": {"cpu": "400m"}}}]}}}})");
}

json StoredPod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "resourceVersion": "7",
                 "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "app", "image": "nginx:1",
                             "resources": {"requests": {"cpu": "400m"}}}],
             "restartPolicy": "Always", "schedulerName": "fitledger",
             "terminationGracePeriodSeconds": 30},
    "status": {"phase": "Pending", "qosClass": "Burstable"}})");
}

TEST(PrepareCreateTest, DeploymentDefaults) {
  auto d = PrepareCreate(Kind::kDeployment, "default", Deployment());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)["spec"]["replicas"], 1);
  EXPECT_EQ((*d)["spec"]["strategy"]["type"], "RollingUpdate");
  EXPECT_EQ((*d)["spec"]["revisionHistoryLimit"], 10);
  EXPECT_EQ((*d)["metadata"]["generation"], 1);
  EXPECT_EQ((*d)["spec"]["template"]["spec"]["restartPolicy"], "Always");
  EXPECT_EQ((*d)["status"], json::object());
}

TEST(PrepareCreateTest, DeploymentValidation) {
  json no_selector = Deployment();
  no_selector["spec"].erase("selector");
  EXPECT_THAT(PrepareCreate(Kind::kDeployment, "default", no_selector),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "Deployment.apps \"web\" is invalid: spec.selector: Required value"));
  json mismatch = Deployment();
  mismatch["spec"]["selector"]["matchLabels"]["app"] = "other";
  EXPECT_THAT(PrepareCreate(Kind::kDeployment, "default", mismatch),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("`selector` does not match template `labels`")));
  json bad_cpu = Deployment();
  bad_cpu["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots";
  EXPECT_THAT(PrepareCreate(Kind::kDeployment, "default", bad_cpu),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("spec.template")));
  json wrong_kind = Deployment();
  wrong_kind["kind"] = "StatefulSet";
  EXPECT_THAT(PrepareCreate(Kind::kDeployment, "default", wrong_kind),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not Deployment")));
  json other_ns = Deployment();
  other_ns["metadata"]["namespace"] = "kube-system";
  EXPECT_THAT(PrepareCreate(Kind::kDeployment, "default", other_ns),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not match")));
}

TEST(PrepareUpdateTest, PodMetadataAndImageMayChangeResourcesMayNot) {
  json labelled = StoredPod();
  labelled["metadata"]["labels"]["x"] = "y";
  labelled["spec"]["containers"][0]["image"] = "nginx:2";
  labelled["status"]["phase"] = "Running";  // ignored: the main resource keeps the status
  auto ok = PrepareUpdate(Kind::kPod, Subresource::kMain, StoredPod(), labelled, "web");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)["metadata"]["labels"]["x"], "y");
  EXPECT_EQ((*ok)["status"]["phase"], "Pending");

  json resized = StoredPod();
  resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2";
  EXPECT_THAT(PrepareUpdate(Kind::kPod, Subresource::kMain, StoredPod(), resized, "web"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("Pod \"web\" is invalid: spec: Forbidden: pod updates may not "
                                 "change fields other than `spec.containers[*].image`")));
  json tolerated = StoredPod();
  tolerated["spec"]["tolerations"] = json::parse(R"([{"key": "k", "operator": "Exists"}])");
  EXPECT_TRUE(PrepareUpdate(Kind::kPod, Subresource::kMain, StoredPod(), tolerated, "web").ok());
}

TEST(PrepareUpdateTest, StatusSubresourceChangesOnlyStatus) {
  json update = StoredPod();
  update["metadata"]["labels"]["x"] = "y";
  update["status"]["conditions"] = json::parse(R"([{"type": "PodScheduled", "status": "False"}])");
  auto out = PrepareUpdate(Kind::kPod, Subresource::kStatus, StoredPod(), update, "web");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE((*out)["metadata"]["labels"].contains("x"));
  EXPECT_EQ((*out)["status"]["conditions"][0]["status"], "False");
}

TEST(PrepareUpdateTest, IdentityAndConcurrency) {
  json renamed = StoredPod();
  renamed["metadata"]["name"] = "other";
  EXPECT_THAT(PrepareUpdate(Kind::kPod, Subresource::kMain, StoredPod(), renamed, "web"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "the name of the object (other) does not match the name on the URL (web)"));
  json stale = StoredPod();
  stale["metadata"]["resourceVersion"] = "3";
  EXPECT_THAT(PrepareUpdate(Kind::kPod, Subresource::kMain, StoredPod(), stale, "web"),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("the object has been modified")));
  json new_uid = StoredPod();
  new_uid["metadata"]["uid"] = "u-2";
  EXPECT_THAT(PrepareUpdate(Kind::kPod, Subresource::kMain, StoredPod(), new_uid, "web"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("field is immutable")));
}

TEST(PrepareUpdateTest, DeploymentGenerationAndImmutableSelector) {
  json stored = *PrepareCreate(Kind::kDeployment, "default", Deployment());
  json scaled = stored;
  scaled["spec"]["replicas"] = 5;
  auto out = PrepareUpdate(Kind::kDeployment, Subresource::kMain, stored, scaled, "web");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)["metadata"]["generation"], 2);
  json relabelled = stored;
  relabelled["metadata"]["labels"] = {{"a", "b"}};
  out = PrepareUpdate(Kind::kDeployment, Subresource::kMain, stored, relabelled, "web");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)["metadata"]["generation"], 1);
  json reselected = stored;
  reselected["spec"]["selector"]["matchLabels"]["tier"] = "x";
  reselected["spec"]["template"]["metadata"]["labels"]["tier"] = "x";
  EXPECT_THAT(
      PrepareUpdate(Kind::kDeployment, Subresource::kMain, stored, reselected, "web"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("spec.selector: Invalid value")));
}

TEST(SelectorTest, MatchLabelsAndExpressions) {
  json labels = {{"app", "web"}, {"tier", "front"}};
  EXPECT_TRUE(*SelectorMatches(json::parse(R"({"matchLabels": {"app": "web"}})"), labels));
  EXPECT_FALSE(*SelectorMatches(json::parse(R"({"matchLabels": {"app": "db"}})"), labels));
  EXPECT_TRUE(
      *SelectorMatches(json::parse(R"({"matchExpressions": [{"key": "tier", "operator": "In",
                                           "values": ["front", "back"]},
                                          {"key": "gone", "operator": "DoesNotExist"}]})"),
                       labels));
  EXPECT_FALSE(
      *SelectorMatches(json::parse(R"({"matchExpressions": [{"key": "tier", "operator": "NotIn",
                                           "values": ["front"]}]})"),
                       labels));
  EXPECT_THAT(SelectorMatches(json::parse(R"({"matchExpressions": [{"key": "a",
                                                                   "operator": "Near"}]})"),
                              labels),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST(ScaleTest, FromDeployment) {
  json d = *PrepareCreate(Kind::kDeployment, "default", Deployment());
  d["metadata"]["namespace"] = "default";
  d["status"]["replicas"] = 1;
  json scale = ScaleOf(d);
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(scale["spec"]["replicas"], 1);
  EXPECT_EQ(scale["status"]["selector"], "app=web");
}

TEST(NodeSpecTest, FromObject) {
  auto spec = NodeSpecFromObject(json::parse(R"({"kind": "Node", "apiVersion": "v1",
      "metadata": {"name": "worker-3", "labels": {"zone": "b"}},
      "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "worker-3");
  EXPECT_EQ(spec->allocatable, spec->capacity);
  EXPECT_THAT(NodeSpecFromObject(json::parse(R"({"metadata": {"name": "bare"}})")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("status.allocatable")));
}

}  // namespace
}  // namespace fitledger::sim
