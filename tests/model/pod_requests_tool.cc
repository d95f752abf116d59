// pod_requests_tool: fitledger's PodRequests on pods read from stdin, for the differential test
// against upstream's own code (tests/upstream/suite/e2e/requests_test.go). Each line is a Pod as
// JSON; each line out is its requests in both bases,
//   {"spec":{...},"node":{...}}  with  {"cpu":m,"memory":b,"ephemeral-storage":b,
//                                       "scalars":{"name":n,...},"nonZeroCpu":m,"nonZeroMemory":b}
// or {"error":"..."} when the pod cannot be decoded or counted.
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "model/objects_json.h"
#include "model/pod.h"

namespace {

void AppendResources(const fitledger::Resources& r, std::string* out) {
  absl::StrAppend(out, "{\"cpu\":", r.milli_cpu, ",\"memory\":", r.memory_bytes,
                  ",\"ephemeral-storage\":", r.ephemeral_storage_bytes, ",\"scalars\":{");
  bool first = true;
  for (const auto& [name, value] : r.scalars) {
    if (!first) out->push_back(',');
    first = false;
    fitledger::AppendJsonString(name, out);
    absl::StrAppend(out, ":", value);
  }
  absl::StrAppend(out, "},\"nonZeroCpu\":", r.non_zero_milli_cpu,
                  ",\"nonZeroMemory\":", r.non_zero_memory_bytes, "}");
}

std::string Answer(const std::string& line) {
  std::string out;
  absl::StatusOr<fitledger::Pod> pod = fitledger::ParsePod(line);
  if (!pod.ok()) {
    out = "{\"error\":";
    fitledger::AppendJsonString(pod.status().ToString(), &out);
    return out + "}";
  }
  absl::StatusOr<fitledger::Resources> spec =
      fitledger::PodRequests(*pod, fitledger::RequestBasis::kSpec);
  absl::StatusOr<fitledger::Resources> node =
      fitledger::PodRequests(*pod, fitledger::RequestBasis::kSpecAndStatus);
  if (!spec.ok() || !node.ok()) {
    out = "{\"error\":";
    fitledger::AppendJsonString((spec.ok() ? node.status() : spec.status()).ToString(), &out);
    return out + "}";
  }
  out = "{\"spec\":";
  AppendResources(*spec, &out);
  out += ",\"node\":";
  AppendResources(*node, &out);
  return out + "}";
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    std::cout << Answer(line) << '\n';
  }
  return 0;
}
