// Decoding Pod JSON (model/objects_json.h, the one decoder the API client and the webhook share):
// the fields the ledger reads, null as absent, everything else skipped, and errors that name the
// field where the decoder stopped.
#include "model/objects_json.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fitledger {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

Quantity Q(absl::string_view text) { return *Quantity::Parse(text); }

// Shaped like what the API server sends: managedFields, a last-applied annotation (escaped JSON
// with the same keys the decoder looks for), labels, env, probes and volumes around the fields
// the ledger reads.
constexpr char kPod[] = R"json({
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {
    "name": "checkout-api-7c9d8f6b5-x2k4q", "generateName": "checkout-api-7c9d8f6b5-",
    "namespace": "shop", "uid": "5f0c1a52-3b7e-4c49-9a43-0d1f5e6b7a88",
    "resourceVersion": "918273", "creationTimestamp": "2026-11-30T10:00:00Z",
    "deletionTimestamp": "2026-11-30T11:00:00Z",
    "labels": {"app": "checkout-api", "pod-template-hash": "7c9d8f6b5"},
    "annotations": {
      "kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{\"nodeName\":\"wrong\",\"containers\":[{\"name\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"99\"}}}]}}\n"
    },
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                         "name": "checkout-api-7c9d8f6b5", "uid": "0a1b", "controller": true}],
    "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                       "fieldsType": "FieldsV1",
                       "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
                         "f:resources": {"f:requests": {"f:cpu": {}}}}}}}}]
  },
  "spec": {
    "volumes": [{"name": "config", "configMap": {"name": "checkout-config"}}],
    "initContainers": [
      {"name": "migrate", "image": "migrate:1",
       "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}},
      {"name": "proxy", "restartPolicy": "Always",
       "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}
    ],
    "containers": [
      {"name": "app", "image": "checkout:2",
       "env": [{"name": "RESOURCES", "value": "{\"requests\":{\"cpu\":\"8\"}}"}],
       "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
       "resources": {"requests": {"cpu": "500m", "memory": 268435456},
                     "limits": {"cpu": " 1 ", "memory": "512Mi"}}},
      {"name": "sidecar", "resources": {}}
    ],
    "overhead": {"cpu": "10m"},
    "resources": {"requests": {"memory": "1Gi"}, "limits": {"cpu": "2"}},
    "nodeName": "gke-prod-east1-pool-3-8f3a2c1d-7x9q",
    "schedulerName": "fitledger",
    "priority": 1000
  },
  "status": {
    "phase": "Failed", "reason": "OutOfcpu", "message": "Pod was rejected: Node didn't have enough resource: cpu",
    "resize": "Deferred",
    "allocatedResources": {"cpu": "1500m", "memory": "1Gi"},
    "resources": {"requests": {"memory": "1536Mi"}, "limits": {"cpu": "2"}},
    "conditions": [
      {"type": "PodScheduled", "status": "True", "reason": "Scheduled"},
      {"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
      {"type": "PodResizePending", "status": "True", "reason": "Deferred"}
    ],
    "initContainerStatuses": [{"name": "proxy", "allocatedResources": {"cpu": "150m"},
                               "resources": null}],
    "containerStatuses": [
      {"name": "app", "allocatedResources": {"cpu": "750m"},
       "resources": {"requests": {"cpu": "600m"}, "limits": {"cpu": "1"}}},
      {"name": "sidecar", "state": {"running": {"startedAt": "2026-11-30T10:00:05Z"}}}
    ]
  }
})json";

TEST(DecodePodTest, ReadsTheFieldsTheLedgerNeedsAndSkipsTheRest) {
  absl::StatusOr<Pod> pod = ParsePod(kPod);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->name, "checkout-api-7c9d8f6b5-x2k4q");
  EXPECT_EQ(pod->namespace_name, "shop");
  EXPECT_EQ(pod->uid, "5f0c1a52-3b7e-4c49-9a43-0d1f5e6b7a88");
  EXPECT_TRUE(pod->deleting);
  EXPECT_EQ(pod->node_name, "gke-prod-east1-pool-3-8f3a2c1d-7x9q");
  EXPECT_EQ(pod->scheduler_name, "fitledger");
  EXPECT_EQ(pod->priority, 1000);
  ASSERT_EQ(pod->containers.size(), 2u);
  EXPECT_EQ(pod->containers[0].name, "app");
  EXPECT_FALSE(pod->containers[0].restartable);
  EXPECT_THAT(pod->containers[0].requests,
              ElementsAre(Pair("cpu", Q("500m")), Pair("memory", Q("256Mi"))));
  EXPECT_THAT(pod->containers[0].limits,
              ElementsAre(Pair("cpu", Q("1")), Pair("memory", Q("512Mi"))));
  EXPECT_EQ(pod->containers[1].name, "sidecar");
  EXPECT_TRUE(pod->containers[1].requests.empty());
  ASSERT_EQ(pod->init_containers.size(), 2u);
  EXPECT_FALSE(pod->init_containers[0].restartable);
  EXPECT_TRUE(pod->init_containers[1].restartable);
  EXPECT_THAT(pod->init_containers[1].limits, ElementsAre(Pair("cpu", Q("200m"))));
  EXPECT_THAT(pod->overhead, ElementsAre(Pair("cpu", Q("10m"))));
  ASSERT_TRUE(pod->pod_requests.has_value());
  EXPECT_THAT(*pod->pod_requests, ElementsAre(Pair("memory", Q("1Gi"))));
  ASSERT_TRUE(pod->pod_limits.has_value());
  EXPECT_THAT(*pod->pod_limits, ElementsAre(Pair("cpu", Q("2"))));
  EXPECT_EQ(pod->phase, "Failed");
  EXPECT_EQ(pod->status_reason, "OutOfcpu");
  EXPECT_EQ(pod->status_message, "Pod was rejected: Node didn't have enough resource: cpu");
  EXPECT_EQ(pod->resize, "Deferred");
  EXPECT_EQ(pod->resize_pending_reason, "Infeasible");  // the first PodResizePending only
  ASSERT_EQ(pod->init_container_statuses.size(), 1u);
  EXPECT_FALSE(pod->init_container_statuses[0].has_resources);  // null is absent
  ASSERT_EQ(pod->container_statuses.size(), 2u);
  EXPECT_EQ(pod->container_statuses[0].name, "app");
  EXPECT_THAT(pod->container_statuses[0].allocated_resources, ElementsAre(Pair("cpu", Q("750m"))));
  EXPECT_TRUE(pod->container_statuses[0].has_resources);
  EXPECT_THAT(pod->container_statuses[0].status_requests, ElementsAre(Pair("cpu", Q("600m"))));
  EXPECT_FALSE(pod->container_statuses[1].has_resources);
  EXPECT_TRUE(pod->has_status_resources);
  EXPECT_THAT(pod->status_pod_requests, ElementsAre(Pair("memory", Q("1536Mi"))));
  EXPECT_THAT(pod->status_allocated_resources,
              ElementsAre(Pair("cpu", Q("1500m")), Pair("memory", Q("1Gi"))));
}

