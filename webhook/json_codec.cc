#include "webhook/json_codec.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "model/objects_json.h"
#include "simdjson.h"

namespace fitledger::webhook {
namespace {

namespace ond = simdjson::ondemand;
using ond::json_type;

// Debian's Abseil has its own string_view type; simdjson speaks std::string_view.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Where a value sits in the document, for error messages only: a chain of stack frames, rendered
// only when something is wrong, so the happy path builds no strings.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;  // an object key, or empty for an array element
  int index = -1;        // the array index when key is empty
  bool map_key = false;  // key is a map key (rendered ["key"]) rather than a field name
};

void RenderPath(const Path* p, std::string* out) {
  if (p == nullptr) return;
  RenderPath(p->parent, out);
  if (p->key.empty() && p->index >= 0) {
    absl::StrAppend(out, "[", p->index, "]");
  } else if (p->map_key) {
    absl::StrAppend(out, "[\"", A(p->key), "\"]");
  } else {
    if (!out->empty()) out->push_back('.');
    out->append(p->key.data(), p->key.size());
  }
}

std::string Render(const Path& p) {
  std::string out;
  RenderPath(&p, &out);
  return out.empty() ? "request body" : out;
}

absl::string_view TypeName(json_type t) {
  switch (t) {
    case json_type::array:
      return "array";
    case json_type::object:
      return "object";
    case json_type::number:
      return "number";
    case json_type::string:
      return "string";
    case json_type::boolean:
      return "boolean";
    case json_type::null:
      return "null";
  }
  return "unknown";
}

absl::Status JsonError(simdjson::error_code err, const Path& p) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed JSON at ", Render(p), ": ", simdjson::error_message(err)));
}

absl::Status TypeError(const Path& p, absl::string_view expected, json_type got) {
  return absl::InvalidArgumentError(
      absl::StrCat(Render(p), ": expected ", expected, ", got ", TypeName(got)));
}

#define JSON_OK(expr, path)                                      \
  do {                                                           \
    if (auto json_err_ = (expr); json_err_ != simdjson::SUCCESS) \
      return JsonError(json_err_, path);                         \
  } while (0)

absl::Status TypeOf(ond::value& v, const Path& p, json_type* t) {
  JSON_OK(v.type().get(*t), p);
  return absl::OkStatus();
}

// Every `json_type t` below is set by TypeOf before it is read; each is value-initialized
// anyway, since GCC's -Wmaybe-uninitialized cannot see through the RETURN_IF_ERROR (31 warnings
// in a Release build otherwise).
// Calls fn(key, value, path) for each member of the object `v`; null is an empty object.
template <typename Fn>
absl::Status ForEachMember(ond::value& v, const Path& p, absl::string_view what, Fn&& fn) {
  json_type t{};
  RETURN_IF_ERROR(TypeOf(v, p, &t));
  if (t == json_type::null) return absl::OkStatus();
  if (t != json_type::object) return TypeError(p, what, t);
  ond::object obj;
  JSON_OK(v.get_object().get(obj), p);
  for (auto member : obj) {
    ond::field field;
    JSON_OK(std::move(member).get(field), p);
    std::string_view key;
    JSON_OK(field.unescaped_key().get(key), p);
    const Path fp{&p, key};
    RETURN_IF_ERROR(fn(key, field.value(), fp));
  }
  return absl::OkStatus();
}

// Calls fn(value, path) for each element of the array `v`; null is an empty array.
template <typename Fn>
absl::Status ForEachElement(ond::value& v, const Path& p, absl::string_view what, Fn&& fn) {
  json_type t{};
  RETURN_IF_ERROR(TypeOf(v, p, &t));
  if (t == json_type::null) return absl::OkStatus();
  if (t != json_type::array) return TypeError(p, what, t);
  ond::array arr;
  JSON_OK(v.get_array().get(arr), p);
  int index = 0;
  for (auto element : arr) {
    const Path ep{&p, {}, index++};
    ond::value ev;
    JSON_OK(std::move(element).get(ev), ep);
    RETURN_IF_ERROR(fn(ev, ep));
  }
  return absl::OkStatus();
}

