#include "sim/config.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "model/quantity.h"
#include "sim/pod_requests.h"
#include "yaml-cpp/yaml.h"

namespace fitledger::sim {
namespace {

// Errors carry the key path and the 1-based line of the offending node.
absl::Status Bad(const std::string& path, const YAML::Node& node, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, " (line ", node.Mark().line + 1, "): ", what));
}

absl::Status CheckKeys(const std::string& path, const YAML::Node& map,
                       const std::set<std::string>& allowed) {
  if (!map.IsMap()) return Bad(path, map, "must be a mapping");
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>();
    if (allowed.count(key) == 0) {
      return Bad(path.empty() ? key : absl::StrCat(path, ".", key), kv.first,
                 absl::StrCat("unknown key; expected one of: ", absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Scalar(const std::string& path, const YAML::Node& node) {
  if (!node.IsScalar()) return Bad(path, node, "must be a scalar");
  return node.as<std::string>();
}

absl::StatusOr<bool> Bool(const std::string& path, const YAML::Node& node) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    return Bad(path, node, "must be true or false");
  }
  return value;
}

absl::StatusOr<int64_t> Int(const std::string& path, const YAML::Node& node, int64_t min) {
  int64_t value = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.as<std::string>(), &value) || value < min) {
    return Bad(path, node, absl::StrCat("must be an integer >= ", min));
  }
  return value;
}

absl::StatusOr<absl::Duration> Duration(const std::string& path, const YAML::Node& node) {
  ASSIGN_OR_RETURN(std::string text, Scalar(path, node));
  auto d = ParseDuration(text);
  if (!d.ok()) return Bad(path, node, d.status().message());
  return *d;
}

