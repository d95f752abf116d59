// The in-process controllers driven one pass at a time (Controllers::SyncOnce) over a real store.
#include "sim/controllers.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sim/api_objects.h"
#include "sim/object_api.h"

namespace fitledger::sim {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ControllersTest : public ::testing::Test {
 protected:
  ControllersTest()
      : store_({.event_window = 10000}),
        controllers_(&store_, [this](const std::string& ns, const std::string& name) {
          terminating_.push_back(ns + "/" + name);
          store_.TerminatePod(ns, name, /*kubelet_enabled=*/true);
        }) {
    NodeSpec node;
    node.name = "worker-1";
    node.allocatable = {{"cpu", "1"}, {"memory", "8Gi"}, {"pods", "110"}};
    node.capacity = node.allocatable;
    EXPECT_TRUE(store_.AddNode(node).ok());
  }

  void CreateDeployment(int replicas) {
    json d = json::parse(R"({"apiVersion": "apps/v1", "kind": "Deployment",
      "metadata": {"name": "web"},
      "spec": {"selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}},
                            "spec": {"schedulerName": "fitledger",
                                     "containers": [{"name": "app", "image": "nginx",
                                         "resources": {"requests": {"cpu": "400m"}}}]}}}})");
    d["spec"]["replicas"] = replicas;
    auto prepared = PrepareCreate(Kind::kDeployment, "default", d);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    ASSERT_TRUE(store_.CreateObject(Kind::kDeployment, "default", *prepared).ok());
  }

  std::vector<ObjectPtr> Objects(Kind kind) {
    ObjectFilter filter;
    filter.kind = kind;
    auto list = store_.List(filter, 0, "");
    EXPECT_TRUE(list.ok());
    return list.ok() ? list->items : std::vector<ObjectPtr>{};
  }

  std::vector<std::string> Phases() {
    std::vector<std::string> out;
    for (const ObjectPtr& p : Objects(Kind::kPod)) out.push_back(p->fields.phase);
    std::sort(out.begin(), out.end());
    return out;
  }

  json Deployment() {
    return json::parse((*store_.Get(Kind::kDeployment, "default", "web"))->json);
  }

  ClusterStore store_;
  std::vector<std::string> terminating_;
  Controllers controllers_;
};

