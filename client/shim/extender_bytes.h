// Filter's and Prioritize's messages as protobuf wire bytes, for the webhook on a transport that
// carries bytes (the shim's own HTTP/2 client): the request is written from the decoded pod and
// the candidate names' views, and the reply read into views, with no message for either. The
// same bytes protobuf would write and read for these messages
// (tests/client/shim/extender_bytes_test.cc compares them).
#ifndef FITLEDGER_CLIENT_SHIM_EXTENDER_BYTES_H_
#define FITLEDGER_CLIENT_SHIM_EXTENDER_BYTES_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/shim/json_codec.h"
#include "fitledger/v1/extender.pb.h"

namespace fitledger::shim {

// Appends the fitledger.v1.ExtenderArgs of `pod` (left out when null), `node_names` and
// `reply_node_indexes` (Filter's: answer the fitting candidates by position).
void WriteExtenderArgs(const v1::Pod* pod, absl::Span<const absl::string_view> node_names,
                       bool reply_node_indexes, std::string* out);

// Reads a fitledger.v1.ExtenderFilterResult without `nodes`: `out` views into `bytes`, which must
// outlive it; node_indexes packed or not, each at most 5 bytes long. False for anything else (full
// nodes, fields this does not read, text that is not ASCII, malformed bytes): the caller then
// parses the message, and protobuf decides.
bool ReadFilterResult(absl::string_view bytes, FilterResultView* out);

// Reads a fitledger.v1.HostPriorityList, as ReadFilterResult.
bool ReadHostPriorityList(absl::string_view bytes, HostPriorityView* out);

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_EXTENDER_BYTES_H_
