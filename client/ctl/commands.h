// fitledgerctl's read-only commands over the server's gRPC API.
#ifndef FITLEDGER_CLIENT_CTL_COMMANDS_H_
#define FITLEDGER_CLIENT_CTL_COMMANDS_H_

#include <string>

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
// Why the pod in `pod_file` (YAML or JSON) does or does not fit `node`, with the numbers.
absl::StatusOr<std::string> Explain(const ServerTarget& target, const std::string& pod_file,
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
