// Protobuf's wire format, the few pieces fitledger reads and writes by hand: one-byte tags,
// varints and length-delimited fields. For Filter's and Prioritize's messages on the path between
// the shim and the server's unary listener, where building messages costs more than the call's
// own work (server/service/extender_wire.h, client/shim/extender_bytes.h).
#ifndef FITLEDGER_COMMON_PROTO_WIRE_H_
#define FITLEDGER_COMMON_PROTO_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace fitledger::wire {

constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;

// The tag of `field` with `wire_type`, for fields numbered below 16 (one byte).
constexpr char Tag(int field, int wire_type) { return static_cast<char>((field << 3) | wire_type); }

// A map<K, V> entry's key and value fields, when both are strings.
constexpr char kMapKey = Tag(1, kLengthDelimited);
constexpr char kMapValue = Tag(2, kLengthDelimited);

// Reads a varint of at most `max_bytes` bytes at `*p`, not past `end`, and moves `*p` past it.
// False when it is truncated or longer. Protobuf reads longer (non-canonical) varints too: a
// caller that gets false leaves the bytes to protobuf.
inline bool ReadVarint(const char** p, const char* end, int max_bytes, uint64_t* value) {
  uint64_t v = 0;
  for (int i = 0; i < max_bytes && *p < end; ++i) {
    const auto byte = static_cast<uint8_t>(*(*p)++);
    v |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if (byte < 0x80) {
      *value = v;
      return true;
    }
  }
  return false;
}

// Reads the length of a length-delimited field (at most 4 bytes: 256 MiB, over any message
// fitledger takes) and checks the field fits before `end`; `*field` views its bytes and `*p`
// moves past them.
inline bool ReadField(const char** p, const char* end, absl::string_view* field) {
  uint64_t length = 0;
  if (!ReadVarint(p, end, 4, &length) || length > static_cast<uint64_t>(end - *p)) return false;
  *field = absl::string_view(*p, length);
  *p += length;
  return true;
}

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline char* PutVarint(uint64_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// A length-delimited field of `length` bytes with its one-byte tag and its length.
inline size_t FieldSize(size_t length) { return 1 + VarintSize(length) + length; }

inline char* PutField(char tag, absl::string_view bytes, char* p) {
  *p++ = tag;
  p = PutVarint(bytes.size(), p);
  std::memcpy(p, bytes.data(), bytes.size());
  return p + bytes.size();
}

// A map<string, string> entry's size, and the entry with its tag.
inline size_t MapEntrySize(absl::string_view key, absl::string_view value) {
  return FieldSize(key.size()) + FieldSize(value.size());
}

inline char* PutMapEntry(char tag, absl::string_view key, absl::string_view value, char* p) {
  *p++ = tag;
  p = PutVarint(MapEntrySize(key, value), p);
  p = PutField(kMapKey, key, p);
  return PutField(kMapValue, value, p);
}

// True when no byte of `bytes` has its high bit set: ASCII, which is valid UTF-8 (protobuf checks
// UTF-8 in proto3 strings; a reader that sees anything else leaves the bytes to protobuf).
inline bool IsAscii(absl::string_view bytes) {
  uint8_t high = 0;
  for (char c : bytes) high |= static_cast<uint8_t>(c);
  return high < 0x80;
}

}  // namespace fitledger::wire

#endif  // FITLEDGER_COMMON_PROTO_WIRE_H_
