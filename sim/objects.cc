#include "sim/objects.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/json_access.h"

namespace fitledger::sim {

using nlohmann::json;

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::Time ParseTimestamp(absl::string_view text) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(text), absl::UTCTimeZone(), &t, &err)) {
    return absl::InfinitePast();
  }
  return t;
}

std::string StoreKey(absl::string_view ns, absl::string_view name) {
  return absl::StrCat(ns, "/", name);
}

std::string Dump(const json& j) {
  std::string out = j.dump(-1, ' ', false, json::error_handler_t::replace);
  out.shrink_to_fit();  // stored for the life of the object
  return out;
}

std::string NodeIp(int index) {
  return absl::StrCat("10.0.", (index / 250) % 256, ".", index % 250 + 1);
}

std::string PodIp(int node_index, int64_t n) {
  return absl::StrCat("10.", 64 + (node_index / 256) % 128, ".", node_index % 256, ".",
                      n % 254 + 1);
}

json BuildNode(const NodeSpec& spec, absl::string_view uid, uint64_t resource_version,
               absl::Time created, absl::string_view internal_ip) {
  json labels = {{"beta.kubernetes.io/arch", "amd64"},
                 {"beta.kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"kubernetes.io/hostname", spec.name},
                 {"kubernetes.io/os", "linux"}};
  for (const auto& [k, v] : spec.labels) labels[k] = v;
  json allocatable = json::object();
  for (const auto& [k, v] : spec.allocatable) allocatable[k] = v;
  json capacity = json::object();
  for (const auto& [k, v] : spec.capacity) capacity[k] = v;
  std::string ts = FormatTimestamp(created);
  auto condition = [&](const char* type, const char* status, const char* reason,
                       const char* message) {
    return json{{"type", type},
                {"status", status},
                {"lastHeartbeatTime", ts},
                {"lastTransitionTime", ts},
                {"reason", reason},
                {"message", message}};
  };
  return json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata",
               {{"name", spec.name},
                {"uid", uid},
                {"resourceVersion", std::to_string(resource_version)},
                {"creationTimestamp", ts},
                {"labels", labels},
                {"annotations", {{"node.alpha.kubernetes.io/ttl", "0"}}}}},
              {"spec", json::object()},
              {"status",
               {{"addresses", json::array({{{"type", "InternalIP"}, {"address", internal_ip}},
                                           {{"type", "Hostname"}, {"address", spec.name}}})},
                {"allocatable", allocatable},
                {"capacity", capacity},
                {"conditions",
                 json::array({condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                                        "kubelet has sufficient memory available"),
                              condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                                        "kubelet has no disk pressure"),
                              condition("PIDPressure", "False", "KubeletHasSufficientPID",
                                        "kubelet has sufficient PID available"),
                              condition("Ready", "True", "KubeletReady",
                                        "kubelet is posting ready status")})},
                {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
                {"nodeInfo",
                 {{"architecture", "amd64"},
                  {"bootID", uid},
                  {"containerRuntimeVersion", "containerd://1.7.13"},
                  {"kernelVersion", "6.1.0-18-amd64"},
                  {"kubeProxyVersion", "v1.30.0"},
                  {"kubeletVersion", "v1.30.0"},
                  {"machineID", uid},
                  {"operatingSystem", "linux"},
                  {"osImage", "Debian GNU/Linux 12 (bookworm) (fitledger-sim)"},
                  {"systemUUID", uid}}}}}};
}

ContainerImages ContainersOf(const json& pod) {
  ContainerImages out;
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return out;
  auto containers = spec->find("containers");
  if (containers == spec->end() || !containers->is_array()) return out;
  for (const json& c : *containers) {
    std::string name = JsonStr(c, "name");
    if (name.empty()) name = absl::StrCat("c", out.size());
    out.emplace_back(std::move(name), JsonStr(c, "image"));
  }
  return out;
}

std::vector<std::pair<absl::string_view, std::string>> RunningStatusMembers(
    absl::string_view host_ip, absl::string_view pod_ip, absl::string_view timestamp,
    const ContainerImages& containers) {
  const std::string ts = JsonString(timestamp);
  std::string conditions = "[";
  for (const char* type : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    if (conditions.size() > 1) conditions.push_back(',');
    absl::StrAppend(&conditions, "{\"lastTransitionTime\":", ts, ",\"status\":\"True\",\"type\":\"",
                    type, "\"}");
  }
  conditions.push_back(']');
  std::string statuses = "[";
  for (const auto& [name, image] : containers) {
    if (statuses.size() > 1) statuses.push_back(',');
    absl::StrAppend(&statuses, "{\"image\":", JsonString(image), ",\"name\":", JsonString(name),
                    ",\"ready\":true,\"restartCount\":0,\"started\":true,"
                    "\"state\":{\"running\":{\"startedAt\":",
                    ts, "}}}");
  }
  statuses.push_back(']');
  return {{"phase", "\"Running\""},
          {"hostIP", JsonString(host_ip)},
          {"hostIPs", absl::StrCat("[{\"ip\":", JsonString(host_ip), "}]")},
          {"podIP", JsonString(pod_ip)},
          {"podIPs", absl::StrCat("[{\"ip\":", JsonString(pod_ip), "}]")},
          {"startTime", ts},
          {"conditions", std::move(conditions)},
          {"containerStatuses", std::move(statuses)}};
}

