// The kubeconfig fitledger-sim writes for its clients (kubectl, fitledger-server).
#ifndef FITLEDGER_SIM_KUBECONFIG_H_
#define FITLEDGER_SIM_KUBECONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sim/config.h"

namespace fitledger::sim {

// A kubeconfig whose current context points at `server_url` (http:// or https://), with the
// certificate-authority / client-certificate / client-key paths of `config.kubeconfig_out` and
// the bearer token of `config.token` when set. HTTPS without a CA path skips verification.
std::string KubeconfigYaml(absl::string_view server_url, const SimConfig& config);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_KUBECONFIG_H_
