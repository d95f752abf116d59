#include "server/kube/connection.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "simdjson.h"
#include "yaml-cpp/yaml.h"

namespace fitledger::kube {
namespace {

constexpr char kExecV1[] = "client.authentication.k8s.io/v1";
constexpr char kExecV1beta1[] = "client.authentication.k8s.io/v1beta1";
// clientcmd's reserved cluster extension name for per-cluster exec plugin config
// (client-go rest/exec.go, clientauthentication v1 Cluster.Config).
constexpr char kExecExtension[] = "client.authentication.k8s.io/exec";

int Line(const YAML::Node& node) { return node.IsDefined() ? node.Mark().line + 1 : 0; }

std::string Where(const std::string& file, int line) {
  return line > 0 ? absl::StrCat(file, ":", line) : file;
}

absl::Status FieldError(const std::string& file, const YAML::Node& node, const std::string& field,
                        const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat("kubeconfig ", Where(file, Line(node)), ": ", field, ": ", message));
}

bool Absent(const YAML::Node& v) { return !v.IsDefined() || v.IsNull(); }

// Set to something: present and not empty ("" / [] / {} set nothing, as in client-go's types).
bool Set(const YAML::Node& v) {
  if (Absent(v)) return false;
  if (v.IsScalar()) return !v.Scalar().empty();
  return v.size() > 0;
}

// A string field of a mapping, or "" when absent.
absl::StatusOr<std::string> Str(const std::string& file, const YAML::Node& map,
                                const std::string& key, const std::string& path) {
  YAML::Node v = map[key];
  if (Absent(v)) return std::string();
  if (!v.IsScalar()) return FieldError(file, v, path + "." + key, "must be a string");
  return v.Scalar();
}

absl::StatusOr<bool> Bool(const std::string& file, const YAML::Node& map, const std::string& key,
                          const std::string& path) {
  YAML::Node v = map[key];
  if (Absent(v)) return false;
  if (!v.IsScalar() || (v.Scalar() != "true" && v.Scalar() != "false")) {
    return FieldError(file, v, path + "." + key, "must be true or false");
  }
  return v.Scalar() == "true";
}

absl::StatusOr<std::vector<std::string>> StrList(const std::string& file, const YAML::Node& map,
                                                 const std::string& key, const std::string& path) {
  std::vector<std::string> out;
  YAML::Node v = map[key];
  if (Absent(v)) return out;
  if (!v.IsSequence()) return FieldError(file, v, path + "." + key, "must be a list of strings");
  for (const YAML::Node& item : v) {
    if (!item.IsScalar()) return FieldError(file, item, path + "." + key, "must be strings");
    out.push_back(item.Scalar());
  }
  return out;
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

// clientcmd's ResolvePaths: a relative path joins the folder of the file it came from.
std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return dir + "/" + path;
}

// YAML to JSON as sigs.k8s.io/yaml converts it: plain scalars keep their YAML 1.1 type.
nlohmann::json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.Scalar()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted: always a string
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      if (s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
      int64_t i;
      if (absl::SimpleAtoi(s, &i)) return i;
      double d;
      if (!s.empty() && (absl::ascii_isdigit(s[0]) || s[0] == '-' || s[0] == '.') &&
          absl::SimpleAtod(s, &d)) {
        return d;
      }
      return s;
    }
    default:
      return nullptr;
  }
}

// Calls `entry(name, body, line)` for each {name, <kind>: {...}} item of the list `list`.
// InvalidArgument for a malformed list or a name listed twice (clientcmd/api/v1 conversion.go:
// "duplicate name ... in list").
template <typename F>
absl::Status ForEachNamed(const std::string& file, const YAML::Node& root, const std::string& list,
                          const std::string& kind, F entry) {
  YAML::Node seq = root[list];
  if (Absent(seq)) return absl::OkStatus();
  if (!seq.IsSequence()) return FieldError(file, seq, list, "must be a list");
  std::set<std::string> seen;
  for (const YAML::Node& item : seq) {
    if (!item.IsMap()) return FieldError(file, item, list, "entries must be mappings");
    ASSIGN_OR_RETURN(std::string name, Str(file, item, "name", list + "[]"));
    if (!seen.insert(name).second) {
      return FieldError(file, item, list, absl::StrCat("duplicate name \"", name, "\""));
    }
    std::string path = absl::StrCat(list, "[", name, "].", kind);
    YAML::Node body = item[kind];
    if (Absent(body)) body = YAML::Node(YAML::NodeType::Map);
    if (!body.IsMap()) return FieldError(file, item[kind], path, "must be a mapping");
    RETURN_IF_ERROR(entry(name, body, path, Line(item)));
  }
  return absl::OkStatus();
}

