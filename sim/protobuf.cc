// Kubernetes' protobuf encoding of pods, nodes and Status objects (sim/protobuf.h).
#include "sim/protobuf.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "common/json.h"
#include "model/k8s_field_numbers.h"
#include "simdjson.h"

namespace fitledger::sim {
namespace {

// The schema: one line per message, "Name field=number:type ...". Types: string, bool, int32,
// int64 (varints; k8s.io/api uses proto2, repeated scalars unpacked), time (metav1.Time and its
// JSON RFC 3339 string: message {1 seconds int64, 2 nanos int32}), quantity (resource.Quantity, a
// JSON string or number: message {1 string}), intorstring (intstr.IntOrString: message {1 type
// int64 (0 Int, 1 String), 2 intVal int32, 3 strVal string}), fieldsv1 (metav1.FieldsV1, a JSON
// object: message {1 Raw bytes} holding its compact JSON text), or a message of this table.
// "[]" marks a repeated field, "map<T>" a map from string to T (repeated entries {1 key, 2
// value}), "^" a message whose fields the JSON inlines into the parent (Go's `json:",inline"`:
// Volume.volumeSource, Probe.handler, EphemeralContainer.ephemeralContainerCommon, the
// localObjectReference of ConfigMap and Secret references). Names, numbers and types are those of
// k8s.io/api core/v1/generated.proto, k8s.io/apimachinery pkg/apis/meta/v1/generated.proto,
// pkg/api/resource/generated.proto and pkg/util/intstr/generated.proto (the proto field names are
// the JSON names); every message reachable from Pod, Node and Status is listed. The table is
// generated from those files by sim/tools/gen_k8s_schema.py (issue 50 item 5; ctest
// k8s_schema_up_to_date checks it against the pinned modules).
constexpr char kSchema[] =
#include "sim/k8s_schema.inc"
    ;

namespace fields = ::fitledger::k8s_fields;
// A protobuf map<K, V> is a repeated entry message {1 key, 2 value} (the protobuf language
// specification, "Maps").
constexpr uint32_t kMapKey = 1;
constexpr uint32_t kMapValue = 2;

// protobuf.go protoEncodingPrefix.
constexpr absl::string_view kMagic("k8s\0", 4);

enum class Type {
  kString,
  kBool,
  kInt32,
  kInt64,
  kTime,
  kQuantity,
  kIntOrString,
  kFieldsV1,
  kMessage
};

struct Message;

struct Field {
  std::string name;
  uint32_t number = 0;
  Type type = Type::kString;
  bool repeated = false;
  bool map = false;                  // a map from string to `type`
  bool inlined = false;              // a message whose fields the JSON holds in the parent
  const Message* message = nullptr;  // kMessage
};

struct Message {
  std::string name;
  std::vector<Field> fields;
  absl::flat_hash_map<std::string, int> by_name;
  absl::flat_hash_map<uint32_t, int> by_number;
  std::vector<int> inlined;  // indices of the inlined fields
};

[[noreturn]] void BadSchema(absl::string_view what) {
  std::fprintf(stderr, "sim/protobuf.cc: bad schema table: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::abort();
}

using Schema = absl::flat_hash_map<std::string, std::unique_ptr<Message>>;

const Schema& GetSchema() {
  static const Schema* const schema = [] {
    auto* s = new Schema();
    std::vector<std::vector<std::string>> lines;
    for (absl::string_view line : absl::StrSplit(kSchema, '\n', absl::SkipEmpty())) {
      std::vector<std::string> tokens = absl::StrSplit(line, ' ', absl::SkipEmpty());
      (*s)[tokens[0]] = std::make_unique<Message>();
      lines.push_back(std::move(tokens));
    }
    for (const std::vector<std::string>& tokens : lines) {
      Message& m = *(*s)[tokens[0]];
      m.name = tokens[0];
      for (size_t i = 1; i < tokens.size(); ++i) {
        std::vector<std::string> name_rest = absl::StrSplit(tokens[i], absl::MaxSplits('=', 1));
        if (name_rest.size() != 2) BadSchema(tokens[i]);
        std::vector<std::string> number_type =
            absl::StrSplit(name_rest[1], absl::MaxSplits(':', 1));
        Field f;
        f.name = name_rest[0];
        if (number_type.size() != 2 || !absl::SimpleAtoi(number_type[0], &f.number)) {
          BadSchema(tokens[i]);
        }
        absl::string_view type = number_type[1];
        if (absl::ConsumePrefix(&type, "[]")) f.repeated = true;
        if (absl::ConsumePrefix(&type, "^")) f.inlined = true;
        if (absl::ConsumePrefix(&type, "map<") && absl::ConsumeSuffix(&type, ">")) f.map = true;
        static const auto* const kScalars =
            new absl::flat_hash_map<std::string, Type>{{"string", Type::kString},
                                                       {"bool", Type::kBool},
                                                       {"int32", Type::kInt32},
                                                       {"int64", Type::kInt64},
                                                       {"time", Type::kTime},
                                                       {"quantity", Type::kQuantity},
                                                       {"intorstring", Type::kIntOrString},
                                                       {"fieldsv1", Type::kFieldsV1}};
        if (auto it = kScalars->find(type); it != kScalars->end()) {
          f.type = it->second;
        } else if (auto m2 = s->find(type); m2 != s->end()) {
          f.type = Type::kMessage;
          f.message = m2->second.get();
        } else {
          BadSchema(tokens[i]);
        }
        if (f.inlined && (f.type != Type::kMessage || f.repeated || f.map)) BadSchema(tokens[i]);
        const int index = static_cast<int>(m.fields.size());
        if (f.inlined) {
          m.inlined.push_back(index);
        } else if (!m.by_name.emplace(f.name, index).second) {
          BadSchema(tokens[i]);
        }
        if (!m.by_number.emplace(f.number, index).second) BadSchema(tokens[i]);
        m.fields.push_back(std::move(f));
      }
    }
    return s;
  }();
  return *schema;
}

const Message* FindMessage(absl::string_view kind) {
  if (kind != "Pod" && kind != "Node" && kind != "Status") return nullptr;
  const Schema& schema = GetSchema();
  auto it = schema.find(kind);
  return it == schema.end() ? nullptr : it->second.get();
}

// Protobuf wire format (protobuf.dev/programming-guides/encoding): varints, tags, lengths.
void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void PutTag(uint32_t number, int wire_type, std::string* out) {
  PutVarint((static_cast<uint64_t>(number) << 3) | wire_type, out);
}

void PutBytes(uint32_t number, absl::string_view bytes, std::string* out) {
  PutTag(number, 2, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

// metav1.Time's JSON: RFC 3339 (meta/v1 time.go UnmarshalJSON); the common
// "YYYY-MM-DDTHH:MM:SSZ" without absl::ParseTime, which is slower.
bool ParseRfc3339(absl::string_view text, int64_t* seconds, int64_t* nanos) {
  auto digits = [&](size_t at, size_t n, int* out) {
    *out = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      *out = *out * 10 + (text[i] - '0');
    }
    return true;
  };
  int y, mo, d, h, mi, s;
  if (text.size() == 20 && text[4] == '-' && text[7] == '-' && text[10] == 'T' && text[13] == ':' &&
      text[16] == ':' && text[19] == 'Z' && digits(0, 4, &y) && digits(5, 2, &mo) &&
      digits(8, 2, &d) && digits(11, 2, &h) && digits(14, 2, &mi) && digits(17, 2, &s)) {
    *seconds = absl::ToUnixSeconds(
        absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s), absl::UTCTimeZone()));
    *nanos = 0;
    return true;
  }
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &error)) return false;
  *seconds = absl::ToUnixSeconds(t);
  *nanos = (t - absl::FromUnixSeconds(*seconds)) / absl::Nanoseconds(1);
  return true;
}

