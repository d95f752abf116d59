// Decoding Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) of pods and
// nodes into fitledger's model: the same fields as objects.h reads from JSON, with the same
// meaning. kube-scheduler's informers ask for this encoding by default (its
// clientConnection.contentType); the API server's cost to encode it, the bytes on the wire and
// the cost to skip what fitledger does not read are all lower than JSON's, because every
// embedded message carries its length.
//
// An encoded object is the envelope the API server's protobuf serializer writes
// (k8s.io/apimachinery runtime/serializer/protobuf/protobuf.go): the four bytes "k8s\0", then a
// runtime.Unknown message (1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding,
// 4: contentType) whose `raw` is the object's own message. Field numbers are those of
// k8s.io/api core/v1 and k8s.io/apimachinery meta/v1 generated.proto. Fields fitledger does not
// read are skipped by their length, whatever their number.
#ifndef FITLEDGER_SERVER_KUBE_PROTOBUF_OBJECTS_H_
#define FITLEDGER_SERVER_KUBE_PROTOBUF_OBJECTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/pod.h"
#include "server/kube/objects.h"

namespace fitledger::kube {

// The envelope's first four bytes (protobuf.go protoEncodingPrefix).
inline constexpr absl::string_view kProtobufMagic("k8s\0", 4);

// Decode an enveloped Pod / Node. InvalidArgument, naming the field, for bytes that are not an
// envelope, a kind other than the one asked for, malformed protobuf, or a malformed quantity.
absl::StatusOr<Pod> DecodePodProtobuf(absl::string_view envelope, std::string* resource_version);
absl::StatusOr<DecodedNode> DecodeNodeProtobuf(absl::string_view envelope);

// An error answer's body as text for a message. kube-apiserver writes an error in the encoding
// the request negotiated (k8s.io/apiserver pkg/endpoints/handlers/responsewriters/writers.go
// ErrorNegotiated -> WriteObjectNegotiated), so a watch that asked for protobuf is refused with
// a protobuf Status: that becomes "Status <code>: <message>". Any other body is returned as it is.
std::string ErrorBodyText(absl::string_view body);

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_PROTOBUF_OBJECTS_H_
