// Proto <-> model conversions: for the gRPC services, and for the in-process webhook backend
// (extender_backend.cc), whose Backend interface takes the proto Pod the webhook decoded.
#ifndef FITLEDGER_SERVER_SERVICE_CONVERT_H_
#define FITLEDGER_SERVER_SERVICE_CONVERT_H_

#include "absl/status/statusor.h"
#include "fitledger/v1/extender.pb.h"
#include "fitledger/v1/introspection.pb.h"
#include "model/pod.h"
#include "model/resources.h"

namespace fitledger {

// The model pod for a proto Pod. InvalidArgument naming the field for a malformed quantity.
absl::StatusOr<Pod> PodFromProto(const v1::Pod& pod);

// Canonical amounts (cpu in millicores, the rest in units) as a proto map.
void ToProto(const Resources& resources, v1::ResourceAmounts* out);

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_CONVERT_H_
