// libFuzzer target: the shim's extender JSON decoding (client/shim/json_codec.h). The first byte
// picks the body kind (filter/prioritize, bind, preempt); the rest is the body. Successful decodes
// are encoded back, as the shim would answer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/shim/json_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static fitledger::shim::JsonDecoder* decoder = new fitledger::shim::JsonDecoder();
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string out;
  switch (data[0] % 3) {
    case 0: {
      fitledger::v1::ExtenderArgs args;
      std::vector<absl::string_view> raw_nodes;
      if (decoder->DecodeExtenderArgs(body, &args, &raw_nodes).ok()) {
        fitledger::v1::ExtenderFilterResult result;
        *result.mutable_node_names() = args.node_names();
        fitledger::shim::EncodeFilterResult(result, &out);
        fitledger::shim::EncodeFilterResultWithNodes(result, raw_nodes, &out);
      }
      break;
    }
    case 1: {
      fitledger::v1::ExtenderBindingArgs args;
      if (decoder->DecodeBindingArgs(body, &args).ok()) {
        fitledger::shim::EncodeError(args.pod_name(), &out);
      }
      break;
    }
    default: {
      fitledger::v1::ExtenderPreemptionArgs args;
      (void)decoder->DecodePreemptionArgs(body, &args);
      break;
    }
  }
  return 0;
}
