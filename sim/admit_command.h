// `fitledger-sim admit`: the simulated kubelet's admission (sim/kubelet.h) of a list of pods on one
// node, offline, so that a test can put the same pods to upstream's own code and compare
// (tests/upstream's kubelet differential).
//
// Input, one JSON object:
//   {"node": <v1.Node>, "devices": {"example.com/gpu": 4}, "pods": [<v1.Pod>, ...]}
// `devices` (optional) maps each device-plugin resource to its healthy device count on the node;
// absent, the node has none. The pods are admitted in order on an empty node, each admitted pod
// joining the node's pods (a refused one does not). Pods are read as the kubelet gets them, after
// the API server's defaulting: a limit without a request is not turned into a request here.
//
// Output, one JSON array, an entry per pod in input order:
//   [{"name": "<metadata.name>", "admit": true, "reason": "", "message": ""}, ...]
// with the kubelet's reason and message (without the "Pod was rejected: " of the pod's status)
// when refused.
#ifndef FITLEDGER_SIM_ADMIT_COMMAND_H_
#define FITLEDGER_SIM_ADMIT_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fitledger::sim {

// The output for `input` (a newline-terminated JSON array). InvalidArgument naming the field for
// input that is not such an object: not JSON, no node object, a malformed quantity, a device
// count that is not a non-negative integer, a device resource that is not an extended resource
// name, pods that are not a list of objects.
absl::StatusOr<std::string> RunAdmitCommand(absl::string_view input);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_ADMIT_COMMAND_H_
