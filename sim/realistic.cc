#include "sim/realistic.h"

#include <initializer_list>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace fitledger::sim {
namespace {

// Members in the order Go's encoding/json writes the API types (struct field order), as the API
// server sends them.
using ojson = nlohmann::ordered_json;

constexpr absl::string_view kLowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789";
constexpr absl::string_view kDigits = "0123456789";
constexpr absl::string_view kBase36 = "0123456789abcdefghijklmnopqrstuvwxyz";
// The characters of generated name suffixes (apiserver's names.SimpleNameGenerator, via
// k8s.io/apimachinery/pkg/util/rand.String: consonants and digits that spell no words).
constexpr absl::string_view kNameSuffix = "bcdfghjklmnpqrstvwxz2456789";

// --- managedFields ---

// The key structured-merge-diff gives an item of a list it merges by key (the API's
// listMapKeys / patchMergeKey); empty for lists it keeps whole (atomic).
std::string ItemKey(absl::string_view list, const ojson& item) {
  auto key = [&item](std::initializer_list<const char*> fields) -> std::string {
    ojson k = ojson::object();
    for (const char* f : fields) {
      if (!item.contains(f)) return "";
      k[f] = item[f];
    }
    return absl::StrCat("k:", k.dump());
  };
  if (list == "containers" || list == "initContainers" || list == "env" || list == "volumes") {
    return key({"name"});
  }
  if (list == "volumeMounts") return key({"mountPath"});
  if (list == "ports") return key({"containerPort", "protocol"});
  if (list == "conditions" || list == "addresses") return key({"type"});
  if (list == "podIPs" || list == "hostIPs") return key({"ip"});
  return "";
}

// The FieldsV1 set of the fields `value` sets ("f:<name>", "k:{...}" for keyed list items, "."
// for a map or item owned as a whole), as the API server's field manager records them. The
// object itself and its direct members carry no ".".
ojson FieldSet(const ojson& value, int depth = 0) {
  ojson out = ojson::object();
  if (depth >= 2) out["."] = ojson::object();
  for (const auto& [k, v] : value.items()) {
    std::string f = absl::StrCat("f:", k);
    if (v.is_object() && !v.empty()) {
      out[f] = FieldSet(v, depth + 1);
    } else if (k == "ownerReferences") {
      // Owner references are owned whole: {".":{},"k:{\"uid\":...}":{}}.
      ojson list = {{".", ojson::object()}};
      for (const ojson& item : v) {
        list[absl::StrCat("k:", ojson{{"uid", item.value("uid", "")}}.dump())] = ojson::object();
      }
      out[f] = std::move(list);
    } else if (v.is_array() && !v.empty() && v[0].is_object() && !ItemKey(k, v[0]).empty()) {
      ojson list = ojson::object();
      for (const ojson& item : v) list[ItemKey(k, item)] = FieldSet(item, 2);
      out[f] = std::move(list);
    } else {
      out[f] = ojson::object();
    }
  }
  return out;
}

ojson ManagedFieldsEntry(absl::string_view manager, const ojson& fields,
                         absl::string_view subresource = "") {
  ojson entry = {{"manager", manager}, {"operation", "Update"},    {"apiVersion", "v1"},
                 {"time", "@TS@"},     {"fieldsType", "FieldsV1"}, {"fieldsV1", FieldSet(fields)}};
  if (!subresource.empty()) entry["subresource"] = subresource;
  return entry;
}

// --- Nodes ---

struct CloudFacts {
  const char* region;
  std::vector<const char*> zones;
  std::vector<const char*> pools;
  const char* instance_type;
  const char* os_image;
  const char* kernel;
  const char* runtime;
  const char* kubelet;
};

const CloudFacts& Facts(Cloud cloud) {
  static const auto* const kGke =
      new CloudFacts{"europe-west1",
                     {"europe-west1-b", "europe-west1-c", "europe-west1-d"},
                     {"default-pool", "highmem-pool", "batch-spot-pool"},
                     "e2-standard-8",
                     "Container-Optimized OS from Google",
                     "6.1.100+",
                     "containerd://1.7.22",
                     "v1.28.13-gke.1006000"};
  static const auto* const kEks =
      new CloudFacts{"us-west-2",
                     {"us-west-2a", "us-west-2b", "us-west-2c"},
                     {"ng-general-20240819", "ng-memory-20240819", "ng-spot-20240819"},
                     "m6i.2xlarge",
                     "Amazon Linux 2023.5.20240819",
                     "6.1.102-111.182.amzn2023.x86_64",
                     "containerd://1.7.20",
                     "v1.28.12-eks-2f46c53"};
  static const auto* const kAks = new CloudFacts{"westeurope",
                                                 {"westeurope-1", "westeurope-2", "westeurope-3"},
                                                 {"nodepool1", "userpool1", "spotpool1"},
                                                 "Standard_D8s_v5",
                                                 "Ubuntu 22.04.4 LTS",
                                                 "5.15.0-1071-azure",
                                                 "containerd://1.7.20-1",
                                                 "v1.28.12"};
  static const auto* const kNone = new CloudFacts{"",
                                                  {},
                                                  {},
                                                  "",
                                                  "Debian GNU/Linux 12 (bookworm)",
                                                  "6.1.0-18-amd64",
                                                  "containerd://1.7.13",
                                                  "v1.28.0"};
  switch (cloud) {
    case Cloud::kGke:
      return *kGke;
    case Cloud::kEks:
      return *kEks;
    case Cloud::kAks:
      return *kAks;
    case Cloud::kNone:
      break;
  }
  return *kNone;
}

constexpr int kAksPools = 3;
constexpr int kZones = 3;

// Images a node of each cloud has pulled: the cloud's system images, then workload images.
struct Image {
  std::string repository;
  std::string tag;
  int64_t size_bytes;
};
std::vector<Image> SystemImages(Cloud cloud) {
  switch (cloud) {
    case Cloud::kGke:
      return {{"gke.gcr.io/gke-metrics-agent", "1.12.3-gke.0", 98765432},
              {"gke.gcr.io/fluent-bit", "v1.8.12-gke.37", 31456789},
              {"gke.gcr.io/kube-proxy-amd64", "v1.28.13-gke.1006000", 72134567},
              {"gke.gcr.io/gcp-compute-persistent-disk-csi-driver", "v1.13.2-gke.0", 26543210},
              {"gke.gcr.io/csi-node-driver-registrar", "v2.11.1-gke.2", 11234567},
              {"gke.gcr.io/netd", "v0.8.0-gke.10", 39876543},
              {"gke.gcr.io/pause", "3.8@sha256", 311234}};
    case Cloud::kEks:
      return {{"602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni", "v1.18.3-eksbuild.2",
               45987654},
              {"602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni-init",
               "v1.18.3-eksbuild.2", 63456789},
              {"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy",
               "v1.28.12-minimal-eksbuild.5", 35678901},
              {"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-ebs-csi-driver", "v1.34.0",
               40123456},
              {"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause", "3.5", 298765}};
    case Cloud::kAks:
      return {{"mcr.microsoft.com/oss/kubernetes/kube-proxy", "v1.28.12-hotfix.20240819", 77123456},
              {"mcr.microsoft.com/containernetworking/azure-cns", "v1.6.5", 44567890},
              {"mcr.microsoft.com/oss/kubernetes-csi/azuredisk-csi", "v1.30.2", 91234567},
              {"mcr.microsoft.com/oss/kubernetes-csi/azurefile-csi", "v1.30.4", 87654321},
              {"mcr.microsoft.com/azuremonitor/containerinsights/ciprod", "3.1.23", 312345678},
              {"mcr.microsoft.com/oss/kubernetes/pause", "3.6", 253636}};
    case Cloud::kNone:
      break;
  }
  return {{"registry.k8s.io/kube-proxy", "v1.28.0", 29012345},
          {"registry.k8s.io/pause", "3.9", 321520}};
}
std::vector<Image> WorkloadImages() {
  return {{"ghcr.io/acme/checkout-api", "2.14.1", 187654321},
          {"ghcr.io/acme/search-indexer", "5.2.0", 412345678},
          {"ghcr.io/acme/orders-worker", "1.33.7", 154321098},
          {"ghcr.io/acme/web-frontend", "7.1.4", 98765432},
          {"ghcr.io/acme/payments-gateway", "3.8.2", 203456789},
          {"docker.io/library/nginx", "1.27.1", 72345678},
          {"cr.fluentbit.io/fluent/fluent-bit", "3.1.6", 38765432},
          {"docker.io/envoyproxy/envoy", "v1.31.1", 61234567},
          {"quay.io/prometheus/node-exporter", "v1.8.2", 23456789},
          {"registry.k8s.io/ingress-nginx/controller", "v1.11.2", 105678901},
          {"docker.io/grafana/promtail", "3.1.1", 76543210},
          {"docker.io/library/redis", "7.4.0", 45678901},
          {"docker.io/bitnami/kubectl", "1.30.4", 87654321}};
}

// A stable digest per image (the same on every node, as the registry's is).
std::string Digest(absl::string_view repository, absl::string_view tag) {
  SeededRandom r(std::hash<std::string>{}(absl::StrCat(repository, ":", tag)) ^ 0x5bd1e995ULL);
  return r.Hex(64);
}

// The project of a GCE provider ID, gce://<project>/<zone>/<name>.
std::string GceProject(const CloudNode& node) {
  const size_t start = std::string("gce://").size();
  return node.provider_id.substr(start, node.provider_id.find('/', start) - start);
}

std::string GkeLabelList(const ojson& labels) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels.items()) {
    if (absl::StartsWith(k, "cloud.google.com/")) {
      parts.push_back(absl::StrCat(k, "=", v.get<std::string>()));
    }
  }
  return absl::StrJoin(parts, ",");
}

}  // namespace