// An object-typed field: fn(value, path) runs only when the value is an object; null leaves the
// field absent (as Go leaves a nil pointer).
template <typename Fn>
absl::Status Message(ond::value& v, const Path& p, Fn&& fn) {
  json_type t{};
  RETURN_IF_ERROR(TypeOf(v, p, &t));
  if (t == json_type::null) return absl::OkStatus();
  if (t != json_type::object) return TypeError(p, "an object or null", t);
  return fn(v, p);
}

// A string or null: a string's view (into the decoder's buffer) goes to `out`; null leaves
// `out` as it is.
absl::Status StringView(ond::value& v, const Path& p, std::string_view* out) {
  json_type t{};
  RETURN_IF_ERROR(TypeOf(v, p, &t));
  if (t == json_type::null) return absl::OkStatus();
  if (t != json_type::string) return TypeError(p, "a string or null", t);
  JSON_OK(v.get_string().get(*out), p);
  return absl::OkStatus();
}

absl::Status String(ond::value& v, const Path& p, std::string* out) {
  std::string_view s;  // data() stays null for null
  RETURN_IF_ERROR(StringView(v, p, &s));
  if (s.data() != nullptr) out->assign(s.data(), s.size());
  return absl::OkStatus();
}

absl::Status Int64(ond::value& v, const Path& p, int64_t* out) {
  json_type t{};
  RETURN_IF_ERROR(TypeOf(v, p, &t));
  if (t == json_type::null) return absl::OkStatus();
  if (t != json_type::number) return TypeError(p, "an integer or null", t);
  if (v.get_int64().get(*out) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat(Render(p), ": expected an integer, got ", A(v.raw_json_token())));
  }
  return absl::OkStatus();
}

// An array of strings or null: `add` gets each string, a view into the decoder's buffer.
template <typename Add>
absl::Status Strings(ond::value& v, const Path& p, Add add) {
  return ForEachElement(v, p, "an array of strings or null", [&](ond::value& e, const Path& ep) {
    json_type t{};
    RETURN_IF_ERROR(TypeOf(e, ep, &t));
    if (t != json_type::string) return TypeError(ep, "a string", t);
    std::string_view s;
    JSON_OK(e.get_string().get(s), ep);
    add(s);
    return absl::OkStatus();
  });
}

bool IsJsonBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// An array of plain strings (no escapes, no control characters: node names always are) read
// straight from the text at `p` (its '['), which ends by `end`: each string a view of its bytes.
// False, with `out` as it was, for anything else (which the caller reads element by element).
// simdjson skips the array after; this scan is several times faster than its iteration.
bool PlainStringViews(const char* p, const char* end, std::vector<absl::string_view>* out) {
  const size_t before = out->size();
  const auto blanks = [&] {
    while (p < end && IsJsonBlank(*p)) ++p;
  };
  if (p >= end || *p != '[') return false;
  ++p;
  blanks();
  if (p < end && *p == ']') return true;
  for (;;) {
    if (p >= end || *p != '"') break;
    const char* text = ++p;
    p += JsonPlainPrefix(absl::string_view(text, static_cast<size_t>(end - text)));
    if (p >= end || *p != '"') break;  // an escape or a control character
    out->emplace_back(text, static_cast<size_t>(p - text));
    ++p;
    blanks();
    if (p < end && *p == ']') return true;
    if (p >= end || *p != ',') break;
    ++p;
    blanks();
  }
  out->resize(before);
  return false;
}

