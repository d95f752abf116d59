// What `generate` builds beyond its basic objects (sim/README.md, "Generated clusters"): node
// names in the shapes the managed clouds give them, nodes as those clouds' kubelets and
// controllers write them, and heavy pods as a Deployment's ReplicaSet creates them and the kubelet
// runs them (managedFields, ownerReferences, a kubectl last-applied-configuration, env, probes,
// volumes). Everything is drawn from a seed: the same seed gives the same objects.
#ifndef FITLEDGER_SIM_REALISTIC_H_
#define FITLEDGER_SIM_REALISTIC_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sim/config.h"

namespace fitledger::sim {

// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
// the same sequence for a seed on every platform, which <random>'s distributions do not promise.
// Thread-compatible.
class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // In [0, n) (modulo bias is negligible for the small n used here). REQUIRES: n > 0.
  uint64_t Below(uint64_t n) { return Next() % n; }
  // `n` characters drawn from `alphabet`.
  std::string Chars(absl::string_view alphabet, int n);
  // `n` lowercase hex digits.
  std::string Hex(int n) { return Chars("0123456789abcdef", n); }

 private:
  uint64_t state_;
};

enum class Cloud { kNone, kGke, kEks, kAks };

// A generated node's identity in its cloud; kNone for prefix-named nodes.
struct CloudNode {
  Cloud cloud = Cloud::kNone;
  std::string name;
  std::string region;
  std::string zone;
  std::string pool;  // GKE node pool, EKS node group, AKS agent pool
  std::string instance_type;
  std::string provider_id;  // spec.providerID
  std::string instance_id;  // the cloud's id of the VM (GCE instance id, EC2 id, VMSS index)
};

// Names generated nodes as the clouds do, deterministic for a seed. Names are unique among those
// one namer returns. Thread-compatible.
//   GKE: gke-<cluster>-<pool>-<8 hex>-<4 chars>  (the 8 hex name the pool's instance group in
//        one zone, the 4 chars the VM in it)
//   EKS: ip-10-<a>-<b>-<c>.<region>.compute.internal  (the node's InternalIP, spelled out)
//   AKS: aks-<pool>-<8 digits>-vmss<6 base-36>  (the scale set, then the VM's index in base 36)
class CloudNodeNamer {
 public:
  // REQUIRES: naming != NodeNaming::kPrefix.
  CloudNodeNamer(NodeNaming naming, uint64_t seed);
  // The next node; `internal_ip` is the IPv4 address the sim gives it (10.x.y.z).
  CloudNode Next(absl::string_view internal_ip);

 private:
  CloudNode Gke();
  CloudNode Eks(absl::string_view internal_ip);
  CloudNode Aks();

  // Constant after construction.
  const NodeNaming naming_;
  std::vector<std::string> gke_groups_;      // the 8 hex of each (pool, zone) instance group
  std::vector<std::string> aks_scale_sets_;  // the 8 digits of each pool's scale set
  std::string cluster_;

  SeededRandom random_;
  std::set<std::string> names_;
  std::vector<int> aks_next_index_;  // per pool: the next VM index in its scale set
};

// Turns BuildNode's `node` into one as the cloud's kubelet and controllers write it: the cloud's
// labels and annotations (kubelet-set ones too), spec.podCIDR(s) and providerID, managedFields of
// the kubelet and kube-controller-manager, the cloud's extra node conditions, InternalDNS /
// ExternalIP addresses, container images (8-15 of them, the bulk of a real node), nodeInfo.
// `index` is the node's index in the sim (its pod CIDR); `random` varies the images per node.
// For Cloud::kNone only the cloud-neutral parts are added.
void MakeNodeRealistic(const CloudNode& cloud, int index, SeededRandom* random,
                       nlohmann::json* node);

// A pod shape for the generator, with placeholders: @NAME@ @NS@ @UID@ @RV@ @NODE@ @HOSTIP@
// @PODIP@ @TS@, and @CID0@ .. @CID<containers - 1>@ for the container IDs (64 hex each).
struct PodTemplate {
  std::string generate_name;  // "<app>-<pod-template-hash>-": a pod's name is this + 5 chars
  int containers = 0;         // how many @CID<k>@ it holds
  std::string json;
};

// A pod shape's text (PodTemplate::json, or the basic template the store builds) with its
// placeholders filled in; `container_ids` fill @CID0@ onwards.
std::string FillPodTemplate(const std::string& text, const std::string& name, const std::string& ns,
                            const std::string& uid, uint64_t rv, const std::string& node,
                            const std::string& host_ip, const std::string& pod_ip,
                            const std::string& timestamp,
                            const std::vector<std::string>& container_ids);

// How many workloads RealisticPodTemplate knows.
inline constexpr int kRealisticPodShapes = 5;

// Workload `shape` (0 .. kRealisticPodShapes - 1) as its ReplicaSet creates its pods and the
// kubelet runs them: one container with env, a readiness probe (some a liveness probe too), the
// projected kube-api-access volume the ServiceAccount admission adds (some a ConfigMap volume
// too), ownerReferences, managedFields (kube-controller-manager's, kubectl-client-side-apply's,
// the kubelet's status entry), a kubectl.kubernetes.io/last-applied-configuration annotation, a
// Running status as a 1.28 kubelet writes it. 5.6-6.1 KB of compact JSON once filled in. The
// container requests `requests`.
PodTemplate RealisticPodTemplate(int shape, const StringPairs& requests, uint64_t seed);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_REALISTIC_H_
