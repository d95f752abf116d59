// The arguments of kube-scheduler's extender verbs as fitledger reads them, one type per verb
// (k8s.io/kube-scheduler/extender/v1 types.go), whatever wire they came by: the webhook's JSON
// (webhook/json_codec.h) or gRPC (fitledger.v1, converted at that edge). Filter and Prioritize
// take the Pod and the candidates' names.
#ifndef FITLEDGER_MODEL_EXTENDER_ARGS_H_
#define FITLEDGER_MODEL_EXTENDER_ARGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/pod.h"

namespace fitledger {

// ExtenderBindingArgs.
struct BindArgs {
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
  std::string node;

  bool operator==(const BindArgs&) const = default;
};

// Victims / MetaVictims of one node: the pods to evict, by UID.
struct Victims {
  std::vector<std::string> pod_uids;
  int64_t num_pdb_violations = 0;

  bool operator==(const Victims&) const = default;
};

// Node name -> victims. Also Preempt's answer (ExtenderPreemptionResult.NodeNameToMetaVictims).
using NodeVictims = std::map<std::string, Victims>;

// ExtenderPreemptionArgs.
struct PreemptArgs {
  Pod pod;
  // NodeNameToMetaVictims (nodeCacheCapable extenders get UIDs) when it names any node, else the
  // UIDs of NodeNameToVictims' full pods.
  NodeVictims victims;

  bool operator==(const PreemptArgs&) const = default;
};

}  // namespace fitledger

#endif  // FITLEDGER_MODEL_EXTENDER_ARGS_H_
