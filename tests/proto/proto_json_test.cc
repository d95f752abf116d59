// The proto schema accepts the JSON kube-scheduler sends, through protobuf's own JSON parser.
#include <string>

#include "fitledger/v1/extender.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace fitledger {
namespace {

using google::protobuf::util::JsonParseOptions;
using google::protobuf::util::JsonStringToMessage;

TEST(ProtoJsonTest, ParsesKubernetesExtenderArgsExample) {
  // The example from k8s.io/kube-scheduler/extender/v1 types_test.go.
  const std::string json =
      R"({"Pod":{"metadata":{"name":"podname"},"spec":{"containers":null},"status":{}},)"
      R"("Nodes":{"metadata":{},"items":[]},"NodeNames":["node1"]})";
  v1::ExtenderArgs args;
  ASSERT_TRUE(JsonStringToMessage(json, &args).ok());
  EXPECT_EQ(args.pod().metadata().name(), "podname");
  EXPECT_TRUE(args.has_nodes());
  EXPECT_EQ(args.nodes().items_size(), 0);
  ASSERT_EQ(args.node_names_size(), 1);
  EXPECT_EQ(args.node_names(0), "node1");
}

TEST(ProtoJsonTest, ParsesARealisticPodIgnoringUnknownFields) {
  const std::string json = R"({
    "Pod": {
      "apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "burst-7d9f-abcde", "namespace": "sched-lab",
                   "uid": "6f1c2e1a-0b5e-4a43-9a55-1d2f3e4a5b6c", "resourceVersion": "123",
                   "labels": {"app": "burst"}, "creationTimestamp": "2026-11-30T12:00:00Z",
                   "deletionTimestamp": "2026-11-30T12:05:00Z",
                   "ownerReferences": [{"kind": "ReplicaSet", "name": "burst-7d9f"}]},
      "spec": {
        "schedulerName": "fitledger-scheduler", "priority": 0, "nodeName": "",
        "overhead": {"cpu": "250m"},
        "resources": {"requests": {"cpu": "1"}},
        "initContainers": [{"name": "sidecar", "image": "x", "restartPolicy": "Always",
                            "resources": {"requests": {"cpu": "100m"}}}],
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": "400m", "memory": "128Mi"},
                                      "limits": {"memory": "256Mi"}}}],
        "tolerations": [{"key": "x", "operator": "Exists"}]
      },
      "status": {"phase": "Pending", "qosClass": "Burstable",
                 "containerStatuses": [{"name": "pause", "allocatedResources": {"cpu": "500m"},
                                        "resources": {"requests": {"cpu": "450m"}}}]}
    },
    "NodeNames": ["w1", "w2"]
  })";
  v1::ExtenderArgs args;
  JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = JsonStringToMessage(json, &args, options);
  ASSERT_TRUE(status.ok()) << status.ToString();
  const v1::Pod& pod = args.pod();
  EXPECT_EQ(pod.metadata().namespace_(), "sched-lab");
  EXPECT_EQ(pod.metadata().uid(), "6f1c2e1a-0b5e-4a43-9a55-1d2f3e4a5b6c");
  EXPECT_EQ(pod.metadata().deletion_timestamp(), "2026-11-30T12:05:00Z");
  EXPECT_EQ(pod.spec().scheduler_name(), "fitledger-scheduler");
  EXPECT_EQ(pod.spec().overhead().at("cpu"), "250m");
  EXPECT_EQ(pod.spec().resources().requests().at("cpu"), "1");
  ASSERT_EQ(pod.spec().init_containers_size(), 1);
  EXPECT_EQ(pod.spec().init_containers(0).restart_policy(), "Always");
  ASSERT_EQ(pod.spec().containers_size(), 1);
  EXPECT_EQ(pod.spec().containers(0).resources().requests().at("memory"), "128Mi");
  EXPECT_EQ(pod.spec().containers(0).resources().limits().at("memory"), "256Mi");
  EXPECT_EQ(pod.status().phase(), "Pending");
  ASSERT_EQ(pod.status().container_statuses_size(), 1);
  EXPECT_EQ(pod.status().container_statuses(0).allocated_resources().at("cpu"), "500m");
  EXPECT_FALSE(args.has_nodes());
  EXPECT_EQ(args.node_names_size(), 2);
}

TEST(ProtoJsonTest, EmitsPascalCaseKeys) {
  v1::ExtenderFilterResult result;
  result.add_node_names("w1");
  (*result.mutable_failed_nodes())["w2"] = "Insufficient cpu";
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(result, &json).ok());
  EXPECT_EQ(json, R"({"NodeNames":["w1"],"FailedNodes":{"w2":"Insufficient cpu"}})");
  v1::ExtenderBindingArgs bind;
  ASSERT_TRUE(
      JsonStringToMessage(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"w1"})", &bind)
          .ok());
  EXPECT_EQ(bind.pod_uid(), "u");
  EXPECT_EQ(bind.node(), "w1");
}

}  // namespace
}  // namespace fitledger
