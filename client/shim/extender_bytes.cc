#include "client/shim/extender_bytes.h"

#include <cstdint>
#include <vector>

#include "common/proto_wire.h"

namespace fitledger::shim {
namespace {

using wire::kLengthDelimited;
using wire::Tag;
using Args = v1::ExtenderArgs;
using FilterReply = v1::ExtenderFilterResult;
static_assert(Args::kPodFieldNumber < 16 && Args::kNodeNamesFieldNumber < 16 &&
              Args::kReplyNodeIndexesFieldNumber < 16);
static_assert(FilterReply::kNodeNamesFieldNumber < 16 &&
              FilterReply::kNodeIndexesFieldNumber < 16 &&
              FilterReply::kFailedNodesFieldNumber < 16 &&
              FilterReply::kFailedAndUnresolvableNodesFieldNumber < 16 &&
              FilterReply::kErrorFieldNumber < 16);
static_assert(v1::HostPriorityList::kItemsFieldNumber < 16 &&
              v1::HostPriority::kHostFieldNumber < 16 && v1::HostPriority::kScoreFieldNumber < 16);

// A string field's bytes, if they are ASCII (protobuf checks UTF-8; ASCII needs no check).
bool ReadText(const char** p, const char* end, absl::string_view* text) {
  return wire::ReadField(p, end, text) && wire::IsAscii(*text);
}

// One map<string, string> entry: the key and value fields in any order, either left out (empty),
// the last of a repeated one counting.
bool ReadMapEntry(const char** p, const char* end, FilterResultView::Entries* out) {
  absl::string_view entry;
  if (!wire::ReadField(p, end, &entry)) return false;
  absl::string_view key;
  absl::string_view value;
  const char* q = entry.data();
  const char* const entry_end = q + entry.size();
  while (q < entry_end) {
    const char tag = *q++;
    absl::string_view* field = tag == wire::kMapKey     ? &key
                               : tag == wire::kMapValue ? &value
                                                        : nullptr;
    if (field == nullptr || !ReadText(&q, entry_end, field)) return false;
  }
  out->emplace_back(key, value);
  return true;
}

// One uint32 varint, written in at most 5 bytes (protobuf reads longer ones, truncated: those it
// reads itself).
bool ReadIndex(const char** p, const char* end, std::vector<uint32_t>* out) {
  uint64_t value = 0;
  if (*p < end && static_cast<uint8_t>(**p) < 0x80) {  // one byte: the first 128 candidates
    value = static_cast<uint8_t>(*(*p)++);
  } else if (!wire::ReadVarint(p, end, 5, &value) || value > UINT32_MAX) {
    return false;
  }
  out->push_back(static_cast<uint32_t>(value));
  return true;
}

}  // namespace

void WriteExtenderArgs(const v1::Pod* pod, absl::Span<const absl::string_view> node_names,
                       bool reply_node_indexes, std::string* out) {
  constexpr char kPod = Tag(Args::kPodFieldNumber, kLengthDelimited);
  constexpr char kName = Tag(Args::kNodeNamesFieldNumber, kLengthDelimited);
  constexpr char kReplyNodeIndexes = Tag(Args::kReplyNodeIndexesFieldNumber, wire::kVarint);
  const size_t pod_size = pod != nullptr ? pod->ByteSizeLong() : 0;
  size_t size = pod != nullptr ? wire::FieldSize(pod_size) : 0;
  for (absl::string_view name : node_names) size += wire::FieldSize(name.size());
  if (reply_node_indexes) size += 2;  // proto3 leaves out false
  const size_t at = out->size();
  out->resize(at + size);
  char* p = out->data() + at;
  if (pod != nullptr) {
    *p++ = kPod;
    p = wire::PutVarint(pod_size, p);
    p = reinterpret_cast<char*>(
        pod->SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(p)));
  }
  for (absl::string_view name : node_names) p = wire::PutField(kName, name, p);
  if (reply_node_indexes) {
    *p++ = kReplyNodeIndexes;
    *p++ = 1;
  }
}

bool ReadFilterResult(absl::string_view bytes, FilterResultView* out) {
  constexpr char kName = Tag(FilterReply::kNodeNamesFieldNumber, kLengthDelimited);
  constexpr char kFailed = Tag(FilterReply::kFailedNodesFieldNumber, kLengthDelimited);
  constexpr char kUnresolvable =
      Tag(FilterReply::kFailedAndUnresolvableNodesFieldNumber, kLengthDelimited);
  constexpr char kError = Tag(FilterReply::kErrorFieldNumber, kLengthDelimited);
  constexpr char kIndexes = Tag(FilterReply::kNodeIndexesFieldNumber, kLengthDelimited);
  constexpr char kIndex = Tag(FilterReply::kNodeIndexesFieldNumber, wire::kVarint);
  out->Clear();
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while (p < end) {
    const char tag = *p++;
    bool ok = false;
    if (tag == kName) {
      absl::string_view name;
      ok = ReadText(&p, end, &name);
      out->node_names.push_back(name);
    } else if (tag == kFailed) {
      ok = ReadMapEntry(&p, end, &out->failed_nodes);
    } else if (tag == kUnresolvable) {
      ok = ReadMapEntry(&p, end, &out->failed_and_unresolvable_nodes);
    } else if (tag == kError) {
      ok = ReadText(&p, end, &out->error);
    } else if (tag == kIndexes) {  // packed, as protobuf writes them
      absl::string_view packed;
      ok = wire::ReadField(&p, end, &packed);
      out->node_indexes.reserve(out->node_indexes.size() + packed.size());  // at most
      const char* q = packed.data();
      const char* const packed_end = q + packed.size();
      while (ok && q < packed_end) ok = ReadIndex(&q, packed_end, &out->node_indexes);
    } else if (tag == kIndex) {  // one by one, which protobuf reads too
      ok = ReadIndex(&p, end, &out->node_indexes);
    }
    if (!ok) return false;
  }
  return true;
}

bool ReadHostPriorityList(absl::string_view bytes, HostPriorityView* out) {
  constexpr char kItem = Tag(v1::HostPriorityList::kItemsFieldNumber, kLengthDelimited);
  constexpr char kHost = Tag(v1::HostPriority::kHostFieldNumber, kLengthDelimited);
  constexpr char kScore = Tag(v1::HostPriority::kScoreFieldNumber, wire::kVarint);
  out->clear();
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while (p < end) {
    absl::string_view item;
    if (*p++ != kItem || !wire::ReadField(&p, end, &item)) return false;
    absl::string_view host;
    uint64_t score = 0;
    const char* q = item.data();
    const char* const item_end = q + item.size();
    while (q < item_end) {
      const char tag = *q++;
      const bool ok = tag == kHost    ? ReadText(&q, item_end, &host)
                      : tag == kScore ? wire::ReadVarint(&q, item_end, 10, &score)
                                      : false;
      if (!ok) return false;
    }
    out->emplace_back(host, static_cast<int64_t>(score));
  }
  return true;
}

}  // namespace fitledger::shim
