// libFuzzer target: fitledger::Quantity::Parse on arbitrary text. Besides not crashing, a parsed
// quantity's canonical rendering must parse back to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "model/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fitledger::Quantity> q = fitledger::Quantity::Parse(text);
  if (!q.ok()) return 0;
  (void)q->MilliValue();
  (void)q->Value();
  absl::StatusOr<fitledger::Quantity> again = fitledger::Quantity::Parse(q->ToString());
  if (!again.ok() || !(*again == *q)) std::abort();
  return 0;
}
