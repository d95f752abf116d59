// Proto <-> model conversions at the gRPC edge: fitledger-server's gRPC services read the model
// from fitledger.v1 messages, and fitledger-shim writes the model its webhook decoded into them.
// Nothing else sees a proto type.
#ifndef FITLEDGER_SERVER_SERVICE_CONVERT_H_
#define FITLEDGER_SERVER_SERVICE_CONVERT_H_

#include "absl/status/statusor.h"
#include "fitledger/v1/extender.pb.h"
#include "fitledger/v1/introspection.pb.h"
#include "model/extender_args.h"
#include "model/pod.h"
#include "model/resources.h"

namespace fitledger {

// The model pod for a proto Pod. InvalidArgument naming the field for a malformed quantity.
absl::StatusOr<Pod> PodFromProto(const v1::Pod& pod);
// The proto Pod of a model pod, with every field PodFromProto reads (so PodFromProto gives `pod`
// back): quantities in their canonical text. The model keeps only whether deletionTimestamp is
// set: a deleting pod's is written as the Unix epoch, "1970-01-01T00:00:00Z". status.resize and
// the PodResizePending condition are not in the proto, so not written.
void PodToProto(const Pod& pod, v1::Pod* out);

// Preempt's arguments: NodeNameToMetaVictims when it names any node, else the UIDs of
// NodeNameToVictims' pods (model/extender_args.h). InvalidArgument for a malformed pod.
absl::StatusOr<PreemptArgs> PreemptArgsFromProto(const v1::ExtenderPreemptionArgs& args);
// The pod and the victims as MetaVictims (UIDs: all the server reads).
void PreemptArgsToProto(const PreemptArgs& args, v1::ExtenderPreemptionArgs* out);
// Preempt's answer, both ways (NodeNameToMetaVictims).
void VictimsToProto(const NodeVictims& victims, v1::ExtenderPreemptionResult* out);
NodeVictims VictimsFromProto(const v1::ExtenderPreemptionResult& result);

// Canonical amounts (cpu in millicores, the rest in units) as a proto map.
void ToProto(const Resources& resources, v1::ResourceAmounts* out);

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_CONVERT_H_
