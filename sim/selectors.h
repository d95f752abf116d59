// Field and label selectors as the API server applies them to LIST and WATCH, restricted to the
// fields the sim indexes. Plain values; thread-compatible.
#ifndef FITLEDGER_SIM_SELECTORS_H_
#define FITLEDGER_SIM_SELECTORS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fitledger::sim {

enum class Kind { kPod, kNode };

// The indexed fields of a stored object that selectors can see. `labels` is sorted by key.
struct ObjectFields {
  std::string namespace_name;  // empty for nodes
  std::string name;
  std::string node_name;       // pods: spec.nodeName
  std::string phase;           // pods: status.phase
  std::string scheduler_name;  // pods: spec.schedulerName
  std::vector<std::pair<std::string, std::string>> labels;
};

// `fieldSelector`: comma-separated `field=value`, `field==value` or `field!=value` terms, all of
// which must hold. Pods support metadata.name, metadata.namespace, spec.nodeName, status.phase and
// spec.schedulerName; nodes metadata.name.
class FieldSelector {
 public:
  FieldSelector() = default;  // matches everything
  // InvalidArgument ("field label not supported: X", or a malformed term).
  static absl::StatusOr<FieldSelector> Parse(absl::string_view text, Kind kind);
  bool Matches(const ObjectFields& fields) const;
  bool empty() const { return terms_.empty(); }

 private:
  enum class Field { kName, kNamespace, kNodeName, kPhase, kSchedulerName };
  struct Term {
    Field field;
    bool equal;
    std::string value;
  };
  std::vector<Term> terms_;
};

// `labelSelector`: comma-separated `k=v`, `k==v`, `k!=v`, `k` (exists) and `!k` (does not
// exist). Set-based terms (`in`, `notin`) are rejected with InvalidArgument.
class LabelSelector {
 public:
  LabelSelector() = default;  // matches everything
  static absl::StatusOr<LabelSelector> Parse(absl::string_view text);
  bool Matches(const std::vector<std::pair<std::string, std::string>>& labels) const;
  bool empty() const { return terms_.empty(); }

 private:
  enum class Op { kEqual, kNotEqual, kExists, kNotExists };
  struct Term {
    std::string key;
    Op op;
    std::string value;
  };
  std::vector<Term> terms_;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_SELECTORS_H_