absl::Status ReadExec(const std::string& file, const std::string& dir, const YAML::Node& node,
                      const std::string& path, ExecConfig* exec) {
  if (!node.IsMap()) return FieldError(file, node, path, "must be a mapping");
  ASSIGN_OR_RETURN(exec->command, Str(file, node, "command", path));
  // clientcmd resolves the command against the file's folder only when it holds a separator.
  if (exec->command.find('/') != std::string::npos) exec->command = Resolve(dir, exec->command);
  ASSIGN_OR_RETURN(exec->args, StrList(file, node, "args", path));
  YAML::Node env = node["env"];
  if (!Absent(env)) {
    if (!env.IsSequence()) return FieldError(file, env, path + ".env", "must be a list");
    for (const YAML::Node& e : env) {
      if (!e.IsMap()) return FieldError(file, e, path + ".env", "entries must be {name, value}");
      ASSIGN_OR_RETURN(std::string name, Str(file, e, "name", path + ".env[]"));
      ASSIGN_OR_RETURN(std::string value, Str(file, e, "value", path + ".env[]"));
      exec->env.emplace_back(std::move(name), std::move(value));
    }
  }
  ASSIGN_OR_RETURN(exec->api_version, Str(file, node, "apiVersion", path));
  ASSIGN_OR_RETURN(exec->install_hint, Str(file, node, "installHint", path));
  ASSIGN_OR_RETURN(exec->provide_cluster_info, Bool(file, node, "provideClusterInfo", path));
  ASSIGN_OR_RETURN(exec->interactive_mode, Str(file, node, "interactiveMode", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  if (slash == 0) dir = "/";
  if (!dir.empty() && dir[0] == '/') return dir;
  // clientcmd resolves against filepath.Abs(filepath.Dir(file)).
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return dir;
  return dir.empty() ? std::string(cwd) : absl::StrCat(cwd, "/", dir);
}

// client-go clientcmd validation.go parseProxyURL: http, https and socks5 only.
absl::Status CheckProxyUrl(const std::string& url) {
  size_t sep = url.find("://");
  std::string scheme = sep == std::string::npos ? "" : absl::AsciiStrToLower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https" && scheme != "socks5") {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported scheme \"", scheme, "\", must be http, https, or socks5"));
  }
  if (url.size() <= sep + 3) return absl::InvalidArgumentError("has no host");
  return absl::OkStatus();
}

std::string UserError(const Kubeconfig::User& user, const std::string& name,
                      const std::string& message) {
  return absl::StrCat("kubeconfig ", user.origin, ": users[", name, "].user.", message);
}

}  // namespace

