#include "sim/store.h"

#include <atomic>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sim/tables.h"
#include "tests/common/status_matchers.h"

namespace fitledger::sim {
namespace {

using ::fitledger::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

std::string PodJson(const std::string& name, const std::string& cpu = "100m",
                    const std::string& node = "") {
  json pod = {{"metadata", {{"name", name}, {"labels", {{"app", "web"}}}}},
              {"spec",
               {{"containers",
                 json::array({{{"name", "c"}, {"resources", {{"requests", {{"cpu", cpu}}}}}}})}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod.dump();
}

class StoreTest : public ::testing::Test {
 protected:
  StoreTest() : store_({.event_window = 100, .clock = [this] { return now_; }}) {
    NodeSpec node;
    node.name = "worker-1";
    node.allocatable = {{"cpu", "4"}, {"memory", "8Gi"}, {"pods", "110"}};
    node.capacity = node.allocatable;
    EXPECT_TRUE(store_.AddNode(node).ok());
  }

  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
  ClusterStore store_;
};

TEST_F(StoreTest, CreateAssignsServerFields) {
  auto pod = store_.CreatePod(PodJson("p1"), "default");
  ASSERT_TRUE(pod.ok()) << pod.status();
  json j = json::parse((*pod)->json);
  EXPECT_EQ(j["metadata"]["namespace"], "default");
  EXPECT_EQ(j["metadata"]["uid"].get<std::string>().size(), 36u);
  EXPECT_EQ(j["metadata"]["resourceVersion"], absl::StrCat((*pod)->resource_version));
  EXPECT_EQ(j["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(j["status"]["phase"], "Pending");
  EXPECT_EQ(j["spec"]["schedulerName"], "default-scheduler");
  ASSERT_NE((*pod)->kubelet_pod, nullptr);
  ASSERT_EQ((*pod)->kubelet_pod->containers.size(), 1u);
  EXPECT_EQ((*pod)->kubelet_pod->containers[0].requests.at("cpu").MilliValue(), 100);
}

// SetDefaults_Pod: a container's limit without a request defaults the request, which the
// kubelet admits by.
TEST_F(StoreTest, ALimitWithoutARequestDefaultsTheRequest) {
  json pod = {{"metadata", {{"name", "limited"}}},
              {"spec",
               {{"containers",
                 json::array({{{"name", "c"}, {"resources", {{"limits", {{"cpu", "500m"}}}}}}})}}}};
  auto created = store_.CreatePod(pod.dump(), "default");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(json::parse((*created)->json)["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "500m");
  ASSERT_NE((*created)->kubelet_pod, nullptr);
  EXPECT_EQ((*created)->kubelet_pod->containers[0].requests.at("cpu").MilliValue(), 500);
}

TEST_F(StoreTest, CreateErrors) {
  ASSERT_TRUE(store_.CreatePod(PodJson("p1"), "default").ok());
  EXPECT_THAT(store_.CreatePod(PodJson("p1"), "default"),
              StatusIs(absl::StatusCode::kAlreadyExists, "pods \"p1\" already exists"));
  EXPECT_THAT(
      store_.CreatePod(PodJson(""), "default"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("metadata.name: Required value")));
  EXPECT_THAT(store_.CreatePod(PodJson("bad", "4x"), "default"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Pod \"bad\" is invalid")));
  EXPECT_THAT(store_.CreatePod("{not json", "default"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown format")));
  EXPECT_THAT(store_.CreatePod(R"({"metadata":{"name":3},"spec":{}})", "default"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metadata.name")));
  EXPECT_THAT(store_.CreatePod(R"({"metadata":{"name":"x","namespace":"other"}})", "default"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not match")));
}

TEST_F(StoreTest, GenerateNameMakesAName) {
  auto pod = store_.CreatePod(
      R"({"metadata":{"generateName":"web-"},"spec":{"containers":[{"name":"c"}]}})", "default");
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_THAT((*pod)->fields.name, ::testing::StartsWith("web-"));
  EXPECT_EQ((*pod)->fields.name.size(), 9u);
}

TEST_F(StoreTest, BindThenKubeletAdmitsUntilFull) {
  ASSERT_TRUE(store_.CreatePod(PodJson("a", "3800m"), "default").ok());
  ASSERT_TRUE(store_.CreatePod(PodJson("b", "400m"), "default").ok());
  ASSERT_TRUE(store_.Bind("default", "a", "", "worker-1").ok());
  ASSERT_TRUE(store_.Bind("default", "b", "", "worker-1").ok());
  auto first = store_.AdmitPod("default", "a");
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->admitted);
  auto second = store_.AdmitPod("default", "b");
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(second->admitted);
  json b = json::parse((*store_.Get(Kind::kPod, "default", "b"))->json);
  EXPECT_EQ(b["status"]["phase"], "Failed");
  EXPECT_EQ(b["status"]["reason"], "OutOfcpu");
  EXPECT_EQ(b["status"]["message"],
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 400, used: 3800, "
            "capacity: 4000");
  json a = json::parse((*store_.Get(Kind::kPod, "default", "a"))->json);
  EXPECT_EQ(a["status"]["phase"], "Running");
  EXPECT_EQ(a["status"]["hostIP"], "10.0.0.1");
  EXPECT_FALSE(store_.AdmitPod("default", "a").has_value());  // already admitted

  // Deleting the running pod frees its capacity.
  ASSERT_TRUE(store_.DeletePod("default", "a", "").ok());
  ASSERT_TRUE(store_.CreatePod(PodJson("c", "4"), "default").ok());
  ASSERT_TRUE(store_.Bind("default", "c", "", "worker-1").ok());
  EXPECT_TRUE(store_.AdmitPod("default", "c")->admitted);
  EXPECT_EQ(store_.Stats().rejections_by_reason.at("OutOfcpu"), 1);
}

TEST_F(StoreTest, SucceededPodsReleaseKubeletCapacity) {
  ASSERT_TRUE(store_.CreatePod(PodJson("a", "4"), "default").ok());
  ASSERT_TRUE(store_.Bind("default", "a", "", "worker-1").ok());
  ASSERT_TRUE(store_.AdmitPod("default", "a")->admitted);
  ASSERT_TRUE(store_.SetPodPhase("default", "a", "Succeeded").ok());
  ASSERT_TRUE(store_.CreatePod(PodJson("b", "4"), "default").ok());
  ASSERT_TRUE(store_.Bind("default", "b", "", "worker-1").ok());
  EXPECT_TRUE(store_.AdmitPod("default", "b")->admitted);
  EXPECT_THAT(store_.SetPodPhase("default", "b", "Done"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown pod phase")));
}

TEST_F(StoreTest, BindConflicts) {
  auto pod = store_.CreatePod(PodJson("p"), "default");
  ASSERT_TRUE(pod.ok());
  EXPECT_THAT(store_.Bind("default", "p", "wrong-uid", "worker-1"),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr(absl::StrCat("Precondition failed: UID in precondition: "
                                              "wrong-uid, UID in object meta: ",
                                              (*pod)->uid))));
  ASSERT_TRUE(store_.Bind("default", "p", (*pod)->uid, "nowhere").ok());
  EXPECT_THAT(store_.Bind("default", "p", "", "worker-1"),
              StatusIs(absl::StatusCode::kAborted,
                       "Operation cannot be fulfilled on pods/binding \"p\": pod p is already "
                       "assigned to node \"nowhere\""));
  EXPECT_FALSE(store_.AdmitPod("default", "p").has_value());  // unknown node: stays Pending
  EXPECT_THAT(store_.Bind("default", "missing", "", "worker-1"),
              StatusIs(absl::StatusCode::kNotFound, "pods \"missing\" not found"));
}

// pkg/registry/core/pod/storage/storage.go setPodHostAndAnnotations: preconditions, a pod being
// deleted, scheduling gates; the binding's annotations are merged into the pod's.
TEST_F(StoreTest, BindChecksAndAnnotationsAsTheApiServer) {
  auto pod = store_.CreatePod(PodJson("p"), "default");
  ASSERT_TRUE(pod.ok());
  ClusterStore::BindRequest stale;
  stale.resource_version = "1";
  stale.node = "worker-1";
  EXPECT_THAT(store_.Bind("default", "p", stale),
              StatusIs(absl::StatusCode::kAborted,
                       absl::StrCat("Operation cannot be fulfilled on pods \"p\": StorageError: "
                                    "invalid object, Code: 4, Key: /registry/pods/default/p, "
                                    "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
                                    "ResourceVersion in precondition: 1, ResourceVersion in object "
                                    "meta: ",
                                    (*pod)->resource_version)));
  ClusterStore::BindRequest ok;
  ok.resource_version = absl::StrCat((*pod)->resource_version);
  ok.node = "worker-1";
  ok.annotations = {{"example.com/decided-by", "fitledger"}};
  auto bound = store_.Bind("default", "p", ok);
  ASSERT_TRUE(bound.ok()) << bound.status();
  json p = json::parse((*bound)->json);
  EXPECT_EQ(p["metadata"]["annotations"]["example.com/decided-by"], "fitledger");
  EXPECT_EQ(p["spec"]["nodeName"], "worker-1");
  EXPECT_EQ(p["status"]["conditions"][0]["type"], "PodScheduled");

  json gated = json::parse(PodJson("gated"));
  gated["spec"]["schedulingGates"] = json::array({{{"name", "example.com/wait"}}});
  ASSERT_TRUE(store_.CreatePod(gated.dump(), "default").ok());
  EXPECT_THAT(store_.Bind("default", "gated", "", "worker-1"),
              StatusIs(absl::StatusCode::kAborted,
                       "Operation cannot be fulfilled on pods/binding \"gated\": pod gated has "
                       "non-empty .spec.schedulingGates"));

  // A pod being deleted (a graceful deletion pending) is checked before its node.
  ASSERT_TRUE(store_.CreatePod(PodJson("bound", "100m", "elsewhere"), "default").ok());
  auto pending = store_.DeletePod("default", "bound", ClusterStore::DeleteRequest());
  ASSERT_TRUE(pending.ok());
  ASSERT_FALSE(pending->deleted);
  EXPECT_THAT(store_.Bind("default", "bound", "", "worker-1"),
              StatusIs(absl::StatusCode::kAborted,
                       "Operation cannot be fulfilled on pods/binding \"bound\": pod bound is "
                       "being deleted, cannot be assigned to a host"));
}

// Deletion as the API server does it for pods (generic registry store.go Delete, rest/delete.go
// BeforeDelete, pod strategy CheckGracefulDelete).
TEST_F(StoreTest, PodDeletionIsGracefulForBoundPodsAndImmediateOtherwise) {
  ASSERT_TRUE(store_.CreatePod(PodJson("unbound"), "default").ok());
  ClusterStore::DeleteRequest defaults;
  auto gone = store_.DeletePod("default", "unbound", defaults);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->deleted);  // not scheduled: no grace period
  EXPECT_THAT(store_.Get(Kind::kPod, "default", "unbound"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));

  ASSERT_TRUE(store_.CreatePod(PodJson("web", "1"), "default").ok());
  ASSERT_TRUE(store_.Bind("default", "web", "", "worker-1").ok());
  ASSERT_TRUE(store_.AdmitPod("default", "web")->admitted);
  const uint64_t before = store_.resource_version();
  auto pending = store_.DeletePod("default", "web", defaults);
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->deleted);
  json web = json::parse(pending->object->json);
  // terminationGracePeriodSeconds defaulted to 30 on create (defaults.go SetDefaults_PodSpec).
  EXPECT_EQ(web["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_EQ(web["metadata"]["deletionTimestamp"], FormatTimestamp(now_ + absl::Seconds(30)));
  EXPECT_TRUE(pending->object->fields.deleting);
  ObjectFilter all;
  WatchBatch batch = store_.Poll(all, before, now_, absl::ZeroDuration(), 10);
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].type, EventType::kModified);
  // A longer grace period does not extend it; a shorter one shortens it.
  ClusterStore::DeleteRequest longer;
  longer.grace_period_seconds = 60;
  EXPECT_EQ(store_.DeletePod("default", "web", longer)->object, pending->object);
  ClusterStore::DeleteRequest shorter;
  shorter.grace_period_seconds = 10;
  auto shortened = store_.DeletePod("default", "web", shorter);
  ASSERT_TRUE(shortened.ok());
  EXPECT_EQ(json::parse(shortened->object->json)["metadata"]["deletionTimestamp"],
            FormatTimestamp(now_ + absl::Seconds(10)));
  // The kubelet ends it: containers stopped (Succeeded), then deleted with grace 0.
  store_.TerminatePod("default", "web", /*kubelet_enabled=*/true);
  EXPECT_THAT(store_.Get(Kind::kPod, "default", "web"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));
  batch = store_.Poll(all, shortened->object->resource_version, now_, absl::ZeroDuration(), 10);
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.events[0].type, EventType::kModified);
  EXPECT_EQ(batch.events[0].object->fields.phase, "Succeeded");
  EXPECT_EQ(batch.events[1].type, EventType::kDeleted);
  // Its capacity is free again.
  ASSERT_TRUE(store_.CreatePod(PodJson("next", "4"), "default").ok());
  ASSERT_TRUE(store_.Bind("default", "next", "", "worker-1").ok());
  EXPECT_TRUE(store_.AdmitPod("default", "next")->admitted);

  // A terminal pod and an explicit gracePeriodSeconds=0 are deleted at once.
  ASSERT_TRUE(store_.SetPodPhase("default", "next", "Succeeded").ok());
  EXPECT_TRUE(store_.DeletePod("default", "next", defaults)->deleted);
  // A pod on a node the sim does not have: the pod garbage collector's orphan.
  ASSERT_TRUE(store_.CreatePod(PodJson("orphan", "100m", "gone-node"), "default").ok());
  ASSERT_FALSE(store_.DeletePod("default", "orphan", defaults)->deleted);
  store_.TerminatePod("default", "orphan", /*kubelet_enabled=*/false);
  EXPECT_THAT(store_.Get(Kind::kPod, "default", "orphan"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));
}

// Create-time defaults and status.qosClass (pkg/apis/core/helper/qos ComputePodQOS).
TEST_F(StoreTest, CreateDefaultsAndQosClass) {
  auto best = store_.CreatePod(json({{"metadata", {{"name", "best"}}},
                                     {"spec", {{"containers", json::array({{{"name", "c"}}})}}}})
                                   .dump(),
                               "default");
  ASSERT_TRUE(best.ok());
  json b = json::parse((*best)->json);
  EXPECT_EQ(b["status"]["qosClass"], "BestEffort");
  EXPECT_EQ(b["spec"]["restartPolicy"], "Always");
  EXPECT_EQ(b["spec"]["serviceAccountName"], "default");
  EXPECT_EQ(b["spec"]["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ((*best)->fields.restart_policy, "Always");
  auto burstable = store_.CreatePod(PodJson("burstable"), "default");
  EXPECT_EQ(json::parse((*burstable)->json)["status"]["qosClass"], "Burstable");
  json g = {{"metadata", {{"name", "guaranteed"}}},
            {"spec",
             {{"containers", json::array({{{"name", "c"},
                                           {"resources",
                                            {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}},
                                             {"requests", {{"cpu", "1000m"}}}}}}})}}}};
  auto guaranteed = store_.CreatePod(g.dump(), "default");
  ASSERT_TRUE(guaranteed.ok()) << guaranteed.status();
  EXPECT_EQ(json::parse((*guaranteed)->json)["status"]["qosClass"], "Guaranteed");
}

TEST_F(StoreTest, PagedListIsASnapshot) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(store_.CreatePod(PodJson(absl::StrCat("p", 100 + i)), "default").ok());
  }
  ObjectFilter filter;
  auto page1 = store_.List(filter, 10, "");
  ASSERT_TRUE(page1.ok());
  EXPECT_EQ(page1->items.size(), 10u);
  EXPECT_EQ(page1->remaining_items, 15);
  ASSERT_TRUE(store_.CreatePod(PodJson("p000"), "default").ok());
  ASSERT_TRUE(store_.DeletePod("default", "p124", "").ok());
  auto page2 = store_.List(filter, 10, page1->continue_token);
  ASSERT_TRUE(page2.ok());
  auto page3 = store_.List(filter, 10, page2->continue_token);
  ASSERT_TRUE(page3.ok());
  EXPECT_EQ(page3->items.size(), 5u);
  EXPECT_TRUE(page3->continue_token.empty());
  EXPECT_EQ(page2->resource_version, page1->resource_version);
  EXPECT_EQ(page3->items.back()->fields.name, "p124");
  EXPECT_EQ(page1->items.front()->fields.name, "p100");
  EXPECT_THAT(store_.List(filter, 10, "bm90LWEtdG9rZW4"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid continue token")));
}

// Continue tokens are the API server's (apiserver pkg/storage/continue.go): the resourceVersion
// and the next key. They stay valid while that resourceVersion is in the history; after that the
// list continues inconsistently at the latest state (etcd3/store.go
// handleCompactedErrorForPaging).
TEST_F(StoreTest, ContinueTokensReadTheirVersionUntilItIsForgotten) {
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(store_.CreatePod(PodJson(absl::StrCat("p", i)), "default").ok());
  }
  ObjectFilter filter;
  auto page1 = store_.List(filter, 2, "");
  ASSERT_TRUE(page1.ok());
  std::string decoded;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(page1->continue_token, &decoded));
  const json token = json::parse(decoded);
  EXPECT_EQ(token["v"], "meta.k8s.io/v1");
  EXPECT_EQ(token["rv"], page1->resource_version);
  EXPECT_EQ(token["start"], std::string("default/p1") + '\0');
  // Deleting p2 and changing p3 after page 1 does not change page 2: it reads page 1's version,
  // rebuilt from the history.
  ASSERT_TRUE(store_.DeletePod("default", "p2", "").ok());
  ASSERT_TRUE(store_.SetPodPhase("default", "p3", "Succeeded").ok());
  auto page2 = store_.List(filter, 2, page1->continue_token);
  ASSERT_TRUE(page2.ok());
  ASSERT_EQ(page2->items.size(), 2u);
  EXPECT_EQ(page2->items[0]->fields.name, "p2");
  EXPECT_EQ(page2->items[1]->fields.phase, "Pending");
  EXPECT_EQ(page2->resource_version, page1->resource_version);
  EXPECT_EQ(page2->remaining_items, 2);
  // A selector hides remainingItemCount, as etcd3 does.
  ObjectFilter selected;
  selected.labels = *LabelSelector::Parse("app=web");
  EXPECT_FALSE(store_.List(selected, 2, "")->remaining_items.has_value());
  // Exact reads of an old version, and of a forgotten one.
  ListRequest exact;
  exact.exact = page1->resource_version;
  EXPECT_EQ(store_.List(exact)->items.size(), 6u);
  store_.ExpireHistory();
  EXPECT_THAT(store_.List(exact),
              StatusIs(absl::StatusCode::kOutOfRange,
                       "The resourceVersion for the provided list is too old."));
  auto expired = store_.List(filter, 2, page2->continue_token);
  ASSERT_TRUE(expired.ok());
  EXPECT_TRUE(expired->continue_expired);
  // The token it offers continues after p3 at the latest version: p4, p5.
  auto rest = store_.List(filter, 10, expired->continue_token);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->items.size(), 2u);
  EXPECT_EQ(rest->items[0]->fields.name, "p4");
  EXPECT_EQ(rest->resource_version, store_.resource_version());
}

TEST_F(StoreTest, ListFiltersByNamespaceAndSelectors) {
  ASSERT_TRUE(store_.CreatePod(PodJson("a"), "default").ok());
  ASSERT_TRUE(store_.CreatePod(PodJson("b"), "other").ok());
  ASSERT_TRUE(store_.Bind("other", "b", "", "worker-1").ok());
  ObjectFilter filter;
  filter.namespace_name = "other";
  EXPECT_EQ(store_.List(filter, 0, "")->items.size(), 1u);
  filter.namespace_name = "";
  filter.fields = *FieldSelector::Parse("spec.nodeName=", Kind::kPod);
  auto unbound = store_.List(filter, 0, "");
  ASSERT_EQ(unbound->items.size(), 1u);
  EXPECT_EQ(unbound->items[0]->fields.name, "a");
  ObjectFilter nodes;
  nodes.kind = Kind::kNode;
  EXPECT_EQ(store_.List(nodes, 0, "")->items.size(), 1u);
}

TEST_F(StoreTest, PollHonoursTheLag) {
  const uint64_t start = store_.resource_version();
  ASSERT_TRUE(store_.CreatePod(PodJson("a"), "default").ok());
  ObjectFilter filter;
  WatchBatch early =
      store_.Poll(filter, start, now_ + absl::Milliseconds(999), absl::Seconds(1), 10);
  EXPECT_TRUE(early.events.empty());
  EXPECT_EQ(early.cursor, start);
  ASSERT_TRUE(early.next_visible.has_value());
  EXPECT_EQ(*early.next_visible, now_ + absl::Seconds(1));
  WatchBatch late = store_.Poll(filter, start, now_ + absl::Seconds(1), absl::Seconds(1), 10);
  ASSERT_EQ(late.events.size(), 1u);
  EXPECT_EQ(late.events[0].type, EventType::kAdded);
  EXPECT_EQ(late.cursor, store_.resource_version());
}

TEST_F(StoreTest, SelectorWatchSeesPodsLeaveAsDeleted) {
  ASSERT_TRUE(store_.CreatePod(PodJson("a"), "default").ok());
  const uint64_t start = store_.resource_version();
  ASSERT_TRUE(store_.SetPodPhase("default", "a", "Succeeded").ok());
  ObjectFilter filter;
  filter.fields = *FieldSelector::Parse("status.phase!=Succeeded,status.phase!=Failed", Kind::kPod);
  WatchBatch batch = store_.Poll(filter, start, now_, absl::ZeroDuration(), 10);
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].type, EventType::kDeleted);
}

// The watch cache's convertToWatchEvent (apiserver pkg/storage/cacher/cache_watcher.go): leaving a
// selector is DELETED with the previous content at the new resourceVersion; entering it is ADDED
// with the new content.
TEST_F(StoreTest, PodThatStopsMatchingArrivesAsDeletedWithItsPreviousContentAtTheNewVersion) {
  ASSERT_TRUE(store_.CreatePod(PodJson("big", "3800m"), "default").ok());
  ASSERT_TRUE(store_.CreatePod(PodJson("small", "400m"), "default").ok());
  ASSERT_TRUE(store_.Bind("default", "big", "", "worker-1").ok());
  ASSERT_TRUE(store_.AdmitPod("default", "big").has_value());
  const uint64_t start = store_.resource_version();
  ASSERT_TRUE(store_.Bind("default", "small", "", "worker-1").ok());
  const uint64_t bound = store_.resource_version();
  std::optional<Admission> verdict = store_.AdmitPod("default", "small");
  ASSERT_TRUE(verdict.has_value());
  ASSERT_FALSE(verdict->admitted);
  const uint64_t rejected = store_.resource_version();

  ObjectFilter running;
  running.fields =
      *FieldSelector::Parse("status.phase!=Succeeded,status.phase!=Failed", Kind::kPod);
  WatchBatch batch = store_.Poll(running, start, now_, absl::ZeroDuration(), 10);
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.events[0].type, EventType::kModified);
  EXPECT_EQ(batch.events[0].object->resource_version, bound);
  EXPECT_EQ(batch.events[1].type, EventType::kDeleted);
  const json gone = json::parse(batch.events[1].object->json);
  EXPECT_EQ(batch.events[1].object->resource_version, rejected);
  EXPECT_EQ(gone["metadata"]["resourceVersion"], absl::StrCat(rejected));
  EXPECT_EQ(gone["status"]["phase"], "Pending");
  EXPECT_FALSE(gone["status"].contains("reason"));
  EXPECT_EQ(gone["spec"]["nodeName"], "worker-1");
  EXPECT_EQ(batch.events[1].object->fields.phase, "Pending");
  // The stored pod itself is untouched: Failed at `rejected`.
  EXPECT_EQ((*store_.Get(Kind::kPod, "default", "small"))->fields.phase, "Failed");

  ObjectFilter failed;
  failed.fields = *FieldSelector::Parse("status.phase=Failed", Kind::kPod);
  batch = store_.Poll(failed, start, now_, absl::ZeroDuration(), 10);
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].type, EventType::kAdded);
  const json added = json::parse(batch.events[0].object->json);
  EXPECT_EQ(added["status"]["phase"], "Failed");
  EXPECT_EQ(added["status"]["reason"], "OutOfcpu");
  EXPECT_EQ(added["metadata"]["resourceVersion"], absl::StrCat(rejected));

  ObjectFilter on_node;
  on_node.fields = *FieldSelector::Parse("spec.nodeName=worker-1", Kind::kPod);
  batch = store_.Poll(on_node, start, now_, absl::ZeroDuration(), 10);
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.events[0].type, EventType::kAdded);
  EXPECT_EQ(batch.events[1].type, EventType::kModified);

  // A deletion is DELETED for the watches the pod matched before it, with the last content.
  ASSERT_TRUE(store_.DeletePod("default", "small", "").ok());
  const uint64_t deleted = store_.resource_version();
  batch = store_.Poll(running, rejected, now_, absl::ZeroDuration(), 10);
  EXPECT_TRUE(batch.events.empty());
  batch = store_.Poll(failed, rejected, now_, absl::ZeroDuration(), 10);
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].type, EventType::kDeleted);
  EXPECT_EQ(json::parse(batch.events[0].object->json)["status"]["phase"], "Failed");
  EXPECT_EQ(batch.events[0].object->resource_version, deleted);
}