// As StringList, as views: an array of plain strings (every list of node names) read in place,
// each a view into the body itself; any other array element by element by simdjson, each string
// consumed (unescaped into the decoder's buffer, its view pointing there), so a malformed array
// fails as an element-by-element read fails. `end`: the end of the text simdjson reads.
// `*plain` becomes false when the array is read element by element.
absl::Status StringViews(ond::value& v, const Path& p, const char* end,
                         std::vector<absl::string_view>* out, bool* plain) {
  if (PlainStringViews(v.raw_json_token().data(), end, out)) return absl::OkStatus();
  *plain = false;
  return Strings(v, p, [out](std::string_view s) { out->emplace_back(s.data(), s.size()); });
}

// The pod of a request, by the model's decoder (model/objects_json.h: the one that reads the
// API server's pods); its errors name the field under `p` ("Pod: field spec.containers[0]...").
absl::Status ReadPod(ond::value& v, const Path& p, Pod* out) {
  absl::StatusOr<Pod> pod = DecodePod(v, nullptr);
  if (!pod.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Render(p), ": ", pod.status().message()));
  }
  *out = *std::move(pod);
  return absl::OkStatus();
}

// Trims JSON whitespace at the end of `s`.
absl::string_view TrimRight(absl::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// A node's metadata.name ("" when absent), the rest of the node skipped unread.
absl::Status ReadNodeName(ond::value& v, const Path& p, std::string_view* name) {
  *name = {};
  return ForEachMember(
      v, p, "a node object", [&](std::string_view key, ond::value& e, const Path& fp) {
        if (key != "metadata") return absl::OkStatus();
        return Message(e, fp, [&](ond::value& m, const Path& mp) {
          return ForEachMember(m, mp, "an object",
                               [&](std::string_view k, ond::value& f, const Path& kp) {
                                 return k == "name" ? StringView(f, kp, name) : absl::OkStatus();
                               });
        });
      });
}

// Nodes: each item's name to `names` and its exact text to `raw_nodes` (if not null); the rest of
// each item is skipped unread, and the list's metadata too.
absl::Status ReadNodeList(ond::document& doc, ond::value& v, const Path& p,
                          std::vector<absl::string_view>* raw_nodes,
                          std::vector<absl::string_view>* names) {
  return ForEachMember(v, p, "an object", [&](std::string_view key, ond::value& e, const Path& fp) {
    if (key != "items") return absl::OkStatus();
    return ForEachElement(
        e, fp, "an array of nodes or null", [&](ond::value& item, const Path& ip) {
          json_type t{};
          RETURN_IF_ERROR(TypeOf(item, ip, &t));
          if (t != json_type::object) return TypeError(ip, "a node object", t);
          const char* start = item.raw_json_token().data();
          std::string_view name;
          RETURN_IF_ERROR(ReadNodeName(item, ip, &name));
          names->push_back(A(name));
          // The node object is consumed: the iterator sits on the ',' or ']' after it.
          const char* end = nullptr;
          JSON_OK(doc.current_location().get(end), ip);
          if (raw_nodes != nullptr) {
            raw_nodes->push_back(
                TrimRight(absl::string_view(start, static_cast<size_t>(end - start))));
          }
          return absl::OkStatus();
        });
  });
}

// One node's Victims or MetaVictims ({"Pods": [...], "NumPDBViolations": n}): the pods' UIDs,
// from full pods (`full`, their metadata.uid) or from MetaPods ({"UID": ...}).
absl::Status ReadVictims(ond::value& v, const Path& p, bool full, Victims* out) {
  return ForEachMember(v, p, "an object", [&](std::string_view key, ond::value& e, const Path& fp) {
    if (absl::EqualsIgnoreCase(A(key), "Pods")) {
      if (full) {
        return ForEachElement(
            e, fp, "an array of pods or null", [&](ond::value& m, const Path& ep) {
              Pod pod;
              RETURN_IF_ERROR(Message(
                  m, ep, [&](ond::value& o, const Path& op) { return ReadPod(o, op, &pod); }));
              out->pod_uids.push_back(std::move(pod.uid));
              return absl::OkStatus();
            });
      }
      return ForEachElement(
          e, fp, "an array of {\"UID\": ...} or null", [&](ond::value& pod, const Path& ep) {
            std::string& uid = out->pod_uids.emplace_back();
            return ForEachMember(pod, ep, "an object",
                                 [&](std::string_view k, ond::value& f, const Path& kp) {
                                   if (absl::EqualsIgnoreCase(A(k), "UID")) {
                                     return String(f, kp, &uid);
                                   }
                                   return absl::OkStatus();
                                 });
          });
    }
    if (absl::EqualsIgnoreCase(A(key), "NumPDBViolations")) {
      return Int64(e, fp, &out->num_pdb_violations);
    }
    return absl::OkStatus();
  });
}

// NodeNameToVictims or NodeNameToMetaVictims: node name -> Victims (null: no victims).
absl::Status VictimsMap(ond::value& v, const Path& p, bool full, NodeVictims* out) {
  return ForEachMember(v, p, "an object or null",
                       [&](std::string_view key, ond::value& e, const Path& fp) {
                         const Path kp{fp.parent, key, -1, true};
                         json_type t{};
                         RETURN_IF_ERROR(TypeOf(e, kp, &t));
                         Victims& slot = (*out)[std::string(key)];
                         slot = Victims();
                         if (t == json_type::null) return absl::OkStatus();
                         return ReadVictims(e, kp, full, &slot);
                       });
}

}  // namespace