TEST(DecodePodTest, NullIsAbsent) {
  absl::StatusOr<Pod> pod = ParsePod(R"({
    "metadata": {"name": "p", "namespace": null, "uid": "u", "deletionTimestamp": null},
    "spec": {"containers": [{"name": "c", "resources": null, "restartPolicy": null}],
             "initContainers": null, "overhead": null, "resources": null, "priority": null,
             "nodeName": null},
    "status": {"phase": "Pending", "conditions": null, "containerStatuses": null,
               "resources": null, "allocatedResources": null}
  })");
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->name, "p");
  EXPECT_EQ(pod->namespace_name, "");
  EXPECT_FALSE(pod->deleting);
  ASSERT_EQ(pod->containers.size(), 1u);
  EXPECT_TRUE(pod->containers[0].requests.empty());
  EXPECT_TRUE(pod->init_containers.empty());
  EXPECT_FALSE(pod->pod_requests.has_value());
  EXPECT_EQ(pod->priority, 0);
  EXPECT_EQ(pod->node_name, "");
  EXPECT_EQ(pod->phase, "Pending");
  EXPECT_EQ(pod->resize_pending_reason, "");
  EXPECT_FALSE(pod->has_status_resources);
  EXPECT_TRUE(pod->status_allocated_resources.empty());
}

