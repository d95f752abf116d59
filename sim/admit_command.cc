#include "sim/admit_command.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_access.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "sim/kubelet.h"
#include "sim/pod_requests.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

absl::Status BadAdmitInput(absl::string_view what) { return absl::InvalidArgumentError(what); }

absl::StatusOr<DeviceCounts> ParseDevices(const json& devices) {
  DeviceCounts out;
  if (devices.is_null()) return out;
  if (!devices.is_object()) {
    return BadAdmitInput("devices: must be an object of device counts");
  }
  for (const auto& [name, count] : devices.items()) {
    if (!IsExtendedResourceName(name)) {
      return BadAdmitInput(absl::StrCat("devices.", name,
                                        ": a device plugin's resource is an extended resource "
                                        "name (example.com/gpu)"));
    }
    if (!count.is_number_integer() || count.get<int64_t>() < 0) {
      return BadAdmitInput(
          absl::StrCat("devices.", name, ": must be an integer >= 0, got ", count.dump()));
    }
    out.emplace(name, count.get<int64_t>());
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> RunAdmitCommand(absl::string_view input) {
  const json root = json::parse(input.begin(), input.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return BadAdmitInput("the input is not JSON");
  if (!root.is_object()) return BadAdmitInput("the input must be a JSON object");
  for (const auto& [key, value] : root.items()) {
    if (key != "node" && key != "devices" && key != "pods") {
      return BadAdmitInput(
          absl::StrCat("unknown key \"", key, "\"; expected node, devices and pods"));
    }
  }
  const json& node = JsonMember(root, "node");
  if (!node.is_object()) return BadAdmitInput("node: a v1.Node object is required");
  const json& status = JsonMember(node, "status");
  if (!status.is_null() && !status.is_object()) {
    return BadAdmitInput("node.status: must be an object");
  }
  ASSIGN_OR_RETURN(ResourceList allocatable,
                   ParseResourceList(JsonMember(status, "allocatable"), "node.status.allocatable"));
  ASSIGN_OR_RETURN(DeviceCounts devices, ParseDevices(JsonMember(root, "devices")));
  const json& pods = JsonMember(root, "pods");
  if (!pods.is_array()) return BadAdmitInput("pods: a list of v1.Pod objects is required");

  std::vector<KubeletPod> parsed;
  for (size_t i = 0; i < pods.size(); ++i) {
    absl::StatusOr<KubeletPod> pod = ParseKubeletPod(pods[i]);
    if (!pod.ok()) {
      return BadAdmitInput(absl::StrCat("pods[", i, "]: ", pod.status().message()));
    }
    parsed.push_back(*std::move(pod));
  }

  KubeletAccounting kubelet;
  const std::string node_name = JsonStr(JsonMember(node, "metadata"), "name");
  kubelet.SetNode(node_name, allocatable, std::move(devices));
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < parsed.size(); ++i) {
    // Keyed by position: the input's pods need no UIDs, and two may share one.
    const Admission a = kubelet.Admit(node_name, absl::StrCat("pod-", i), parsed[i]);
    out.push_back(nlohmann::ordered_json{{"name", parsed[i].name},
                                         {"admit", a.admitted},
                                         {"reason", a.reason},
                                         {"message", a.message}});
  }
  return out.dump() + "\n";
}

}  // namespace fitledger::sim
