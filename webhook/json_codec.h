// kube-scheduler's extender JSON <-> fitledger's proto messages, without protobuf's JSON parser.
//
// Decoding follows Go's encoding/json as kube-scheduler uses it: the keys of the extender types
// (ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs, Victims, MetaVictims, MetaPod)
// match case-insensitively ("Pod", "pod", "POD"); inside Pod and Nodes the Kubernetes API's
// camelCase keys match exactly. `null` means absent, unknown keys are ignored, a wrong type is an
// error naming the field. Resource quantities (requests, limits, overhead, allocatable, ...) are
// checked with fitledger::Quantity; as in Kubernetes, surrounding blanks are trimmed and a bare
// JSON number is accepted. On well-formed input the result equals protobuf's JsonStringToMessage
// with ignore_unknown_fields (tests/webhook/json_codec_test.cc proves it on fixtures).
//
// Encoding writes the PascalCase keys kube-scheduler reads, with map keys sorted (as Go does).
//
// Not shared with the watcher's decoder (server/kube/objects.h), though both read Pods with
// simdjson: this one fills fitledger.v1 messages (what fitledger-shim forwards over gRPC, and
// what the tests hold equal to protobuf's own JSON parser), keys matched case-insensitively at
// the extender level; the watcher fills the server's plain model straight from watch events and
// LIST pages (no protobuf in the server's core) and reads status fields the incoming pod never
// carries (allocated resources, resize conditions).
#ifndef FITLEDGER_WEBHOOK_JSON_CODEC_H_
#define FITLEDGER_WEBHOOK_JSON_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/json.h"
#include "fitledger/v1/extender.pb.h"

namespace fitledger::webhook {

// Decodes request bodies with simdjson's On Demand parser, reusing its buffers across calls.
// Thread-compatible: keep one per thread (it is not cheap to create).
//
// Every Decode* returns InvalidArgument with a message naming the field ("NodeNames: expected an
// array of strings or null, got number") for malformed JSON, a wrong type or a bad quantity; the
// output message is then unspecified. `body` may be empty (an error) and needs no padding.
class JsonDecoder {
 public:
  JsonDecoder();
  ~JsonDecoder();
  JsonDecoder(const JsonDecoder&) = delete;
  JsonDecoder& operator=(const JsonDecoder&) = delete;

  // The body of filter and prioritize. When it carries Nodes, `raw_nodes` (if not null) gets the
  // exact JSON text of each Nodes.items[i], in order. With `node_names` (not null), the
  // candidates' names go there: NodeNames, or, when the body carries Nodes (an object), each
  // item's metadata.name ("" if absent) and nothing of NodeNames; then out->nodes() is set but
  // gets no items, and the items' other fields are skipped unread (a full-Nodes body is
  // megabytes, and a Filter needs only the names). The views point into `body` (names without
  // escapes, when `body`'s capacity holds simdjson's padding; valid until `body` changes) or
  // into this decoder (valid until the next Decode* call).
  absl::Status DecodeExtenderArgs(const std::string& body, v1::ExtenderArgs* out,
                                  std::vector<absl::string_view>* raw_nodes,
                                  std::vector<absl::string_view>* node_names = nullptr);
  // After DecodeExtenderArgs with `node_names`: whether every name was read by the plain scan,
  // so none needs escaping when written back as JSON (AppendJsonString would copy it as is).
  bool node_names_plain() const;
  // The body of bind.
  absl::Status DecodeBindingArgs(const std::string& body, v1::ExtenderBindingArgs* out);
  // The body of preempt.
  absl::Status DecodePreemptionArgs(const std::string& body, v1::ExtenderPreemptionArgs* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What the encoders write of an ExtenderFilterResult, as views (into a message, or into the
// candidates and a backend's answer).
struct FilterResultView {
  using Entries = std::vector<std::pair<absl::string_view, absl::string_view>>;
  std::vector<absl::string_view> node_names;
  // The two maps' entries in any order; of entries with one key the last counts, as when
  // protobuf reads a map.
  Entries failed_nodes;
  Entries failed_and_unresolvable_nodes;
  absl::string_view error;

  void Clear();
  // Views into `result`, which must outlive them.
  void Assign(const v1::ExtenderFilterResult& result);
};

// A HostPriorityList's items, as views.
using HostPriorityView = std::vector<std::pair<absl::string_view, int64_t>>;

// The encoders append to `out`.

// ExtenderFilterResult for nodeCacheCapable extenders:
// {"NodeNames":[...],"FailedNodes":{...},"FailedAndUnresolvableNodes":{...},"Error":"..."}.
// `names_plain`: the caller knows no node name needs escaping (JsonDecoder::node_names_plain of
// the candidates they are); they are then written as they are.
void EncodeFilterResult(const FilterResultView& result, std::string* out, bool names_plain = false);
void EncodeFilterResult(const v1::ExtenderFilterResult& result, std::string* out);
// ExtenderFilterResult for extenders that get full nodes: `nodes` are the passing nodes' raw JSON
// objects, copied verbatim into {"Nodes":{"metadata":{},"items":[...]},"FailedNodes":{...},
// "FailedAndUnresolvableNodes":{...},"Error":"..."}. result.node_names (and a message's nodes) are
// not written.
void EncodeFilterResultWithNodes(const FilterResultView& result,
                                 absl::Span<const absl::string_view> nodes, std::string* out);
void EncodeFilterResultWithNodes(const v1::ExtenderFilterResult& result,
                                 absl::Span<const absl::string_view> nodes, std::string* out);
// HostPriorityList as the bare array [{"Host":"n1","Score":7},...].
void EncodeHostPriorityList(const HostPriorityView& list, std::string* out);
void EncodeHostPriorityList(const v1::HostPriorityList& list, std::string* out);
// {"Error":"..."}: ExtenderBindingResult, and the body of every error reply.
void EncodeError(absl::string_view error, std::string* out);
// {"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"u"}],"NumPDBViolations":0},...}}.
void EncodePreemptionResult(const v1::ExtenderPreemptionResult& result, std::string* out);

}  // namespace fitledger::webhook

#endif  // FITLEDGER_WEBHOOK_JSON_CODEC_H_