// Encoded fields in the order written, and where each begins: Kubernetes' generated marshallers
// write fields by number and map entries by key, so a message whose JSON has another order is
// reordered when it is closed.
struct Sink {
  struct Chunk {
    uint32_t number;
    std::string key;  // map entries: the key; else empty
    size_t begin;
  };
  std::string bytes;
  std::vector<Chunk> chunks;
  bool sorted = true;

  void Clear() {
    bytes.clear();
    chunks.clear();
    sorted = true;
  }
  // Starts a field; the caller appends its tag and value.
  void Begin(uint32_t number, absl::string_view key = {}) {
    if (!chunks.empty()) {
      const Chunk& last = chunks.back();
      if (number < last.number || (number == last.number && key < last.key)) sorted = false;
    }
    chunks.push_back({number, std::string(key), bytes.size()});
  }
  // The fields in order: `bytes` itself when they are, else `scratch` filled.
  absl::string_view Ordered(std::string* scratch) const {
    if (sorted) return bytes;
    std::vector<size_t> order(chunks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (chunks[a].number != chunks[b].number) return chunks[a].number < chunks[b].number;
      return chunks[a].key < chunks[b].key;
    });
    scratch->clear();
    for (size_t i : order) {
      const size_t end = i + 1 < chunks.size() ? chunks[i + 1].begin : bytes.size();
      scratch->append(bytes, chunks[i].begin, end - chunks[i].begin);
    }
    return *scratch;
  }
};

// Encodes while WalkJson reads the JSON text (SAX calls): no JSON document is built. A stack of
// frames, one per open object or array: a message, a map, a repeated field, a FieldsV1 object
// (kept as text), or a value being skipped (unknown or mistyped).
class SaxEncoder {
 public:
  using number_integer_t = nlohmann::json::number_integer_t;
  using number_unsigned_t = nlohmann::json::number_unsigned_t;
  using number_float_t = nlohmann::json::number_float_t;
  using string_t = std::string;
  using binary_t = nlohmann::json::binary_t;

  SaxEncoder(const Message* top, std::vector<std::string>* omitted)
      : top_(top), omitted_(omitted) {}

  // After a successful parse: runtime.Unknown {typeMeta {apiVersion, kind}, raw}, with
  // contentEncoding and contentType left out.
  std::string Envelope() {
    std::string type_meta;
    PutBytes(fields::TypeMeta::kApiVersion, api_version_, &type_meta);
    PutBytes(fields::TypeMeta::kKind, kind_, &type_meta);
    std::string out(kMagic);
    out.reserve(kMagic.size() + type_meta.size() + raw_.size() + 16);
    PutBytes(fields::Unknown::kTypeMeta, type_meta, &out);
    PutBytes(fields::Unknown::kRaw, raw_, &out);
    return out;
  }
  const std::string& error() const { return error_; }

