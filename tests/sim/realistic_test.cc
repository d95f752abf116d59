#include "sim/realistic.h"

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/pod.h"
#include "nlohmann/json.hpp"
#include "server/kube/objects.h"
#include "sim/objects.h"
#include "sim/pod_requests.h"
#include "sim/store.h"

namespace fitledger::sim {
namespace {

using nlohmann::json;

const std::regex kGke(
    "gke-[a-z0-9-]+-(default-pool|highmem-pool|batch-spot-pool)-[0-9a-f]{8}-[a-z0-9]{4}");
const std::regex kEks(R"(ip-10-(\d+)-(\d+)-(\d+)\.us-west-2\.compute\.internal)");
const std::regex kAks("aks-(nodepool1|userpool1|spotpool1)-[1-9][0-9]{7}-vmss[0-9a-z]{6}");

std::vector<std::string> Names(NodeNaming naming, uint64_t seed, int n) {
  CloudNodeNamer namer(naming, seed);
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(namer.Next(NodeIp(i)).name);
  return names;
}

TEST(CloudNodeNamerTest, NamesHaveTheCloudsShapes) {
  for (const std::string& name : Names(NodeNaming::kGke, 7, 500)) {
    EXPECT_TRUE(std::regex_match(name, kGke)) << name;
  }
  std::vector<std::string> eks = Names(NodeNaming::kEks, 7, 500);
  for (size_t i = 0; i < eks.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(eks[i], m, kEks)) << eks[i];
    // The name spells the node's InternalIP.
    EXPECT_EQ(absl::StrCat("10.", m[1].str(), ".", m[2].str(), ".", m[3].str()),
              NodeIp(static_cast<int>(i)));
  }
  for (const std::string& name : Names(NodeNaming::kAks, 7, 500)) {
    EXPECT_TRUE(std::regex_match(name, kAks)) << name;
  }
}

TEST(CloudNodeNamerTest, AksCountsEachScaleSetsVmsInBase36) {
  CloudNodeNamer namer(NodeNaming::kAks, 3);
  std::map<std::string, std::vector<std::string>> by_scale_set;
  for (int i = 0; i < 400; ++i) {
    std::string name = namer.Next(NodeIp(i)).name;
    by_scale_set[name.substr(0, name.size() - 6)].push_back(name.substr(name.size() - 6));
  }
  ASSERT_EQ(by_scale_set.size(), 3u);
  for (const auto& [scale_set, suffixes] : by_scale_set) {
    ASSERT_GT(suffixes.size(), 37u) << scale_set;
    EXPECT_EQ(suffixes[0], "000000");
    EXPECT_EQ(suffixes[9], "000009");
    EXPECT_EQ(suffixes[10], "00000a");
    EXPECT_EQ(suffixes[35], "00000z");
    EXPECT_EQ(suffixes[36], "000010");
  }
}

TEST(CloudNodeNamerTest, DeterministicUniqueAndMixed) {
  EXPECT_EQ(Names(NodeNaming::kGke, 1, 200), Names(NodeNaming::kGke, 1, 200));
  EXPECT_NE(Names(NodeNaming::kGke, 1, 200), Names(NodeNaming::kGke, 2, 200));
  // 5,000 GKE names draw 4 random characters each: clashes are drawn again.
  std::vector<std::string> many = Names(NodeNaming::kGke, 1, 5000);
  EXPECT_EQ(std::set<std::string>(many.begin(), many.end()).size(), 5000u);
  int gke = 0, eks = 0, aks = 0;
  for (const std::string& name : Names(NodeNaming::kMixed, 1, 300)) {
    gke += std::regex_match(name, kGke);
    eks += std::regex_match(name, kEks);
    aks += std::regex_match(name, kAks);
  }
  EXPECT_EQ(gke + eks + aks, 300);
  EXPECT_GT(gke, 60);
  EXPECT_GT(eks, 60);
  EXPECT_GT(aks, 60);
}

GenerateSpec RealisticSpec() {
  GenerateSpec spec;
  spec.nodes = 30;
  spec.pods_per_node = 10;
  spec.node_naming = NodeNaming::kMixed;
  spec.objects = ObjectProfile::kRealistic;
  spec.seed = 42;
  spec.node_allocatable = {{"cpu", "7910m"},
                           {"memory", "28902052Ki"},
                           {"pods", "110"},
                           {"ephemeral-storage", "47060071478"}};
  spec.pod_requests = {{"cpu", "100m"}, {"memory", "256Mi"}};
  return spec;
}

std::vector<ObjectPtr> All(ClusterStore& store, Kind kind) {
  ObjectFilter filter;
  filter.kind = kind;
  auto list = store.List(filter, 0, "");
  EXPECT_TRUE(list.ok()) << list.status();
  return list.ok() ? list->items : std::vector<ObjectPtr>{};
}

TEST(StoreGenerateTest, RealisticPodsWeighUpToSixKilobytes) {
  ClusterStore store({});
  ASSERT_TRUE(store.Generate(RealisticSpec()).ok());
  std::vector<ObjectPtr> pods = All(store, Kind::kPod);
  ASSERT_EQ(pods.size(), 300u);
  std::set<std::string> apps;
  int with_liveness = 0, with_config_map = 0;
  for (const ObjectPtr& pod : pods) {
    SCOPED_TRACE(pod->fields.name);
    EXPECT_GE(pod->json.size(), 5000u);
    EXPECT_LE(pod->json.size(), 6144u);
    json j = json::parse(pod->json);
    const json& meta = j["metadata"];
    EXPECT_EQ(meta["name"], pod->fields.name);
    EXPECT_EQ(meta["uid"], pod->uid);
    EXPECT_EQ(meta["resourceVersion"], absl::StrCat(pod->resource_version));
    EXPECT_EQ(meta["ownerReferences"][0]["kind"], "ReplicaSet");
    ASSERT_EQ(meta["managedFields"].size(), 3u);
    EXPECT_EQ(meta["managedFields"][0]["manager"], "kube-controller-manager");
    EXPECT_EQ(meta["managedFields"][2]["subresource"], "status");
    EXPECT_TRUE(meta["managedFields"][0]["fieldsV1"]["f:spec"].contains("f:containers"));
    // The annotation kubectl writes: the applied manifest as escaped JSON.
    json applied = json::parse(
        meta["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].get<std::string>());
    EXPECT_EQ(applied["metadata"]["name"], pod->fields.name);
    EXPECT_EQ(applied["metadata"]["namespace"], "bench");
    const json& app = j["spec"]["containers"][0];
    EXPECT_FALSE(app["env"].empty());
    EXPECT_TRUE(app.contains("readinessProbe"));
    with_liveness += app.contains("livenessProbe");
    // The ServiceAccount admission's projected volume, and some with a ConfigMap.
    ASSERT_FALSE(j["spec"]["volumes"].empty());
    EXPECT_TRUE(j["spec"]["volumes"].back().contains("projected"));
    with_config_map += j["spec"]["volumes"][0].contains("configMap");
    EXPECT_EQ(j["spec"]["nodeName"], pod->fields.node_name);
    EXPECT_EQ(j["status"]["phase"], "Running");
    EXPECT_EQ(j["status"]["podIP"], pod->fields.pod_ip);
    EXPECT_FALSE(std::regex_search(pod->json, std::regex("@[A-Z0-9]+@"))) << "a placeholder left";
    // The pod requests what podRequests says, as the server and the sim's kubelet count it.
    auto parsed = ParsePod(pod->json);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    auto requests = PodRequests(*parsed, RequestBasis::kSpec);
    ASSERT_TRUE(requests.ok());
    EXPECT_EQ(requests->milli_cpu, 100);
    EXPECT_EQ(requests->memory_bytes, 256 << 20);
    // The sim's kubelet reads the same (sim/pod_requests.h, its own code).
    ASSERT_NE(pod->kubelet_pod, nullptr);
    ResourceAmounts kubelet_requests;
    kubelet_requests.SetMax(PodRequests(*pod->kubelet_pod));
    EXPECT_EQ(kubelet_requests.milli_cpu, requests->milli_cpu);
    EXPECT_EQ(kubelet_requests.memory_bytes, requests->memory_bytes);
    apps.insert(j["metadata"]["labels"]["app.kubernetes.io/name"].get<std::string>());
  }
  EXPECT_EQ(apps.size(), static_cast<size_t>(kRealisticPodShapes));
  EXPECT_GT(with_liveness, 60);
  EXPECT_GT(with_config_map, 60);
}

// A node's status.allocatable as the sim's kubelet reads it.
ResourceAmounts Allocatable(const StoredObject& node) {
  absl::StatusOr<ResourceList> list =
      ParseResourceList(json::parse(node.json)["status"]["allocatable"], "status.allocatable");
  EXPECT_TRUE(list.ok()) << list.status();
  ResourceAmounts amounts;
  if (list.ok()) amounts.Add(*list);
  return amounts;
}

TEST(StoreGenerateTest, RealisticNodesCarryTheirCloudsLabelsAndImages) {
  ClusterStore store({});
  ASSERT_TRUE(store.Generate(RealisticSpec()).ok());
  std::vector<ObjectPtr> nodes = All(store, Kind::kNode);
  ASSERT_EQ(nodes.size(), 30u);
  for (const ObjectPtr& node : nodes) {
    SCOPED_TRACE(node->fields.name);
    json j = json::parse(node->json);
    const json& labels = j["metadata"]["labels"];
    EXPECT_EQ(labels["kubernetes.io/hostname"], node->fields.name);
    EXPECT_TRUE(labels.contains("topology.kubernetes.io/zone"));
    const std::string& name = node->fields.name;
    std::smatch m;
    if (std::regex_match(name, kGke)) {
      EXPECT_NE(name.find(labels["cloud.google.com/gke-nodepool"].get<std::string>()),
                std::string::npos);
      EXPECT_EQ(j["spec"]["providerID"].get<std::string>().rfind("gce://", 0), 0u);
    } else if (std::regex_match(name, m, kEks)) {
      EXPECT_TRUE(labels.contains("eks.amazonaws.com/nodegroup"));
      EXPECT_EQ(j["status"]["addresses"][0]["address"],
                absl::StrCat("10.", m[1].str(), ".", m[2].str(), ".", m[3].str()));
      EXPECT_EQ(j["spec"]["providerID"].get<std::string>().rfind("aws:///us-west-2", 0), 0u);
    } else {
      ASSERT_TRUE(std::regex_match(name, kAks));
      EXPECT_NE(name.find(labels["kubernetes.azure.com/agentpool"].get<std::string>()),
                std::string::npos);
      EXPECT_EQ(j["spec"]["providerID"].get<std::string>().rfind("azure:///", 0), 0u);
    }
    EXPECT_GE(j["status"]["images"].size(), 8u);
    EXPECT_EQ(j["metadata"]["managedFields"].size(), 3u);
    EXPECT_GE(node->json.size(), 4000u);
    EXPECT_LE(node->json.size(), 14000u);
    EXPECT_EQ(Allocatable(*node).milli_cpu, 7910);
  }
}

// What a pod of `cpu` millicores and `memory` bytes lacks on each node, by the sim's own
// accounting: "cpu", "memory", "cpu+memory" or "" (fits).
std::map<std::string, std::string> Lacks(ClusterStore& store, int64_t cpu, int64_t memory) {
  std::map<std::string, ResourceAmounts> used;
  for (const ObjectPtr& pod : All(store, Kind::kPod)) {
    used[pod->fields.node_name].Add(PodRequests(*pod->kubelet_pod));
  }
  std::map<std::string, std::string> out;
  for (const ObjectPtr& node : All(store, Kind::kNode)) {
    const ResourceAmounts& u = used[node->fields.name];
    const ResourceAmounts allocatable = Allocatable(*node);
    std::string lacks;
    if (allocatable.milli_cpu - u.milli_cpu < cpu) lacks = "cpu";
    if (allocatable.memory_bytes - u.memory_bytes < memory) {
      lacks += lacks.empty() ? "memory" : "+memory";
    }
    out[node->fields.name] = lacks;
  }
  return out;
}

TEST(StoreGenerateTest, FullNodesLeaveOnlyWhatFreeSaysInTurn) {
  GenerateSpec spec = RealisticSpec();
  spec.node_naming = NodeNaming::kGke;
  spec.full_nodes.fraction = 1.0 / 3;
  spec.full_nodes.free = {{"cpu", "200m"}, {"memory", "512Mi"}};
  ClusterStore store({});
  ASSERT_TRUE(store.Generate(spec).ok());
  // In the order the nodes were generated (by their IPs' order of creation): the full ones lack
  // cpu, memory, both, cpu, ... for a pod of 500m and 1Gi; the rest fit it.
  std::map<std::string, std::string> lacks = Lacks(store, 500, 1 << 30);
  std::vector<std::pair<std::string, std::string>> by_ip;
  for (const ObjectPtr& node : All(store, Kind::kNode)) {
    json j = json::parse(node->json);
    by_ip.emplace_back(j["status"]["addresses"][0]["address"].get<std::string>(),
                       lacks[node->fields.name]);
  }
  std::sort(by_ip.begin(), by_ip.end(), [](const auto& a, const auto& b) {
    auto last = [](const std::string& ip) { return std::stoi(ip.substr(ip.rfind('.') + 1)); };
    return last(a.first) < last(b.first);
  });
  std::vector<std::string> turns;
  for (const auto& [ip, lack] : by_ip) {
    if (!lack.empty()) turns.push_back(lack);
  }
  EXPECT_THAT(turns, ::testing::ElementsAre("cpu", "memory", "cpu+memory", "cpu", "memory",
                                            "cpu+memory", "cpu", "memory", "cpu+memory", "cpu"));
  // A pod that fits in what is left free fits everywhere.
  for (const auto& [node, lack] : Lacks(store, 200, 512 << 20)) EXPECT_EQ(lack, "") << node;
  // Every pod, fillers included, is admitted: the kubelet's accounting has room for them all.
  EXPECT_EQ(store.Stats().pods_by_phase.at("Running"), 310);
  EXPECT_EQ(store.Stats().rejections_by_reason.size(), 0u);
}

TEST(StoreGenerateTest, FullNodesWithBasicObjects) {
  GenerateSpec spec;
  spec.nodes = 6;
  spec.pods_per_node = 2;
  spec.full_nodes.fraction = 0.5;
  spec.full_nodes.free = {{"cpu", "50m"}};
  ClusterStore store({});
  ASSERT_TRUE(store.Generate(spec).ok());
  std::map<std::string, std::string> lacks = Lacks(store, 100, 0);
  int full = 0;
  for (const auto& [node, lack] : lacks) {
    if (lack.empty()) continue;
    ++full;
    auto filler = store.Get(Kind::kPod, "bench", absl::StrCat("bench-", node.substr(5), "-fill"));
    EXPECT_TRUE(filler.ok()) << node;
  }
  EXPECT_EQ(full, 3);
}

TEST(StoreGenerateTest, AFullNodeThatCannotBeFilledIsAnError) {
  GenerateSpec spec;
  spec.nodes = 2;
  spec.pods_per_node = 1;
  spec.full_nodes.fraction = 1;
  spec.full_nodes.free = {{"cpu", "40"}};
  ClusterStore store({});
  absl::Status status = store.Generate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("fullNodes.free.cpu"));
}

TEST(StoreGenerateTest, TheSameSeedGivesTheSameCluster) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  auto generate = [now](uint64_t seed) {
    auto store = std::make_unique<ClusterStore>(
        ClusterStore::Options{.event_window = 100, .clock = [now] { return now; }});
    GenerateSpec spec = RealisticSpec();
    spec.seed = seed;
    spec.full_nodes.fraction = 0.3;
    spec.full_nodes.free = {{"cpu", "100m"}};
    EXPECT_TRUE(store->Generate(spec).ok());
    // UIDs come from a per-process salt and a per-store counter: in one process they repeat.
    std::vector<std::string> out;
    for (Kind kind : {Kind::kNode, Kind::kPod}) {
      for (const ObjectPtr& o : All(*store, kind)) out.push_back(o->json);
    }
    return out;
  };
  std::vector<std::string> a = generate(5), b = generate(5), c = generate(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace fitledger::sim
