#include "server/kube/connection.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace fitledger::kube {
namespace {

absl::Status FieldError(const std::string& file, const YAML::Node& node, const std::string& field,
                        const std::string& message) {
  int line = node.IsDefined() ? node.Mark().line + 1 : 0;
  return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", file, line > 0 ? ":" : "",
                                                 line > 0 ? std::to_string(line) : "", ": ", field,
                                                 ": ", message));
}

// A string field of a mapping, or "" when absent.
absl::StatusOr<std::string> Str(const std::string& file, const YAML::Node& map,
                                const std::string& key, const std::string& path) {
  YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull()) return std::string();
  if (!v.IsScalar()) return FieldError(file, v, path + "." + key, "must be a string");
  return v.Scalar();
}

// The entry of `list` (a sequence of {name, <kind>: {...}}) named `name`.
absl::StatusOr<YAML::Node> Named(const std::string& file, const YAML::Node& root,
                                 const std::string& list, const std::string& kind,
                                 const std::string& name) {
  YAML::Node seq = root[list];
  if (!seq.IsDefined() || seq.IsNull()) {
    return FieldError(file, root, list, "missing");
  }
  if (!seq.IsSequence()) return FieldError(file, seq, list, "must be a list");
  for (const YAML::Node& entry : seq) {
    if (entry["name"].IsDefined() && entry["name"].IsScalar() && entry["name"].Scalar() == name) {
      YAML::Node body = entry[kind];
      if (!body.IsDefined() || !body.IsMap()) {
        return FieldError(file, entry, absl::StrCat(list, "[", name, "].", kind),
                          "missing or not a mapping");
      }
      return body;
    }
  }
  return FieldError(file, seq, list, absl::StrCat("no entry named \"", name, "\""));
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return dir + "/" + path;
}

