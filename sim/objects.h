// Kubernetes object JSON that fitledger-sim builds: nodes from config, generated pods, the status
// the kubelet writes, Status objects, lists. nlohmann::json values; the store keeps their
// compact dumps.
#ifndef FITLEDGER_SIM_OBJECTS_H_
#define FITLEDGER_SIM_OBJECTS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "sim/config.h"
#include "sim/selectors.h"

namespace fitledger::sim {

// RFC 3339 in UTC with second precision, as metav1.Time serializes ("2024-05-01T12:00:00Z").
std::string FormatTimestamp(absl::Time t);
// Parses FormatTimestamp's format; InfinitePast if malformed.
absl::Time ParseTimestamp(absl::string_view text);

// "namespace/name" (or "/name" for a cluster-scoped object): how the stores key an object.
std::string StoreKey(absl::string_view ns, absl::string_view name);

// Compact JSON, never throwing (invalid UTF-8 is replaced).
std::string Dump(const nlohmann::json& j);

// A v1 Node for `spec`: labels (kubernetes.io/hostname, kubernetes.io/os, ... plus the configured
// ones), status.capacity/allocatable, a Ready condition, an InternalIP address, nodeInfo.
nlohmann::json BuildNode(const NodeSpec& spec, absl::string_view uid, uint64_t resource_version,
                         absl::Time created, absl::string_view internal_ip);

// A realistic (~1.5 KB) bound, Running pod as a deployment would create it, with placeholders
// @NAME@ @NS@ @UID@ @RV@ @NODE@ @HOSTIP@ @PODIP@ @TS@ for the generator to fill in.
std::string GeneratedPodTemplate(const StringPairs& requests);

// spec.containers' (name, image) of a pod; a container without a name is "c<index>".
using ContainerImages = std::vector<std::pair<std::string, std::string>>;
ContainerImages ContainersOf(const nlohmann::json& pod);

// The status members the kubelet sets when it starts a pod, as (key, JSON text): phase Running,
// hostIP(s), podIP(s), startTime, Initialized / Ready / ContainersReady / PodScheduled conditions,
// a running status per container. `timestamp` is put in as is (RFC 3339, or a placeholder).
std::vector<std::pair<absl::string_view, std::string>> RunningStatusMembers(
    absl::string_view host_ip, absl::string_view pod_ip, absl::string_view timestamp,
    const ContainerImages& containers);

// The indexed fields of a (validated) pod or node object.
ObjectFields FieldsOf(const nlohmann::json& object);

// The IP of the `index`th node (10.0.x.y) and of its `n`th pod (10.<64+>.x.y).
std::string NodeIp(int index);
std::string PodIp(int node_index, int64_t n);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_OBJECTS_H_