TEST_F(StoreTest, WatchStartRejectsForgottenVersions) {
  ASSERT_TRUE(store_.CreatePod(PodJson("a"), "default").ok());
  const uint64_t old = store_.resource_version();
  ASSERT_TRUE(store_.CreatePod(PodJson("b"), "default").ok());
  EXPECT_TRUE(store_.WatchStart(absl::StrCat(old)).ok());
  store_.ExpireHistory();
  EXPECT_THAT(
      store_.WatchStart(absl::StrCat(old)),
      StatusIs(absl::StatusCode::kOutOfRange, absl::StrCat("too old resource version: ", old, " (",
                                                           store_.resource_version(), ")")));
  EXPECT_EQ(*store_.WatchStart("0"), store_.resource_version());
  EXPECT_THAT(store_.WatchStart("abc"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("abc")));
}

TEST_F(StoreTest, HistoryWindowExpiresOldVersions) {
  const uint64_t start = store_.resource_version();
  for (int i = 0; i < 120; ++i) {
    ASSERT_TRUE(store_.CreatePod(PodJson(absl::StrCat("p", i)), "default").ok());
  }
  EXPECT_THAT(store_.WatchStart(absl::StrCat(start)),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("too old")));
  ObjectFilter filter;
  EXPECT_TRUE(store_.Poll(filter, start, now_, absl::ZeroDuration(), 10).expired);
}

