#include "common/yaml_fields.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace fitledger {

struct Fields::Impl {
  const YAML::Node& node;
  std::string file;
  std::string path;
  std::set<std::string> seen;
};

Fields::Fields(const YAML::Node& node, std::string file, std::string path)
    : impl_(new Impl{node, std::move(file), std::move(path), {}}) {}

Fields::~Fields() { delete impl_; }

namespace {
std::string Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}
}  // namespace

absl::Status Fields::Error(absl::string_view key, absl::string_view message) const {
  int line = impl_->node.Mark().line + 1;
  try {
    YAML::Node child = impl_->node[std::string(key)];
    if (child.IsDefined() && child.Mark().line >= 0) line = child.Mark().line + 1;
  } catch (const YAML::Exception&) {
  }
  return absl::InvalidArgumentError(
      absl::StrCat(impl_->file, ":", line, ": key ", Join(impl_->path, key), ": ", message));
}

namespace {
// Returns the child, or an undefined/null node; never throws.
bool Lookup(const YAML::Node& node, absl::string_view key, YAML::Node* out) {
  try {
    YAML::Node child = node[std::string(key)];
    if (!child.IsDefined() || child.IsNull()) return false;
    *out = child;
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}
}  // namespace

absl::Status Fields::String(absl::string_view key, std::string* out) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  if (!child.IsScalar()) return Error(key, "must be a string");
  *out = child.Scalar();
  return absl::OkStatus();
}

absl::Status Fields::Bool(absl::string_view key, bool* out) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  const std::string s = child.IsScalar() ? child.Scalar() : "";
  if (s == "true") {
    *out = true;
  } else if (s == "false") {
    *out = false;
  } else {
    return Error(key, "must be true or false");
  }
  return absl::OkStatus();
}

absl::Status Fields::Int(absl::string_view key, int64_t* out, int64_t min, int64_t max) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  int64_t v = 0;
  if (!child.IsScalar() || !absl::SimpleAtoi(child.Scalar(), &v)) {
    return Error(key, "must be an integer");
  }
  if (v < min || v > max) return Error(key, absl::StrCat("must be between ", min, " and ", max));
  *out = v;
  return absl::OkStatus();
}

absl::Status Fields::Double(absl::string_view key, double* out, double min, double max) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  double v = 0;
  if (!child.IsScalar() || !absl::SimpleAtod(child.Scalar(), &v) || !(v >= min && v <= max)) {
    return Error(key, absl::StrCat("must be a number in [", min, ", ", max, "]"));
  }
  *out = v;
  return absl::OkStatus();
}

bool Fields::Has(absl::string_view key) const {
  YAML::Node child;
  return Lookup(impl_->node, key, &child);
}

absl::Status Fields::StringMap(absl::string_view key,
                               std::vector<std::pair<std::string, std::string>>* out,
                               const EntryCheck& check) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  if (!child.IsMap()) return Error(key, "must be a mapping");
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& entry : child) {
    const std::string name = entry.first.Scalar();
    const int line = entry.first.Mark().line + 1;
    auto fail = [&](absl::string_view message) {
      return absl::InvalidArgumentError(absl::StrCat(
          impl_->file, ":", line, ": key ", Join(impl_->path, key), ".", name, ": ", message));
    };
    if (!entry.second.IsScalar()) return fail("must be a scalar");
    std::string value = entry.second.Scalar();
    if (check) {
      if (absl::Status judged = check(name, value); !judged.ok()) return fail(judged.message());
    }
    entries.emplace_back(name, std::move(value));
  }
  *out = std::move(entries);
  return absl::OkStatus();
}

absl::Status Fields::Duration(absl::string_view key, absl::Duration* out) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  if (!child.IsScalar()) return Error(key, "must be a duration such as 2s");
  absl::StatusOr<absl::Duration> d = ParseDuration(child.Scalar());
  if (!d.ok()) return Error(key, d.status().message());
  *out = *d;
  return absl::OkStatus();
}

absl::Status Fields::StringList(absl::string_view key, std::vector<std::string>* out) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  std::vector<std::string> values;
  if (child.IsScalar()) {
    values.push_back(child.Scalar());
  } else if (child.IsSequence()) {
    for (const YAML::Node& item : child) {
      if (!item.IsScalar()) return Error(key, "must be a list of strings");
      values.push_back(item.Scalar());
    }
  } else {
    return Error(key, "must be a string or a list of strings");
  }
  *out = std::move(values);
  return absl::OkStatus();
}

absl::Status Fields::Map(absl::string_view key, const std::function<absl::Status(Fields&)>& fn) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  if (!child.IsMap()) return Error(key, "must be a mapping");
  Fields nested(child, impl_->file, Join(impl_->path, key));
  RETURN_IF_ERROR(fn(nested));
  return nested.Finish();
}

absl::Status Fields::MapList(absl::string_view key,
                             const std::function<absl::Status(Fields&)>& fn) {
  impl_->seen.insert(std::string(key));
  YAML::Node child;
  if (!Lookup(impl_->node, key, &child)) return absl::OkStatus();
  if (!child.IsSequence()) return Error(key, "must be a list of mappings");
  size_t index = 0;
  for (const YAML::Node& item : child) {
    const std::string item_key = absl::StrCat(key, "[", index++, "]");
    if (!item.IsMap()) return Error(item_key, "must be a mapping");
    Fields nested(item, impl_->file, Join(impl_->path, item_key));
    RETURN_IF_ERROR(fn(nested));
    RETURN_IF_ERROR(nested.Finish());
  }
  return absl::OkStatus();
}

absl::Status Fields::Finish() {
  try {
    for (const auto& entry : impl_->node) {
      const std::string key = entry.first.Scalar();
      if (impl_->seen.count(key) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(impl_->file, ":",
                                                       entry.first.Mark().line + 1,
                                                       ": unknown key ", Join(impl_->path, key)));
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(impl_->file, ": ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status LoadYamlString(const std::string& text, const std::string& name,
                            const std::function<absl::Status(Fields&)>& fn) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":", e.mark.line + 1, ": invalid YAML: ", e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": invalid YAML: ", e.what()));
  }
  if (root.IsNull() || !root.IsDefined()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":", root.Mark().line + 1, ": the document must be a mapping"));
  }
  Fields fields(root, name, "");
  RETURN_IF_ERROR(fn(fields));
  return fields.Finish();
}

absl::Status LoadYamlFile(const std::string& file, const std::function<absl::Status(Fields&)>& fn) {
  std::ifstream in(file);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read config file ", file));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return LoadYamlString(buffer.str(), file, fn);
}

}  // namespace fitledger
