// Strict reading of YAML configuration with yaml-cpp: every error names the key path and the
// line, unknown keys are errors, and no yaml-cpp exception escapes. fitledger-server's and
// fitledger-shim's configs (config/) and fitledger-sim's (sim/config.cc) are read with it.
#ifndef FITLEDGER_COMMON_YAML_FIELDS_H_
#define FITLEDGER_COMMON_YAML_FIELDS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/file.h"

namespace YAML {
class Node;
}

namespace fitledger {

// A view of one YAML mapping at `path` (e.g. "grpc.tls"). Reading a key records it; Finish()
// reports keys that were never read. Thread-compatible; lives for one Load call.
class Fields {
 public:
  // `node` must outlive this. `file` is used in messages.
  Fields(const YAML::Node& node, std::string file, std::string path);
  ~Fields();

  // Each reader leaves `*out` unchanged when the key is absent (or null) and returns
  // InvalidArgument "FILE:LINE: key PATH.KEY: ..." for a wrong type or value.
  absl::Status String(absl::string_view key, std::string* out);
  absl::Status Bool(absl::string_view key, bool* out);
  absl::Status Int(absl::string_view key, int64_t* out, int64_t min, int64_t max);
  absl::Status Double(absl::string_view key, double* out, double min, double max);
  absl::Status Duration(absl::string_view key, absl::Duration* out);
  // A scalar or a sequence of scalars.
  absl::Status StringList(absl::string_view key, std::vector<std::string>* out);
  // A mapping of scalars, in order: `check` (if set) judges each entry; its error's message is
  // reported for "KEY.NAME" at the entry's line.
  using EntryCheck = std::function<absl::Status(const std::string& name, const std::string& value)>;
  absl::Status StringMap(absl::string_view key,
                         std::vector<std::pair<std::string, std::string>>* out,
                         const EntryCheck& check = nullptr);
  // True if `key` is present and not null (does not count as reading it).
  bool Has(absl::string_view key) const;
  // A nested mapping: `fn` reads it through its own Fields (Finish is called for it).
  absl::Status Map(absl::string_view key, const std::function<absl::Status(Fields&)>& fn);
  // A sequence of mappings: `fn` reads each through its own Fields (path "KEY[i]").
  absl::Status MapList(absl::string_view key, const std::function<absl::Status(Fields&)>& fn);

  // InvalidArgument naming the first unknown key, if any.
  absl::Status Finish();

  // An error about `key` in this mapping, with the file, line and path.
  absl::Status Error(absl::string_view key, absl::string_view message) const;

 private:
  struct Impl;
  Impl* impl_;
};

// Loads `file` and calls `fn` with the top-level mapping. Parse errors and a non-mapping
// document are InvalidArgument naming the file and line; a missing file is NotFound. An empty
// file is an empty mapping.
absl::Status LoadYamlFile(const std::string& file, const std::function<absl::Status(Fields&)>& fn);
// The same for YAML text (file = `name` in messages).
absl::Status LoadYamlString(const std::string& text, const std::string& name,
                            const std::function<absl::Status(Fields&)>& fn);

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_YAML_FIELDS_H_