TEST(StoreGenerateTest, GeneratesBoundRunningPodsWithRealisticJson) {
  ClusterStore store({});
  GenerateSpec spec;
  spec.nodes = 3;
  spec.pods_per_node = 4;
  ASSERT_TRUE(store.Generate(spec).ok());
  StoreStats stats = store.Stats();
  EXPECT_EQ(stats.nodes, 3);
  EXPECT_EQ(stats.pods_by_phase.at("Running"), 12);
  auto pod = store.Get(Kind::kPod, "bench", "bench-2-3");
  ASSERT_TRUE(pod.ok());
  json j = json::parse((*pod)->json);
  EXPECT_EQ(j["spec"]["nodeName"], "node-2");
  EXPECT_EQ(j["metadata"]["resourceVersion"], absl::StrCat((*pod)->resource_version));
  EXPECT_GT((*pod)->json.size(), 1000u);
  EXPECT_LT((*pod)->json.size(), 2100u);
  EXPECT_TRUE(store.WatchStart(absl::StrCat(store.resource_version())).ok());
}

TEST(TablesTest, HumanDuration) {
  EXPECT_EQ(HumanDuration(absl::Seconds(45)), "45s");
  EXPECT_EQ(HumanDuration(absl::Seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(absl::Seconds(192)), "3m12s");
  EXPECT_EQ(HumanDuration(absl::Minutes(15)), "15m");
  EXPECT_EQ(HumanDuration(absl::Hours(5)), "5h");
  EXPECT_EQ(HumanDuration(absl::Hours(5) + absl::Minutes(3)), "5h3m");
  EXPECT_EQ(HumanDuration(absl::Hours(30)), "30h");
  EXPECT_EQ(HumanDuration(absl::Hours(51)), "2d3h");
  EXPECT_EQ(HumanDuration(absl::Hours(24 * 30)), "30d");
}

TEST_F(StoreTest, OtherKindsCreateUpdateDelete) {
  json d = {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata", {{"generateName", "web-"}, {"labels", {{"app", "web"}}}}},
            {"spec", {{"replicas", 1}}}};
  auto created = store_.CreateObject(Kind::kDeployment, "default", d);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string name = (*created)->fields.name;
  EXPECT_THAT(name, ::testing::StartsWith("web-"));
  EXPECT_EQ((*created)->fields.namespace_name, "default");
  json stored = json::parse((*created)->json);
  EXPECT_EQ(stored["metadata"]["uid"], (*created)->uid);

  json updated = stored;
  updated["spec"]["replicas"] = 3;
  updated["metadata"]["uid"] = "forged";  // an update never changes the UID
  auto replaced = store_.UpdateObject(Kind::kDeployment, "default", name,
                                      (*created)->resource_version, updated);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(json::parse((*replaced)->json)["spec"]["replicas"], 3);
  EXPECT_EQ(json::parse((*replaced)->json)["metadata"]["uid"], (*created)->uid);
  // A writer holding the old resourceVersion loses (409 Conflict).
  EXPECT_THAT(store_.UpdateObject(Kind::kDeployment, "default", name, (*created)->resource_version,
                                  updated),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("the object has been modified")));

  ObjectFilter filter;
  filter.kind = Kind::kDeployment;
  WatchBatch batch =
      store_.Poll(filter, (*created)->resource_version - 1, now_, absl::ZeroDuration(), 100);
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.events[0].type, EventType::kAdded);
  EXPECT_EQ(batch.events[1].type, EventType::kModified);

  DeletePreconditions other_uid;
  other_uid.uid = "other-uid";
  EXPECT_THAT(store_.DeleteObject(Kind::kDeployment, "default", name, other_uid),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("Deployment.apps \"" + name +
                                 "\": the UID in the precondition (other-uid) does not match")));
  DeletePreconditions old_version;
  old_version.resource_version = "1";
  EXPECT_THAT(store_.DeleteObject(Kind::kDeployment, "default", name, old_version),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("the ResourceVersion in the precondition (1) does not match")));
  // A precondition given as "" is compared too, as the API server's pointers are.
  DeletePreconditions empty_uid;
  empty_uid.uid = "";
  EXPECT_THAT(store_.DeleteObject(Kind::kDeployment, "default", name, empty_uid),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("the UID in the precondition () does not match")));
  ASSERT_TRUE(store_.DeleteObject(Kind::kDeployment, "default", name, {}).ok());
  EXPECT_THAT(store_.Get(Kind::kDeployment, "default", name),
              StatusIs(absl::StatusCode::kNotFound,
                       absl::StrCat("deployments.apps \"", name, "\" not found")));
}