absl::StatusOr<Kubeconfig> ParseKubeconfigFile(absl::string_view text, const std::string& name,
                                               const std::string& dir) {
  Kubeconfig config;
  config.files.push_back(name);
  if (text.empty()) return config;  // clientcmd.Load: no data is the empty config
  // YAML is UTF-8 text, and Go's YAML reader (gopkg.in/yaml, reader.go yaml_parser_update_buffer)
  // refuses a file that is not ("invalid leading/trailing UTF-8 octet"); yaml-cpp does not, and
  // every string read here reaches JSON (the exec plugin's KUBERNETES_EXEC_INFO).
  if (!simdjson::validate_utf8(text.data(), text.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", name, ": the file is not valid UTF-8 text"));
  }
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (root.IsNull()) return config;
    if (!root.IsMap()) return FieldError(name, root, "(document)", "must be a mapping");
    ASSIGN_OR_RETURN(config.current_context, Str(name, root, "current-context", ""));

    RETURN_IF_ERROR(ForEachNamed(
        name, root, "clusters", "cluster",
        [&](const std::string& key, const YAML::Node& c, const std::string& path,
            int line) -> absl::Status {
          Kubeconfig::Cluster cluster;
          cluster.origin = Where(name, line);
          ASSIGN_OR_RETURN(cluster.server, Str(name, c, "server", path));
          ASSIGN_OR_RETURN(cluster.tls_server_name, Str(name, c, "tls-server-name", path));
          ASSIGN_OR_RETURN(cluster.proxy_url, Str(name, c, "proxy-url", path));
          ASSIGN_OR_RETURN(cluster.disable_compression, Bool(name, c, "disable-compression", path));
          ASSIGN_OR_RETURN(std::string ca, Str(name, c, "certificate-authority", path));
          cluster.ca_file = Resolve(dir, ca);
          ASSIGN_OR_RETURN(cluster.ca_pem,
                           Base64Field(name, c, "certificate-authority-data", path));
          ASSIGN_OR_RETURN(cluster.insecure_skip_tls_verify,
                           Bool(name, c, "insecure-skip-tls-verify", path));
          YAML::Node extensions = c["extensions"];
          if (!Absent(extensions)) {
            if (!extensions.IsSequence()) {
              return FieldError(name, extensions, path + ".extensions", "must be a list");
            }
            for (const YAML::Node& ext : extensions) {
              if (ext.IsMap() && ext["name"].IsScalar() && ext["name"].Scalar() == kExecExtension &&
                  !Absent(ext["extension"])) {
                cluster.exec_extension_json = YamlToJson(ext["extension"]).dump();
              }
            }
          }
          config.clusters.emplace(key, std::move(cluster));
          return absl::OkStatus();
        }));

    RETURN_IF_ERROR(ForEachNamed(
        name, root, "users", "user",
        [&](const std::string& key, const YAML::Node& u, const std::string& path,
            int line) -> absl::Status {
          Kubeconfig::User user;
          user.origin = Where(name, line);
          ASSIGN_OR_RETURN(user.token, Str(name, u, "token", path));
          ASSIGN_OR_RETURN(std::string token_file, Str(name, u, "tokenFile", path));
          user.token_file = Resolve(dir, token_file);
          ASSIGN_OR_RETURN(std::string cert, Str(name, u, "client-certificate", path));
          user.client_cert_file = Resolve(dir, cert);
          ASSIGN_OR_RETURN(user.client_cert_pem,
                           Base64Field(name, u, "client-certificate-data", path));
          ASSIGN_OR_RETURN(std::string key_file, Str(name, u, "client-key", path));
          user.client_key_file = Resolve(dir, key_file);
          ASSIGN_OR_RETURN(user.client_key_pem, Base64Field(name, u, "client-key-data", path));
          if (!Absent(u["exec"])) {
            user.has_exec = true;
            RETURN_IF_ERROR(ReadExec(name, dir, u["exec"], path + ".exec", &user.exec));
            user.exec.user = key;
          }
          for (const char* field : {"auth-provider", "username", "password", "as", "as-uid",
                                    "as-groups", "as-user-extra"}) {
            if (Set(u[field])) user.unsupported.push_back(field);
          }
          config.users.emplace(key, std::move(user));
          return absl::OkStatus();
        }));

    RETURN_IF_ERROR(ForEachNamed(name, root, "contexts", "context",
                                 [&](const std::string& key, const YAML::Node& c,
                                     const std::string& path, int line) -> absl::Status {
                                   Kubeconfig::Context context;
                                   context.origin = Where(name, line);
                                   ASSIGN_OR_RETURN(context.cluster, Str(name, c, "cluster", path));
                                   ASSIGN_OR_RETURN(context.user, Str(name, c, "user", path));
                                   ASSIGN_OR_RETURN(context.namespace_name,
                                                    Str(name, c, "namespace", path));
                                   config.contexts.emplace(key, std::move(context));
                                   return absl::OkStatus();
                                 }));
    return config;
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", name, ":", e.mark.line + 1, ": invalid YAML: ", e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", name, ": ", e.what()));
  }
}

Kubeconfig MergeKubeconfigs(const std::vector<Kubeconfig>& files) {
  Kubeconfig merged;
  for (const Kubeconfig& file : files) {
    // std::map::insert keeps an existing key: the first file to set a name wins, whole.
    merged.clusters.insert(file.clusters.begin(), file.clusters.end());
    merged.users.insert(file.users.begin(), file.users.end());
    merged.contexts.insert(file.contexts.begin(), file.contexts.end());
    if (merged.current_context.empty()) merged.current_context = file.current_context;
    merged.files.insert(merged.files.end(), file.files.begin(), file.files.end());
  }
  return merged;
}