struct BadCase {
  std::string json;
  std::string message;  // the error's start: "field <path>: "
};

TEST(DecodePodTest, AnErrorNamesTheFieldWhereDecodingStopped) {
  const std::vector<BadCase> cases = {
      {R"({"metadata": {"name": 7}})", "field metadata.name: "},
      {R"({"metadata": []})", "field metadata: "},
      {R"({"metadata": {"deletionTimestamp": 1}})", "field metadata.deletionTimestamp: "},
      {R"({"spec": {"containers": [{"name": "a"}, {"resources": {"requests": {"cpu": "1x"}}}]}})",
       "field spec.containers[1].resources.requests.cpu: "},
      {R"({"spec": {"containers": [{"resources": {"limits": {"memory": true}}}]}})",
       "field spec.containers[0].resources.limits.memory: a quantity must be a string or a "
       "number"},
      {R"({"spec": {"initContainers": [{}, {}, {"restartPolicy": 1}]}})",
       "field spec.initContainers[2].restartPolicy: "},
      {R"({"spec": {"containers": {}}})", "field spec.containers: "},
      {R"({"spec": {"overhead": {"cpu": "-"}}})", "field spec.overhead.cpu: "},
      {R"({"spec": {"resources": {"requests": {"cpu": []}}}})",
       "field spec.resources.requests.cpu: a quantity must be a string or a number"},
      {R"({"spec": {"priority": "high"}})", "field spec.priority: "},
      {R"({"spec": {"priority": 3000000000}})",
       "field spec.priority: 3000000000 is out of the int32 range"},
      {R"({"spec": {"priority": -2147483649}})", "field spec.priority: "},
      {R"({"spec": {"nodeName": {}}})", "field spec.nodeName: "},
      {R"({"status": {"phase": 1}})", "field status.phase: "},
      {R"({"status": {"conditions": [{"type": "Ready"}, {"reason": 3}]}})",
       "field status.conditions[1].reason: "},
      {R"({"status": {"containerStatuses": [{"allocatedResources": {"cpu": "2q"}}]}})",
       "field status.containerStatuses[0].allocatedResources.cpu: "},
      {R"({"status": {"initContainerStatuses": [{"resources": {"requests": {"memory": "x"}}}]}})",
       "field status.initContainerStatuses[0].resources.requests.memory: "},
      {R"({"status": {"containerStatuses": [{"name": 1}]}})",
       "field status.containerStatuses[0].name: "},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<Pod> pod = ParsePod(c.json);
    ASSERT_FALSE(pod.ok()) << c.json;
    EXPECT_EQ(pod.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_EQ(pod.status().message().substr(0, c.message.size()), c.message)
        << c.json << "\n  got: " << pod.status().message();
  }
}

// A resource list with a key given twice keeps the last value, as Go's decoding into a map does:
// the overhead is not counted twice.
TEST(DecodePodTest, ARepeatedResourceKeyKeepsTheLastValue) {
  absl::StatusOr<Pod> pod = ParsePod(
      R"({"spec": {"overhead": {"cpu": "1", "cpu": "250m"},
                   "containers": [{"resources": {"requests": {"memory": "1Gi", "cpu": "1",
                                                              "memory": "2Gi"}}}]}})");
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_THAT(pod->overhead, ElementsAre(Pair("cpu", Q("250m"))));
  ASSERT_EQ(pod->containers.size(), 1u);
  EXPECT_THAT(pod->containers[0].requests,
              ElementsAre(Pair("memory", Q("2Gi")), Pair("cpu", Q("1"))));
  EXPECT_EQ(ParsePod(R"({"spec": {"priority": 2147483647}})")->priority, 2147483647);
}

TEST(DecodePodTest, NotAnObjectIsAnError) {
  EXPECT_EQ(ParsePod("[]").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePod("{").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fitledger