std::string GeneratedPodTemplate(const StringPairs& requests) {
  json req = json::object();
  for (const auto& [k, v] : requests) req[k] = v;
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "@NAME@"},
        {"generateName", "bench-5d8f7c9b6d-"},
        {"namespace", "@NS@"},
        {"uid", "@UID@"},
        {"resourceVersion", "@RV@"},
        {"creationTimestamp", "@TS@"},
        {"labels", {{"app", "bench"}, {"pod-template-hash", "5d8f7c9b6d"}, {"tier", "backend"}}},
        {"annotations", {{"kubectl.kubernetes.io/default-container", "app"}}},
        {"ownerReferences", json::array({{{"apiVersion", "apps/v1"},
                                          {"kind", "ReplicaSet"},
                                          {"name", "bench-5d8f7c9b6d"},
                                          {"uid", "0d3c5a56-2b4e-4f3a-9c1e-6a7b8c9d0e1f"},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}})}}},
      {"spec",
       {{"containers",
         json::array(
             {{{"name", "app"},
               {"image", "registry.example.com/bench/app:1.4.2"},
               {"imagePullPolicy", "IfNotPresent"},
               {"ports",
                json::array({{{"name", "http"}, {"containerPort", 8080}, {"protocol", "TCP"}}})},
               {"env", json::array({{{"name", "LOG_LEVEL"}, {"value", "info"}}})},
               {"resources", {{"requests", req}}},
               {"terminationMessagePath", "/dev/termination-log"},
               {"terminationMessagePolicy", "File"}}})},
        {"dnsPolicy", "ClusterFirst"},
        {"nodeName", "@NODE@"},
        {"preemptionPolicy", "PreemptLowerPriority"},
        {"priority", 0},
        {"restartPolicy", "Always"},
        {"schedulerName", "default-scheduler"},
        {"serviceAccountName", "default"},
        {"terminationGracePeriodSeconds", 30},
        {"tolerations", json::array({{{"key", "node.kubernetes.io/not-ready"},
                                      {"operator", "Exists"},
                                      {"effect", "NoExecute"},
                                      {"tolerationSeconds", 300}}})}}},
      {"status", json::object()}};
  // The status timestamps are the creation time too.
  for (const auto& [key, value] :
       RunningStatusMembers("@HOSTIP@", "@PODIP@", "@TS@", ContainersOf(pod))) {
    pod["status"][std::string(key)] = json::parse(value);
  }
  pod["status"]["qosClass"] = "Burstable";
  return Dump(pod);
}

ObjectFields FieldsOf(const json& object) {
  ObjectFields f;
  const json empty = json::object();
  auto child = [&](const json& parent, const char* key) -> const json& {
    if (!parent.is_object()) return empty;
    auto it = parent.find(key);
    return it != parent.end() && it->is_object() ? *it : empty;
  };
  const json& metadata = child(object, "metadata");
  const json& spec = child(object, "spec");
  const json& status = child(object, "status");
  f.namespace_name = JsonStr(metadata, "namespace");
  f.name = JsonStr(metadata, "name");
  f.node_name = JsonStr(spec, "nodeName");
  f.scheduler_name = JsonStr(spec, "schedulerName");
  f.phase = JsonStr(status, "phase");
  f.restart_policy = JsonStr(spec, "restartPolicy");
  f.service_account_name = JsonStr(spec, "serviceAccountName");
  auto boolean = [](const json& parent, const char* key) {
    auto it = parent.find(key);
    return it != parent.end() && it->is_boolean() && it->get<bool>();
  };
  f.host_network = boolean(spec, "hostNetwork");
  f.nominated_node_name = JsonStr(status, "nominatedNodeName");
  f.unschedulable = boolean(spec, "unschedulable");
  f.deleting = metadata.contains("deletionTimestamp") && !metadata["deletionTimestamp"].is_null();
  // ToSelectableFields reads status.podIPs[0]; podIP is its first entry.
  if (auto ips = status.find("podIPs"); ips != status.end() && ips->is_array() && !ips->empty()) {
    f.pod_ip = JsonStr((*ips)[0], "ip");
  } else {
    f.pod_ip = JsonStr(status, "podIP");
  }
  for (const auto& [k, v] : child(metadata, "labels").items()) {
    if (v.is_string()) f.labels.emplace_back(k, v.get<std::string>());
  }
  std::sort(f.labels.begin(), f.labels.end());
  // The other kinds' selectable fields (pkg/registry/core/event/strategy.go ToSelectableFields;
  // pkg/apis/apps/v1/conversion.go for replica sets).
  const std::string kind = JsonStr(object, "kind");
  if (kind == "Event") {
    const json& involved = child(object, "involvedObject");
    for (const char* key :
         {"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"}) {
      f.other.emplace_back(absl::StrCat("involvedObject.", key), JsonStr(involved, key));
    }
    f.other.emplace_back("reason", JsonStr(object, "reason"));
    f.other.emplace_back("reportingComponent", JsonStr(object, "reportingComponent"));
    f.other.emplace_back("source", JsonStr(child(object, "source"), "component"));
    f.other.emplace_back("type", JsonStr(object, "type"));
    std::sort(f.other.begin(), f.other.end());
  } else if (kind == "ReplicaSet") {
    auto replicas = status.find("replicas");
    f.other.emplace_back("status.replicas",
                         replicas != status.end() && replicas->is_number_integer()
                             ? absl::StrCat(replicas->get<int64_t>())
                             : "0");
  }
  return f;
}

}  // namespace fitledger::sim