struct JsonDecoder::Impl {
  ond::parser parser;
  // A padded copy of the body when the body's own capacity leaves no room for simdjson's
  // padding.
  std::string padded;
  // The end of the text being parsed (the body, or its padded copy).
  const char* end = nullptr;
  bool node_names_plain = false;  // node_names_plain()
  bool nodes_given = false;       // nodes_given()

  // Starts parsing `body` and runs fn(doc, root) on the root value, which must be an object.
  template <typename Fn>
  absl::Status Parse(const std::string& body, Fn&& fn) {
    const Path root;
    if (absl::StripAsciiWhitespace(body).empty()) {
      return absl::InvalidArgumentError("empty request body: expected a JSON object");
    }
    const char* data = body.data();
    size_t capacity = body.capacity();
    if (capacity - body.size() < simdjson::SIMDJSON_PADDING) {
      padded.reserve(body.size() + simdjson::SIMDJSON_PADDING);
      padded.assign(body);
      data = padded.data();
      capacity = padded.capacity();
    }
    end = data + body.size();
    ond::document doc;
    JSON_OK(parser.iterate(data, body.size(), capacity).get(doc), root);
    ond::value value;
    json_type t{};
    JSON_OK(doc.type().get(t), root);
    if (t != json_type::object) {
      return absl::InvalidArgumentError(
          absl::StrCat("request body: expected a JSON object, got ", TypeName(t)));
    }
    JSON_OK(doc.get_value().get(value), root);
    RETURN_IF_ERROR(fn(doc, value, root));
    const char* rest = nullptr;
    if (doc.current_location().get(rest) == simdjson::SUCCESS) {
      return absl::InvalidArgumentError("malformed JSON: trailing content after the object");
    }
    return absl::OkStatus();
  }
};

JsonDecoder::JsonDecoder() : impl_(std::make_unique<Impl>()) {}
JsonDecoder::~JsonDecoder() = default;