// --- SeededRandom ---

uint64_t SeededRandom::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::string SeededRandom::Chars(absl::string_view alphabet, int n) {
  std::string out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back(alphabet[Below(alphabet.size())]);
  return out;
}

// --- CloudNodeNamer ---

CloudNodeNamer::CloudNodeNamer(NodeNaming naming, uint64_t seed) : naming_(naming), random_(seed) {
  const char* clusters[] = {"prod-eu", "prod-us", "shop-main", "platform"};
  cluster_ = clusters[random_.Below(4)];
  for (int g = 0; g < kZones * 3; ++g) gke_groups_.push_back(random_.Hex(8));
  for (int p = 0; p < kAksPools; ++p) {
    aks_scale_sets_.push_back(absl::StrCat(1 + random_.Below(9), random_.Chars(kDigits, 7)));
  }
  aks_next_index_.assign(kAksPools, 0);
}

CloudNode CloudNodeNamer::Next(absl::string_view internal_ip) {
  Cloud cloud = Cloud::kGke;
  switch (naming_) {
    case NodeNaming::kGke:
      cloud = Cloud::kGke;
      break;
    case NodeNaming::kEks:
      cloud = Cloud::kEks;
      break;
    case NodeNaming::kAks:
      cloud = Cloud::kAks;
      break;
    case NodeNaming::kMixed:
    case NodeNaming::kPrefix:
      cloud = static_cast<Cloud>(1 + random_.Below(3));
      break;
  }
  // Unique names: a clash (possible for GKE's 4 random characters) draws again.
  while (true) {
    CloudNode node = cloud == Cloud::kGke ? Gke() : cloud == Cloud::kEks ? Eks(internal_ip) : Aks();
    if (names_.insert(node.name).second) return node;
  }
}

