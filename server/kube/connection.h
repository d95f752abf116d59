// How to reach the Kubernetes API: from a kubeconfig file or from inside a pod.
#ifndef FITLEDGER_SERVER_KUBE_CONNECTION_H_
#define FITLEDGER_SERVER_KUBE_CONNECTION_H_

#include <string>

#include "absl/status/statusor.h"

namespace fitledger::kube {

// The resolved connection settings. PEM data is held decoded; file paths are read by libcurl.
// Secrets (token, key) are never included in error messages or logs. Plain value.
struct Connection {
  std::string server;  // e.g. https://10.0.0.1:6443 or http://127.0.0.1:8080
  std::string ca_file;
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  std::string token;
  // A token file re-read on every request (in-cluster service-account tokens rotate).
  std::string token_file;
  std::string client_cert_file;
  std::string client_cert_pem;
  std::string client_key_file;
  std::string client_key_pem;
  std::string source;  // where these settings came from, for messages
};

// Reads a kubeconfig file: the current context's cluster and user. Supports server,
// certificate-authority(-data), insecure-skip-tls-verify, token, tokenFile,
// client-certificate(-data), client-key(-data). Relative file paths are relative to the
// kubeconfig's folder. InvalidArgument / NotFound naming the file and the field.
absl::StatusOr<Connection> LoadKubeconfig(const std::string& path);
// The same from YAML text (`name` stands for the file in messages, `dir` resolves paths).
absl::StatusOr<Connection> ParseKubeconfig(const std::string& text, const std::string& name,
                                           const std::string& dir);

// In-cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT and the service account's
// token and ca.crt under `secrets_dir` (default /var/run/secrets/kubernetes.io/serviceaccount).
absl::StatusOr<Connection> InClusterConnection(
    const std::string& secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// `flag_path` if set, else $KUBECONFIG (first entry), else in-cluster.
absl::StatusOr<Connection> ResolveConnection(const std::string& flag_path);

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_CONNECTION_H_