absl::Status JsonDecoder::DecodeExtenderArgs(const std::string& body, Pod* pod,
                                             std::vector<absl::string_view>* node_names,
                                             std::vector<absl::string_view>* raw_nodes) {
  *pod = Pod();
  node_names->clear();
  if (raw_nodes != nullptr) raw_nodes->clear();
  impl_->node_names_plain = true;
  impl_->nodes_given = false;  // node_names then holds Nodes' names (NodeNames are ignored)
  return impl_->Parse(body, [&](ond::document& doc, ond::value& v, const Path& p) {
    return ForEachMember(
        v, p, "an object", [&](std::string_view key, ond::value& e, const Path& fp) {
          if (absl::EqualsIgnoreCase(A(key), "Pod")) {
            return Message(e, fp,
                           [&](ond::value& m, const Path& mp) { return ReadPod(m, mp, pod); });
          }
          if (absl::EqualsIgnoreCase(A(key), "Nodes")) {
            return Message(e, fp, [&](ond::value& m, const Path& mp) {
              if (!impl_->nodes_given) {
                node_names->clear();  // Nodes win over NodeNames, wherever they are
                impl_->node_names_plain = false;
                impl_->nodes_given = true;
              }
              return ReadNodeList(doc, m, mp, raw_nodes, node_names);
            });
          }
          if (absl::EqualsIgnoreCase(A(key), "NodeNames")) {
            if (impl_->nodes_given) return absl::OkStatus();
            return StringViews(e, fp, impl_->end, node_names, &impl_->node_names_plain);
          }
          return absl::OkStatus();
        });
  });
}

bool JsonDecoder::node_names_plain() const { return impl_->node_names_plain; }

bool JsonDecoder::nodes_given() const { return impl_->nodes_given; }

absl::Status JsonDecoder::DecodeBindingArgs(const std::string& body, BindArgs* out) {
  *out = BindArgs();
  return impl_->Parse(body, [&](ond::document&, ond::value& v, const Path& p) {
    return ForEachMember(v, p, "an object",
                         [&](std::string_view key, ond::value& e, const Path& fp) {
                           if (absl::EqualsIgnoreCase(A(key), "PodName")) {
                             return String(e, fp, &out->pod_name);
                           }
                           if (absl::EqualsIgnoreCase(A(key), "PodNamespace")) {
                             return String(e, fp, &out->pod_namespace);
                           }
                           if (absl::EqualsIgnoreCase(A(key), "PodUID")) {
                             return String(e, fp, &out->pod_uid);
                           }
                           if (absl::EqualsIgnoreCase(A(key), "Node")) {
                             return String(e, fp, &out->node);
                           }
                           return absl::OkStatus();
                         });
  });
}

