// Where a value sits in a decoded object, for error messages (the JSON decoders of
// model/objects_json.cc, the protobuf decoder of server/kube/protobuf_objects.cc).
#ifndef FITLEDGER_MODEL_FIELD_PATH_H_
#define FITLEDGER_MODEL_FIELD_PATH_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fitledger {

// Where a value sits in the object ("spec.containers[1].resources"), for error messages only: a
// chain of links on the decoder's stack, put into words only when an error names it. (A watch
// sync decodes 150,000 pods; building each field's path as a string cost allocations per field.)
// A Path points at its parent: the parent must outlive it (name a Path that others link to;
// never link to a temporary one).
class Path {
 public:
  explicit Path(absl::string_view name) : name_(name) {}
  Path(const Path& parent, absl::string_view name) : parent_(&parent), name_(name) {}
  Path(const Path& parent, size_t index) : parent_(&parent), index_(index), is_index_(true) {}

  std::string ToString() const {
    std::string out = parent_ == nullptr ? std::string() : parent_->ToString();
    if (is_index_) {
      absl::StrAppend(&out, "[", index_, "]");
    } else {
      absl::StrAppend(&out, out.empty() ? "" : ".", name_);
    }
    return out;
  }

 private:
  const Path* parent_ = nullptr;
  absl::string_view name_;
  size_t index_ = 0;
  bool is_index_ = false;
};

// InvalidArgument: "field <path>: <message>".
inline absl::Status FieldError(const Path& field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("field ", field.ToString(), ": ", message));
}

}  // namespace fitledger

#endif  // FITLEDGER_MODEL_FIELD_PATH_H_
