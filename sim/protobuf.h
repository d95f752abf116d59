// Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf) of pods, nodes and Status
// objects, for fitledger-sim's watch streams: the encoder from the objects' JSON, the watch frame,
// the Accept negotiation, and a decoder back to JSON for tests. Driven by a schema table of the
// core/v1 and meta/v1 messages reachable from Pod, Node and Status (field names, numbers, types,
// from k8s.io/api core/v1/generated.proto and k8s.io/apimachinery pkg/apis/meta/v1/generated.proto
// at the commits named in tests/data/k8s-api/README.md).
//
// Thread-safe: the functions share only the schema table, built once and never changed.
#ifndef FITLEDGER_SIM_PROTOBUF_H_
#define FITLEDGER_SIM_PROTOBUF_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace fitledger::sim {

// k8s.io/apiserver pkg/endpoints/handlers/watch.go: a watch answers the media type plus
// ";stream=watch".
inline constexpr char kProtobufMediaType[] = "application/vnd.kubernetes.protobuf";
inline constexpr char kProtobufWatchContentType[] =
    "application/vnd.kubernetes.protobuf;stream=watch";

// The object as the full protobuf serializer writes it (apimachinery runtime/serializer/protobuf/
// protobuf.go): the magic "k8s\0", then a runtime.Unknown {typeMeta {apiVersion, kind}, raw}, raw
// being the Pod, Node or Status message named by the object's "kind". A JSON field the schema
// does not know, or of a type the field does not take, is left out; its path (e.g.
// "spec.containers[0].fooBar") is appended to `omitted` when given. null is an absent field.
// InvalidArgument when the object is not a JSON object of kind Pod, Node or Status.
absl::StatusOr<std::string> ProtobufEnvelope(const nlohmann::json& object,
                                             std::vector<std::string>* omitted = nullptr);
// The same from compact JSON text (a StoredObject's `json`); keeps the order of the keys of
// managedFields[].fieldsV1, whose text the encoding carries. InvalidArgument on malformed JSON.
absl::StatusOr<std::string> ProtobufEnvelopeFromText(absl::string_view json_text,
                                                     std::vector<std::string>* omitted = nullptr);

// The JSON of an envelope written by Kubernetes or by ProtobufEnvelope, with "kind" and
// "apiVersion" from its typeMeta; times at second precision, as metav1.Time's JSON. Fields the
// schema does not know are skipped, their field numbers appended to `unknown` when given.
// InvalidArgument on bytes that are not such an envelope.
absl::StatusOr<nlohmann::json> ProtobufEnvelopeToJson(absl::string_view envelope,
                                                      std::vector<std::string>* unknown = nullptr);

// Appends one watch event frame: a 4-byte big-endian length (apimachinery pkg/util/framer/
// framer.go NewLengthDelimitedFrameWriter), then a metav1.WatchEvent {type, object:
// runtime.RawExtension {raw: envelope}} written by the raw protobuf serializer, without magic
// (runtime/serializer/codec_factory.go: the StreamSerializer is protobuf.NewRawSerializer).
void AppendWatchFrame(absl::string_view type, absl::string_view envelope, std::string* out);

// Whether an Accept header prefers protobuf to JSON: the entry with the highest q wins, ties go to
// the earlier entry, entries with q=0 and media types the server cannot write are skipped;
// "*/*" and "application/*" pick JSON (k8s.io/apiserver pkg/endpoints/handlers/negotiation/
// negotiate.go NegotiateOutputMediaType over goautoneg.ParseAccept). False without an entry.
bool PrefersProtobuf(absl::string_view accept);

// The protobuf envelope of one immutable object version, encoded on first use and kept.
// Thread-safe: concurrent first calls may each encode; one result is kept, the others dropped.
// A copy starts empty: a copied StoredObject is the start of a new version.
class EnvelopeCache {
 public:
  EnvelopeCache() = default;
  EnvelopeCache(const EnvelopeCache&) {}
  EnvelopeCache& operator=(const EnvelopeCache&) = delete;
  ~EnvelopeCache();

  // The envelope of `json_text` (empty if it cannot be encoded). REQUIRES: the same text on every
  // call.
  absl::string_view Get(absl::string_view json_text) const;

 private:
  mutable std::atomic<const std::string*> envelope_{nullptr};
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_PROTOBUF_H_