absl::StatusOr<std::string> Base64Field(const std::string& file, const YAML::Node& map,
                                        const std::string& key, const std::string& path) {
  ASSIGN_OR_RETURN(std::string encoded, Str(file, map, key, path));
  if (encoded.empty()) return std::string();
  std::string decoded;
  if (!absl::Base64Unescape(encoded, &decoded)) {
    return FieldError(file, map[key], path + "." + key, "is not valid base64");
  }
  return decoded;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

absl::StatusOr<Connection> ParseKubeconfig(const std::string& text, const std::string& name,
                                           const std::string& dir) {
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsMap()) return FieldError(name, root, "(document)", "must be a mapping");
    ASSIGN_OR_RETURN(std::string context_name, Str(name, root, "current-context", ""));
    if (context_name.empty()) {
      return FieldError(name, root, "current-context", "missing or empty");
    }
    ASSIGN_OR_RETURN(YAML::Node context, Named(name, root, "contexts", "context", context_name));
    std::string ctx_path = absl::StrCat("contexts[", context_name, "].context");
    ASSIGN_OR_RETURN(std::string cluster_name, Str(name, context, "cluster", ctx_path));
    if (cluster_name.empty()) return FieldError(name, context, ctx_path + ".cluster", "missing");
    ASSIGN_OR_RETURN(std::string user_name, Str(name, context, "user", ctx_path));

    Connection c;
    c.source = absl::StrCat("kubeconfig ", name);
    ASSIGN_OR_RETURN(YAML::Node cluster, Named(name, root, "clusters", "cluster", cluster_name));
    std::string cl_path = absl::StrCat("clusters[", cluster_name, "].cluster");
    ASSIGN_OR_RETURN(c.server, Str(name, cluster, "server", cl_path));
    if (c.server.empty()) return FieldError(name, cluster, cl_path + ".server", "missing");
    if (c.server.rfind("http://", 0) != 0 && c.server.rfind("https://", 0) != 0) {
      return FieldError(name, cluster["server"], cl_path + ".server",
                        "must start with http:// or https://");
    }
    while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
    ASSIGN_OR_RETURN(std::string ca, Str(name, cluster, "certificate-authority", cl_path));
    c.ca_file = Resolve(dir, ca);
    ASSIGN_OR_RETURN(c.ca_pem, Base64Field(name, cluster, "certificate-authority-data", cl_path));
    YAML::Node insecure = cluster["insecure-skip-tls-verify"];
    if (insecure.IsDefined() && !insecure.IsNull()) {
      if (!insecure.IsScalar() || (insecure.Scalar() != "true" && insecure.Scalar() != "false")) {
        return FieldError(name, insecure, cl_path + ".insecure-skip-tls-verify",
                          "must be true or false");
      }
      c.insecure_skip_tls_verify = insecure.Scalar() == "true";
    }

    if (!user_name.empty()) {
      ASSIGN_OR_RETURN(YAML::Node user, Named(name, root, "users", "user", user_name));
      std::string u_path = absl::StrCat("users[", user_name, "].user");
      ASSIGN_OR_RETURN(c.token, Str(name, user, "token", u_path));
      ASSIGN_OR_RETURN(std::string token_file, Str(name, user, "tokenFile", u_path));
      c.token_file = Resolve(dir, token_file);
      ASSIGN_OR_RETURN(std::string cert, Str(name, user, "client-certificate", u_path));
      c.client_cert_file = Resolve(dir, cert);
      ASSIGN_OR_RETURN(c.client_cert_pem,
                       Base64Field(name, user, "client-certificate-data", u_path));
      ASSIGN_OR_RETURN(std::string key, Str(name, user, "client-key", u_path));
      c.client_key_file = Resolve(dir, key);
      ASSIGN_OR_RETURN(c.client_key_pem, Base64Field(name, user, "client-key-data", u_path));
      bool has_cert = !c.client_cert_file.empty() || !c.client_cert_pem.empty();
      bool has_key = !c.client_key_file.empty() || !c.client_key_pem.empty();
      if (has_cert != has_key) {
        return FieldError(name, user, u_path,
                          "client-certificate and client-key must be given together");
      }
      if (user["exec"].IsDefined() || user["auth-provider"].IsDefined()) {
        return FieldError(name, user, u_path,
                          "exec and auth-provider credentials are not supported; use a token or a "
                          "client certificate");
      }
    }
    return c;
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", name, ":", e.mark.line + 1, ": invalid YAML: ", e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", name, ": ", e.what()));
  }
}

absl::StatusOr<Connection> LoadKubeconfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok())
    return absl::NotFoundError(absl::StrCat("kubeconfig ", path, ": cannot read the file"));
  std::string dir;
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) dir = path.substr(0, slash);
  return ParseKubeconfig(*text, path, dir);
}

absl::StatusOr<Connection> InClusterConnection(const std::string& secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return absl::FailedPreconditionError(
        "no kubeconfig given (--kubeconfig or $KUBECONFIG) and not running in a cluster "
        "(KUBERNETES_SERVICE_HOST/PORT unset)");
  }
  Connection c;
  c.source = "in-cluster service account";
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  c.server = absl::StrCat("https://", h, ":", port);
  c.token_file = secrets_dir + "/token";
  c.ca_file = secrets_dir + "/ca.crt";
  if (!ReadFile(c.token_file).ok()) {
    return absl::NotFoundError(absl::StrCat("in-cluster: cannot read ", c.token_file));
  }
  return c;
}

absl::StatusOr<Connection> ResolveConnection(const std::string& flag_path) {
  if (!flag_path.empty()) return LoadKubeconfig(flag_path);
  const char* env = std::getenv("KUBECONFIG");
  if (env != nullptr && *env != '\0') {
    std::vector<std::string> paths = absl::StrSplit(env, ':', absl::SkipEmpty());
    if (!paths.empty()) return LoadKubeconfig(paths.front());
  }
  return InClusterConnection();
}

}  // namespace fitledger::kube
