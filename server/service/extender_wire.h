// Filter's and Prioritize's messages read and written as protobuf wire bytes, for the unary
// listener: the candidate names stay views into the request, and the result is written without
// building a message. Same bytes in and out as protobuf's own parser and serializer would take
// and give for these messages (tests/server/service/extender_wire_test.cc compares them).
#ifndef FITLEDGER_SERVER_SERVICE_EXTENDER_WIRE_H_
#define FITLEDGER_SERVER_SERVICE_EXTENDER_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fitledger/v1/extender.pb.h"
#include "server/ledger/ledger.h"

namespace fitledger {

// Reads a fitledger.v1.ExtenderArgs of the usual shape (kube-scheduler's with nodeCacheCapable,
// as fitledger-shim sends it): at most one `pod`, any number of `node_names` and
// `reply_node_indexes`, nothing else. On true, `pod` holds the pod (cleared when absent), `names`
// the candidates, as views into `bytes`, which must outlive them, and `reply_node_indexes` the
// flag. False for anything else: full `nodes`, a repeated `pod`, other fields, a name that is not
// ASCII, malformed bytes. The caller then parses the whole message, so protobuf alone decides what
// is accepted and how.
bool ReadExtenderArgs(absl::string_view bytes, v1::Pod* pod, std::vector<absl::string_view>* names,
                      bool* reply_node_indexes);

// Appends the fitledger.v1.ExtenderFilterResult for `result` over `names` (the candidates it
// indexes): the fitting names in order (or, `by_index`, their indexes as node_indexes), and
// failed_nodes and failed_and_unresolvable_nodes.
void WriteFilterResult(absl::Span<const absl::string_view> names, const FilterResult& result,
                       bool by_index, std::string* out);

// Appends the fitledger.v1.HostPriorityList of `names[i]` scored `scores[i]`.
// REQUIRES: names.size() == scores.size().
void WriteHostPriorityList(absl::Span<const absl::string_view> names,
                           absl::Span<const int64_t> scores, std::string* out);

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_EXTENDER_WIRE_H_
