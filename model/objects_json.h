// Kubernetes Pod and Node JSON into fitledger's model (simdjson On Demand), the one JSON decoder
// of both: the API client's watch events and LIST pages (server/kube), and the pod of every
// extender request (webhook/json_codec.cc). Only the fields the model keeps are read; unknown
// fields are skipped; JSON null means absent; the Kubernetes API's camelCase keys match exactly.
#ifndef FITLEDGER_MODEL_OBJECTS_JSON_H_
#define FITLEDGER_MODEL_OBJECTS_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/node.h"
#include "model/pod.h"
#include "simdjson.h"

namespace fitledger {

// Decodes a Pod object (the `{"metadata":..,"spec":..,"status":..}` value), consuming it; its
// metadata.resourceVersion goes to `resource_version` when that is not null. InvalidArgument
// for a wrong type or a malformed quantity, naming the field ("field spec.containers[0]...").
absl::StatusOr<Pod> DecodePod(simdjson::ondemand::value value, std::string* resource_version);
// Decodes a Node object: its name and allocatable (see Node).
absl::StatusOr<Node> DecodeNode(simdjson::ondemand::value value, std::string* resource_version);

// Decodes a ResourceList (`{"cpu":"500m","memory":128974848}`); bare numbers are accepted as
// Kubernetes' own decoder accepts them, and surrounding blanks are trimmed.
absl::StatusOr<QuantityList> DecodeResourceList(simdjson::ondemand::value value,
                                                absl::string_view field);

// Whole-document versions (copy `json` into a padded buffer).
absl::StatusOr<Pod> ParsePod(absl::string_view json, std::string* resource_version = nullptr);
absl::StatusOr<Node> ParseNode(absl::string_view json, std::string* resource_version = nullptr);

}  // namespace fitledger

#endif  // FITLEDGER_MODEL_OBJECTS_JSON_H_