// Pools get 60% / 25% / 15% of the nodes.
static int PickPool(SeededRandom* random) {
  const uint64_t r = random->Below(100);
  return r < 60 ? 0 : r < 85 ? 1 : 2;
}

CloudNode CloudNodeNamer::Gke() {
  const CloudFacts& facts = Facts(Cloud::kGke);
  const int pool = PickPool(&random_);
  const int zone = static_cast<int>(random_.Below(kZones));
  CloudNode node;
  node.cloud = Cloud::kGke;
  node.region = facts.region;
  node.zone = facts.zones[zone];
  node.pool = facts.pools[pool];
  node.instance_type = pool == 1 ? "e2-highmem-8" : facts.instance_type;
  node.name = absl::StrCat("gke-", cluster_, "-", node.pool, "-", gke_groups_[pool * kZones + zone],
                           "-", random_.Chars(kLowerAlnum, 4));
  node.instance_id = absl::StrCat(1 + random_.Below(9), random_.Chars(kDigits, 18));
  node.provider_id = absl::StrCat("gce://", cluster_, "-project/", node.zone, "/", node.name);
  return node;
}

CloudNode CloudNodeNamer::Eks(absl::string_view internal_ip) {
  const CloudFacts& facts = Facts(Cloud::kEks);
  const int pool = PickPool(&random_);
  const int zone = static_cast<int>(random_.Below(kZones));
  CloudNode node;
  node.cloud = Cloud::kEks;
  node.region = facts.region;
  node.zone = facts.zones[zone];
  node.pool = facts.pools[pool];
  node.instance_type = pool == 1 ? "r6i.2xlarge" : facts.instance_type;
  node.name = absl::StrCat("ip-", absl::StrJoin(absl::StrSplit(internal_ip, '.'), "-"), ".",
                           node.region, ".compute.internal");
  node.instance_id = absl::StrCat("i-0", random_.Hex(16));
  node.provider_id = absl::StrCat("aws:///", node.zone, "/", node.instance_id);
  return node;
}

