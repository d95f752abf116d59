// fitledger-sim's configuration: the nodes of the simulated cluster, the watch lag, the simulated
// kubelet, optional generated load, TLS and auth. Loaded from YAML (see sim/README.md).
#ifndef FITLEDGER_SIM_CONFIG_H_
#define FITLEDGER_SIM_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fitledger::sim {

// Ordered (name, value) pairs as written in the file: resource lists and labels.
using StringPairs = std::vector<std::pair<std::string, std::string>>;

struct NodeSpec {
  std::string name;
  StringPairs allocatable;  // resource name -> quantity text, e.g. {"cpu", "4"}
  StringPairs capacity;     // defaults to `allocatable`
  StringPairs labels;
  // Device-plugin resources: extended resource name -> healthy devices, which the simulated
  // kubelet's device manager allocates (sim/kubelet.h). The config loader also lists each in
  // `allocatable` and `capacity`, as the kubelet reports a device plugin's devices.
  std::vector<std::pair<std::string, int64_t>> devices;
};

// How generated nodes are named (generate.nodeNames): `<node_prefix><i>`, or as the managed
// clouds name their nodes (sim/README.md gives the shapes); kMixed draws one of the three per node.
enum class NodeNaming { kPrefix, kGke, kEks, kAks, kMixed };

// What generated objects look like (generate.objects): kBasic is a ~1.5 KB pod and a plain node;
// kRealistic pods of 3-6 KB (managedFields, ownerReferences, a kubectl last-applied-configuration,
// env, probes, volumes) and nodes as the clouds' kubelets write them (labels, managedFields,
// images, ...).
enum class ObjectProfile { kBasic, kRealistic };

// generate.fullNodes: `fraction` of the generated nodes (chosen with the seed) get one more bound,
// Running pod that fills them up to `free` (resource name -> quantity text), so a pod requesting
// more than that fails there. The full nodes take the resources of `free` in turn: with cpu and
// memory, one is filled in cpu, the next in memory, the next in both, and so on.
struct FullNodesSpec {
  double fraction = 0;
  StringPairs free;
};

// Pre-populates a big cluster: `nodes` nodes named by `node_naming` and `pods_per_node` bound,
// Running pods on each (namespace `pod_namespace`), admitted by the kubelet's accounting. With
// the defaults (prefix names, basic objects, no full nodes) nothing is drawn from `seed`: the
// cluster is the same as before these options existed.
struct GenerateSpec {
  int nodes = 0;
  int pods_per_node = 0;
  std::string node_prefix = "node-";
  std::string pod_namespace = "bench";
  StringPairs node_allocatable = {{"cpu", "32"}, {"memory", "128Gi"}, {"pods", "110"}};
  StringPairs pod_requests = {{"cpu", "100m"}, {"memory", "128Mi"}};
  NodeNaming node_naming = NodeNaming::kPrefix;
  ObjectProfile objects = ObjectProfile::kBasic;
  uint64_t seed = 1;  // names, shapes, which nodes are full: the same cluster for the same seed
  FullNodesSpec full_nodes;
};

struct KubeletConfig {
  bool enabled = true;
  absl::Duration admit_delay = absl::ZeroDuration();
};

// HTTPS when `cert_file` is set; with `client_ca_file`, clients must present a certificate
// signed by it.
struct TlsConfig {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool enabled() const { return !cert_file.empty(); }
};

// Paths written into the generated kubeconfig (certificate-authority, client-certificate,
// client-key). Empty: omitted.
struct KubeconfigOutConfig {
  std::string ca_file;
  std::string client_cert_file;
  std::string client_key_file;
};

struct SimConfig {
  std::vector<NodeSpec> nodes;
  absl::Duration watch_lag = absl::ZeroDuration();
  absl::Duration bookmark_interval = absl::Seconds(1);
  // How many events the watch history keeps; a watch resuming from before it gets 410 Gone.
  int64_t event_window = 10000;
  // core/v1 Events are deleted this long after they were created (kube-apiserver --event-ttl).
  absl::Duration event_ttl = absl::Hours(1);
  // Streaming lists (WatchList: sendInitialEvents=true on a watch). false answers such a watch
  // 422 as an API server with the WatchList feature gate off does.
  bool watch_list = true;
  // A WatchList whose client accepts gzip is answered gzip, one member per write, as
  // kube-apiserver 1.37 does with its feature WatchListCompression (on by default there; off
  // here by default: gzip costs the demo and the sync benchmarks CPU the sim is not measuring).
  bool watch_list_compression = false;
  // A watch without timeoutSeconds ends after this long (clients resume).
  absl::Duration max_watch_duration = absl::Minutes(30);
  KubeletConfig kubelet;
  GenerateSpec generate;
  TlsConfig tls;
  std::string token;  // non-empty: API paths require `Authorization: Bearer <token>`
  KubeconfigOutConfig kubeconfig_out;
  int threads = 128;                        // HTTP worker threads; every open watch holds one
  size_t max_body_bytes = 3 * 1024 * 1024;  // larger request bodies get 413
};

// Parses the YAML text of a config. InvalidArgument naming the key path and line for an unknown
// key, a wrong type, a malformed quantity or duration, or a duplicate node name.
absl::StatusOr<SimConfig> ParseSimConfig(absl::string_view yaml_text);

// Reads and parses `path`. NotFound if it cannot be read; otherwise as ParseSimConfig.
absl::StatusOr<SimConfig> LoadSimConfigFile(const std::string& path);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_CONFIG_H_