// Leases live in the one store: one resourceVersion, one history, the same watch rules; an
// update that changes nothing is not written (etcd3/store.go GuaranteedUpdate), for any kind.
TEST_F(StoreTest, LeasesShareTheHistoryAndAnUnchangedUpdateIsNotWritten) {
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "sched"}}},
                {"spec", {{"holderIdentity", "a_1"}, {"leaseDurationSeconds", 15}}}};
  const uint64_t before = store_.resource_version();
  auto created = store_.CreateObject(Kind::kLease, "kube-system", lease);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)->resource_version, before + 1);
  json stored = json::parse((*created)->json);
  auto same = store_.UpdateObject(Kind::kLease, "kube-system", "sched",
                                  (*created)->resource_version, stored);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ((*same)->resource_version, (*created)->resource_version);
  EXPECT_EQ(store_.resource_version(), before + 1);
  stored["spec"]["holderIdentity"] = "b_2";
  auto moved = store_.UpdateObject(Kind::kLease, "kube-system", "sched",
                                   (*created)->resource_version, stored);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ((*moved)->resource_version, before + 2);

  ObjectFilter leases;
  leases.kind = Kind::kLease;
  absl::StatusOr<FieldSelector> by_name = FieldSelector::Parse("metadata.name=sched", Kind::kLease);
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  leases.fields = *by_name;
  WatchBatch batch = store_.Poll(leases, before, now_, absl::ZeroDuration(), 100);
  ASSERT_EQ(batch.events.size(), 2u);  // ADDED, MODIFIED: the unchanged update left none
  EXPECT_EQ(batch.events[0].type, EventType::kAdded);
  EXPECT_EQ(batch.events[1].type, EventType::kModified);
  ObjectFilter pods;
  pods.kind = Kind::kPod;
  EXPECT_TRUE(store_.Poll(pods, before, now_, absl::ZeroDuration(), 100).events.empty());
  ASSERT_TRUE(store_.DeleteObject(Kind::kLease, "kube-system", "sched", {}).ok());
  EXPECT_EQ(store_.Poll(leases, before, now_, absl::ZeroDuration(), 100).events.back().type,
            EventType::kDeleted);
}