  bool null() {
    if (InFieldsV1()) return FieldsV1Scalar("null");
    Value();  // an absent field
    return true;
  }
  bool boolean(bool v) {
    if (InFieldsV1()) return FieldsV1Scalar(v ? "true" : "false");
    const Field* f = ScalarField();
    if (f == nullptr) return true;
    if (f->type != Type::kBool) return Omit();
    Sink& sink = Target();
    sink.Begin(f->number);
    PutTag(f->number, 0, &sink.bytes);
    PutVarint(v ? 1 : 0, &sink.bytes);
    return true;
  }
  bool number_integer(number_integer_t v) { return Integer(v, absl::StrCat(v)); }
  bool number_unsigned(number_unsigned_t v) {
    return Integer(static_cast<int64_t>(v), absl::StrCat(v));
  }
  bool number_float(number_float_t, const string_t& text) {
    if (InFieldsV1()) return FieldsV1Scalar(text);
    const Field* f = ScalarField();
    if (f == nullptr) return true;
    if (f->type != Type::kQuantity) return Omit();
    return Quantity(*f, text);
  }
  bool string(string_t& v) {
    if (InFieldsV1()) {
      std::string quoted;
      AppendJsonString(v, &quoted);
      return FieldsV1Scalar(quoted);
    }
    if (top_level_key_ != nullptr) {  // kind, apiVersion: the envelope's typeMeta
      *top_level_key_ = v;
      top_level_key_ = nullptr;
      return true;
    }
    const Field* f = ScalarField();
    if (f == nullptr) return true;
    Sink& sink = Target();
    switch (f->type) {
      case Type::kString:
        sink.Begin(f->number, map_key());
        if (map_key_field_ != nullptr)
          return MapEntry(sink, [&](std::string* s) { PutBytes(kMapValue, v, s); });
        PutBytes(f->number, v, &sink.bytes);
        return true;
      case Type::kTime: {
        int64_t seconds = 0;
        int64_t nanos = 0;
        if (!ParseRfc3339(v, &seconds, &nanos)) return Omit();
        // metav1.Time: {seconds, nanos} (meta/v1 time_proto.go).
        std::string t;
        PutTag(fields::Time::kSeconds, 0, &t);
        PutVarint(static_cast<uint64_t>(seconds), &t);
        PutTag(fields::Time::kNanos, 0, &t);
        PutVarint(static_cast<uint64_t>(nanos), &t);
        sink.Begin(f->number);
        PutBytes(f->number, t, &sink.bytes);
        return true;
      }
      case Type::kQuantity:
        return Quantity(*f, v);
      case Type::kIntOrString: {
        // intstr.IntOrString: {type (1 String), strVal}.
        std::string x;
        PutTag(fields::IntOrString::kType, 0, &x);
        PutVarint(1, &x);
        PutBytes(fields::IntOrString::kStrVal, v, &x);
        sink.Begin(f->number);
        PutBytes(f->number, x, &sink.bytes);
        return true;
      }
      default:
        return Omit();
    }
  }
  bool binary(binary_t&) { return Omit(); }

  bool start_object(std::size_t) {
    if (InFieldsV1()) return FieldsV1Open('{');
    if (depth_ == 0) {
      Frame& frame = Push(Frame::kMessage);
      frame.message = top_;
      frame.number = 0;
      return true;
    }
    if (Top().kind == Frame::kSkip) {
      ++Top().skip_depth;
      return true;
    }
    const bool in_map = Top().kind == Frame::kMap;
    const Field* f = ValueField();
    if (f == nullptr) return Skip();
    if (in_map) return OmitAndSkip();  // map values are scalars
    if (f->map && !InRepeated()) {
      Frame& frame = PushChild(Frame::kMap, *f);
      frame.field = f;
      return true;
    }
    if (f->map) return OmitAndSkip();
    if (f->type == Type::kMessage && (!f->repeated || InRepeated())) {
      Frame& frame = PushChild(Frame::kMessage, *f);
      frame.message = f->message;
      return true;
    }
    if (f->type == Type::kFieldsV1 && (!f->repeated || InRepeated())) {
      PushChild(Frame::kFieldsV1, *f);
      return FieldsV1Open('{');
    }
    return OmitAndSkip();
  }
  bool end_object() { return Close('}'); }
  bool start_array(std::size_t) {
    if (InFieldsV1()) return FieldsV1Open('[');
    if (depth_ == 0) return Fail("not a JSON object");
    if (Top().kind == Frame::kSkip) {
      ++Top().skip_depth;
      return true;
    }
    const bool in_map = Top().kind == Frame::kMap;
    const Field* f = ValueField();
    if (f == nullptr) return Skip();
    if (in_map || !f->repeated || InRepeated()) return OmitAndSkip();
    Frame& frame = PushChild(Frame::kRepeated, *f);
    frame.field = f;
    return true;
  }
  bool end_array() { return Close(']'); }
  bool key(string_t& key) {
    if (InFieldsV1()) {
      Frame& frame = Top();
      if (!frame.first.back()) frame.text.push_back(',');
      frame.first.back() = false;
      AppendJsonString(key, &frame.text);
      frame.text.push_back(':');
      frame.after_key = true;
      return true;
    }
    top_level_key_ = nullptr;
    Frame& frame = Top();
    if (frame.kind == Frame::kSkip) return true;
    if (omitted_ != nullptr) {
      path_.resize(frame.path_mark);
      absl::StrAppend(&path_, ".", key);
    }
    frame.pending = nullptr;
    frame.pending_inline = -1;
    if (frame.kind == Frame::kMap) {
      frame.map_key = key;
      frame.pending = frame.field;
      return true;
    }
    if (depth_ == 1 && (key == "kind" || key == "apiVersion")) {
      top_level_key_ = key == "kind" ? &kind_ : &api_version_;
      return true;
    }
    const Message& m = *frame.message;
    if (auto it = m.by_name.find(key); it != m.by_name.end()) {
      frame.pending = &m.fields[it->second];
      return true;
    }
    for (int index : m.inlined) {
      const Message& in = *m.fields[index].message;
      if (auto it = in.by_name.find(key); it != in.by_name.end()) {
        frame.pending = &in.fields[it->second];
        frame.pending_inline = index;
        return true;
      }
    }
    Omit();  // the value is skipped: pending stays null
    return true;
  }

