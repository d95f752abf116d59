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

// The kinds the sim serves (sim/kinds.h describes each); ClusterStore (sim/store.h) keeps them all.
enum class Kind { kPod, kNode, kEvent, kDeployment, kReplicaSet, kLease };

// The indexed fields of a stored object that selectors can see (the API server's selectable
// fields: pods pkg/registry/core/pod/strategy.go ToSelectableFields, nodes
// pkg/registry/core/node/strategy.go), plus whether a deletion is pending. `labels` is sorted by
// key.
struct ObjectFields {
  std::string namespace_name;  // empty for nodes
  std::string name;
  std::string node_name;             // pods: spec.nodeName
  std::string phase;                 // pods: status.phase
  std::string scheduler_name;        // pods: spec.schedulerName
  std::string restart_policy;        // pods: spec.restartPolicy
  std::string service_account_name;  // pods: spec.serviceAccountName
  bool host_network = false;         // pods: spec.hostNetwork
  std::string pod_ip;                // pods: status.podIPs[0].ip
  std::string nominated_node_name;   // pods: status.nominatedNodeName
  bool unschedulable = false;        // nodes: spec.unschedulable
  bool deleting = false;             // metadata.deletionTimestamp is set (not selectable)
  std::vector<std::pair<std::string, std::string>> labels;
  // The selectable fields of other kinds (events: involvedObject.kind, reason, type, ...), as
  // (field label, value), sorted by field label.
  std::vector<std::pair<std::string, std::string>> other;
};

// `fieldSelector`: comma-separated `field=value`, `field==value` or `field!=value` terms, all of
// which must hold. The fields the API server converts (pkg/apis/core/v1/conversion.go): pods
// metadata.name, metadata.namespace, spec.nodeName (and the old spelling spec.host),
// spec.restartPolicy, spec.schedulerName, spec.serviceAccountName, spec.hostNetwork,
// status.phase, status.podIP, status.podIPs (accepted, but not a selectable field: its value is
// always ""), status.nominatedNodeName; nodes metadata.name and spec.unschedulable; events
// metadata.name, metadata.namespace, involvedObject.{kind,namespace,name,uid,apiVersion,
// resourceVersion,fieldPath}, reason, reportingComponent, source, type (pkg/apis/core/v1/
// conversion.go, pkg/registry/core/event/strategy.go ToSelectableFields); deployments and
// replica sets metadata.name, metadata.namespace (and status.replicas for replica sets,
// pkg/apis/apps/v1/conversion.go); leases metadata.name and metadata.namespace (apiserver
// pkg/registry/generic/matcher.go ObjectMetaFieldsSet, which the Lease strategy's attributes use).
class FieldSelector {
 public:
  FieldSelector() = default;  // matches everything
  // InvalidArgument ("field label not supported: X", or a malformed term).
  static absl::StatusOr<FieldSelector> Parse(absl::string_view text, Kind kind);
  bool Matches(const ObjectFields& fields) const;
  bool empty() const { return terms_.empty(); }

 private:
  enum class Field {
    kName,
    kNamespace,
    kNodeName,
    kPhase,
    kSchedulerName,
    kRestartPolicy,
    kServiceAccountName,
    kHostNetwork,
    kPodIp,
    kNominatedNodeName,
    kUnschedulable,
    kEmpty,  // converted but not selectable (status.podIPs)
    kOther,  // one of ObjectFields::other, by `name`
  };
  struct Term {
    Field field;
    bool equal;
    std::string value;
    std::string name;  // kOther: the field label
  };
  std::vector<Term> terms_;
};

// `labelSelector`: comma-separated `k=v`, `k==v`, `k!=v`, `k` (exists) and `!k` (does not
// exist), and the set-based `k in (v1,v2)` and `k notin (v1,v2)` (apimachinery pkg/labels).
class LabelSelector {
 public:
  LabelSelector() = default;  // matches everything
  static absl::StatusOr<LabelSelector> Parse(absl::string_view text);
  bool Matches(const std::vector<std::pair<std::string, std::string>>& labels) const;
  bool empty() const { return terms_.empty(); }

 private:
  enum class Op { kEqual, kNotEqual, kExists, kNotExists, kIn, kNotIn };
  struct Term {
    std::string key;
    Op op;
    std::string value;
    std::vector<std::string> values;  // kIn, kNotIn
  };
  std::vector<Term> terms_;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_SELECTORS_H_
