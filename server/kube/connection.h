// How to reach the Kubernetes API: from kubeconfig files, read and merged as kubectl does
// (client-go's tools/clientcmd), or from inside a pod.
#ifndef FITLEDGER_SERVER_KUBE_CONNECTION_H_
#define FITLEDGER_SERVER_KUBE_CONNECTION_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fitledger::kube {

// What an exec credential plugin is told about the cluster (ExecCredential spec.cluster, sent in
// KUBERNETES_EXEC_INFO when provideClusterInfo is true). Mirrors client-go's
// pkg/apis/clientauthentication/v1 Cluster, filled as rest/exec.go ConfigToExecCluster does.
struct ExecClusterInfo {
  std::string server;
  std::string tls_server_name;
  bool insecure_skip_tls_verify = false;
  std::string ca_pem;  // certificate-authority-data, or the certificate-authority file's content
  std::string proxy_url;
  bool disable_compression = false;
  // The cluster's extensions[name=client.authentication.k8s.io/exec].extension, as JSON; empty
  // when absent.
  std::string config_json;
};

// A user's `exec` credential plugin (client-go tools/clientcmd/api/v1 ExecConfig), validated as
// clientcmd's validation.go validateAuthInfo does for the user in use.
struct ExecConfig {
  // A path (one with a '/' is resolved against the folder of the kubeconfig that holds the user,
  // as clientcmd's loader.go GetAuthInfoFileReferences does) or a name looked up in $PATH.
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to (and overriding) ours
  // client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1.
  std::string api_version;
  std::string install_hint;  // shown when `command` cannot be found
  // "Never" or "IfAvailable" (run without stdin either way: fitledger-server has no terminal).
  // "Always" is refused when the kubeconfig is read.
  std::string interactive_mode;
  bool provide_cluster_info = false;
  ExecClusterInfo cluster;  // sent only when provide_cluster_info
  std::string user;         // the kubeconfig user's name, for messages
};

// The resolved connection settings. PEM data is held decoded; file paths are read when used.
// Secrets (token, key) are never included in error messages or logs. Plain value.
struct Connection {
  std::string server;  // e.g. https://10.0.0.1:6443 or http://127.0.0.1:8080 (no trailing '/')
  // The name the server's certificate is checked against (and sent as SNI) instead of the
  // server URL's host.
  std::string tls_server_name;
  // http://, https:// or socks5:// proxy for every request; empty: libcurl's defaults, which
  // honour $https_proxy / $http_proxy / $no_proxy as client-go's ProxyFromEnvironment does.
  std::string proxy_url;
  bool disable_compression = false;
  std::string ca_file;
  std::string ca_pem;  // wins over ca_file
  bool insecure_skip_tls_verify = false;
  std::string token;  // wins over token_file
  // A token file re-read on every request (in-cluster service-account tokens rotate).
  std::string token_file;
  std::string client_cert_file;
  std::string client_cert_pem;  // wins over client_cert_file
  std::string client_key_file;
  std::string client_key_pem;  // wins over client_key_file
  // Credentials from a plugin; used only when no token, token file or client certificate is set
  // (client-go's exec Authenticator.UpdateTransportConfig steps aside for those).
  std::optional<ExecConfig> exec;
  std::string source;  // where these settings came from, for messages
};