TEST_F(StoreTest, EventsSelectableByInvolvedObject) {
  json event = {{"apiVersion", "v1"},
                {"kind", "Event"},
                {"metadata", {{"name", "web.1"}}},
                {"involvedObject", {{"kind", "Pod"}, {"name", "web"}, {"namespace", "default"}}},
                {"reason", "FailedScheduling"},
                {"type", "Warning"}};
  ASSERT_TRUE(store_.CreateObject(Kind::kEvent, "default", event).ok());
  auto matching = FieldSelector::Parse(
      "involvedObject.name=web,involvedObject.namespace=default,involvedObject.kind=Pod",
      Kind::kEvent);
  ASSERT_TRUE(matching.ok()) << matching.status();
  ObjectFilter filter;
  filter.kind = Kind::kEvent;
  filter.fields = *matching;
  EXPECT_EQ(store_.List(filter, 0, "")->items.size(), 1u);
  filter.fields = *FieldSelector::Parse("involvedObject.name=other", Kind::kEvent);
  EXPECT_TRUE(store_.List(filter, 0, "")->items.empty());
  EXPECT_THAT(
      FieldSelector::Parse("spec.nodeName=x", Kind::kEvent),
      StatusIs(absl::StatusCode::kInvalidArgument, "field label not supported: spec.nodeName"));
}