 private:
  struct Frame {
    enum Kind { kMessage, kMap, kRepeated, kFieldsV1, kSkip } kind = kMessage;
    const Message* message = nullptr;           // kMessage
    const Field* field = nullptr;               // kMap, kRepeated: the field
    uint32_t number = 0;                        // the field this frame's value is written as
    size_t parent = 0;                          // where it is written: this frame of the stack,
    int parent_inline = -1;                     // in its inlined message of this field index, or -1
    Sink sink;                                  // kMessage
    std::vector<std::pair<int, Sink>> inlined;  // kMessage: the inlined messages begun
    const Field* pending = nullptr;             // the field of the key just read (kMessage, kMap)
    int pending_inline = -1;
    std::string map_key;  // kMap
    size_t index = 0;     // kRepeated: the next element's index
    int skip_depth = 0;   // kSkip
    std::string text;     // kFieldsV1: the object as compact JSON
    std::vector<bool> first;
    bool after_key = false;
    size_t path_mark = 0;
  };

  Frame& Top() { return stack_[depth_ - 1]; }
  bool InRepeated() const { return depth_ > 0 && stack_[depth_ - 1].kind == Frame::kRepeated; }
  bool InFieldsV1() const { return depth_ > 0 && stack_[depth_ - 1].kind == Frame::kFieldsV1; }
  absl::string_view map_key() const {
    return map_key_field_ != nullptr ? absl::string_view(stack_[depth_ - 1].map_key)
                                     : absl::string_view();
  }

  Frame& Push(Frame::Kind kind) {
    if (stack_.size() == depth_) stack_.emplace_back();
    Frame& frame = stack_[depth_++];
    frame.kind = kind;
    frame.message = nullptr;
    frame.field = nullptr;
    frame.sink.Clear();
    frame.inlined.clear();
    frame.pending = nullptr;
    frame.pending_inline = -1;
    frame.index = 0;
    frame.skip_depth = 0;
    frame.text.clear();
    frame.first.clear();
    frame.after_key = false;
    frame.path_mark = path_.size();
    return frame;
  }
  // A frame for the value of field `f` of the top frame, written where that frame writes `f`.
  Frame& PushChild(Frame::Kind kind, const Field& f) {
    size_t parent = depth_ - 1;
    int parent_inline = stack_[parent].pending_inline;
    if (stack_[parent].kind == Frame::kRepeated) {
      parent_inline = stack_[parent].parent_inline;
      parent = stack_[parent].parent;
    }
    Frame& frame = Push(kind);
    frame.number = f.number;
    frame.parent = parent;
    frame.parent_inline = parent_inline;
    return frame;
  }

  // The field a value at the top is of; nullptr when it is to be skipped. In a repeated field,
  // advances to the next element.
  const Field* ValueField() {
    Frame& frame = Top();
    if (frame.kind == Frame::kRepeated) {
      if (omitted_ != nullptr) {
        path_.resize(frame.path_mark);
        absl::StrAppend(&path_, "[", frame.index, "]");
      }
      ++frame.index;
      return frame.field;
    }
    const Field* f = frame.pending;
    frame.pending = nullptr;
    return f;
  }
  // As ValueField for a scalar: also sets map_key_field_ in a map.
  const Field* ScalarField() {
    map_key_field_ = nullptr;
    if (depth_ == 0) return nullptr;
    if (Top().kind == Frame::kSkip) return nullptr;
    const bool in_map = Top().kind == Frame::kMap;
    const Field* f = ValueField();
    if (f == nullptr) return nullptr;
    if (in_map) {
      map_key_field_ = f;
      return f;
    }
    if ((f->repeated && !InRepeated()) || f->map) {
      Omit();
      return nullptr;
    }
    return f;
  }
  void Value() {
    if (depth_ > 0 && Top().kind != Frame::kSkip) ValueField();
  }

  // Where the top frame's fields go: its own sink, or an inlined message's. In a map or a
  // repeated field, the frame that holds it.
  Sink& Target() {
    size_t at = depth_ - 1;
    int in = stack_[at].pending_inline;
    if (stack_[at].kind != Frame::kMessage) {
      in = stack_[at].parent_inline;
      at = stack_[at].parent;
    }
    return SinkOf(at, in);
  }
  Sink& SinkOf(size_t at, int inline_index) {
    Frame& frame = stack_[at];
    if (inline_index < 0) return frame.sink;
    for (auto& [index, sink] : frame.inlined) {
      if (index == inline_index) return sink;
    }
    frame.inlined.emplace_back(inline_index, Sink());
    return frame.inlined.back().second;
  }

  // A map entry {1 key, 2 value} in `sink`, begun by the caller.
  template <typename Fill>
  bool MapEntry(Sink& sink, Fill&& fill) {
    const Frame& frame = Top();
    std::string entry;
    PutBytes(kMapKey, frame.map_key, &entry);
    fill(&entry);
    PutBytes(map_key_field_->number, entry, &sink.bytes);
    return true;
  }

