// Filter's answer, one type from the ledger (Ledger::Filter) through the extender and the
// webhook's Backend to the encoders (the JSON webhook, the gRPC service): moved, never copied.
#ifndef FITLEDGER_MODEL_FILTER_RESULT_H_
#define FITLEDGER_MODEL_FILTER_RESULT_H_

#include <cstddef>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace fitledger {

// Nodes are named by their position among the candidates the call was given; a candidate in
// none of the lists failed without a reason.
struct FilterResult {
  std::vector<size_t> fits;  // positions of the candidates that fit
  // Position, reasons joined by ", " (NodeResourcesFit's wording): views into `texts`, into
  // static text, or into what the producer keeps alive until the answer is encoded. A call
  // answers hundreds of failing nodes with a handful of distinct texts; a string per node was an
  // allocation and a free per node.
  std::vector<std::pair<size_t, absl::string_view>> failed;
  std::vector<std::pair<size_t, absl::string_view>> unresolvable;  // preemption cannot help
  // The views' text. A deque: moving the result (or this member) moves no string, so the views
  // stay valid wherever the result goes. Move-only, so no copy's views point into another's
  // texts.
  std::deque<std::string> texts;

  FilterResult() = default;
  FilterResult(FilterResult&&) = default;
  FilterResult& operator=(FilterResult&&) = default;
  FilterResult(const FilterResult&) = delete;
  FilterResult& operator=(const FilterResult&) = delete;
};

}  // namespace fitledger

#endif  // FITLEDGER_MODEL_FILTER_RESULT_H_
