// fitledgerctl's read-only commands over the server's gRPC API.
#ifndef FITLEDGER_CLIENT_CTL_COMMANDS_H_
#define FITLEDGER_CLIENT_CTL_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fitledger::ctl {

struct ServerTarget {
  std::string address;  // unix:///path or host:port
  // Optional TLS to the server.
  std::string tls_ca_file;
  std::string tls_server_name;
  std::string tls_cert_file;
  std::string tls_key_file;
  absl::Duration timeout = absl::Seconds(5);
};

// grpc.health.v1 Check: OK when SERVING; Unavailable otherwise (message says why).
absl::Status Health(const ServerTarget& target);
// The nodes table: allocatable / confirmed / assumed / free per accounted resource.
absl::StatusOr<std::string> NodesTable(const ServerTarget& target);
// The assumed pods, oldest first.
absl::StatusOr<std::string> AssumedTable(const ServerTarget& target);
// One pod to explain: a Pod, or the pod template of a workload.
struct ExplainSubject {
  std::string label;     // "pod web", "deployment web (its pod template)"
  std::string pod_json;  // a Pod object
};
// The pods the manifests in `text` describe (YAML or JSON; several YAML documents separated by
// `---` are explained each; empty documents are skipped): a Pod (v1) itself, and the pod template
// of a Deployment, StatefulSet, DaemonSet, ReplicaSet (apps/v1), ReplicationController (v1), Job
// (batch/v1: spec.template) or CronJob (batch/v1: spec.jobTemplate.spec.template), as the pod the
// workload's controller would create (the template's metadata and spec, named after the
// workload, in its namespace). InvalidArgument, naming `source` and the document's number, for
// invalid YAML, a document that is not an object, without `kind`, of another kind, or a workload
// without a template; and when there is no document at all.
absl::StatusOr<std::vector<ExplainSubject>> ExplainSubjects(const std::string& text,
                                                            const std::string& source);
struct ExplainResult {
  std::string text;
  bool all_fit = true;  // false when some subject does not fit
};
// Why each pod of the manifests in `file` ("-": standard input; ExplainSubjects) does or does
// not fit `node`, with the numbers. An error for unreadable or unsupported input, or when the
// server cannot answer.
absl::StatusOr<ExplainResult> Explain(const ServerTarget& target, const std::string& file,
                                      const std::string& node);
// The kubelet rejections the server has seen.
absl::StatusOr<std::string> RejectionsTable(const ServerTarget& target);
// Waits until the server's view includes every pod change the API had made when this was
// called: reads the API's current resourceVersion (via `kubeconfig`, "" = $KUBECONFIG) and
// polls the server's applied one until it has reached it. DeadlineExceeded after `timeout`.
absl::Status AwaitView(const ServerTarget& target, const std::string& kubeconfig,
                       absl::Duration timeout);
// Whether the server runs with its ledger (false with --no-ledger).
absl::StatusOr<bool> LedgerEnabled(const ServerTarget& target);

// YAML (or JSON) text -> JSON text, every scalar as a string (what the proto schema expects for
// quantities; protobuf's parser accepts numeric strings for integer fields).
absl::StatusOr<std::string> YamlToJson(const std::string& yaml);

}  // namespace fitledger::ctl

#endif  // FITLEDGER_CLIENT_CTL_COMMANDS_H_
