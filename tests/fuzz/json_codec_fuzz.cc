// libFuzzer target: the webhook's extender JSON decoding (webhook/json_codec.h). The first byte
// picks the body kind (filter/prioritize, bind, preempt); the rest is the body. Successful decodes
// are encoded back, as the webhook would answer; filter bodies are decoded twice, read in place
// and from a copy, which must agree.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "webhook/json_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static fitledger::webhook::JsonDecoder* decoder = new fitledger::webhook::JsonDecoder();
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string out;
  switch (data[0] % 3) {
    case 0: {
      // The webhook's way: the body's capacity holds simdjson's padding as the HTTP server
      // leaves it, so plain names are views into the body; against a body without room, which
      // the decoder copies. Both must give the same answer: the same error, or the same pod,
      // names and raw nodes.
      static fitledger::webhook::JsonDecoder* padded_decoder =
          new fitledger::webhook::JsonDecoder();
      std::string padded = body;
      padded.reserve(padded.size() + 64);
      fitledger::Pod in_place, copied;
      std::vector<absl::string_view> names_in_place, names_copied, raw_in_place, raw_copied;
      const absl::Status a =
          padded_decoder->DecodeExtenderArgs(padded, &in_place, &names_in_place, &raw_in_place);
      std::string tight(body.data(), body.size());
      tight.shrink_to_fit();
      const absl::Status b =
          decoder->DecodeExtenderArgs(tight, &copied, &names_copied, &raw_copied);
      const auto same_text = [](const std::vector<absl::string_view>& x,
                                const std::vector<absl::string_view>& y) {
        return std::equal(x.begin(), x.end(), y.begin(), y.end());
      };
      if (a != b || (a.ok() && (!(in_place == copied) || !same_text(names_in_place, names_copied) ||
                                !same_text(raw_in_place, raw_copied) ||
                                padded_decoder->nodes_given() != decoder->nodes_given()))) {
        std::fprintf(stderr, "in place and copied disagree: %s / %s\n", a.ToString().c_str(),
                     b.ToString().c_str());
        std::abort();
      }
      if (a.ok()) {
        fitledger::webhook::FilterResultView result;
        result.node_names = names_in_place;
        fitledger::webhook::EncodeFilterResult(result, &out, padded_decoder->node_names_plain());
        fitledger::webhook::EncodeFilterResultWithNodes(result, raw_in_place, &out);
      }
      break;
    }
    case 1: {
      fitledger::BindArgs args;
      if (decoder->DecodeBindingArgs(body, &args).ok()) {
        fitledger::webhook::EncodeError(args.pod_name, &out);
      }
      break;
    }
    default: {
      fitledger::PreemptArgs args;
      if (decoder->DecodePreemptionArgs(body, &args).ok()) {
        fitledger::webhook::EncodePreemptionResult(args.victims, &out);
      }
      break;
    }
  }
  return 0;
}
