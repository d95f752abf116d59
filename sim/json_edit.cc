#include "sim/json_edit.h"

#include "common/json.h"

namespace fitledger::sim {

namespace {

// A cursor over JSON text. Every Skip* returns false on malformed input.
class Scanner {
 public:
  explicit Scanner(absl::string_view text) : text_(text) {}

  size_t pos() const { return pos_; }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' ||
                        text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  // A string literal; `raw` receives its text between the quotes (escapes not decoded).
  bool SkipString(absl::string_view* raw) {
    SkipSpace();
    if (Peek() != '"') return false;
    const size_t start = ++pos_;
    while (!AtEnd()) {
      const char c = text_[pos_++];
      if (c == '\\') {
        if (AtEnd()) return false;
        ++pos_;
      } else if (c == '"') {
        if (raw != nullptr) *raw = text_.substr(start, pos_ - 1 - start);
        return true;
      }
    }
    return false;
  }
  // Any value: objects and arrays by bracket depth, strings by their quotes, scalars up to the
  // next delimiter.
  bool SkipValue() {
    SkipSpace();
    if (AtEnd()) return false;
    const char c = Peek();
    if (c == '"') return SkipString(nullptr);
    if (c == '{' || c == '[') {
      int depth = 0;
      while (!AtEnd()) {
        const char d = Peek();
        if (d == '"') {
          if (!SkipString(nullptr)) return false;
          continue;
        }
        ++pos_;
        if (d == '{' || d == '[') {
          ++depth;
        } else if (d == '}' || d == ']') {
          if (--depth == 0) return true;
        }
      }
      return false;
    }
    const size_t start = pos_;
    while (!AtEnd() && Peek() != ',' && Peek() != '}' && Peek() != ']' && Peek() != ' ' &&
           Peek() != '\n' && Peek() != '\r' && Peek() != '\t') {
      ++pos_;
    }
    return pos_ > start;
  }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
};

struct Member {
  absl::string_view key;  // raw, between the quotes
  size_t value_begin;
  size_t value_end;
};

// The members of `object` in order; nullopt unless it is exactly one well-formed object.
std::optional<std::vector<Member>> Members(absl::string_view object) {
  Scanner s(object);
  if (!s.Consume('{')) return std::nullopt;
  std::vector<Member> members;
  s.SkipSpace();
  if (s.Peek() != '}') {
    while (true) {
      Member m;
      if (!s.SkipString(&m.key) || !s.Consume(':')) return std::nullopt;
      s.SkipSpace();
      m.value_begin = s.pos();
      if (!s.SkipValue()) return std::nullopt;
      m.value_end = s.pos();
      members.push_back(m);
      if (s.Consume(',')) continue;
      break;
    }
  }
  if (!s.Consume('}')) return std::nullopt;
  s.SkipSpace();
  if (!s.AtEnd()) return std::nullopt;
  return members;
}

}  // namespace

bool IsObjectText(absl::string_view text) {
  Scanner s(text);
  s.SkipSpace();
  return s.Peek() == '{';
}

std::optional<absl::string_view> FindMember(absl::string_view object, absl::string_view key) {
  std::optional<std::vector<Member>> members = Members(object);
  if (!members.has_value()) return std::nullopt;
  for (const Member& m : *members) {
    if (m.key == key) return object.substr(m.value_begin, m.value_end - m.value_begin);
  }
  return std::nullopt;
}

std::string EditMembers(absl::string_view object, const std::vector<MemberEdit>& edits) {
  std::optional<std::vector<Member>> existing = Members(object);
  if (!existing.has_value()) {
    existing.emplace();
    object = "{}";
  }
  std::vector<bool> done(edits.size(), false);
  std::string out;
  out.reserve(object.size() + 512);
  out.push_back('{');
  bool first = true;
  for (const Member& m : *existing) {
    if (!first) out.push_back(',');
    first = false;
    out.push_back('"');
    out.append(m.key.data(), m.key.size());
    out.append("\":");
    const absl::string_view current = object.substr(m.value_begin, m.value_end - m.value_begin);
    bool replaced = false;
    for (size_t i = 0; i < edits.size(); ++i) {
      if (!done[i] && edits[i].key == m.key) {
        out.append(edits[i].value(current));
        done[i] = true;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.append(current.data(), current.size());
  }
  for (size_t i = 0; i < edits.size(); ++i) {
    if (done[i]) continue;
    if (!first) out.push_back(',');
    first = false;
    AppendJsonString(edits[i].key, &out);
    out.push_back(':');
    out.append(edits[i].value(std::nullopt));
  }
  out.push_back('}');
  return out;
}

std::string SetMembers(absl::string_view object,
                       const std::vector<std::pair<absl::string_view, std::string>>& members) {
  std::vector<MemberEdit> edits;
  edits.reserve(members.size());
  for (const std::pair<absl::string_view, std::string>& member : members) {
    const std::string& value = member.second;
    edits.push_back({member.first, [&value](std::optional<absl::string_view>) { return value; }});
  }
  return EditMembers(object, edits);
}

}  // namespace fitledger::sim
