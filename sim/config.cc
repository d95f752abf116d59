#include "sim/config.h"

#include <limits>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"
#include "model/quantity.h"
#include "sim/pod_requests.h"

namespace fitledger::sim {
namespace {

// What ParseSimConfig's messages name as the file.
constexpr char kConfigName[] = "sim config";

absl::Status NonNegativeQuantity(const std::string&, const std::string& value) {
  absl::StatusOr<Quantity> q = Quantity::Parse(value);
  if (!q.ok()) return q.status();
  if (q->IsNegative()) return absl::InvalidArgumentError("must not be negative");
  return absl::OkStatus();
}

absl::Status Quantities(Fields& f, absl::string_view key, StringPairs* out) {
  return f.StringMap(key, out, NonNegativeQuantity);
}

absl::Status ReadNode(Fields& f, NodeSpec* spec) {
  if (!f.Has("name")) return f.Error("name", "is required");
  RETURN_IF_ERROR(f.String("name", &spec->name));
  if (spec->name.empty()) return f.Error("name", "must not be empty");
  RETURN_IF_ERROR(Quantities(f, "allocatable", &spec->allocatable));
  RETURN_IF_ERROR(Quantities(f, "capacity", &spec->capacity));
  if (!f.Has("capacity")) spec->capacity = spec->allocatable;
  if (spec->allocatable.empty()) spec->allocatable = spec->capacity;
  RETURN_IF_ERROR(f.StringMap("labels", &spec->labels));
  StringPairs devices;
  RETURN_IF_ERROR(
      f.StringMap("devices", &devices, [&](const std::string& name, const std::string& value) {
        if (!IsExtendedResourceName(name)) {
          return absl::InvalidArgumentError(
              "a device plugin's resource is an extended resource name (example.com/gpu)");
        }
        int64_t count = 0;
        if (!absl::SimpleAtoi(value, &count) || count < 0) {
          return absl::InvalidArgumentError("must be an integer >= 0");
        }
        for (const StringPairs* list : {&spec->allocatable, &spec->capacity}) {
          for (const auto& [listed, _] : *list) {
            if (listed == name) {
              return absl::InvalidArgumentError(
                  "also in allocatable or capacity; a device plugin's resource is its device "
                  "count, listed there by the kubelet");
            }
          }
        }
        return absl::OkStatus();
      }));
  for (const auto& [name, count] : devices) {
    int64_t n = 0;
    (void)absl::SimpleAtoi(count, &n);  // checked above
    spec->devices.emplace_back(name, n);
    spec->allocatable.emplace_back(name, count);
    spec->capacity.emplace_back(name, count);
  }
  return absl::OkStatus();
}

absl::Status ReadGenerate(Fields& g, GenerateSpec* gen) {
  int64_t n = gen->nodes;
  RETURN_IF_ERROR(g.Int("nodes", &n, 0, std::numeric_limits<int>::max()));
  gen->nodes = static_cast<int>(n);
  n = gen->pods_per_node;
  RETURN_IF_ERROR(g.Int("podsPerNode", &n, 0, std::numeric_limits<int>::max()));
  gen->pods_per_node = static_cast<int>(n);
  RETURN_IF_ERROR(g.String("nodePrefix", &gen->node_prefix));
  RETURN_IF_ERROR(g.String("namespace", &gen->pod_namespace));
  RETURN_IF_ERROR(Quantities(g, "nodeAllocatable", &gen->node_allocatable));
  RETURN_IF_ERROR(Quantities(g, "podRequests", &gen->pod_requests));
  if (g.Has("nodeNames")) {
    std::string naming;
    RETURN_IF_ERROR(g.String("nodeNames", &naming));
    static const auto* const kNamings =
        new std::map<std::string, NodeNaming>{{"prefix", NodeNaming::kPrefix},
                                              {"gke", NodeNaming::kGke},
                                              {"eks", NodeNaming::kEks},
                                              {"aks", NodeNaming::kAks},
                                              {"mixed", NodeNaming::kMixed}};
    auto it = kNamings->find(naming);
    if (it == kNamings->end()) {
      return g.Error("nodeNames", "must be one of: prefix, gke, eks, aks, mixed");
    }
    gen->node_naming = it->second;
    if (gen->node_naming != NodeNaming::kPrefix && g.Has("nodePrefix")) {
      return g.Error("nodePrefix",
                     "applies only to nodeNames: prefix (the cloud shapes make their own names)");
    }
  }
  if (g.Has("objects")) {
    std::string objects;
    RETURN_IF_ERROR(g.String("objects", &objects));
    if (objects == "basic") {
      gen->objects = ObjectProfile::kBasic;
    } else if (objects == "realistic") {
      gen->objects = ObjectProfile::kRealistic;
    } else {
      return g.Error("objects", "must be basic or realistic");
    }
  }
  int64_t seed = static_cast<int64_t>(gen->seed);
  RETURN_IF_ERROR(g.Int("seed", &seed, 0, std::numeric_limits<int64_t>::max()));
  gen->seed = static_cast<uint64_t>(seed);
  return g.Map("fullNodes", [&](Fields& f) {
    if (!f.Has("fraction") || !f.Has("free"))
      return f.Error("fraction", "fullNodes needs fraction and free");
    RETURN_IF_ERROR(f.Double("fraction", &gen->full_nodes.fraction, 0, 1));
    RETURN_IF_ERROR(Quantities(f, "free", &gen->full_nodes.free));
    if (gen->full_nodes.free.empty()) return f.Error("free", "must name at least one resource");
    for (const auto& [name, value] : gen->full_nodes.free) {
      if (name == "pods") {
        return f.Error("free", "pods cannot be filled by one pod (name cpu, memory, ...)");
      }
    }
    return absl::OkStatus();
  });
}

absl::Status ReadRoot(Fields& root, SimConfig* config) {
  std::set<std::string> names;
  RETURN_IF_ERROR(root.MapList("nodes", [&](Fields& f) {
    NodeSpec spec;
    RETURN_IF_ERROR(ReadNode(f, &spec));
    if (!names.insert(spec.name).second) return f.Error("name", "duplicate node name");
    config->nodes.push_back(std::move(spec));
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(root.Duration("watchLag", &config->watch_lag));
  RETURN_IF_ERROR(root.Duration("bookmarkInterval", &config->bookmark_interval));
  if (config->bookmark_interval <= absl::ZeroDuration()) {
    return root.Error("bookmarkInterval", "must be positive");
  }
  RETURN_IF_ERROR(root.Bool("watchList", &config->watch_list));
  RETURN_IF_ERROR(root.Bool("watchListCompression", &config->watch_list_compression));
  RETURN_IF_ERROR(root.Duration("maxWatchDuration", &config->max_watch_duration));
  RETURN_IF_ERROR(
      root.Int("eventWindow", &config->event_window, 1, std::numeric_limits<int64_t>::max()));
  RETURN_IF_ERROR(root.Duration("eventTtl", &config->event_ttl));
  int64_t threads = config->threads;
  RETURN_IF_ERROR(root.Int("threads", &threads, 4, 1 << 16));
  config->threads = static_cast<int>(threads);
  int64_t bytes = static_cast<int64_t>(config->max_body_bytes);
  RETURN_IF_ERROR(root.Int("maxBodyBytes", &bytes, 1024, std::numeric_limits<int64_t>::max()));
  config->max_body_bytes = static_cast<size_t>(bytes);
  RETURN_IF_ERROR(root.Map("kubelet", [&](Fields& k) {
    RETURN_IF_ERROR(k.Bool("enabled", &config->kubelet.enabled));
    return k.Duration("admitDelay", &config->kubelet.admit_delay);
  }));
  RETURN_IF_ERROR(
      root.Map("generate", [&](Fields& g) { return ReadGenerate(g, &config->generate); }));
  RETURN_IF_ERROR(root.Map("tls", [&](Fields& t) {
    RETURN_IF_ERROR(t.String("certFile", &config->tls.cert_file));
    RETURN_IF_ERROR(t.String("keyFile", &config->tls.key_file));
    RETURN_IF_ERROR(t.String("clientCAFile", &config->tls.client_ca_file));
    if (config->tls.cert_file.empty() != config->tls.key_file.empty()) {
      return t.Error("certFile", "certFile and keyFile go together");
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(root.String("token", &config->token));
  return root.Map("kubeconfigOut", [&](Fields& k) {
    KubeconfigOutConfig& out = config->kubeconfig_out;
    RETURN_IF_ERROR(k.String("caFile", &out.ca_file));
    RETURN_IF_ERROR(k.String("clientCertFile", &out.client_cert_file));
    return k.String("clientKeyFile", &out.client_key_file);
  });
}

}  // namespace

absl::StatusOr<SimConfig> ParseSimConfig(absl::string_view yaml_text) {
  SimConfig config;
  RETURN_IF_ERROR(LoadYamlString(std::string(yaml_text), kConfigName,
                                 [&](Fields& root) { return ReadRoot(root, &config); }));
  return config;
}

absl::StatusOr<SimConfig> LoadSimConfigFile(const std::string& path) {
  SimConfig config;
  RETURN_IF_ERROR(LoadYamlFile(path, [&](Fields& root) { return ReadRoot(root, &config); }));
  return config;
}

}  // namespace fitledger::sim
