#include "server/service/extender_wire.h"

#include "common/proto_wire.h"
#include "google/protobuf/io/coded_stream.h"

namespace fitledger {
namespace {

using wire::FieldSize;
using wire::kLengthDelimited;
using wire::PutField;
using wire::PutVarint;
using wire::Tag;
using wire::VarintSize;
using Args = v1::ExtenderArgs;
using FilterReply = v1::ExtenderFilterResult;
static_assert(Args::kPodFieldNumber < 16 && Args::kNodeNamesFieldNumber < 16 &&
              Args::kReplyNodeIndexesFieldNumber < 16);
static_assert(FilterReply::kNodeNamesFieldNumber < 16 &&
              FilterReply::kNodeIndexesFieldNumber < 16 &&
              FilterReply::kFailedNodesFieldNumber < 16 &&
              FilterReply::kFailedAndUnresolvableNodesFieldNumber < 16);
static_assert(v1::HostPriorityList::kItemsFieldNumber < 16 &&
              v1::HostPriority::kHostFieldNumber < 16 && v1::HostPriority::kScoreFieldNumber < 16);

// The entries of a map<string, string> field: name -> reason.
size_t MapSize(absl::Span<const absl::string_view> names,
               const std::vector<std::pair<size_t, std::string>>& entries) {
  size_t size = 0;
  for (const auto& [i, why] : entries) size += FieldSize(wire::MapEntrySize(names[i], why));
  return size;
}

char* PutMap(char tag, absl::Span<const absl::string_view> names,
             const std::vector<std::pair<size_t, std::string>>& entries, char* p) {
  for (const auto& [i, why] : entries) p = wire::PutMapEntry(tag, names[i], why, p);
  return p;
}

// Grows `out` by `size` bytes and returns where they start.
char* Extend(std::string* out, size_t size) {
  const size_t at = out->size();
  out->resize(at + size);
  return out->data() + at;
}

}  // namespace

bool ReadExtenderArgs(absl::string_view bytes, v1::Pod* pod, std::vector<absl::string_view>* names,
                      bool* reply_node_indexes) {
  constexpr char kNameTag = Tag(Args::kNodeNamesFieldNumber, kLengthDelimited);
  constexpr char kPodTag = Tag(Args::kPodFieldNumber, kLengthDelimited);
  constexpr char kIndexesTag = Tag(Args::kReplyNodeIndexesFieldNumber, wire::kVarint);
  names->clear();
  *reply_node_indexes = false;
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  absl::string_view pod_bytes;
  bool has_pod = false;
  while (p < end) {
    // The tags are one byte; anything else (a second pod included: protobuf merges the two, and
    // a tag written long) is protobuf's to read.
    const char tag = *p++;
    if (tag == kIndexesTag) {
      uint64_t value = 0;  // a bool: any value but 0 is true, and the last one counts
      if (!wire::ReadVarint(&p, end, 10, &value)) return false;
      *reply_node_indexes = value != 0;
      continue;
    }
    const bool is_name = tag == kNameTag;
    if (!is_name && (tag != kPodTag || has_pod)) return false;
    absl::string_view field;
    if (!wire::ReadField(&p, end, &field)) return false;
    if (is_name) {
      // Protobuf checks UTF-8; ASCII needs no check.
      if (!wire::IsAscii(field)) return false;
      names->push_back(field);
    } else {
      pod_bytes = field;
      has_pod = true;
    }
  }
  if (!has_pod) {
    pod->Clear();
    return true;
  }
  // Inside ExtenderArgs the pod is one level deep: it gets one level less of protobuf's nesting
  // budget than a pod parsed alone.
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(pod_bytes.data()),
                                            static_cast<int>(pod_bytes.size()));
  in.SetRecursionLimit(google::protobuf::io::CodedInputStream::GetDefaultRecursionLimit() - 1);
  return pod->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

void WriteFilterResult(absl::Span<const absl::string_view> names, const FilterResult& result,
                       bool by_index, std::string* out) {
  constexpr char kName = Tag(FilterReply::kNodeNamesFieldNumber, kLengthDelimited);
  constexpr char kFailed = Tag(FilterReply::kFailedNodesFieldNumber, kLengthDelimited);
  constexpr char kUnresolvable =
      Tag(FilterReply::kFailedAndUnresolvableNodesFieldNumber, kLengthDelimited);
  constexpr char kIndexes = Tag(FilterReply::kNodeIndexesFieldNumber, kLengthDelimited);
  size_t size = MapSize(names, result.failed) + MapSize(names, result.unresolvable);
  // By index: one packed field, as protobuf writes a repeated scalar (left out when empty), in
  // field order after the maps.
  size_t packed = 0;
  if (by_index) {
    for (size_t i : result.fits) packed += VarintSize(i);
    if (packed > 0) size += FieldSize(packed);
  } else {
    for (size_t i : result.fits) size += FieldSize(names[i].size());
  }
  char* p = Extend(out, size);
  if (!by_index) {
    for (size_t i : result.fits) p = PutField(kName, names[i], p);
  }
  p = PutMap(kFailed, names, result.failed, p);
  p = PutMap(kUnresolvable, names, result.unresolvable, p);
  if (packed > 0) {
    *p++ = kIndexes;
    p = PutVarint(packed, p);
    for (size_t i : result.fits) p = PutVarint(i, p);
  }
}

void WriteHostPriorityList(absl::Span<const absl::string_view> names,
                           absl::Span<const int64_t> scores, std::string* out) {
  constexpr char kItem = Tag(v1::HostPriorityList::kItemsFieldNumber, kLengthDelimited);
  constexpr char kHost = Tag(v1::HostPriority::kHostFieldNumber, kLengthDelimited);
  constexpr char kScore = Tag(v1::HostPriority::kScoreFieldNumber, wire::kVarint);
  // proto3 leaves out a field at its default: an empty host, a zero score.
  auto item_size = [&](size_t i) {
    size_t n = names[i].empty() ? 0 : FieldSize(names[i].size());
    if (scores[i] != 0) n += 1 + VarintSize(static_cast<uint64_t>(scores[i]));
    return n;
  };
  size_t size = 0;
  for (size_t i = 0; i < names.size(); ++i) size += FieldSize(item_size(i));
  char* p = Extend(out, size);
  for (size_t i = 0; i < names.size(); ++i) {
    *p++ = kItem;
    p = PutVarint(item_size(i), p);
    if (!names[i].empty()) p = PutField(kHost, names[i], p);
    if (scores[i] != 0) {
      *p++ = kScore;
      p = PutVarint(static_cast<uint64_t>(scores[i]), p);
    }
  }
}

}  // namespace fitledger