CloudNode CloudNodeNamer::Aks() {
  const CloudFacts& facts = Facts(Cloud::kAks);
  const int pool = PickPool(&random_);
  const int zone = static_cast<int>(random_.Below(kZones));
  CloudNode node;
  node.cloud = Cloud::kAks;
  node.region = facts.region;
  node.zone = facts.zones[zone];
  node.pool = facts.pools[pool];
  node.instance_type = pool == 1 ? "Standard_E8s_v5" : facts.instance_type;
  // VMSS instance names end in the VM's index in base 36, six digits.
  int index = aks_next_index_[pool]++;
  std::string base36(6, '0');
  for (int i = 5, n = index; i >= 0 && n > 0; --i, n /= 36) base36[i] = kBase36[n % 36];
  const std::string scale_set =
      absl::StrCat("aks-", node.pool, "-", aks_scale_sets_[pool], "-vmss");
  node.name = absl::StrCat(scale_set, base36);
  node.instance_id = absl::StrCat(index);
  node.provider_id = absl::StrCat(
      "azure:///subscriptions/3f2b6a1c-8d4e-4b7a-9c0d-1e2f3a4b5c6d/resourceGroups/mc_rg-", cluster_,
      "_", cluster_, "_", node.region, "/providers/Microsoft.Compute/virtualMachineScaleSets/",
      scale_set, "/virtualMachines/", index);
  return node;
}

// --- Nodes ---