TEST_F(ControllersTest, DeploymentMakesAReplicaSetThatMakesPods) {
  CreateDeployment(3);
  controllers_.SyncOnce();
  std::vector<ObjectPtr> sets = Objects(Kind::kReplicaSet);
  ASSERT_EQ(sets.size(), 1u);
  json rs = json::parse(sets[0]->json);
  const std::string hash = rs["metadata"]["labels"]["pod-template-hash"];
  EXPECT_EQ(rs["metadata"]["name"], "web-" + hash);
  EXPECT_EQ(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
  EXPECT_EQ(rs["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(rs["spec"]["selector"]["matchLabels"]["pod-template-hash"], hash);
  EXPECT_EQ(rs["status"]["replicas"], 3);
  std::vector<ObjectPtr> pods = Objects(Kind::kPod);
  ASSERT_EQ(pods.size(), 3u);
  for (const ObjectPtr& p : pods) {
    json pod = json::parse(p->json);
    EXPECT_THAT(p->fields.name, HasSubstr("web-" + hash + "-"));
    EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], sets[0]->uid);
    EXPECT_EQ(pod["metadata"]["labels"]["pod-template-hash"], hash);
    EXPECT_EQ(pod["spec"]["schedulerName"], "fitledger");
  }
  json d = Deployment();
  EXPECT_EQ(d["status"]["replicas"], 3);
  EXPECT_EQ(d["status"]["updatedReplicas"], 3);
  EXPECT_EQ(d["status"]["availableReplicas"], 0);
  EXPECT_EQ(d["status"]["observedGeneration"], 1);
  // Events: the deployment scaled the replica set up; the replica set created the pods.
  int created = 0, scaled = 0;
  for (const ObjectPtr& e : Objects(Kind::kEvent)) {
    json event = json::parse(e->json);
    if (event["reason"] == "SuccessfulCreate") ++created;
    if (event["reason"] == "ScalingReplicaSet") ++scaled;
  }
  EXPECT_EQ(created, 3);
  EXPECT_EQ(scaled, 1);
}

TEST_F(ControllersTest, RejectedPodsAreReplacedAndReported) {
  CreateDeployment(3);
  controllers_.SyncOnce();
  // Bind all three to a 1-cpu node: the kubelet admits two (800m) and rejects the third.
  for (const ObjectPtr& p : Objects(Kind::kPod)) {
    ASSERT_TRUE(store_.Bind("default", p->fields.name, "", "worker-1").ok());
    store_.AdmitPod("default", p->fields.name);
  }
  EXPECT_THAT(Phases(), ElementsAre("Failed", "Running", "Running"));
  controllers_.SyncOnce();
  // The rejected pod is not active any more: a replacement (Pending) is made; the Failed one stays.
  EXPECT_THAT(Phases(), ElementsAre("Failed", "Pending", "Running", "Running"));
  bool reported = false;
  for (const ObjectPtr& e : Objects(Kind::kEvent)) {
    json event = json::parse(e->json);
    if (event["reason"] != "OutOfcpu") continue;
    reported = true;
    EXPECT_EQ(event["type"], "Warning");
    EXPECT_EQ(event["source"]["component"], "kubelet");
    EXPECT_EQ(event["source"]["host"], "worker-1");
    EXPECT_EQ(event["involvedObject"]["kind"], "Pod");
    EXPECT_EQ(event["message"],
              "Node didn't have enough resource: cpu, requested: 400, used: 800, capacity: 1000");
  }
  EXPECT_TRUE(reported);
  json d = Deployment();
  EXPECT_EQ(d["status"]["readyReplicas"], 2);
  EXPECT_EQ(d["status"]["unavailableReplicas"], 1);
}

TEST_F(ControllersTest, ScaleDownDeletesUnboundPodsFirst) {
  CreateDeployment(3);
  controllers_.SyncOnce();
  std::vector<ObjectPtr> pods = Objects(Kind::kPod);
  ASSERT_TRUE(store_.Bind("default", pods[0]->fields.name, "", "worker-1").ok());
  store_.AdmitPod("default", pods[0]->fields.name);
  json d = Deployment();
  json scaled = d;
  scaled["spec"]["replicas"] = 1;
  auto prepared = PrepareUpdate(Kind::kDeployment, Subresource::kMain, d, scaled, "web");
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  ASSERT_TRUE(store_
                  .UpdateObject(Kind::kDeployment, "default", "web",
                                std::stoull(d["metadata"]["resourceVersion"].get<std::string>()),
                                *prepared)
                  .ok());
  controllers_.SyncOnce();
  pods = Objects(Kind::kPod);
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0]->fields.phase, "Running");
}

TEST_F(ControllersTest, DeletingTheDeploymentDeletesWhatItMade) {
  CreateDeployment(2);
  controllers_.SyncOnce();
  ASSERT_EQ(Objects(Kind::kPod).size(), 2u);
  ASSERT_TRUE(store_.DeleteObject(Kind::kDeployment, "default", "web", {}).ok());
  controllers_.SyncOnce();
  EXPECT_TRUE(Objects(Kind::kReplicaSet).empty());
  EXPECT_TRUE(Objects(Kind::kPod).empty());  // unbound pods: deleted at once
}

