#include "sim/kubeconfig.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fitledger::sim {
namespace {

// A YAML double-quoted scalar.
std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace

std::string KubeconfigYaml(absl::string_view server_url, const SimConfig& config) {
  std::string cluster = absl::StrCat("    server: ", Quote(server_url), "\n");
  if (absl::StartsWith(server_url, "https://")) {
    if (!config.kubeconfig_out.ca_file.empty()) {
      absl::StrAppend(&cluster, "    certificate-authority: ", Quote(config.kubeconfig_out.ca_file),
                      "\n");
    } else {
      absl::StrAppend(&cluster, "    insecure-skip-tls-verify: true\n");
    }
  }
  std::string user;
  if (!config.token.empty()) absl::StrAppend(&user, "    token: ", Quote(config.token), "\n");
  if (!config.kubeconfig_out.client_cert_file.empty()) {
    absl::StrAppend(
        &user, "    client-certificate: ", Quote(config.kubeconfig_out.client_cert_file), "\n");
  }
  if (!config.kubeconfig_out.client_key_file.empty()) {
    absl::StrAppend(&user, "    client-key: ", Quote(config.kubeconfig_out.client_key_file), "\n");
  }
  return absl::StrCat(
      "apiVersion: v1\nkind: Config\nclusters:\n- name: fitledger-sim\n  cluster:\n", cluster,
      "contexts:\n- name: fitledger-sim\n  context:\n    cluster: fitledger-sim\n"
      "    user: fitledger-sim\n    namespace: default\n"
      "current-context: fitledger-sim\nusers:\n- name: fitledger-sim\n  user:",
      user.empty() ? " {}\n" : absl::StrCat("\n", user), "preferences: {}\n");
}

}  // namespace fitledger::sim