  bool Integer(int64_t v, const std::string& text) {
    if (InFieldsV1()) return FieldsV1Scalar(text);
    const Field* f = ScalarField();
    if (f == nullptr) return true;
    Sink& sink = Target();
    switch (f->type) {
      case Type::kInt32:
      case Type::kInt64: {
        // An int32 is written as its sign-extended 64-bit value (protobuf's int32 encoding).
        const int64_t n = f->type == Type::kInt32 ? static_cast<int32_t>(v) : v;
        sink.Begin(f->number);
        PutTag(f->number, 0, &sink.bytes);
        PutVarint(static_cast<uint64_t>(n), &sink.bytes);
        return true;
      }
      case Type::kQuantity:
        return Quantity(*f, text);
      case Type::kIntOrString: {
        // intstr.IntOrString: {type (0 Int), intVal}.
        std::string x;
        PutTag(fields::IntOrString::kType, 0, &x);
        PutVarint(0, &x);
        PutTag(fields::IntOrString::kIntVal, 0, &x);
        PutVarint(static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v))), &x);
        sink.Begin(f->number);
        PutBytes(f->number, x, &sink.bytes);
        return true;
      }
      default:
        return Omit();
    }
  }

  // resource.Quantity: a string, or a bare number, in JSON (quantity.go UnmarshalJSON); message
  // {string} in protobuf (quantity_proto.go).
  bool Quantity(const Field& f, absl::string_view text) {
    Sink& sink = Target();
    sink.Begin(f.number, map_key());
    if (map_key_field_ != nullptr) {
      return MapEntry(sink, [&](std::string* s) {
        std::string q;
        PutBytes(fields::Quantity::kString, text, &q);
        PutBytes(kMapValue, q, s);
      });
    }
    std::string q;
    PutBytes(fields::Quantity::kString, text, &q);
    PutBytes(f.number, q, &sink.bytes);
    return true;
  }

  // FieldsV1: the object as compact JSON text in its Raw bytes (meta/v1 helper.go).
  bool FieldsV1Separator() {
    Frame& frame = Top();
    if (!frame.after_key && !frame.first.back()) frame.text.push_back(',');
    frame.after_key = false;
    frame.first.back() = false;
    return true;
  }
  bool FieldsV1Scalar(absl::string_view text) {
    FieldsV1Separator();
    Top().text.append(text.data(), text.size());
    return true;
  }
  bool FieldsV1Open(char c) {
    Frame& frame = Top();
    if (!frame.first.empty()) FieldsV1Separator();
    frame.text.push_back(c);
    frame.first.push_back(true);
    return true;
  }

  bool Close(char c) {
    if (depth_ == 0) return Fail("unbalanced JSON");
    Frame& frame = Top();
    switch (frame.kind) {
      case Frame::kSkip:
        if (--frame.skip_depth == 0) Pop();
        return true;
      case Frame::kFieldsV1: {
        frame.text.push_back(c);
        frame.first.pop_back();
        if (!frame.first.empty()) return true;
        std::string raw;
        PutBytes(fields::FieldsV1::kRaw, frame.text, &raw);
        Sink& target = SinkOf(frame.parent, frame.parent_inline);
        target.Begin(frame.number);
        PutBytes(frame.number, raw, &target.bytes);
        Pop();
        return true;
      }
      case Frame::kMap:
      case Frame::kRepeated:
        Pop();
        return true;
      case Frame::kMessage: {
        for (auto& [index, sink] : frame.inlined) {
          const uint32_t number = frame.message->fields[index].number;
          frame.sink.Begin(number);
          PutBytes(number, sink.Ordered(&scratch_), &frame.sink.bytes);
        }
        if (depth_ == 1) {
          raw_ = std::string(frame.sink.Ordered(&scratch_));
        } else {
          Sink& target = SinkOf(frame.parent, frame.parent_inline);
          target.Begin(frame.number);
          PutBytes(frame.number, frame.sink.Ordered(&scratch_), &target.bytes);
        }
        Pop();
        return true;
      }
    }
    return true;
  }
  void Pop() {
    --depth_;
    if (omitted_ != nullptr) path_.resize(stack_[depth_].path_mark);
  }

  bool Skip() {
    Frame& frame = Push(Frame::kSkip);
    frame.skip_depth = 1;
    return true;
  }
  bool OmitAndSkip() {
    Omit();
    return Skip();
  }
  bool Omit() {
    if (omitted_ != nullptr) {
      omitted_->push_back(!path_.empty() && path_[0] == '.' ? path_.substr(1) : path_);
    }
    return true;
  }
  bool Fail(std::string error) {
    error_ = std::move(error);
    return false;
  }

  const Message* const top_;
  std::vector<std::string>* const omitted_;
  std::vector<Frame> stack_;  // frames [0, depth_) are open; the others kept for their buffers
  size_t depth_ = 0;
  const Field* map_key_field_ = nullptr;  // the scalar being written is a map entry's value
  std::string* top_level_key_ = nullptr;
  std::string kind_;
  std::string api_version_;
  std::string raw_;
  std::string path_;
  std::string scratch_;
  std::string error_;
};

