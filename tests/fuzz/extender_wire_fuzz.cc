// libFuzzer target: Filter's and Prioritize's messages read in place, checked against protobuf's
// own parser: the server's request reader (server/service/extender_wire.h) and the shim's reply
// readers (client/shim/extender_bytes.h). Whatever they accept, protobuf must parse to the same.
// The server's answer is then written as the unary listener would.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/shim/extender_bytes.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/service/extender_wire.h"

namespace {

// The shim's readers of the replies.
void CheckReplyReaders(const std::string& bytes) {
  fitledger::shim::FilterResultView view;
  if (fitledger::shim::ReadFilterResult(bytes, &view)) {
    fitledger::v1::ExtenderFilterResult parsed;
    if (!parsed.ParseFromString(bytes) || parsed.has_nodes() ||
        static_cast<int>(view.node_names.size()) != parsed.node_names_size() ||
        view.error != parsed.error() ||
        view.node_indexes !=
            std::vector<uint32_t>(parsed.node_indexes().begin(), parsed.node_indexes().end())) {
      std::abort();
    }
    for (const auto& [key, value] : view.failed_nodes) {
      auto it = parsed.failed_nodes().find(std::string(key));
      if (it == parsed.failed_nodes().end()) std::abort();
    }
  }
  fitledger::shim::HostPriorityView priorities;
  if (fitledger::shim::ReadHostPriorityList(bytes, &priorities)) {
    fitledger::v1::HostPriorityList parsed;
    if (!parsed.ParseFromString(bytes) ||
        static_cast<int>(priorities.size()) != parsed.items_size()) {
      std::abort();
    }
    for (size_t i = 0; i < priorities.size(); ++i) {
      const auto& item = parsed.items(static_cast<int>(i));
      if (priorities[i].first != item.host() || priorities[i].second != item.score()) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  CheckReplyReaders(bytes);
  fitledger::v1::Pod pod;
  std::vector<absl::string_view> names;
  bool by_index = false;
  if (!fitledger::ReadExtenderArgs(bytes, &pod, &names, &by_index)) return 0;
  fitledger::v1::ExtenderArgs parsed;
  if (!parsed.ParseFromString(bytes) || parsed.has_nodes() ||
      by_index != parsed.reply_node_indexes() ||
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
  fitledger::WriteFilterResult(names, result, by_index, &out);
  fitledger::v1::ExtenderFilterResult written;
  if (!written.ParseFromString(out) ||
      (by_index ? written.node_indexes_size() : written.node_names_size()) !=
          static_cast<int>(result.fits.size()) ||
      (by_index ? written.node_names_size() : written.node_indexes_size()) != 0) {
    std::abort();
  }
  if (by_index) {
    // And the shim reads the answer back to the same positions.
    fitledger::shim::FilterResultView view;
    if (!fitledger::shim::ReadFilterResult(out, &view) ||
        view.node_indexes != std::vector<uint32_t>(result.fits.begin(), result.fits.end())) {
      std::abort();
    }
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
