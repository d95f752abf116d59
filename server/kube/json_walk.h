// Small helpers for walking JSON with simdjson's On Demand API, shared by the watch-event
// decoder (watch_event.cc) and the LIST reader (watcher.cc). Include only from files compiled
// with the same simdjson kernel flags (server/kube/CMakeLists.txt).
#ifndef FITLEDGER_SERVER_KUBE_JSON_WALK_H_
#define FITLEDGER_SERVER_KUBE_JSON_WALK_H_

#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "simdjson.h"

namespace fitledger::kube {

// Calls `on_field(key, value)` for each field of `object` until it returns false; stops at the
// first error. (After an error On Demand may have abandoned the document: nothing may touch it
// again, so every reader here makes one forward pass.)
template <typename F>
void ForEachField(simdjson::ondemand::object object, F on_field) {
  for (auto field : object) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return;
    std::string k(key);
    simdjson::ondemand::value v;
    if (field.value().get(v)) return;
    if (!on_field(k, v)) return;
  }
}

// A copy of `text` followed by simdjson's padding, in a buffer this thread reuses: one allocation
// per thread rather than one per watch line or LIST item (about 4 KB each, 150,000 of them in a
// state). Valid until the next call on this thread. A buffer grown past 1 MiB by one large line
// is given back at the next ordinary one.
inline simdjson::padded_string_view PaddedCopy(absl::string_view text) {
  thread_local std::string buffer;
  constexpr size_t kKeep = size_t{1} << 20;
  const size_t needed = text.size() + simdjson::SIMDJSON_PADDING;
  if (buffer.size() < needed || (buffer.size() > kKeep && needed <= kKeep)) {
    std::string().swap(buffer);
    buffer.resize(needed);
  }
  memcpy(buffer.data(), text.data(), text.size());
  memset(buffer.data() + text.size(), 0, simdjson::SIMDJSON_PADDING);
  return simdjson::padded_string_view(buffer.data(), text.size(), buffer.size());
}

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_JSON_WALK_H_