// Calls `sax` for `value` and everything inside it in document order, as nlohmann's SAX parser
// does (start_object, key, string, number_integer, ...), reading with simdjson's On Demand parser:
// no document is built, and a number's text is kept (a Quantity's). False on malformed JSON or
// when `sax` stops, with `*error` set. `scratch` holds each key and string (SAX takes them as
// mutable strings; the encoder copies what it keeps).
template <typename Sax>
bool WalkJson(simdjson::ondemand::value value, Sax* sax, std::string* scratch, std::string* error) {
  auto fail = [&](simdjson::error_code code) {
    *error = absl::StrCat("malformed JSON: ", simdjson::error_message(code));
    return false;
  };
  auto stopped = [&] {
    if (error->empty()) *error = "stopped";
    return false;
  };
  simdjson::ondemand::json_type type;
  if (auto code = value.type().get(type)) return fail(code);
  switch (type) {
    case simdjson::ondemand::json_type::object: {
      simdjson::ondemand::object object;
      if (auto code = value.get_object().get(object)) return fail(code);
      if (!sax->start_object(static_cast<std::size_t>(-1))) return stopped();
      for (auto field : object) {
        std::string_view name;
        if (auto code = field.unescaped_key().get(name)) return fail(code);
        scratch->assign(name);
        if (!sax->key(*scratch)) return stopped();
        simdjson::ondemand::value member;
        if (auto code = field.value().get(member)) return fail(code);
        if (!WalkJson(member, sax, scratch, error)) return false;
      }
      return sax->end_object() || stopped();
    }
    case simdjson::ondemand::json_type::array: {
      simdjson::ondemand::array array;
      if (auto code = value.get_array().get(array)) return fail(code);
      if (!sax->start_array(static_cast<std::size_t>(-1))) return stopped();
      for (auto item : array) {
        simdjson::ondemand::value element;
        if (auto code = item.get(element)) return fail(code);
        if (!WalkJson(element, sax, scratch, error)) return false;
      }
      return sax->end_array() || stopped();
    }
    case simdjson::ondemand::json_type::string: {
      std::string_view text;
      if (auto code = value.get_string().get(text)) return fail(code);
      scratch->assign(text);
      return sax->string(*scratch) || stopped();
    }
    case simdjson::ondemand::json_type::number: {
      const std::string_view token = value.raw_json_token();
      const std::string text(
          absl::StripTrailingAsciiWhitespace(absl::string_view(token.data(), token.size())));
      simdjson::ondemand::number_type kind;
      if (auto code = value.get_number_type().get(kind)) return fail(code);
      if (kind == simdjson::ondemand::number_type::signed_integer) {
        int64_t n = 0;
        if (auto code = value.get_int64().get(n)) return fail(code);
        return sax->number_integer(n) || stopped();
      }
      if (kind == simdjson::ondemand::number_type::unsigned_integer) {
        uint64_t n = 0;
        if (auto code = value.get_uint64().get(n)) return fail(code);
        return sax->number_unsigned(n) || stopped();
      }
      double d = 0;
      if (auto code = value.get_double().get(d)) return fail(code);
      return sax->number_float(d, text) || stopped();
    }
    case simdjson::ondemand::json_type::boolean: {
      bool b = false;
      if (auto code = value.get_bool().get(b)) return fail(code);
      return sax->boolean(b) || stopped();
    }
    case simdjson::ondemand::json_type::null: {
      bool null = false;
      if (auto code = value.is_null().get(null)) return fail(code);
      if (!null) return fail(simdjson::INCORRECT_TYPE);
      return sax->null() || stopped();
    }
    default:
      return fail(simdjson::TAPE_ERROR);
  }
}

absl::StatusOr<std::string> EncodeText(absl::string_view text, std::vector<std::string>* omitted) {
  // The encoder needs the message before it reads the fields: "kind" first, then the walk from the
  // start. One parser per thread: the sim encodes on its request threads.
  thread_local simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(text.data(), text.size());
  simdjson::ondemand::document doc;
  if (auto code = parser.iterate(padded).get(doc)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON: ", simdjson::error_message(code)));
  }
  std::string_view kind_text;
  simdjson::ondemand::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS ||
      object.find_field_unordered("kind").get_string().get(kind_text) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("not a JSON object with a kind");
  }
  const absl::string_view kind(kind_text.data(), kind_text.size());
  const Message* m = FindMessage(kind);
  if (m == nullptr) {
    return absl::InvalidArgumentError(kind.empty()
                                          ? "not a JSON object with a kind"
                                          : absl::StrCat("no protobuf schema for kind ", kind));
  }
  doc.rewind();
  simdjson::ondemand::value top;
  if (auto code = doc.get_value().get(top)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON: ", simdjson::error_message(code)));
  }
  SaxEncoder encoder(m, omitted);
  std::string scratch;
  std::string error;
  if (!WalkJson(top, &encoder, &scratch, &error)) {
    return absl::InvalidArgumentError(encoder.error().empty() ? error : encoder.error());
  }
  // At the end of the text, the document's location is out of bounds.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    return absl::InvalidArgumentError("malformed JSON: text after the value");
  }
  return encoder.Envelope();
}

// Reads the wire format of one message.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) return false;
      const uint8_t byte = static_cast<uint8_t>(rest_[0]);
      rest_.remove_prefix(1);
      *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  // One field: its number, wire type, and its varint or its bytes.
  bool Next(uint32_t* number, int* wire_type, uint64_t* varint, absl::string_view* bytes) {
    uint64_t tag = 0;
    if (!Varint(&tag)) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<int>(tag & 7);
    switch (*wire_type) {
      case 0:
        return Varint(varint);
      case 1:
      case 5: {
        const size_t n = *wire_type == 1 ? 8 : 4;
        if (rest_.size() < n) return false;
        *bytes = rest_.substr(0, n);
        rest_.remove_prefix(n);
        return true;
      }
      case 2: {
        uint64_t n = 0;
        if (!Varint(&n) || n > rest_.size()) return false;
        *bytes = rest_.substr(0, n);
        rest_.remove_prefix(n);
        return true;
      }
      default:
        return false;
    }
  }

 private:
  absl::string_view rest_;
};

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed protobuf: ", what));
}