absl::Status JsonDecoder::DecodePreemptionArgs(const std::string& body, PreemptArgs* out) {
  *out = PreemptArgs();
  NodeVictims full;  // NodeNameToVictims, used when NodeNameToMetaVictims names no node
  RETURN_IF_ERROR(impl_->Parse(body, [&](ond::document&, ond::value& v, const Path& p) {
    return ForEachMember(
        v, p, "an object", [&](std::string_view key, ond::value& e, const Path& fp) {
          if (absl::EqualsIgnoreCase(A(key), "Pod")) {
            return Message(
                e, fp, [&](ond::value& m, const Path& mp) { return ReadPod(m, mp, &out->pod); });
          }
          if (absl::EqualsIgnoreCase(A(key), "NodeNameToVictims")) {
            return VictimsMap(e, fp, /*full=*/true, &full);
          }
          if (absl::EqualsIgnoreCase(A(key), "NodeNameToMetaVictims")) {
            return VictimsMap(e, fp, /*full=*/false, &out->victims);
          }
          return absl::OkStatus();
        });
  }));
  if (out->victims.empty()) out->victims = std::move(full);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Encoding.

namespace {

// The 8 bytes of `s` from `at` as a big-endian integer, zeros past its end.
uint64_t WordAt(absl::string_view s, size_t at) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the first byte must end up highest");
  uint64_t word = 0;
  if (at + 8 <= s.size()) {
    std::memcpy(&word, s.data() + at, 8);
    return __builtin_bswap64(word);
  }
  for (size_t i = at; i < at + 8; ++i) {
    word = word << 8 | (i < s.size() ? static_cast<unsigned char>(s[i]) : 0u);
  }
  return word;
}

// A failure map's values as JSON strings: a call's hundreds of failures carry a few reasons (the
// ledger words them from a few cases and stores each text once), and escaping each value
// (AppendJsonString, its scan and its copy) was about a quarter of writing the map. The last 4
// texts met are kept, replaced in turn, and matched by content (a view at the same address needs
// only its size compared).
class EscapedValues {
 public:
  void Append(absl::string_view value, std::string* out) {
    for (Slot& slot : slots_) {
      if (slot.used && (slot.value.data() == value.data() ? slot.value.size() == value.size()
                                                          : slot.value == value)) {
        out->append(slot.escaped);
        return;
      }
    }
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    slot.used = true;
    slot.value = value;
    slot.escaped.clear();
    AppendJsonString(value, &slot.escaped);
    out->append(slot.escaped);
  }

 private:
  struct Slot {
    bool used = false;
    absl::string_view value;
    std::string escaped;
  };
  std::array<Slot, 4> slots_;
  size_t next_ = 0;
};

// Entries sorted by key, as Go's encoding/json writes maps (src/encoding/json/encode.go,
// mapEncoder: keys sorted as strings, bytewise); of entries with one key, the last.
// `keys_plain`: the caller knows no key needs escaping (node names read in place).
// A call's failing nodes are hundreds of names that share a long prefix (the cluster's name,
// then a few pools'): each is ordered by the 16 bytes after the prefix they all share, taken as
// two integers once, and by the whole name only when those are equal (a memcmp per comparison
// was half of this function's time).
void AppendStringMap(const FilterResultView::Entries& entries, std::string* out, bool keys_plain) {
  size_t shared = entries.empty() ? 0 : entries[0].first.size();
  for (const auto& [key, value] : entries) {
    const absl::string_view first = entries[0].first;
    shared = std::min(shared, key.size());
    if (shared == 0) break;
    if (std::memcmp(first.data(), key.data(), shared) == 0) continue;
    shared = static_cast<size_t>(
        std::mismatch(first.begin(), first.begin() + shared, key.begin()).first - first.begin());
  }
  // Of two keys equal before `shared`, the one with the smaller words is the smaller (bytewise,
  // as Go compares strings; a word past a key's end is padded with zeros, so a key equal to
  // another up to its end is not after it); equal words decide nothing.
  struct Key {
    uint64_t high;
    uint64_t low;
    uint32_t index;
  };
  std::vector<Key> keys(entries.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const absl::string_view key = entries[i].first;
    keys[i] = Key{WordAt(key, shared), WordAt(key, shared + 8), static_cast<uint32_t>(i)};
  }
  const auto same_words = [](const Key& a, const Key& b) {
    return a.high == b.high && a.low == b.low;
  };
  // By key, then by position: of entries with one key, the last comes last.
  std::sort(keys.begin(), keys.end(), [&](const Key& a, const Key& b) {
    if (a.high != b.high) return a.high < b.high;
    if (a.low != b.low) return a.low < b.low;
    const int c = entries[a.index].first.compare(entries[b.index].first);
    return c != 0 ? c < 0 : a.index < b.index;
  });
  EscapedValues values;
  out->push_back('{');
  bool first = true;
  for (size_t k = 0; k < keys.size(); ++k) {
    const auto& [key, value] = entries[keys[k].index];
    if (k + 1 < keys.size() && same_words(keys[k + 1], keys[k]) &&
        entries[keys[k + 1].index].first == key) {
      continue;
    }
    if (!first) out->push_back(',');
    first = false;
    if (keys_plain) {
      out->push_back('"');
      out->append(key.data(), key.size());
      out->push_back('"');
    } else {
      AppendJsonString(key, out);
    }
    out->push_back(':');
    values.Append(value, out);
  }
  out->push_back('}');
}

// About the bytes AppendFailuresAndError writes (exact unless a string needs escaping), so a
// reply is reserved once: a full-Nodes reply of megabytes that outgrew its reservation by its
// failures was reallocated and copied.
size_t FailuresAndErrorSize(const FilterResultView& result) {
  size_t n = 64 + result.error.size();
  for (const auto& [name, why] : result.failed_nodes) n += name.size() + why.size() + 6;
  for (const auto& [name, why] : result.failed_and_unresolvable_nodes) {
    n += name.size() + why.size() + 6;
  }
  return n;
}

void AppendFailuresAndError(const FilterResultView& result, std::string* out, bool names_plain) {
  out->append(",\"FailedNodes\":");
  AppendStringMap(result.failed_nodes, out, names_plain);
  out->append(",\"FailedAndUnresolvableNodes\":");
  AppendStringMap(result.failed_and_unresolvable_nodes, out, names_plain);
  out->append(",\"Error\":");
  AppendJsonString(result.error, out);
  out->push_back('}');
}

}  // namespace

