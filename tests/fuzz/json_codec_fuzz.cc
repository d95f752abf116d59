// libFuzzer target: the webhook's extender JSON decoding (webhook/json_codec.h). The first byte
// picks the body kind (filter/prioritize, bind, preempt); the rest is the body. Successful decodes
// are encoded back, as the shim would answer; filter bodies are also decoded with the candidates'
// names as views (the webhook's way): on valid JSON they must succeed, with the same names,
// wherever the full decode does; on any input, when both succeed, their names must agree.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "simdjson.h"
#include "webhook/json_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static fitledger::webhook::JsonDecoder* decoder = new fitledger::webhook::JsonDecoder();
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string out;
  switch (data[0] % 3) {
    case 0: {
      fitledger::v1::ExtenderArgs args;
      std::vector<absl::string_view> raw_nodes;
      // The shim's way first: NodeNames as views (plain ones read in place, with the body's
      // capacity holding simdjson's padding as the HTTP server leaves it), against the full
      // decode to strings (below: what must agree).
      static fitledger::webhook::JsonDecoder* views_decoder = new fitledger::webhook::JsonDecoder();
      std::string padded = body;
      padded.reserve(padded.size() + 64);
      fitledger::v1::ExtenderArgs views_args;
      std::vector<absl::string_view> views;
      const absl::Status by_views =
          views_decoder->DecodeExtenderArgs(padded, &views_args, nullptr, &views);
      const absl::Status by_strings = decoder->DecodeExtenderArgs(body, &args, &raw_nodes);
      // The views read only the names of full Node objects (and skip NodeNames beside them), so
      // on valid JSON they may accept what the full decode refuses, never the other way round.
      // On malformed JSON either may be the one to notice: simdjson's On-Demand API finds a
      // structural error in what it reads or skips, and the two read different parts (seen: a
      // missing comma inside a node's status, refused by the views' skip of the whole node and
      // passed by the full decode). There only the names must agree when both succeed.
      static simdjson::dom::parser* validator = new simdjson::dom::parser();
      const bool valid = validator->parse(padded).error() == simdjson::SUCCESS;
      std::vector<std::string> names;
      if (args.has_nodes()) {
        for (const auto& node : args.nodes().items()) names.push_back(node.metadata().name());
      } else {
        names.assign(args.node_names().begin(), args.node_names().end());
      }
      if ((valid && !by_views.ok() && by_strings.ok()) ||
          (by_strings.ok() && by_views.ok() &&
           (views_args.has_nodes() != args.has_nodes() ||
            !std::equal(views.begin(), views.end(), names.begin(), names.end())))) {
        std::fprintf(stderr, "views and strings disagree: %s / %s\n", by_views.ToString().c_str(),
                     by_strings.ToString().c_str());
        std::abort();
      }
      if (by_strings.ok()) {
        fitledger::v1::ExtenderFilterResult result;
        *result.mutable_node_names() = args.node_names();
        fitledger::webhook::EncodeFilterResult(result, &out);
        fitledger::webhook::EncodeFilterResultWithNodes(result, raw_nodes, &out);
      }
      break;
    }
    case 1: {
      fitledger::v1::ExtenderBindingArgs args;
      if (decoder->DecodeBindingArgs(body, &args).ok()) {
        fitledger::webhook::EncodeError(args.pod_name(), &out);
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