// Reads the fields {1 string, 2 varint, 3 string, ...} of a small message as number -> value.
struct Small {
  absl::flat_hash_map<uint32_t, uint64_t> varints;
  absl::flat_hash_map<uint32_t, absl::string_view> bytes;
};
absl::StatusOr<Small> ReadSmall(absl::string_view message) {
  Small small;
  Reader r(message);
  while (!r.done()) {
    uint32_t number = 0;
    int wire = 0;
    uint64_t varint = 0;
    absl::string_view bytes;
    if (!r.Next(&number, &wire, &varint, &bytes)) return Malformed("a small message");
    if (wire == 0) small.varints[number] = varint;
    if (wire == 2) small.bytes[number] = bytes;
  }
  return small;
}

class Decoder {
 public:
  explicit Decoder(std::vector<std::string>* unknown) : unknown_(unknown) {}

  absl::Status DecodeMessage(absl::string_view bytes, const Message& m, nlohmann::json* object) {
    if (!object->is_object()) *object = nlohmann::json::object();
    Reader r(bytes);
    while (!r.done()) {
      uint32_t number = 0;
      int wire = 0;
      uint64_t varint = 0;
      absl::string_view payload;
      if (!r.Next(&number, &wire, &varint, &payload)) return Malformed(m.name);
      auto it = m.by_number.find(number);
      if (it == m.by_number.end()) {
        if (unknown_ != nullptr) unknown_->push_back(absl::StrCat(m.name, ".", number));
        continue;
      }
      const Field& f = m.fields[it->second];
      if (f.inlined) {
        if (wire != 2) return Malformed(f.name);
        if (absl::Status s = DecodeMessage(payload, *f.message, object); !s.ok()) return s;
        continue;
      }
      nlohmann::json& slot = (*object)[f.name];
      if (f.map) {
        if (wire != 2) return Malformed(f.name);
        Reader entry(payload);
        std::string key;
        nlohmann::json value;
        while (!entry.done()) {
          uint32_t n = 0;
          int w = 0;
          uint64_t v = 0;
          absl::string_view b;
          if (!entry.Next(&n, &w, &v, &b)) return Malformed(f.name);
          if (n == kMapKey && w == 2) key = std::string(b);
          if (n == kMapValue) {
            if (absl::Status s = DecodeValue(f, w, v, b, &value); !s.ok()) return s;
          }
        }
        if (!slot.is_object()) slot = nlohmann::json::object();
        slot[key] = std::move(value);
        continue;
      }
      if (f.repeated && wire == 2 &&
          (f.type == Type::kInt32 || f.type == Type::kInt64 || f.type == Type::kBool)) {
        Reader packed(payload);  // a packed repeated scalar
        if (!slot.is_array()) slot = nlohmann::json::array();
        while (!packed.done()) {
          uint64_t v = 0;
          if (!packed.Varint(&v)) return Malformed(f.name);
          nlohmann::json value;
          if (absl::Status s = DecodeValue(f, 0, v, {}, &value); !s.ok()) return s;
          slot.push_back(std::move(value));
        }
        continue;
      }
      nlohmann::json value;
      if (absl::Status s = DecodeValue(f, wire, varint, payload, &value); !s.ok()) return s;
      if (f.repeated) {
        if (!slot.is_array()) slot = nlohmann::json::array();
        slot.push_back(std::move(value));
      } else if (f.type == Type::kMessage && slot.is_object()) {
        slot.update(value);  // a message given twice is merged (protobuf's rule)
      } else {
        slot = std::move(value);
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status DecodeValue(const Field& f, int wire, uint64_t varint, absl::string_view bytes,
                           nlohmann::json* value) {
    const int expected =
        f.type == Type::kBool || f.type == Type::kInt32 || f.type == Type::kInt64 ? 0 : 2;
    if (wire != expected) return Malformed(absl::StrCat(f.name, ": wire type ", wire));
    switch (f.type) {
      case Type::kString:
        *value = std::string(bytes);
        return absl::OkStatus();
      case Type::kBool:
        *value = varint != 0;
        return absl::OkStatus();
      case Type::kInt32:
        *value = static_cast<int32_t>(varint);
        return absl::OkStatus();
      case Type::kInt64:
        *value = static_cast<int64_t>(varint);
        return absl::OkStatus();
      case Type::kTime: {
        absl::StatusOr<Small> t = ReadSmall(bytes);
        if (!t.ok()) return t.status();
        // metav1.Time's JSON has second precision (meta/v1 time.go MarshalJSON, RFC3339).
        *value = absl::FormatTime(
            "%Y-%m-%dT%H:%M:%SZ",
            absl::FromUnixSeconds(static_cast<int64_t>(t->varints[fields::Time::kSeconds])),
            absl::UTCTimeZone());
        return absl::OkStatus();
      }
      case Type::kQuantity: {
        absl::StatusOr<Small> q = ReadSmall(bytes);
        if (!q.ok()) return q.status();
        *value = std::string(q->bytes[fields::Quantity::kString]);
        return absl::OkStatus();
      }
      case Type::kIntOrString: {
        absl::StatusOr<Small> x = ReadSmall(bytes);
        if (!x.ok()) return x.status();
        if (x->varints[fields::IntOrString::kType] == 0) {
          *value = static_cast<int32_t>(x->varints[fields::IntOrString::kIntVal]);
        } else {
          *value = std::string(x->bytes[fields::IntOrString::kStrVal]);
        }
        return absl::OkStatus();
      }
      case Type::kFieldsV1: {
        absl::StatusOr<Small> raw = ReadSmall(bytes);
        if (!raw.ok()) return raw.status();
        *value = nlohmann::json::parse(raw->bytes[fields::FieldsV1::kRaw], nullptr,
                                       /*allow_exceptions=*/false);
        if (value->is_discarded()) return Malformed(absl::StrCat(f.name, ": not JSON"));
        return absl::OkStatus();
      }
      case Type::kMessage:
        *value = nlohmann::json::object();
        return DecodeMessage(bytes, *f.message, value);
    }
    return absl::OkStatus();
  }

  std::vector<std::string>* const unknown_;
};

}  // namespace

absl::StatusOr<std::string> ProtobufEnvelope(const nlohmann::json& object,
                                             std::vector<std::string>* omitted) {
  if (!object.is_object()) return absl::InvalidArgumentError("not a JSON object");
  return EncodeText(object.dump(), omitted);
}

absl::StatusOr<std::string> ProtobufEnvelopeFromText(absl::string_view json_text,
                                                     std::vector<std::string>* omitted) {
  return EncodeText(json_text, omitted);
}

absl::StatusOr<nlohmann::json> ProtobufEnvelopeToJson(absl::string_view envelope,
                                                      std::vector<std::string>* unknown) {
  if (!absl::ConsumePrefix(&envelope, kMagic)) return Malformed("no k8s\\0 prefix");
  absl::StatusOr<Small> unknown_message = ReadSmall(envelope);
  if (!unknown_message.ok()) return unknown_message.status();
  absl::StatusOr<Small> type_meta = ReadSmall(unknown_message->bytes[fields::Unknown::kTypeMeta]);
  if (!type_meta.ok()) return type_meta.status();
  const std::string api_version(type_meta->bytes[fields::TypeMeta::kApiVersion]);
  const std::string kind(type_meta->bytes[fields::TypeMeta::kKind]);
  const Message* m = FindMessage(kind);
  if (m == nullptr) return absl::InvalidArgumentError(absl::StrCat("no schema for kind ", kind));
  nlohmann::json object = nlohmann::json::object();
  Decoder decoder(unknown);
  if (absl::Status s =
          decoder.DecodeMessage(unknown_message->bytes[fields::Unknown::kRaw], *m, &object);
      !s.ok()) {
    return s;
  }
  object["kind"] = kind;
  object["apiVersion"] = api_version;
  return object;
}

void AppendWatchFrame(absl::string_view type, absl::string_view envelope, std::string* out) {
  // metav1.WatchEvent {type, object: runtime.RawExtension {raw}}; every tag is one byte.
  static_assert(fields::WatchEvent::kType < 16 && fields::WatchEvent::kObject < 16 &&
                fields::RawExtension::kRaw < 16);
  const size_t raw_extension = 1 + VarintSize(envelope.size()) + envelope.size();
  const size_t event =
      1 + VarintSize(type.size()) + type.size() + 1 + VarintSize(raw_extension) + raw_extension;
  const uint32_t length = static_cast<uint32_t>(event);
  out->reserve(out->size() + 4 + event);
  out->push_back(static_cast<char>(length >> 24));
  out->push_back(static_cast<char>(length >> 16));
  out->push_back(static_cast<char>(length >> 8));
  out->push_back(static_cast<char>(length));
  PutBytes(fields::WatchEvent::kType, type, out);
  PutTag(fields::WatchEvent::kObject, 2, out);
  PutVarint(raw_extension, out);
  PutBytes(fields::RawExtension::kRaw, envelope, out);
}

bool PrefersProtobuf(absl::string_view accept) {
  bool best_protobuf = false;
  double best_q = 0;
  for (absl::string_view clause : absl::StrSplit(accept, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(clause, ';');
    const std::string type = absl::AsciiStrToLower(absl::StripAsciiWhitespace(parts[0]));
    double q = 1;
    for (size_t i = 1; i < parts.size(); ++i) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
      if (absl::StripAsciiWhitespace(kv.first) == "q" &&
          !absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &q)) {
        q = 0;
      }
    }
    bool protobuf = false;
    if (type == kProtobufMediaType) {
      protobuf = true;
    } else if (type != "application/json" && type != "*/*" && type != "application/*") {
      continue;  // a media type the watch cannot be written in
    }
    if (q > best_q) {  // strictly greater: a tie keeps the earlier entry
      best_q = q;
      best_protobuf = protobuf;
    }
  }
  return best_protobuf;
}

EnvelopeCache::~EnvelopeCache() { delete envelope_.load(std::memory_order_acquire); }

absl::string_view EnvelopeCache::Get(absl::string_view json_text) const {
  if (const std::string* cached = envelope_.load(std::memory_order_acquire)) return *cached;
  auto fresh = std::make_unique<std::string>();
  if (absl::StatusOr<std::string> envelope = ProtobufEnvelopeFromText(json_text); envelope.ok()) {
    *fresh = *std::move(envelope);
  }
  const std::string* expected = nullptr;
  if (envelope_.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
    return *fresh.release();
  }
  return *expected;
}

}  // namespace fitledger::sim