absl::StatusOr<Connection> ConnectionFromKubeconfig(const Kubeconfig& config) {
  const std::string files = absl::StrJoin(config.files, ", ");
  const std::string where = absl::StrCat("kubeconfig ", files);
  if (config.current_context.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": current-context: missing or empty"));
  }
  auto ctx_it = config.contexts.find(config.current_context);
  if (ctx_it == config.contexts.end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": contexts: no entry named \"",
                                                   config.current_context,
                                                   "\" (the current-context)"));
  }
  const Kubeconfig::Context& context = ctx_it->second;
  const std::string ctx_path = absl::StrCat("contexts[", config.current_context, "].context");
  if (context.cluster.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", context.origin, ": ", ctx_path, ".cluster: missing"));
  }
  auto cl_it = config.clusters.find(context.cluster);
  if (cl_it == config.clusters.end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": clusters: no entry named \"",
                                                   context.cluster, "\" (", ctx_path, ")"));
  }
  const Kubeconfig::Cluster& cluster = cl_it->second;
  const std::string cl =
      absl::StrCat("kubeconfig ", cluster.origin, ": clusters[", context.cluster, "].cluster.");

  Connection c;
  c.source = absl::StrCat("kubeconfig ", files, " (context ", config.current_context, ")");
  c.server = cluster.server;
  if (c.server.empty()) return absl::InvalidArgumentError(absl::StrCat(cl, "server: missing"));
  if (!absl::StartsWith(c.server, "http://") && !absl::StartsWith(c.server, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat(cl, "server: must start with http:// or https://"));
  }
  while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
  c.tls_server_name = cluster.tls_server_name;
  c.proxy_url = cluster.proxy_url;
  if (!c.proxy_url.empty()) {
    absl::Status proxy = CheckProxyUrl(c.proxy_url);
    if (!proxy.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(cl, "proxy-url: ", proxy.message()));
    }
  }
  c.disable_compression = cluster.disable_compression;
  // certificate-authority-data overrides certificate-authority (clientcmd validation.go).
  c.ca_pem = cluster.ca_pem;
  if (c.ca_pem.empty()) c.ca_file = cluster.ca_file;
  c.insecure_skip_tls_verify = cluster.insecure_skip_tls_verify;

  if (context.user.empty()) return c;  // anonymous
  auto u_it = config.users.find(context.user);
  if (u_it == config.users.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": users: no entry named \"", context.user, "\" (", ctx_path, ")"));
  }
  const Kubeconfig::User& user = u_it->second;
  for (const std::string& field : user.unsupported) {
    if (field == "auth-provider") {
      return absl::InvalidArgumentError(UserError(
          user, context.user,
          "auth-provider: auth-provider plugins are not supported (client-go itself dropped the "
          "gcp and azure ones in Kubernetes 1.26); use an exec credential plugin instead: "
          "`gke-gcloud-auth-plugin` (GKE), `kubelogin convert-kubeconfig` (AKS), "
          "`aws eks get-token` (EKS), or a token or client certificate"));
    }
    if (field == "username" || field == "password") {
      return absl::InvalidArgumentError(UserError(
          user, context.user,
          absl::StrCat(field,
                       ": basic authentication (username/password) is not supported (the API "
                       "server dropped it in Kubernetes 1.19); use a token, tokenFile, a client "
                       "certificate or an exec credential plugin")));
    }
    return absl::InvalidArgumentError(UserError(
        user, context.user,
        absl::StrCat(field,
                     ": impersonation is not supported; give fitledger-server its own identity "
                     "(a token, client certificate or exec plugin for the user it should act "
                     "as)")));
  }
  c.token = user.token;
  if (c.token.empty()) c.token_file = user.token_file;  // token takes precedence (types.go)
  c.client_cert_pem = user.client_cert_pem;
  if (c.client_cert_pem.empty()) c.client_cert_file = user.client_cert_file;
  c.client_key_pem = user.client_key_pem;
  if (c.client_key_pem.empty()) c.client_key_file = user.client_key_file;
  bool has_cert = !c.client_cert_file.empty() || !c.client_cert_pem.empty();
  bool has_key = !c.client_key_file.empty() || !c.client_key_pem.empty();
  if (has_cert != has_key) {
    return absl::InvalidArgumentError(
        UserError(user, context.user, "client-certificate and client-key must be given together"));
  }
  if (!user.has_exec) return c;

  // clientcmd validation.go validateAuthInfo, for the exec plugin of the user in use.
  const ExecConfig& exec = user.exec;
  if (exec.command.empty()) {
    return absl::InvalidArgumentError(UserError(user, context.user, "exec.command: missing"));
  }
  if (exec.api_version.empty()) {
    return absl::InvalidArgumentError(
        UserError(user, context.user,
                  absl::StrCat("exec.apiVersion: missing (", kExecV1, " or ", kExecV1beta1, ")")));
  }
  if (exec.api_version != kExecV1 && exec.api_version != kExecV1beta1) {
    return absl::InvalidArgumentError(
        UserError(user, context.user,
                  absl::StrCat("exec.apiVersion: \"", exec.api_version, "\" is not supported (",
                               kExecV1, " or ", kExecV1beta1, ")")));
  }
  for (const auto& [name, value] : exec.env) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          UserError(user, context.user, "exec.env: every variable needs a name"));
    }
  }
  std::string mode = exec.interactive_mode;
  // clientcmd/api/v1 defaults.go: v1beta1 defaults to IfAvailable; v1 must say.
  if (mode.empty() && exec.api_version == kExecV1beta1) mode = "IfAvailable";
  if (mode.empty()) {
    return absl::InvalidArgumentError(
        UserError(user, context.user,
                  absl::StrCat("exec.interactiveMode: must be specified with ", kExecV1,
                               " (Never or IfAvailable)")));
  }
  if (mode == "Always") {
    return absl::InvalidArgumentError(UserError(
        user, context.user,
        "exec.interactiveMode: Always needs a terminal to prompt on, and fitledger-server never "
        "has one; configure the plugin to run unattended (interactiveMode: Never or "
        "IfAvailable, e.g. a service principal, workload identity or a cached login)"));
  }
  if (mode != "Never" && mode != "IfAvailable") {
    return absl::InvalidArgumentError(
        UserError(user, context.user,
                  absl::StrCat("exec.interactiveMode: \"", mode,
                               "\" is not one of Never, IfAvailable, Always")));
  }
  if (c.token.empty() && c.token_file.empty() && !has_cert) {
    ExecConfig resolved = exec;
    resolved.interactive_mode = mode;
    if (resolved.provide_cluster_info) {
      // client-go rest/exec.go ConfigToExecCluster: the CA as data, read from the file if need be.
      ExecClusterInfo& info = resolved.cluster;
      info.server = c.server;
      info.tls_server_name = c.tls_server_name;
      info.insecure_skip_tls_verify = c.insecure_skip_tls_verify;
      info.proxy_url = c.proxy_url;
      info.disable_compression = c.disable_compression;
      info.config_json = cluster.exec_extension_json;
      info.ca_pem = c.ca_pem;
      if (info.ca_pem.empty() && !c.ca_file.empty()) {
        absl::StatusOr<std::string> ca = ReadFile(c.ca_file);
        if (!ca.ok()) {
          return absl::NotFoundError(
              absl::StrCat(cl, "certificate-authority: cannot read ", c.ca_file,
                           " (the exec plugin's provideClusterInfo needs it)"));
        }
        info.ca_pem = *ca;
      }
    }
    c.exec = std::move(resolved);
  }
  return c;
}

