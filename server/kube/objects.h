// Decoding Kubernetes Pod and Node JSON into fitledger's model (simdjson, on demand). Only the
// fields the ledger needs are kept; unknown fields are skipped; JSON null means absent.
#ifndef FITLEDGER_SERVER_KUBE_OBJECTS_H_
#define FITLEDGER_SERVER_KUBE_OBJECTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/ledger/ledger.h"
#include "server/model/pod.h"
#include "simdjson.h"

namespace fitledger::kube {

struct DecodedNode {
  NodeRecord node;
  std::string resource_version;
};

// Decodes a Pod object (the `{"metadata":..,"spec":..,"status":..}` value). InvalidArgument for
// a wrong type or a malformed quantity, naming the field.
absl::StatusOr<Pod> DecodePod(simdjson::ondemand::value value, std::string* resource_version);
// Decodes a Node object: name and status.allocatable (status.capacity when allocatable is absent).
absl::StatusOr<DecodedNode> DecodeNode(simdjson::ondemand::value value);

// Whole-document versions (copy `json` into a padded buffer).
absl::StatusOr<Pod> ParsePod(absl::string_view json);
absl::StatusOr<DecodedNode> ParseNode(absl::string_view json);

// Decodes a ResourceList (`{"cpu":"500m","memory":128974848}`); bare numbers are accepted as
// Kubernetes' own decoder accepts them, and surrounding blanks are trimmed.
absl::StatusOr<QuantityList> DecodeResourceList(simdjson::ondemand::value value,
                                                absl::string_view field);

// The ledger's view of a pod already in the cluster (requests per RequestBasis::kSpecAndStatus).
absl::StatusOr<PodRecord> ToPodRecord(const Pod& pod);

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_OBJECTS_H_
