// libFuzzer target: Filter's request read in place (server/service/extender_wire.h), checked
// against protobuf's own parser. Whatever the in-place reader accepts, protobuf must parse to the
// same pod and names; the answer is then written as the unary listener would.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "server/service/extender_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fitledger::v1::Pod pod;
  std::vector<absl::string_view> names;
  if (!fitledger::ReadExtenderArgs(bytes, &pod, &names)) return 0;
  fitledger::v1::ExtenderArgs parsed;
  if (!parsed.ParseFromString(bytes) || parsed.has_nodes() ||
      !google::protobuf::util::MessageDifferencer::Equals(pod, parsed.pod()) ||
      static_cast<int>(names.size()) != parsed.node_names_size()) {
    std::abort();
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] != parsed.node_names(static_cast<int>(i))) std::abort();
  }
  // Every other candidate fits; the rest fail with a reason.
  fitledger::FilterResult result;
  std::vector<int64_t> scores;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i % 2 == 0) {
      result.fits.push_back(i);
    } else {
      result.failed.emplace_back(i, "Insufficient cpu");
    }
    scores.push_back(static_cast<int64_t>(i) - 3);
  }
  std::string out;
  fitledger::WriteFilterResult(names, result, &out);
  fitledger::v1::ExtenderFilterResult written;
  if (!written.ParseFromString(out) ||
      written.node_names_size() != static_cast<int>(result.fits.size())) {
    std::abort();
  }
  out.clear();
  fitledger::WriteHostPriorityList(names, scores, &out);
  fitledger::v1::HostPriorityList priorities;
  if (!priorities.ParseFromString(out) ||
      priorities.items_size() != static_cast<int>(names.size())) {
    std::abort();
  }
  return 0;
}