void MakeNodeRealistic(const CloudNode& cloud, int index, SeededRandom* random,
                       nlohmann::json* node) {
  const CloudFacts& facts = Facts(cloud.cloud);
  const std::string name =
      cloud.name.empty() ? (*node)["metadata"]["name"].get<std::string>() : cloud.name;
  nlohmann::json& metadata = (*node)["metadata"];
  nlohmann::json& labels = metadata["labels"];
  nlohmann::json& annotations = metadata["annotations"];
  nlohmann::json& status = (*node)["status"];
  const std::string internal_ip = status["addresses"][0]["address"].get<std::string>();
  annotations["volumes.kubernetes.io/controller-managed-attach-detach"] = "true";
  if (cloud.cloud != Cloud::kNone) {
    labels["beta.kubernetes.io/instance-type"] = cloud.instance_type;
    labels["node.kubernetes.io/instance-type"] = cloud.instance_type;
    labels["failure-domain.beta.kubernetes.io/region"] = cloud.region;
    labels["failure-domain.beta.kubernetes.io/zone"] = cloud.zone;
    labels["topology.kubernetes.io/region"] = cloud.region;
    labels["topology.kubernetes.io/zone"] = cloud.zone;
  }
  const bool spot = absl::StrContains(cloud.pool, "spot");
  switch (cloud.cloud) {
    case Cloud::kGke:
      labels["cloud.google.com/gke-boot-disk"] = "pd-balanced";
      labels["cloud.google.com/gke-container-runtime"] = "containerd";
      labels["cloud.google.com/gke-cpu-scaling-level"] = "8";
      labels["cloud.google.com/gke-logging-variant"] = "DEFAULT";
      labels["cloud.google.com/gke-max-pods-per-node"] = "110";
      labels["cloud.google.com/gke-nodepool"] = cloud.pool;
      labels["cloud.google.com/gke-os-distribution"] = "cos";
      labels["cloud.google.com/gke-provisioning"] = spot ? "spot" : "standard";
      labels["cloud.google.com/gke-stack-type"] = "IPV4";
      labels["cloud.google.com/machine-family"] = "e2";
      labels["cloud.google.com/private-node"] = "false";
      if (spot) labels["cloud.google.com/gke-spot"] = "true";
      labels["topology.gke.io/zone"] = cloud.zone;
      annotations["container.googleapis.com/instance_id"] = cloud.instance_id;
      annotations["csi.volume.kubernetes.io/nodeid"] =
          absl::StrCat(R"({"pd.csi.storage.gke.io":"projects/)", GceProject(cloud), "/zones/",
                       cloud.zone, "/instances/", name, R"("})");
      annotations["node.gke.io/last-applied-node-labels"] = GkeLabelList(labels);
      annotations["node.gke.io/last-applied-node-taints"] = "";
      break;
    case Cloud::kEks:
      labels["alpha.eksctl.io/cluster-name"] = "shop-prod";
      labels["alpha.eksctl.io/nodegroup-name"] = cloud.pool;
      labels["eks.amazonaws.com/capacityType"] = spot ? "SPOT" : "ON_DEMAND";
      labels["eks.amazonaws.com/nodegroup"] = cloud.pool;
      labels["eks.amazonaws.com/nodegroup-image"] = "ami-0a1b2c3d4e5f60718";
      labels["eks.amazonaws.com/sourceLaunchTemplateId"] = "lt-0f1e2d3c4b5a69788";
      labels["eks.amazonaws.com/sourceLaunchTemplateVersion"] = "1";
      labels["k8s.io/cloud-provider-aws"] = "5e8f0c2b9a7d4e61b3c5d7f9a1b3c5d7";
      labels["topology.ebs.csi.aws.com/zone"] = cloud.zone;
      labels["topology.k8s.aws/zone-id"] = absl::StrCat("usw2-az", cloud.zone.back() - 'a' + 1);
      annotations["alpha.kubernetes.io/provided-node-ip"] = internal_ip;
      annotations["csi.volume.kubernetes.io/nodeid"] =
          absl::StrCat(R"({"ebs.csi.aws.com":")", cloud.instance_id, R"("})");
      break;
    case Cloud::kAks:
      labels["agentpool"] = cloud.pool;
      labels["kubernetes.azure.com/agentpool"] = cloud.pool;
      labels["kubernetes.azure.com/cluster"] = "MC_rg-shop_shop-aks_westeurope";
      labels["kubernetes.azure.com/consolidated-additional-properties"] =
          "6d0f8a2e-3b1c-4e5d-9f7a-2c4e6b8d0f1a";
      labels["kubernetes.azure.com/kubelet-identity-client-id"] =
          "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
      labels["kubernetes.azure.com/mode"] = cloud.pool == "nodepool1" ? "system" : "user";
      labels["kubernetes.azure.com/node-image-version"] =
          "AKSUbuntu-2204gen2containerd-202408.12.0";
      labels["kubernetes.azure.com/nodepool-type"] = "VirtualMachineScaleSets";
      labels["kubernetes.azure.com/os-sku"] = "Ubuntu";
      labels["kubernetes.azure.com/role"] = "agent";
      labels["kubernetes.azure.com/storageprofile"] = "managed";
      labels["kubernetes.azure.com/storagetier"] = "Premium_LRS";
      labels["kubernetes.io/role"] = "agent";
      labels["node-role.kubernetes.io/agent"] = "";
      labels["storageprofile"] = "managed";
      labels["storagetier"] = "Premium_LRS";
      labels["topology.disk.csi.azure.com/zone"] = cloud.zone;
      if (spot) labels["kubernetes.azure.com/scalesetpriority"] = "spot";
      annotations["csi.volume.kubernetes.io/nodeid"] = absl::StrCat(
          R"({"disk.csi.azure.com":")", name, R"(","file.csi.azure.com":")", name, R"("})");
      break;
    case Cloud::kNone:
      break;
  }

  nlohmann::json& spec = (*node)["spec"];
  if (cloud.cloud != Cloud::kEks) {  // EKS's VPC CNI gives pods VPC addresses, no pod CIDR
    const std::string cidr =
        absl::StrCat("10.", 64 + (index / 256) % 128, ".", index % 256, ".0/24");
    spec["podCIDR"] = cidr;
    spec["podCIDRs"] = nlohmann::json::array({cidr});
  }
  if (!cloud.provider_id.empty()) spec["providerID"] = cloud.provider_id;

  // Addresses: InternalIP, then the cloud's DNS name / external address, then Hostname.
  nlohmann::json addresses =
      nlohmann::json::array({{{"type", "InternalIP"}, {"address", internal_ip}}});
  if (cloud.cloud == Cloud::kGke) {
    addresses.push_back({{"type", "ExternalIP"},
                         {"address", absl::StrCat("34.", 76 + index / 65536 % 100, ".",
                                                  index / 256 % 256, ".", index % 256)}});
    addresses.push_back(
        {{"type", "InternalDNS"},
         {"address", absl::StrCat(name, ".", cloud.zone, ".c.", GceProject(cloud), ".internal")}});
  } else if (cloud.cloud == Cloud::kEks) {
    addresses.push_back({{"type", "InternalDNS"}, {"address", name}});
  }
  addresses.push_back({{"type", "Hostname"}, {"address", name}});
  status["addresses"] = std::move(addresses);

  // Conditions the cloud's agents add: GKE's node-problem-detector, the route controller.
  const std::string ts = status["conditions"][0]["lastHeartbeatTime"].get<std::string>();
  auto condition = [&ts](const char* type, const char* status_value, const char* reason,
                         const char* message) {
    return nlohmann::json{{"type", type},
                          {"status", status_value},
                          {"lastHeartbeatTime", ts},
                          {"lastTransitionTime", ts},
                          {"reason", reason},
                          {"message", message}};
  };
  nlohmann::json conditions = nlohmann::json::array();
  if (cloud.cloud == Cloud::kGke) {
    conditions.push_back(condition("FrequentUnregisterNetDevice", "False",
                                   "NoFrequentUnregisterNetDevice",
                                   "node is functioning properly"));
    conditions.push_back(condition("FrequentKubeletRestart", "False", "NoFrequentKubeletRestart",
                                   "kubelet is functioning properly"));
    conditions.push_back(condition("FrequentDockerRestart", "False", "NoFrequentDockerRestart",
                                   "docker is functioning properly"));
    conditions.push_back(condition("FrequentContainerdRestart", "False",
                                   "NoFrequentContainerdRestart",
                                   "containerd is functioning properly"));
    conditions.push_back(
        condition("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock"));
    conditions.push_back(condition("ReadonlyFilesystem", "False", "FilesystemIsNotReadOnly",
                                   "Filesystem is not read-only"));
    conditions.push_back(condition("CorruptDockerOverlay2", "False", "NoCorruptDockerOverlay2",
                                   "docker overlay2 is functioning properly"));
    conditions.push_back(condition("NetworkUnavailable", "False", "RouteCreated",
                                   "NodeController create implicit route"));
  }
  for (nlohmann::json& c : status["conditions"]) conditions.push_back(std::move(c));
  status["conditions"] = std::move(conditions);

  // Images: the cloud's system images and some workload images, most recent first.
  std::vector<Image> images = SystemImages(cloud.cloud);
  std::vector<Image> workloads = WorkloadImages();
  const int extra = 3 + static_cast<int>(random->Below(6));
  for (int i = 0; i < extra && !workloads.empty(); ++i) {
    const size_t pick = random->Below(workloads.size());
    images.push_back(workloads[pick]);
    workloads.erase(workloads.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  nlohmann::json image_list = nlohmann::json::array();
  for (const Image& image : images) {
    image_list.push_back(
        {{"names",
          {absl::StrCat(image.repository, "@sha256:", Digest(image.repository, image.tag)),
           absl::StrCat(image.repository, ":", image.tag)}},
         {"sizeBytes", image.size_bytes}});
  }
  status["images"] = std::move(image_list);

  nlohmann::json& info = status["nodeInfo"];
  info["containerRuntimeVersion"] = facts.runtime;
  info["kernelVersion"] = facts.kernel;
  info["kubeProxyVersion"] = facts.kubelet;
  info["kubeletVersion"] = facts.kubelet;
  info["osImage"] = facts.os_image;

  // managedFields: the kubelet (labels, annotations; status as a subresource), the
  // kube-controller-manager (the ttl annotation, the pod CIDR), and GKE's / AKS's node
  // controllers' status conditions.
  ojson kubelet_meta = {
      {"metadata", {{"annotations", ojson::object()}, {"labels", ojson::object()}}}};
  for (const auto& [k, v] : annotations.items()) {
    if (k != "node.alpha.kubernetes.io/ttl") kubelet_meta["metadata"]["annotations"][k] = v;
  }
  for (const auto& [k, v] : labels.items()) kubelet_meta["metadata"]["labels"][k] = v;
  ojson kcm = {{"metadata", {{"annotations", {{"node.alpha.kubernetes.io/ttl", "0"}}}}}};
  if (spec.contains("podCIDR")) {
    kcm["spec"] = {{"podCIDR", spec["podCIDR"]}, {"podCIDRs", spec["podCIDRs"]}};
  }
  ojson kubelet_status = {{"status", ojson::parse(status.dump())}};
  kubelet_status["status"].erase("nodeInfo");
  ojson managed = ojson::array({ManagedFieldsEntry("kubelet", kubelet_meta),
                                ManagedFieldsEntry("kube-controller-manager", kcm),
                                ManagedFieldsEntry("kubelet", kubelet_status, "status")});
  std::string text = managed.dump();
  absl::StrReplaceAll({{"@TS@", ts}}, &text);
  metadata["managedFields"] = nlohmann::json::parse(text);
}

// --- Pods ---

namespace {

struct Shape {
  const char* app;
  const char* image;
  int env;        // env entries on the container (1 or 2)
  bool liveness;  // a liveness probe besides the readiness probe
  bool config;    // a ConfigMap volume
};

// From ~5.6 KB (search-indexer) to ~6 KB once filled in.
constexpr Shape kShapes[kRealisticPodShapes] = {
    {"checkout-api", "ghcr.io/acme/checkout-api:2.14.1", 2, true, false},
    {"search-indexer", "ghcr.io/acme/search-indexer:5.2.0", 1, false, false},
    {"orders-worker", "ghcr.io/acme/orders-worker:1.33.7", 1, false, true},
    {"web-frontend", "ghcr.io/acme/web-frontend:7.1.4", 1, true, false},
    {"payments-gateway", "ghcr.io/acme/payments-gateway:3.8.2", 1, false, true},
};

ojson HttpProbe(const char* path, int period) {
  return {{"httpGet", {{"path", path}, {"port", 8080}, {"scheme", "HTTP"}}},
          {"timeoutSeconds", 1},
          {"periodSeconds", period},
          {"successThreshold", 1},
          {"failureThreshold", 3}};
}

}  // namespace

std::string FillPodTemplate(const std::string& text, const std::string& name, const std::string& ns,
                            const std::string& uid, uint64_t rv, const std::string& node,
                            const std::string& host_ip, const std::string& pod_ip,
                            const std::string& timestamp,
                            const std::vector<std::string>& container_ids) {
  std::vector<std::pair<std::string, std::string>> replacements = {
      {"@NAME@", name}, {"@NS@", ns},          {"@UID@", uid},      {"@RV@", absl::StrCat(rv)},
      {"@NODE@", node}, {"@HOSTIP@", host_ip}, {"@PODIP@", pod_ip}, {"@TS@", timestamp}};
  for (size_t k = 0; k < container_ids.size(); ++k) {
    replacements.emplace_back(absl::StrCat("@CID", k, "@"), container_ids[k]);
  }
  std::string out = absl::StrReplaceAll(text, replacements);
  out.shrink_to_fit();  // the store keeps it for the life of the object
  return out;
}

PodTemplate RealisticPodTemplate(int shape_index, const StringPairs& requests, uint64_t seed) {
  const Shape& shape = kShapes[shape_index % kRealisticPodShapes];
  SeededRandom random(seed * 1000003 + static_cast<uint64_t>(shape_index));
  const std::string hash = random.Chars(kNameSuffix, 10);
  const std::string rs_name = absl::StrCat(shape.app, "-", hash);
  const std::string rs_uid = absl::StrCat(random.Hex(8), "-", random.Hex(4), "-4", random.Hex(3),
                                          "-a", random.Hex(3), "-", random.Hex(12));
  const std::string token_volume = absl::StrCat("kube-api-access-", random.Chars(kNameSuffix, 5));
  const std::string image = shape.image;

  ojson labels = {{"app.kubernetes.io/name", shape.app}, {"pod-template-hash", hash}};
  ojson request_list = ojson::object();
  for (const auto& [k, v] : requests) request_list[k] = v;
  ojson resources = {{"requests", request_list}};

  // The container as the Deployment's template has it (API defaults included); the
  // ServiceAccount admission's token mount and volume are added below.
  ojson env = ojson::array({{{"name", "LOG_LEVEL"}, {"value", "info"}}});
  if (shape.env > 1) {
    env.push_back({{"name", "DB_HOST"}, {"value", "postgres.data"}});
  }
  ojson app = {{"name", "app"}, {"image", image}};
  app["ports"] = {{{"containerPort", 8080}, {"protocol", "TCP"}}};
  app["env"] = env;
  app["resources"] = resources;
  app["volumeMounts"] = ojson::array();
  if (shape.config) {
    app["volumeMounts"].push_back(
        {{"name", "config"}, {"readOnly", true}, {"mountPath", "/etc/app"}});
  }
  if (shape.liveness) app["livenessProbe"] = HttpProbe("/healthz", 10);
  app["readinessProbe"] = HttpProbe("/ready", 5);
  app["terminationMessagePath"] = "/dev/termination-log";
  app["terminationMessagePolicy"] = "File";
  app["imagePullPolicy"] = "IfNotPresent";
  ojson volumes = ojson::array();
  if (shape.config) {
    volumes.push_back(
        {{"name", "config"},
         {"configMap", {{"name", absl::StrCat(shape.app, "-config")}, {"defaultMode", 420}}}});
  }
  ojson spec = ojson::object();
  spec["volumes"] = volumes;
  spec["containers"] = ojson::array({app});
  spec["restartPolicy"] = "Always";
  spec["terminationGracePeriodSeconds"] = 30;
  spec["dnsPolicy"] = "ClusterFirst";
  spec["serviceAccountName"] = shape.app;
  spec["serviceAccount"] = shape.app;
  spec["schedulerName"] = "default-scheduler";
  // What kube-controller-manager wrote (its managedFields): the template's fields.
  ojson kcm_spec = spec;
  if (!shape.config) {
    kcm_spec.erase("volumes");
    kcm_spec["containers"][0].erase("volumeMounts");
  }
  spec["containers"][0]["volumeMounts"].push_back(
      {{"name", token_volume},
       {"readOnly", true},
       {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}});
  spec["volumes"].push_back(
      {{"name", token_volume},
       {"projected",
        {{"sources",
          {{{"serviceAccountToken", {{"expirationSeconds", 3607}, {"path", "token"}}}},
           {{"configMap",
             {{"name", "kube-root-ca.crt"}, {"items", {{{"key", "ca.crt"}, {"path", "ca.crt"}}}}}}},
           {{"downwardAPI",
             {{"items",
               {{{"path", "namespace"},
                 {"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "metadata.namespace"}}}}}}}}}}},
         {"defaultMode", 420}}}});
  spec["nodeName"] = "@NODE@";
  spec["tolerations"] = {{{"key", "node.kubernetes.io/not-ready"},
                          {"operator", "Exists"},
                          {"effect", "NoExecute"},
                          {"tolerationSeconds", 300}},
                         {{"key", "node.kubernetes.io/unreachable"},
                          {"operator", "Exists"},
                          {"effect", "NoExecute"},
                          {"tolerationSeconds", 300}}};
  spec["priority"] = 0;
  spec["enableServiceLinks"] = true;
  spec["preemptionPolicy"] = "PreemptLowerPriority";

  // The manifest kubectl applied (its last-applied-configuration): the main container as a user
  // writes it.
  ojson applied_app = {{"image", image}, {"name", "app"}, {"resources", resources}};
  ojson applied = {{"apiVersion", "v1"},
                   {"kind", "Pod"},
                   {"metadata",
                    {{"labels", {{"app.kubernetes.io/name", shape.app}}},
                     {"name", "@NAME@"},
                     {"namespace", "@NS@"}}},
                   {"spec", {{"containers", ojson::array({applied_app})}}}};
  ojson annotations = {{"kubectl.kubernetes.io/last-applied-configuration", applied.dump() + "\n"}};
  ojson owner = {{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"name", rs_name},
                 {"uid", rs_uid},           {"controller", true},   {"blockOwnerDeletion", true}};

  // Status as the kubelet writes it for a running pod.
  int cid = 0;
  auto container_status = [&](const ojson& c) {
    const std::string c_image = c["image"].get<std::string>();
    ojson s = {{"name", c["name"]}};
    s["state"] = {{"running", {{"startedAt", "@TS@"}}}};
    s["lastState"] = ojson::object();
    s["ready"] = true;
    s["restartCount"] = 0;
    s["image"] = c_image;
    s["imageID"] = absl::StrCat(c_image.substr(0, c_image.rfind(':')), "@sha256:", random.Hex(64));
    s["containerID"] = absl::StrCat("containerd://@CID", cid++, "@");
    s["started"] = true;
    return s;
  };
  ojson status = ojson::object();
  status["phase"] = "Running";
  ojson conditions = ojson::array();
  // A 1.28 kubelet's conditions (1.29+ adds PodReadyToStartContainers).
  for (const char* type : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    conditions.push_back({{"type", type},
                          {"status", "True"},
                          {"lastProbeTime", nullptr},
                          {"lastTransitionTime", "@TS@"}});
  }
  status["conditions"] = conditions;
  status["hostIP"] = "@HOSTIP@";
  status["hostIPs"] = {{{"ip", "@HOSTIP@"}}};
  status["podIP"] = "@PODIP@";
  status["podIPs"] = {{{"ip", "@PODIP@"}}};
  status["startTime"] = "@TS@";
  ojson statuses = ojson::array();
  for (const ojson& c : spec["containers"]) statuses.push_back(container_status(c));
  status["containerStatuses"] = statuses;
  status["qosClass"] = "Burstable";

  // managedFields: the ReplicaSet controller created the pod (metadata and the template's spec),
  // kubectl's client-side apply wrote its annotation, the kubelet writes the status.
  ojson kcm_fields = {
      {"metadata",
       {{"generateName", ""}, {"labels", labels}, {"ownerReferences", ojson::array({owner})}}},
      {"spec", kcm_spec}};
  ojson apply_fields = {
      {"metadata", {{"annotations", {{"kubectl.kubernetes.io/last-applied-configuration", ""}}}}}};
  ojson kubelet_fields = {{"status", status}};
  kubelet_fields["status"].erase("qosClass");
  ojson managed = ojson::array({ManagedFieldsEntry("kube-controller-manager", kcm_fields),
                                ManagedFieldsEntry("kubectl-client-side-apply", apply_fields),
                                ManagedFieldsEntry("kubelet", kubelet_fields, "status")});

  ojson metadata = ojson::object();
  metadata["name"] = "@NAME@";
  metadata["generateName"] = absl::StrCat(rs_name, "-");
  metadata["namespace"] = "@NS@";
  metadata["uid"] = "@UID@";
  metadata["resourceVersion"] = "@RV@";
  metadata["creationTimestamp"] = "@TS@";
  metadata["labels"] = labels;
  metadata["annotations"] = annotations;
  metadata["ownerReferences"] = ojson::array({owner});
  metadata["managedFields"] = managed;

  ojson pod = ojson::object();
  pod["kind"] = "Pod";
  pod["apiVersion"] = "v1";
  pod["metadata"] = metadata;
  pod["spec"] = spec;
  pod["status"] = status;

  PodTemplate out;
  out.generate_name = absl::StrCat(rs_name, "-");
  out.containers = cid;
  out.json = pod.dump();
  return out;
}

}  // namespace fitledger::sim