// One or more kubeconfig files as client-go holds them (api.Config): named maps of clusters,
// users and contexts, with file paths already resolved against the folder of the file each entry
// came from. Entries are decoded and shape-checked when read; whether the entries in use are
// complete is checked by ConnectionFromKubeconfig, as clientcmd checks only the context in use.
struct Kubeconfig {
  struct Cluster {
    std::string origin;  // "file:line", for messages
    std::string server;
    std::string tls_server_name;
    std::string proxy_url;
    bool disable_compression = false;
    std::string ca_file;
    std::string ca_pem;
    bool insecure_skip_tls_verify = false;
    std::string exec_extension_json;
  };
  struct User {
    std::string origin;
    std::string token;
    std::string token_file;
    std::string client_cert_file;
    std::string client_cert_pem;
    std::string client_key_file;
    std::string client_key_pem;
    bool has_exec = false;
    ExecConfig exec;  // as written (validated when the user is used)
    // Fields fitledger does not implement, set in this entry (auth-provider, username, ...):
    // an error names them when the user is used.
    std::vector<std::string> unsupported;
  };
  struct Context {
    std::string origin;
    std::string cluster;
    std::string user;
    std::string namespace_name;
  };
  std::map<std::string, Cluster> clusters;
  std::map<std::string, User> users;
  std::map<std::string, Context> contexts;
  std::string current_context;
  std::vector<std::string> files;  // the files read, in order

  // True when nothing is set (clientcmd api.IsConfigEmpty).
  bool empty() const {
    return clusters.empty() && users.empty() && contexts.empty() && current_context.empty();
  }
};

// Decodes one kubeconfig file's YAML text. `name` stands for the file in messages; relative
// paths resolve against `dir`. Empty text is an empty config (clientcmd.Load). InvalidArgument
// naming the file, line and field for malformed YAML, a field of the wrong type, invalid
// base64, or a name listed twice in one list (clientcmd/api/v1 conversion.go).
absl::StatusOr<Kubeconfig> ParseKubeconfigFile(absl::string_view text, const std::string& name,
                                               const std::string& dir);

// Merges files as clientcmd's ClientConfigLoadingRules.Load does: for clusters, users and
// contexts the first file to set a name wins, and that entry is kept whole (fields of a later
// entry with the same name are ignored, even ones the first leaves unset); current-context comes
// from the first file that sets a non-empty one.
Kubeconfig MergeKubeconfigs(const std::vector<Kubeconfig>& files);

// The current context's cluster and user as connection settings. InvalidArgument naming the
// file, entry and field: no current-context, a context, cluster or user that does not exist, a
// server that is missing or not http(s)://, a client certificate without its key, a proxy-url
// whose scheme is not http, https or socks5, auth-provider, username/password or impersonation
// (with what to use instead), an exec plugin without command or apiVersion, of an unknown
// apiVersion or interactiveMode, or one that needs a terminal (interactiveMode: Always).
// NotFound when a certificate-authority file an exec plugin must be given cannot be read.
absl::StatusOr<Connection> ConnectionFromKubeconfig(const Kubeconfig& config);

// ParseKubeconfigFile then ConnectionFromKubeconfig.
absl::StatusOr<Connection> ParseKubeconfig(absl::string_view text, const std::string& name,
                                           const std::string& dir);

// Exactly one file (the --kubeconfig flag / `kubeconfig` config key, clientcmd's ExplicitPath):
// NotFound if it cannot be read.
absl::StatusOr<Connection> LoadKubeconfig(const std::string& path);

// Reads and merges `paths` in order ($KUBECONFIG's list): a file that does not exist is skipped,
// as clientcmd does; one that cannot be parsed is an error.
absl::StatusOr<Kubeconfig> LoadKubeconfigFiles(const std::vector<std::string>& paths);

// $KUBECONFIG's value split as filepath.SplitList does (':'), empty entries and repeats dropped.
std::vector<std::string> SplitKubeconfigPaths(absl::string_view value);

// In-cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT and the service account's
// token and ca.crt under `secrets_dir` (default /var/run/secrets/kubernetes.io/serviceaccount).
absl::StatusOr<Connection> InClusterConnection(
    const std::string& secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// As kubectl chooses: `flag_path` if set (that file alone); else the files of $KUBECONFIG, or
// ~/.kube/config when it is unset, merged; when those hold nothing at all (missing or empty), the
// in-cluster service account (clientcmd's DeferredLoadingClientConfig.ClientConfig).
absl::StatusOr<Connection> ResolveConnection(const std::string& flag_path);

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_CONNECTION_H_
