#include "config/server_config.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"
#include "model/resources.h"

namespace fitledger::config {

const char kUnaryListenRemoved[] =
    "was removed with fitledger's own HTTP/2 server: remove the key; fitledger-shim calls the "
    "server on grpc.listen (e.g. unix:///run/fitledger/server.sock)";

namespace {

absl::Status ReadTls(Fields& f, TlsFiles* tls) {
  RETURN_IF_ERROR(f.String("certFile", &tls->cert_file));
  RETURN_IF_ERROR(f.String("keyFile", &tls->key_file));
  return f.String("clientCAFile", &tls->client_ca_file);
}

absl::Status Read(Fields& root, ServerConfig* c) {
  RETURN_IF_ERROR(root.String("kubeconfig", &c->kubeconfig));
  RETURN_IF_ERROR(root.Map("kubernetes", [&](Fields& f) -> absl::Status {
    RETURN_IF_ERROR(f.Duration("bindTimeout", &c->bind_timeout));
    RETURN_IF_ERROR(f.Int("bindThreads", &c->bind_threads, 1, 4096));
    RETURN_IF_ERROR(f.Duration("bindBudget", &c->bind_budget));
    if (c->bind_budget <= absl::ZeroDuration()) return f.Error("bindBudget", "must be positive");
    RETURN_IF_ERROR(f.String("contentType", &c->content_type));
    if (c->content_type != "application/vnd.kubernetes.protobuf" &&
        c->content_type != "application/json") {
      return f.Error("contentType",
                     "must be application/vnd.kubernetes.protobuf or application/json");
    }
    RETURN_IF_ERROR(f.StringList("schedulerNames", &c->scheduler_names));
    return f.Int("listPageSize", &c->list_page_size, 1, 100000);
  }));
  RETURN_IF_ERROR(root.Map("grpc", [&](Fields& f) -> absl::Status {
    RETURN_IF_ERROR(f.StringList("listen", &c->grpc_listen));
    std::vector<std::string> unary;
    RETURN_IF_ERROR(f.StringList("unaryListen", &unary));
    if (!unary.empty()) return f.Error("unaryListen", kUnaryListenRemoved);
    return f.Map("tls", [&](Fields& t) { return ReadTls(t, &c->grpc_tls); });
  }));
  RETURN_IF_ERROR(
      root.Map("monitor", [&](Fields& f) { return f.String("listen", &c->monitor_listen); }));
  RETURN_IF_ERROR(root.Map("webhook", [&](Fields& f) { return ReadHttpListener(f, &c->webhook); }));
  RETURN_IF_ERROR(root.Map("ledger", [&](Fields& f) -> absl::Status {
    RETURN_IF_ERROR(f.Bool("enabled", &c->ledger_enabled));
    RETURN_IF_ERROR(f.Map("accounting", [&](Fields& a) -> absl::Status {
      std::string mode = "all";
      RETURN_IF_ERROR(a.String("mode", &mode));
      if (mode != "all" && mode != "managed") return a.Error("mode", "must be all or managed");
      c->accounting_all = mode == "all";
      RETURN_IF_ERROR(a.StringList("managed", &c->managed_resources));
      if (!c->accounting_all && c->managed_resources.empty()) {
        return a.Error("managed", "mode managed needs at least one resource name");
      }
      for (const std::string& name : c->managed_resources) {
        if (name != "cpu" && name != "memory" && name != "ephemeral-storage" &&
            !IsScalarResourceName(name)) {
          return a.Error("managed", absl::StrCat("\"", name,
                                                 "\" is not a resource fitledger can account "
                                                 "(cpu, memory, ephemeral-storage, an extended "
                                                 "resource such as example.com/gpu, hugepages-*)"));
        }
      }
      return absl::OkStatus();
    }));
    RETURN_IF_ERROR(f.StringList("ignoredResources", &c->ignored_resources));
    for (const std::string& name : c->ignored_resources) {
      if (!IsQualifiedName(name)) {
        return f.Error("ignoredResources",
                       absl::StrCat("\"", name,
                                    "\" is not a resource name (a qualified name such as "
                                    "example.com/gpu, as NodeResourcesFitArgs requires)"));
      }
    }
    RETURN_IF_ERROR(f.StringList("ignoredResourceGroups", &c->ignored_resource_groups));
    for (const std::string& group : c->ignored_resource_groups) {
      if (absl::StrContains(group, "/")) {
        return f.Error("ignoredResourceGroups",
                       absl::StrCat("\"", group, "\": a resource group name can't contain '/'"));
      }
      if (!IsQualifiedName(group)) {
        return f.Error("ignoredResourceGroups",
                       absl::StrCat("\"", group, "\" is not a resource group (e.g. example.com)"));
      }
    }
    for (const std::string& name : c->managed_resources) {
      if (std::find(c->ignored_resources.begin(), c->ignored_resources.end(), name) !=
              c->ignored_resources.end() ||
          (IsExtendedResourceName(name) &&
           std::find(c->ignored_resource_groups.begin(), c->ignored_resource_groups.end(),
                     name.substr(0, name.find('/'))) != c->ignored_resource_groups.end())) {
        return f.Error(
            "ignoredResources",
            absl::StrCat("\"", name, "\" is both managed (ledger.accounting.managed) and ignored"));
      }
    }
    RETURN_IF_ERROR(f.String("scoring", &c->scoring));
    if (c->scoring != "LeastAllocated" && c->scoring != "MostAllocated") {
      return f.Error("scoring", "must be LeastAllocated or MostAllocated");
    }
    RETURN_IF_ERROR(f.MapList("scoringResources", [&](Fields& r) -> absl::Status {
      ServerConfig::ScoringResource resource;
      RETURN_IF_ERROR(r.String("name", &resource.name));
      if (resource.name != "cpu" && resource.name != "memory" &&
          resource.name != "ephemeral-storage" && !IsScalarResourceName(resource.name)) {
        return r.Error("name", absl::StrCat("\"", resource.name,
                                            "\" is not a resource fitledger can score (cpu, "
                                            "memory, ephemeral-storage, an extended resource, "
                                            "hugepages-*)"));
      }
      // noderesources validation: weights are 1..MaxNodeScore.
      RETURN_IF_ERROR(r.Int("weight", &resource.weight, 1, 100));
      for (const ServerConfig::ScoringResource& other : c->scoring_resources) {
        if (other.name == resource.name) {
          return r.Error("name", absl::StrCat("\"", resource.name, "\" is listed twice"));
        }
      }
      c->scoring_resources.push_back(std::move(resource));
      return absl::OkStatus();
    }));
    RETURN_IF_ERROR(f.Duration("reconcilePeriod", &c->reconcile_period));
    if (c->reconcile_period <= absl::ZeroDuration()) {
      return f.Error("reconcilePeriod", "must be positive");
    }
    RETURN_IF_ERROR(f.Int("filterCacheSize", &c->filter_cache_size, 0, 1000000));
    return f.Duration("assumedReconcileAge", &c->assumed_reconcile_age);
  }));
  RETURN_IF_ERROR(root.Map("leaderElection", [&](Fields& f) -> absl::Status {
    RETURN_IF_ERROR(f.String("leaseName", &c->lease_name));
    RETURN_IF_ERROR(f.String("leaseNamespace", &c->lease_namespace));
    return f.String("identity", &c->leader_identity);
  }));
  RETURN_IF_ERROR(root.Map("log", [&](Fields& f) -> absl::Status {
    RETURN_IF_ERROR(f.String("level", &c->log_level));
    if (c->log_level == "warning") c->log_level = "warn";
    if (c->log_level != "debug" && c->log_level != "info" && c->log_level != "warn" &&
        c->log_level != "error") {
      return f.Error("level", "must be debug, info, warn (or warning) or error");
    }
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerConfig> ParseServerConfig(const std::string& yaml, const std::string& name) {
  ServerConfig c;
  RETURN_IF_ERROR(LoadYamlString(yaml, name, [&](Fields& f) { return Read(f, &c); }));
  return c;
}

absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& file) {
  ServerConfig c;
  RETURN_IF_ERROR(LoadYamlFile(file, [&](Fields& f) { return Read(f, &c); }));
  return c;
}

bool IsLocalAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix://") || absl::StartsWith(address, "unix:")) return true;
  std::string host = address;
  size_t colon = address.rfind(':');
  if (colon != std::string::npos) host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

namespace {

// One listener address of `key`: unix:///path, or host:port that is loopback unless `tls`.
absl::Status CheckListenAddress(absl::string_view key, const std::string& address, bool tls,
                                absl::string_view non_local_advice) {
  if (absl::StartsWith(address, "unix:")) {
    if (!absl::StartsWith(address, "unix:///")) {
      return absl::InvalidArgumentError(absl::StrCat(
          key, ": \"", address, "\": a Unix socket needs an absolute path, unix:///path"));
    }
    return absl::OkStatus();
  }
  size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": \"", address, "\" is neither unix:///path nor host:port"));
  }
  if (!IsLocalAddress(address) && !tls) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": \"", address, "\" is not a loopback address: ", non_local_advice));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateServerConfig(const ServerConfig& c) {
  if (c.grpc_listen.empty()) return absl::InvalidArgumentError("grpc.listen: at least one address");
  for (const std::string& address : c.grpc_listen) {
    RETURN_IF_ERROR(CheckListenAddress("grpc.listen", address, c.grpc_tls.enabled(),
                                       "set grpc.tls.certFile and keyFile (and clientCAFile for "
                                       "mTLS) to listen on it"));
  }
  RETURN_IF_ERROR(ValidateHttpListener(c.webhook, "webhook."));
  if (c.assumed_reconcile_age < 2 * c.bind_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ledger.assumedReconcileAge (", absl::FormatDuration(c.assumed_reconcile_age),
        ") must be at least twice kubernetes.bindTimeout (", absl::FormatDuration(c.bind_timeout),
        "): a binding the client gave up on may still be applied by the API server"));
  }
  if (c.bind_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("kubernetes.bindTimeout must be positive");
  }
  if (c.bind_budget <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("kubernetes.bindBudget must be positive");
  }
  if (!c.lease_name.empty() && c.lease_namespace.empty()) {
    return absl::InvalidArgumentError(
        "leaderElection.leaseNamespace is required with leaderElection.leaseName");
  }
  if (c.lease_name.empty() && !c.lease_namespace.empty()) {
    return absl::InvalidArgumentError(
        "leaderElection.leaseName is required with leaderElection.leaseNamespace");
  }
  if (c.leader_identity.find('_') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leaderElection.identity \"", c.leader_identity,
        "\": give the hostname part of kube-scheduler's identity (\"<hostname>_<uuid>\"), "
        "without \"_\""));
  }
  if (c.grpc_tls.enabled() && c.grpc_tls.key_file.empty()) {
    return absl::InvalidArgumentError("grpc.tls: certFile needs keyFile");
  }
  return absl::OkStatus();
}

}  // namespace fitledger::config
