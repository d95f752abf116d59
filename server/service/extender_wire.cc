#include "server/service/extender_wire.h"

#include <cstring>

namespace fitledger {
namespace {

// Wire type 2 (length-delimited): strings, bytes, embedded messages, map entries.
constexpr uint8_t kLengthDelimited = 2;
constexpr uint8_t kVarint = 0;

// The one-byte tag of `field` with `wire_type`; every field written here has a number below 16.
constexpr char Tag(int field, uint8_t wire_type) {
  return static_cast<char>((field << 3) | wire_type);
}

using Args = v1::ExtenderArgs;
using FilterReply = v1::ExtenderFilterResult;
static_assert(Args::kPodFieldNumber < 16 && Args::kNodeNamesFieldNumber < 16);
static_assert(FilterReply::kNodeNamesFieldNumber < 16 &&
              FilterReply::kFailedNodesFieldNumber < 16 &&
              FilterReply::kFailedAndUnresolvableNodesFieldNumber < 16);
static_assert(v1::HostPriorityList::kItemsFieldNumber < 16 &&
              v1::HostPriority::kHostFieldNumber < 16 && v1::HostPriority::kScoreFieldNumber < 16);

// A map<string, string> entry's key and value fields.
constexpr char kMapKey = Tag(1, kLengthDelimited);
constexpr char kMapValue = Tag(2, kLengthDelimited);

// Reads a length at `*p`, not past `end`: a varint of at most 4 bytes (256 MiB, over any request
// the listener takes). False when it is truncated or longer.
bool ReadLength(const char** p, const char* end, uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 28 && *p < end; shift += 7) {
    const auto byte = static_cast<uint8_t>(*(*p)++);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) {
      *value = v;
      return true;
    }
  }
  return false;
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

char* PutVarint(uint64_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// A length-delimited field of `length` bytes, with its one-byte tag and its length.
size_t FieldSize(size_t length) { return 1 + VarintSize(length) + length; }

char* PutField(char tag, absl::string_view bytes, char* p) {
  *p++ = tag;
  p = PutVarint(bytes.size(), p);
  std::memcpy(p, bytes.data(), bytes.size());
  return p + bytes.size();
}

size_t MapEntrySize(absl::string_view key, absl::string_view value) {
  return FieldSize(key.size()) + FieldSize(value.size());
}

// The entries of a map<string, string> field: name -> reason.
size_t MapSize(absl::Span<const absl::string_view> names,
               const std::vector<std::pair<size_t, std::string>>& entries) {
  size_t size = 0;
  for (const auto& [i, why] : entries) size += FieldSize(MapEntrySize(names[i], why));
  return size;
}

char* PutMap(char tag, absl::Span<const absl::string_view> names,
             const std::vector<std::pair<size_t, std::string>>& entries, char* p) {
  for (const auto& [i, why] : entries) {
    *p++ = tag;
    p = PutVarint(MapEntrySize(names[i], why), p);
    p = PutField(kMapKey, names[i], p);
    p = PutField(kMapValue, why, p);
  }
  return p;
}

// Grows `out` by `size` bytes and returns where they start.
char* Extend(std::string* out, size_t size) {
  const size_t at = out->size();
  out->resize(at + size);
  return out->data() + at;
}

}  // namespace

bool ReadExtenderArgs(absl::string_view bytes, v1::Pod* pod,
                      std::vector<absl::string_view>* names) {
  constexpr char kNameTag = Tag(Args::kNodeNamesFieldNumber, kLengthDelimited);
  constexpr char kPodTag = Tag(Args::kPodFieldNumber, kLengthDelimited);
  names->clear();
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  const char* pod_bytes = nullptr;
  size_t pod_size = 0;
  uint8_t high_bits = 0;  // of every name byte: 0 when all are ASCII
  while (p < end) {
    // Both tags are one byte; anything else (a second pod included: protobuf merges the two, and
    // a tag written long) is protobuf's to read.
    const char tag = *p++;
    const bool is_name = tag == kNameTag;
    if (!is_name && (tag != kPodTag || pod_bytes != nullptr)) return false;
    uint64_t length = 0;
    if (!ReadLength(&p, end, &length) || length > static_cast<uint64_t>(end - p)) return false;
    if (is_name) {
      for (size_t k = 0; k < length; ++k) high_bits |= static_cast<uint8_t>(p[k]);
      names->emplace_back(p, length);
    } else {
      pod_bytes = p;
      pod_size = length;
    }
    p += length;
  }
  if ((high_bits & 0x80) != 0) return false;  // protobuf checks UTF-8; ASCII needs no check
  if (pod_bytes == nullptr) {
    pod->Clear();
    return true;
  }
  return pod->ParseFromArray(pod_bytes, static_cast<int>(pod_size));
}

void WriteFilterResult(absl::Span<const absl::string_view> names, const FilterResult& result,
                       std::string* out) {
  constexpr char kName = Tag(FilterReply::kNodeNamesFieldNumber, kLengthDelimited);
  constexpr char kFailed = Tag(FilterReply::kFailedNodesFieldNumber, kLengthDelimited);
  constexpr char kUnresolvable =
      Tag(FilterReply::kFailedAndUnresolvableNodesFieldNumber, kLengthDelimited);
  size_t size = MapSize(names, result.failed) + MapSize(names, result.unresolvable);
  for (size_t i : result.fits) size += FieldSize(names[i].size());
  char* p = Extend(out, size);
  for (size_t i : result.fits) p = PutField(kName, names[i], p);
  p = PutMap(kFailed, names, result.failed, p);
  PutMap(kUnresolvable, names, result.unresolvable, p);
}

void WriteHostPriorityList(absl::Span<const absl::string_view> names,
                           absl::Span<const int64_t> scores, std::string* out) {
  constexpr char kItem = Tag(v1::HostPriorityList::kItemsFieldNumber, kLengthDelimited);
  constexpr char kHost = Tag(v1::HostPriority::kHostFieldNumber, kLengthDelimited);
  constexpr char kScore = Tag(v1::HostPriority::kScoreFieldNumber, kVarint);
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