// DELETE ?propagationPolicy=Orphan with a precondition that does not hold fails before anything
// is orphaned (rest.BeforeDelete checks the preconditions before the orphan finalizer is set:
// apiserver pkg/registry/rest/delete.go); one that holds orphans the replica set, then deletes.
TEST_F(ControllersTest, AnOrphaningDeleteWithAFailedPreconditionOrphansNothing) {
  CreateDeployment(1);
  controllers_.SyncOnce();
  ASSERT_EQ(Objects(Kind::kReplicaSet).size(), 1u);
  auto owned = [this] {
    return absl::StrContains(Objects(Kind::kReplicaSet)[0]->json, "ownerReferences");
  };
  ASSERT_TRUE(owned());
  ObjectApi api(&store_);
  ApiRequest request;
  request.method = "DELETE";
  request.path = "/apis/apps/v1/namespaces/default/deployments/web";
  request.body = R"({"propagationPolicy":"Orphan","preconditions":{"uid":"not-it"}})";
  std::optional<ApiResponse> r = api.Handle(request);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 409) << r->body;
  EXPECT_THAT(r->body, HasSubstr("the UID in the precondition (not-it) does not match"));
  request.body = R"({"propagationPolicy":"Orphan","preconditions":{"resourceVersion":"1"}})";
  r = api.Handle(request);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 409) << r->body;
  EXPECT_TRUE(owned());
  EXPECT_TRUE(store_.Get(Kind::kDeployment, "default", "web").ok());

  request.body = absl::StrCat(R"({"propagationPolicy":"Orphan","preconditions":{"uid":")",
                              (*store_.Get(Kind::kDeployment, "default", "web"))->uid, R"("}})");
  r = api.Handle(request);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, 200) << r->body;
  EXPECT_FALSE(owned());
  EXPECT_FALSE(store_.Get(Kind::kDeployment, "default", "web").ok());
}

// The deployment is deleted while its replica set is due a pass anyway (one of its pods just
// changed): the replica set, deleted by the deployment's pass, is reconciled gone before its
// DELETED event is read. Its pods must still go once that event says whose they were (the
// README's clean-up block met this: a churning Deployment's pods stayed after its deletion).
TEST_F(ControllersTest, DeletingTheDeploymentWhileItsPodsChangeDeletesThemToo) {
  CreateDeployment(2);
  controllers_.SyncOnce();
  std::vector<ObjectPtr> pods = Objects(Kind::kPod);
  ASSERT_EQ(pods.size(), 2u);
  ASSERT_TRUE(store_.Bind("default", pods[0]->fields.name, "", "worker-1").ok());
  ASSERT_TRUE(store_.DeleteObject(Kind::kDeployment, "default", "web", {}).ok());
  controllers_.SyncOnce();
  EXPECT_TRUE(Objects(Kind::kReplicaSet).empty());
  EXPECT_TRUE(Objects(Kind::kPod).empty());
}

TEST_F(ControllersTest, TemplateChangeReplacesTheReplicaSet) {
  CreateDeployment(2);
  controllers_.SyncOnce();
  json d = Deployment();
  json changed = d;
  changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2";
  auto prepared = PrepareUpdate(Kind::kDeployment, Subresource::kMain, d, changed, "web");
  ASSERT_TRUE(prepared.ok());
  ASSERT_TRUE(store_
                  .UpdateObject(Kind::kDeployment, "default", "web",
                                std::stoull(d["metadata"]["resourceVersion"].get<std::string>()),
                                *prepared)
                  .ok());
  controllers_.SyncOnce();
  std::vector<ObjectPtr> sets = Objects(Kind::kReplicaSet);
  ASSERT_EQ(sets.size(), 2u);
  int64_t total = 0;
  for (const ObjectPtr& rs : sets)
    total += json::parse(rs->json)["spec"]["replicas"].get<int64_t>();
  EXPECT_EQ(total, 2);  // the old one scaled to 0, the new one to 2
  std::vector<ObjectPtr> pods = Objects(Kind::kPod);
  ASSERT_EQ(pods.size(), 2u);
  for (const ObjectPtr& p : pods) {
    EXPECT_EQ(json::parse(p->json)["spec"]["containers"][0]["image"], "nginx:2");
  }
  EXPECT_EQ(Deployment()["metadata"]["generation"], 2);
  EXPECT_EQ(Deployment()["status"]["observedGeneration"], 2);
}

}  // namespace
}  // namespace fitledger::sim