// Events expire as kube-apiserver's --event-ttl (1h by default) makes them: each one hour after
// it was created, with a DELETED event; an Event a client already deleted is skipped.
TEST_F(StoreTest, EventsExpireAnHourAfterTheyWereCreated) {
  auto event = [](const std::string& name) {
    return json{{"apiVersion", "v1"},
                {"kind", "Event"},
                {"metadata", {{"name", name}}},
                {"involvedObject", {{"kind", "Pod"}, {"name", "web"}, {"namespace", "default"}}},
                {"reason", "Scheduled"},
                {"type", "Normal"}};
  };
  ASSERT_TRUE(store_.CreateObject(Kind::kEvent, "default", event("a")).ok());
  now_ += absl::Minutes(10);
  ASSERT_TRUE(store_.CreateObject(Kind::kEvent, "default", event("b")).ok());
  ASSERT_TRUE(store_.CreateObject(Kind::kEvent, "default", event("c")).ok());
  ASSERT_TRUE(store_.DeleteObject(Kind::kEvent, "default", "c", {}).ok());
  const uint64_t before = store_.resource_version();
  now_ += absl::Minutes(49);
  EXPECT_EQ(store_.ExpireEvents(), 0);  // "a" is 59 minutes old
  now_ += absl::Minutes(1);
  EXPECT_EQ(store_.ExpireEvents(), 1);
  EXPECT_THAT(store_.Get(Kind::kEvent, "default", "a"),
              StatusIs(absl::StatusCode::kNotFound, "events \"a\" not found"));
  EXPECT_TRUE(store_.Get(Kind::kEvent, "default", "b").ok());
  EXPECT_EQ(store_.resource_version(), before + 1);  // one DELETED event
  now_ += absl::Minutes(10);
  EXPECT_EQ(store_.ExpireEvents(), 1);  // "b"; "c" was deleted already
  ObjectFilter filter;
  filter.kind = Kind::kEvent;
  EXPECT_TRUE(store_.List(filter, 0, "")->items.empty());
}

TEST_F(StoreTest, UpdatingAPodToATerminalPhaseFreesTheKubelet) {
  auto pod = store_.CreatePod(PodJson("big", "3"), "default");
  ASSERT_TRUE(pod.ok());
  ASSERT_TRUE(store_.Bind("default", "big", "", "worker-1").ok());
  ASSERT_TRUE(store_.AdmitPod("default", "big")->admitted);
  auto current = store_.Get(Kind::kPod, "default", "big");
  json done = json::parse((*current)->json);
  done["status"]["phase"] = "Succeeded";
  ASSERT_TRUE(
      store_.UpdateObject(Kind::kPod, "default", "big", (*current)->resource_version, done).ok());
  // 3 cpu are free again on the 4-cpu node.
  ASSERT_TRUE(store_.CreatePod(PodJson("next", "3"), "default").ok());
  ASSERT_TRUE(store_.Bind("default", "next", "", "worker-1").ok());
  EXPECT_TRUE(store_.AdmitPod("default", "next")->admitted);
}

}  // namespace
}  // namespace fitledger::sim