absl::StatusOr<StringPairs> Pairs(const std::string& path, const YAML::Node& node,
                                  bool quantities) {
  StringPairs out;
  if (node.IsNull()) return out;
  if (!node.IsMap()) return Bad(path, node, "must be a mapping");
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    std::string child = absl::StrCat(path, ".", key);
    ASSIGN_OR_RETURN(std::string value, Scalar(child, kv.second));
    if (quantities) {
      auto q = Quantity::Parse(value);
      if (!q.ok()) return Bad(child, kv.second, q.status().message());
      if (q->IsNegative()) return Bad(child, kv.second, "must not be negative");
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

absl::StatusOr<NodeSpec> ParseNode(const std::string& path, const YAML::Node& node) {
  RETURN_IF_ERROR(CheckKeys(path, node, {"name", "allocatable", "capacity", "labels", "devices"}));
  NodeSpec spec;
  if (!node["name"]) return Bad(path, node, "name is required");
  ASSIGN_OR_RETURN(spec.name, Scalar(path + ".name", node["name"]));
  if (spec.name.empty()) return Bad(path + ".name", node["name"], "must not be empty");
  if (node["allocatable"]) {
    ASSIGN_OR_RETURN(spec.allocatable, Pairs(path + ".allocatable", node["allocatable"], true));
  }
  if (node["capacity"]) {
    ASSIGN_OR_RETURN(spec.capacity, Pairs(path + ".capacity", node["capacity"], true));
  } else {
    spec.capacity = spec.allocatable;
  }
  if (spec.allocatable.empty()) spec.allocatable = spec.capacity;
  if (node["labels"]) {
    ASSIGN_OR_RETURN(spec.labels, Pairs(path + ".labels", node["labels"], false));
  }
  if (const YAML::Node devices = node["devices"]; devices && !devices.IsNull()) {
    if (!devices.IsMap()) return Bad(path + ".devices", devices, "must be a mapping");
    for (const auto& kv : devices) {
      const std::string name = kv.first.as<std::string>();
      const std::string child = absl::StrCat(path, ".devices.", name);
      if (!IsExtendedResourceName(name)) {
        return Bad(child, kv.first,
                   "a device plugin's resource is an extended resource name (example.com/gpu)");
      }
      ASSIGN_OR_RETURN(int64_t count, Int(child, kv.second, 0));
      for (StringPairs* list : {&spec.allocatable, &spec.capacity}) {
        for (const auto& [listed, _] : *list) {
          if (listed == name) {
            return Bad(child, kv.first,
                       "also in allocatable or capacity; a device plugin's resource is its "
                       "device count, listed there by the kubelet");
          }
        }
      }
      spec.devices.emplace_back(name, count);
    }
    for (const auto& [name, count] : spec.devices) {
      spec.allocatable.emplace_back(name, absl::StrCat(count));
      spec.capacity.emplace_back(name, absl::StrCat(count));
    }
  }
  return spec;
}

absl::StatusOr<SimConfig> ParseRoot(const YAML::Node& root) {
  SimConfig config;
  if (root.IsNull()) return config;
  RETURN_IF_ERROR(CheckKeys("", root,
                            {"nodes", "watchLag", "bookmarkInterval", "eventWindow", "eventTtl",
                             "maxWatchDuration", "kubelet", "generate", "tls", "token",
                             "kubeconfigOut", "threads", "maxBodyBytes", "watchList"}));
  if (const YAML::Node nodes = root["nodes"]; nodes && !nodes.IsNull()) {
    if (!nodes.IsSequence()) return Bad("nodes", nodes, "must be a list");
    std::set<std::string> names;
    for (size_t i = 0; i < nodes.size(); ++i) {
      ASSIGN_OR_RETURN(NodeSpec spec, ParseNode(absl::StrCat("nodes[", i, "]"), nodes[i]));
      if (!names.insert(spec.name).second) {
        return Bad(absl::StrCat("nodes[", i, "].name"), nodes[i], "duplicate node name");
      }
      config.nodes.push_back(std::move(spec));
    }
  }
  if (root["watchLag"]) {
    ASSIGN_OR_RETURN(config.watch_lag, Duration("watchLag", root["watchLag"]));
  }
  if (root["bookmarkInterval"]) {
    ASSIGN_OR_RETURN(config.bookmark_interval,
                     Duration("bookmarkInterval", root["bookmarkInterval"]));
    if (config.bookmark_interval <= absl::ZeroDuration()) {
      return Bad("bookmarkInterval", root["bookmarkInterval"], "must be positive");
    }
  }
  if (root["watchList"]) {
    ASSIGN_OR_RETURN(config.watch_list, Bool("watchList", root["watchList"]));
  }
  if (root["maxWatchDuration"]) {
    ASSIGN_OR_RETURN(config.max_watch_duration,
                     Duration("maxWatchDuration", root["maxWatchDuration"]));
  }
  if (root["eventWindow"]) {
    ASSIGN_OR_RETURN(config.event_window, Int("eventWindow", root["eventWindow"], 1));
  }
  if (root["eventTtl"]) {
    ASSIGN_OR_RETURN(config.event_ttl, Duration("eventTtl", root["eventTtl"]));
  }
  if (root["threads"]) {
    ASSIGN_OR_RETURN(int64_t threads, Int("threads", root["threads"], 4));
    config.threads = static_cast<int>(threads);
  }
  if (root["maxBodyBytes"]) {
    ASSIGN_OR_RETURN(int64_t bytes, Int("maxBodyBytes", root["maxBodyBytes"], 1024));
    config.max_body_bytes = static_cast<size_t>(bytes);
  }
  if (const YAML::Node k = root["kubelet"]) {
    RETURN_IF_ERROR(CheckKeys("kubelet", k, {"enabled", "admitDelay"}));
    if (k["enabled"]) {
      ASSIGN_OR_RETURN(config.kubelet.enabled, Bool("kubelet.enabled", k["enabled"]));
    }
    if (k["admitDelay"]) {
      ASSIGN_OR_RETURN(config.kubelet.admit_delay, Duration("kubelet.admitDelay", k["admitDelay"]));
    }
  }
  if (const YAML::Node g = root["generate"]) {
    RETURN_IF_ERROR(CheckKeys("generate", g,
                              {"nodes", "podsPerNode", "nodePrefix", "namespace", "nodeAllocatable",
                               "podRequests", "nodeNames", "objects", "seed", "fullNodes"}));
    GenerateSpec& gen = config.generate;
    if (g["nodes"]) {
      ASSIGN_OR_RETURN(int64_t n, Int("generate.nodes", g["nodes"], 0));
      gen.nodes = static_cast<int>(n);
    }
    if (g["podsPerNode"]) {
      ASSIGN_OR_RETURN(int64_t n, Int("generate.podsPerNode", g["podsPerNode"], 0));
      gen.pods_per_node = static_cast<int>(n);
    }
    if (g["nodePrefix"]) {
      ASSIGN_OR_RETURN(gen.node_prefix, Scalar("generate.nodePrefix", g["nodePrefix"]));
    }
    if (g["namespace"]) {
      ASSIGN_OR_RETURN(gen.pod_namespace, Scalar("generate.namespace", g["namespace"]));
    }
    if (g["nodeAllocatable"]) {
      ASSIGN_OR_RETURN(gen.node_allocatable,
                       Pairs("generate.nodeAllocatable", g["nodeAllocatable"], true));
    }
    if (g["podRequests"]) {
      ASSIGN_OR_RETURN(gen.pod_requests, Pairs("generate.podRequests", g["podRequests"], true));
    }
    if (g["nodeNames"]) {
      ASSIGN_OR_RETURN(std::string naming, Scalar("generate.nodeNames", g["nodeNames"]));
      static const auto* const kNamings =
          new std::map<std::string, NodeNaming>{{"prefix", NodeNaming::kPrefix},
                                                {"gke", NodeNaming::kGke},
                                                {"eks", NodeNaming::kEks},
                                                {"aks", NodeNaming::kAks},
                                                {"mixed", NodeNaming::kMixed}};
      auto it = kNamings->find(naming);
      if (it == kNamings->end()) {
        return Bad("generate.nodeNames", g["nodeNames"],
                   "must be one of: prefix, gke, eks, aks, mixed");
      }
      gen.node_naming = it->second;
      if (gen.node_naming != NodeNaming::kPrefix && g["nodePrefix"]) {
        return Bad("generate.nodePrefix", g["nodePrefix"],
                   "applies only to nodeNames: prefix (the cloud shapes make their own names)");
      }
    }
    if (g["objects"]) {
      ASSIGN_OR_RETURN(std::string objects, Scalar("generate.objects", g["objects"]));
      if (objects == "basic") {
        gen.objects = ObjectProfile::kBasic;
      } else if (objects == "realistic") {
        gen.objects = ObjectProfile::kRealistic;
      } else {
        return Bad("generate.objects", g["objects"], "must be basic or realistic");
      }
    }
    if (g["seed"]) {
      ASSIGN_OR_RETURN(int64_t seed, Int("generate.seed", g["seed"], 0));
      gen.seed = static_cast<uint64_t>(seed);
    }
    if (const YAML::Node f = g["fullNodes"]) {
      RETURN_IF_ERROR(CheckKeys("generate.fullNodes", f, {"fraction", "free"}));
      if (!f["fraction"] || !f["free"]) {
        return Bad("generate.fullNodes", f, "needs fraction and free");
      }
      double fraction = -1;
      if (!f["fraction"].IsScalar() || !YAML::convert<double>::decode(f["fraction"], fraction) ||
          !(fraction >= 0 && fraction <= 1)) {
        return Bad("generate.fullNodes.fraction", f["fraction"], "must be a number in [0, 1]");
      }
      gen.full_nodes.fraction = fraction;
      ASSIGN_OR_RETURN(gen.full_nodes.free, Pairs("generate.fullNodes.free", f["free"], true));
      if (gen.full_nodes.free.empty()) {
        return Bad("generate.fullNodes.free", f["free"], "must name at least one resource");
      }
      for (const auto& [name, value] : gen.full_nodes.free) {
        if (name == "pods") {
          return Bad("generate.fullNodes.free.pods", f["free"],
                     "pods cannot be filled by one pod (name cpu, memory, ...)");
        }
      }
    }
  }
  if (const YAML::Node t = root["tls"]) {
    RETURN_IF_ERROR(CheckKeys("tls", t, {"certFile", "keyFile", "clientCAFile"}));
    if (t["certFile"]) {
      ASSIGN_OR_RETURN(config.tls.cert_file, Scalar("tls.certFile", t["certFile"]));
    }
    if (t["keyFile"]) {
      ASSIGN_OR_RETURN(config.tls.key_file, Scalar("tls.keyFile", t["keyFile"]));
    }
    if (t["clientCAFile"]) {
      ASSIGN_OR_RETURN(config.tls.client_ca_file, Scalar("tls.clientCAFile", t["clientCAFile"]));
    }
    if (config.tls.cert_file.empty() != config.tls.key_file.empty()) {
      return Bad("tls", t, "certFile and keyFile go together");
    }
  }
  if (root["token"]) {
    ASSIGN_OR_RETURN(config.token, Scalar("token", root["token"]));
  }
  if (const YAML::Node k = root["kubeconfigOut"]) {
    RETURN_IF_ERROR(CheckKeys("kubeconfigOut", k, {"caFile", "clientCertFile", "clientKeyFile"}));
    KubeconfigOutConfig& out = config.kubeconfig_out;
    if (k["caFile"]) {
      ASSIGN_OR_RETURN(out.ca_file, Scalar("kubeconfigOut.caFile", k["caFile"]));
    }
    if (k["clientCertFile"]) {
      ASSIGN_OR_RETURN(out.client_cert_file,
                       Scalar("kubeconfigOut.clientCertFile", k["clientCertFile"]));
    }
    if (k["clientKeyFile"]) {
      ASSIGN_OR_RETURN(out.client_key_file,
                       Scalar("kubeconfigOut.clientKeyFile", k["clientKeyFile"]));
    }
  }
  return config;
}

}  // namespace

absl::StatusOr<SimConfig> ParseSimConfig(absl::string_view yaml_text) {
  try {
    return ParseRoot(YAML::Load(std::string(yaml_text)));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("YAML error (line ", e.mark.line + 1, "): ", e.msg));
  }
}

absl::StatusOr<SimConfig> LoadSimConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read config file ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto config = ParseSimConfig(buffer.str());
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

}  // namespace fitledger::sim