absl::StatusOr<Connection> ParseKubeconfig(absl::string_view text, const std::string& name,
                                           const std::string& dir) {
  ASSIGN_OR_RETURN(Kubeconfig config, ParseKubeconfigFile(text, name, dir));
  return ConnectionFromKubeconfig(config);
}

absl::StatusOr<Connection> LoadKubeconfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("kubeconfig ", path, ": cannot read the file"));
  }
  return ParseKubeconfig(*text, path, DirOf(path));
}

absl::StatusOr<Kubeconfig> LoadKubeconfigFiles(const std::vector<std::string>& paths) {
  std::vector<Kubeconfig> files;
  for (const std::string& path : paths) {
    if (access(path.c_str(), F_OK) != 0) continue;  // clientcmd skips missing files
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) {
      return absl::NotFoundError(absl::StrCat("kubeconfig ", path, ": cannot read the file"));
    }
    ASSIGN_OR_RETURN(Kubeconfig file, ParseKubeconfigFile(*text, path, DirOf(path)));
    files.push_back(std::move(file));
  }
  return MergeKubeconfigs(files);
}

std::vector<std::string> SplitKubeconfigPaths(absl::string_view value) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(value, ':', absl::SkipEmpty())) {
    std::string p(part);
    if (seen.insert(p).second) out.push_back(std::move(p));
  }
  return out;
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
  std::vector<std::string> paths;
  const char* env = std::getenv("KUBECONFIG");
  if (env != nullptr && *env != '\0') {
    paths = SplitKubeconfigPaths(env);
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    paths.push_back(absl::StrCat(home, "/.kube/config"));
  }
  ASSIGN_OR_RETURN(Kubeconfig merged, LoadKubeconfigFiles(paths));
  if (!merged.empty()) return ConnectionFromKubeconfig(merged);
  absl::StatusOr<Connection> in_cluster = InClusterConnection();
  if (in_cluster.ok() || paths.empty()) return in_cluster;
  return absl::Status(in_cluster.status().code(),
                      absl::StrCat(in_cluster.status().message(), "; no kubeconfig found at ",
                                   absl::StrJoin(paths, ":")));
}

}  // namespace fitledger::kube
