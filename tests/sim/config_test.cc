#include "sim/config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger::sim {
namespace {

using ::fitledger::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(SimConfigTest, ParsesThePairConfig) {
  auto config = LoadSimConfigFile(std::string(FITLEDGER_SOURCE_DIR) + "/config/sim/pair.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->nodes.size(), 2u);
  EXPECT_EQ(config->nodes[0].name, "worker-1");
  EXPECT_THAT(config->nodes[0].allocatable,
              ElementsAre(Pair("cpu", "4"), Pair("memory", "8Gi"), Pair("pods", "110")));
  EXPECT_EQ(config->nodes[0].capacity, config->nodes[0].allocatable);
  EXPECT_EQ(config->nodes[1].name, "worker-2");
  EXPECT_EQ(config->watch_lag, absl::Seconds(2));
  EXPECT_TRUE(config->kubelet.enabled);
  EXPECT_EQ(config->bookmark_interval, absl::Seconds(1));
  EXPECT_EQ(config->event_window, 10000);
}

TEST(SimConfigTest, ParsesTheBigConfig) {
  auto config = LoadSimConfigFile(std::string(FITLEDGER_SOURCE_DIR) + "/config/sim/big.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->generate.nodes, 5000);
  EXPECT_EQ(config->generate.pods_per_node, 30);
}

TEST(SimConfigTest, AllKeys) {
  auto config = ParseSimConfig(R"(
nodes:
- name: a
  capacity: {cpu: 2}
watchLag: 500ms
bookmarkInterval: 100ms
eventWindow: 50
maxWatchDuration: 1m
kubelet: {enabled: false, admitDelay: 1s}
generate: {nodes: 3, podsPerNode: 2, nodePrefix: g-, namespace: load,
           nodeAllocatable: {cpu: 8}, podRequests: {cpu: 1}}
tls: {certFile: c.pem, keyFile: k.pem, clientCAFile: ca.pem}
token: secret
kubeconfigOut: {caFile: ca.pem, clientCertFile: cc.pem, clientKeyFile: ck.pem}
threads: 16
maxBodyBytes: 4096
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->nodes[0].allocatable, ElementsAre(Pair("cpu", "2")));
  EXPECT_EQ(config->watch_lag, absl::Milliseconds(500));
  EXPECT_EQ(config->bookmark_interval, absl::Milliseconds(100));
  EXPECT_EQ(config->event_window, 50);
  EXPECT_EQ(config->max_watch_duration, absl::Minutes(1));
  EXPECT_FALSE(config->kubelet.enabled);
  EXPECT_EQ(config->kubelet.admit_delay, absl::Seconds(1));
  EXPECT_EQ(config->generate.node_prefix, "g-");
  EXPECT_TRUE(config->tls.enabled());
  EXPECT_EQ(config->tls.client_ca_file, "ca.pem");
  EXPECT_EQ(config->token, "secret");
  EXPECT_EQ(config->kubeconfig_out.client_key_file, "ck.pem");
  EXPECT_EQ(config->threads, 16);
  EXPECT_EQ(config->max_body_bytes, 4096u);
}

TEST(SimConfigTest, DevicesAreListedInAllocatableAndCapacity) {
  auto config = ParseSimConfig(R"(
nodes:
- name: g
  allocatable: {cpu: 4}
  devices: {example.com/gpu: 2}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->nodes[0].devices, ElementsAre(Pair("example.com/gpu", 2)));
  EXPECT_THAT(config->nodes[0].allocatable,
              ElementsAre(Pair("cpu", "4"), Pair("example.com/gpu", "2")));
  EXPECT_THAT(config->nodes[0].capacity,
              ElementsAre(Pair("cpu", "4"), Pair("example.com/gpu", "2")));
}

TEST(SimConfigTest, DeviceErrors) {
  EXPECT_THAT(ParseSimConfig("nodes:\n- name: g\n  devices: {cpu: 2}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("extended resource name (example.com/gpu)")));
  EXPECT_THAT(ParseSimConfig("nodes:\n- name: g\n  devices: {example.com/gpu: -1}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices.example.com/gpu")));
  EXPECT_THAT(ParseSimConfig("nodes:\n- name: g\n  devices: [1]\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be a mapping")));
  EXPECT_THAT(
      ParseSimConfig("nodes:\n- name: g\n  allocatable: {example.com/gpu: 2}\n  devices: "
                     "{example.com/gpu: 2}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("also in allocatable or capacity")));
}

TEST(SimConfigTest, ErrorsNameTheKeyAndLine) {
  EXPECT_THAT(ParseSimConfig("watchlag: 2s\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sim config:1: unknown key watchlag")));
  EXPECT_THAT(ParseSimConfig("nodes:\n- name: a\n  allocatable: {cpu: 4x}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sim config:3: key nodes[0].allocatable.cpu")));
  EXPECT_THAT(ParseSimConfig("watchLag: soon\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a duration")));
  EXPECT_THAT(ParseSimConfig("nodes:\n- name: a\n- name: a\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate node name")));
  EXPECT_THAT(ParseSimConfig("nodes: [\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid YAML")));
  EXPECT_THAT(LoadSimConfigFile("/nonexistent.yaml"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nonexistent")));
}

TEST(SimConfigTest, GenerateRealisticKeys) {
  auto config = ParseSimConfig(R"(
generate:
  nodes: 10
  nodeNames: eks
  objects: realistic
  seed: 9
  fullNodes: {fraction: 0.25, free: {cpu: 200m, memory: 512Mi}}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->generate.node_naming, NodeNaming::kEks);
  EXPECT_EQ(config->generate.objects, ObjectProfile::kRealistic);
  EXPECT_EQ(config->generate.seed, 9u);
  EXPECT_DOUBLE_EQ(config->generate.full_nodes.fraction, 0.25);
  EXPECT_THAT(config->generate.full_nodes.free,
              ElementsAre(Pair("cpu", "200m"), Pair("memory", "512Mi")));
  // The defaults are the cluster generate made before these keys.
  auto plain = ParseSimConfig("generate: {nodes: 1}\n");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->generate.node_naming, NodeNaming::kPrefix);
  EXPECT_EQ(plain->generate.objects, ObjectProfile::kBasic);
  EXPECT_EQ(plain->generate.full_nodes.fraction, 0);
}

TEST(SimConfigTest, GenerateRealisticErrors) {
  EXPECT_THAT(
      ParseSimConfig("generate: {nodeNames: gcp}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("sim config:1: key generate.nodeNames: must be one of: prefix, gke")));
  EXPECT_THAT(
      ParseSimConfig("generate: {nodeNames: gke, nodePrefix: n-}\n"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("sim config:1: key generate.nodePrefix: applies only to nodeNames: prefix")));
  EXPECT_THAT(ParseSimConfig("generate: {objects: heavy}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("basic or realistic")));
  EXPECT_THAT(
      ParseSimConfig("generate: {fullNodes: {fraction: 1.5, free: {cpu: 1}}}\n"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("sim config:1: key generate.fullNodes.fraction: must be a number in [0, 1]")));
  EXPECT_THAT(ParseSimConfig("generate: {fullNodes: {fraction: 0.5}}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs fraction and free")));
  EXPECT_THAT(ParseSimConfig("generate: {fullNodes: {fraction: 0.5, free: {cpu: 1x}}}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sim config:1: key generate.fullNodes.free.cpu: quantity")));
  EXPECT_THAT(
      ParseSimConfig("generate: {fullNodes: {fraction: 0.5, free: {pods: 1}}}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pods cannot be filled by one pod")));
  EXPECT_THAT(ParseSimConfig("generate: {seed: -1}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("generate.seed")));
}

TEST(SimConfigTest, ParsesTheRealisticBigConfig) {
  auto config =
      LoadSimConfigFile(std::string(FITLEDGER_SOURCE_DIR) + "/config/sim/big-realistic.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->generate.nodes, 5000);
  EXPECT_EQ(config->generate.pods_per_node, 30);
  EXPECT_EQ(config->generate.objects, ObjectProfile::kRealistic);
  EXPECT_GT(config->generate.full_nodes.fraction, 0.3);
}

}  // namespace
}  // namespace fitledger::sim