void FilterResultView::Clear() {
  node_names.clear();
  failed_nodes.clear();
  failed_and_unresolvable_nodes.clear();
  error = {};
}

void EncodeFilterResult(const FilterResultView& result, std::string* out, bool names_plain) {
  size_t list = 0;  // the names in quotes, a comma between two
  for (absl::string_view name : result.node_names) list += name.size() + 3;
  if (list > 0) --list;
  out->reserve(out->size() + list + 32 + FailuresAndErrorSize(result));
  out->append("{\"NodeNames\":[");
  if (names_plain) {
    // Each name as it is: the list's exact size, written in one go.
    const size_t at = out->size();
    out->resize(at + list);
    char* p = out->data() + at;
    for (size_t i = 0; i < result.node_names.size(); ++i) {
      const absl::string_view name = result.node_names[i];
      if (i > 0) *p++ = ',';
      *p++ = '"';
      std::memcpy(p, name.data(), name.size());
      p += name.size();
      *p++ = '"';
    }
  } else {
    bool first = true;
    for (absl::string_view name : result.node_names) {
      if (!first) out->push_back(',');
      first = false;
      AppendJsonString(name, out);
    }
  }
  out->push_back(']');
  AppendFailuresAndError(result, out, names_plain);
}

void EncodeFilterResultWithNodes(const FilterResultView& result,
                                 absl::Span<const absl::string_view> nodes, std::string* out) {
  size_t estimate = 64 + FailuresAndErrorSize(result);
  for (absl::string_view node : nodes) estimate += node.size() + 1;
  out->reserve(out->size() + estimate);
  out->append("{\"Nodes\":{\"metadata\":{},\"items\":[");
  bool first = true;
  for (absl::string_view node : nodes) {
    if (!first) out->push_back(',');
    first = false;
    out->append(node.data(), node.size());
  }
  out->append("]}");
  AppendFailuresAndError(result, out, /*names_plain=*/false);
}

void EncodeHostPriorityList(const HostPriorityView& list, std::string* out) {
  out->push_back('[');
  bool first = true;
  for (const auto& [host, score] : list) {
    if (!first) out->push_back(',');
    first = false;
    out->append("{\"Host\":");
    AppendJsonString(host, out);
    absl::StrAppend(out, ",\"Score\":", score, "}");
  }
  out->push_back(']');
}

void EncodeError(absl::string_view error, std::string* out) {
  out->append("{\"Error\":");
  AppendJsonString(error, out);
  out->push_back('}');
}

void EncodePreemptionResult(const NodeVictims& result, std::string* out) {
  out->append("{\"NodeNameToMetaVictims\":{");
  bool first = true;
  for (const auto& [node, victims] : result) {  // a std::map: sorted by key, as Go writes maps
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(node, out);
    out->append(":{\"Pods\":[");
    bool first_pod = true;
    for (const std::string& uid : victims.pod_uids) {
      if (!first_pod) out->push_back(',');
      first_pod = false;
      out->append("{\"UID\":");
      AppendJsonString(uid, out);
      out->push_back('}');
    }
    absl::StrAppend(out, "],\"NumPDBViolations\":", victims.num_pdb_violations, "}");
  }
  out->append("}}");
}

}  // namespace fitledger::webhook
