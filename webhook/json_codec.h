// kube-scheduler's extender JSON <-> fitledger's model (model/extender_args.h), with simdjson.
//
// Decoding follows Go's encoding/json as kube-scheduler uses it: the keys of the extender types
// (ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs, Victims, MetaVictims, MetaPod)
// match case-insensitively ("Pod", "pod", "POD"); `null` means absent, unknown keys are ignored,
// a wrong type is an error naming the field. The pods are read by the model's own decoder
// (model/objects_json.h DecodePod, the one that reads the API server's pods), so their
// camelCase keys match exactly and their quantities are checked as Kubernetes checks them.
// tests/webhook/json_codec_test.cc holds the result equal to protobuf's JSON parser followed by
// the gRPC edge's conversion (server/service/convert.h), on fixtures of real bodies.
//
// Encoding writes the PascalCase keys kube-scheduler reads, with map keys sorted (as Go does).
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
#include "model/extender_args.h"
#include "model/pod.h"

namespace fitledger::webhook {

// Decodes request bodies with simdjson's On Demand parser, reusing its buffers across calls.
// Thread-compatible: keep one per thread (it is not cheap to create).
//
// Every Decode* returns InvalidArgument with a message naming the field ("NodeNames: expected an
// array of strings or null, got number") for malformed JSON, a wrong type or a bad quantity; the
// output is then unspecified. `body` may be empty (an error) and needs no padding.
class JsonDecoder {
 public:
  JsonDecoder();
  ~JsonDecoder();
  JsonDecoder(const JsonDecoder&) = delete;
  JsonDecoder& operator=(const JsonDecoder&) = delete;

  // The body of filter and prioritize: its Pod (a default Pod when absent or null) and its
  // candidates' names into `node_names`: NodeNames, or, when the body carries Nodes (an object;
  // see nodes_given), each item's metadata.name ("" if absent) and nothing of NodeNames; then,
  // with `raw_nodes` (not null), the exact JSON text of each Nodes.items[i] goes there, in order.
  // The items' other fields are skipped unread (a full-Nodes body is megabytes, and a Filter
  // needs only the names). The views point into `body` (names without escapes, when `body`'s
  // capacity holds simdjson's padding; valid until `body` changes) or into this decoder (valid
  // until the next Decode* call).
  absl::Status DecodeExtenderArgs(const std::string& body, Pod* pod,
                                  std::vector<absl::string_view>* node_names,
                                  std::vector<absl::string_view>* raw_nodes = nullptr);
  // After DecodeExtenderArgs: whether every name was read by the plain scan, so none needs
  // escaping when written back as JSON (AppendJsonString would copy it as is).
  bool node_names_plain() const;
  // After DecodeExtenderArgs: whether the body carried Nodes (full Node objects: an extender
  // that is not nodeCacheCapable), so the answer carries the passing ones.
  bool nodes_given() const;
  // The body of bind.
  absl::Status DecodeBindingArgs(const std::string& body, BindArgs* out);
  // The body of preempt.
  absl::Status DecodePreemptionArgs(const std::string& body, PreemptArgs* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What the encoders write of an ExtenderFilterResult, as views (into the candidates and a
// backend's answer).
struct FilterResultView {
  using Entries = std::vector<std::pair<absl::string_view, absl::string_view>>;
  std::vector<absl::string_view> node_names;
  // The two maps' entries in any order; of entries with one key the last counts, as when
  // Go reads a map.
  Entries failed_nodes;
  Entries failed_and_unresolvable_nodes;
  absl::string_view error;

  void Clear();
};

// A HostPriorityList's items, as views.
using HostPriorityView = std::vector<std::pair<absl::string_view, int64_t>>;

// The encoders append to `out`.

// ExtenderFilterResult for nodeCacheCapable extenders:
// {"NodeNames":[...],"FailedNodes":{...},"FailedAndUnresolvableNodes":{...},"Error":"..."}.
// `names_plain`: the caller knows no node name needs escaping (JsonDecoder::node_names_plain of
// the candidates they are); they are then written as they are.
void EncodeFilterResult(const FilterResultView& result, std::string* out, bool names_plain = false);
// ExtenderFilterResult for extenders that get full nodes: `nodes` are the passing nodes' raw JSON
// objects, copied verbatim into {"Nodes":{"metadata":{},"items":[...]},"FailedNodes":{...},
// "FailedAndUnresolvableNodes":{...},"Error":"..."}. result.node_names are not written.
void EncodeFilterResultWithNodes(const FilterResultView& result,
                                 absl::Span<const absl::string_view> nodes, std::string* out);
// HostPriorityList as the bare array [{"Host":"n1","Score":7},...].
void EncodeHostPriorityList(const HostPriorityView& list, std::string* out);
// {"Error":"..."}: ExtenderBindingResult, and the body of every error reply.
void EncodeError(absl::string_view error, std::string* out);
// {"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"u"}],"NumPDBViolations":0},...}}.
void EncodePreemptionResult(const NodeVictims& result, std::string* out);

}  // namespace fitledger::webhook

#endif  // FITLEDGER_WEBHOOK_JSON_CODEC_H_
