// fitledger-server's configuration: YAML (see config/server.yaml), then command-line overrides.
#ifndef FITLEDGER_CONFIG_SERVER_CONFIG_H_
#define FITLEDGER_CONFIG_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/http_listener.h"

namespace fitledger::config {

struct ServerConfig {
  // Empty: $KUBECONFIG, else in-cluster.
  std::string kubeconfig;
  // One binding POST (or GET of a pod) gives up after this; its outcome is then unknown.
  absl::Duration bind_timeout = absl::Seconds(3);
  // kubernetes.bindThreads: binds (a binding POST each) running at once; more wait in order.
  int64_t bind_threads = 64;
  // The whole Bind verb (reading the pod, settling an earlier unknown outcome, the POST, the
  // follow-up GET) ends within this; each request's timeout is min(bind_timeout, what is left).
  // Below kube-scheduler's extender httpTimeout (5 s by default).
  absl::Duration bind_budget = absl::Seconds(4);
  int64_t list_page_size = 500;
  // kubernetes.contentType: the encoding asked for on the watches of pods and nodes, as
  // kube-scheduler's clientConnection.contentType (default protobuf there too). LIST pages and
  // everything else are JSON.
  std::string content_type = "application/vnd.kubernetes.protobuf";
  // The schedulerName of the pods fitledger places (the profiles of the kube-schedulers that call
  // it): the kubelet-rejection detector counts only their pods. Empty: every pod's.
  std::vector<std::string> scheduler_names = {"fitledger-scheduler"};

  // gRPC listeners: "unix:///path" or "host:port". A TCP address that is not loopback
  // requires TLS.
  std::vector<std::string> grpc_listen = {"unix:///run/fitledger/server.sock"};
  TlsFiles grpc_tls;

  // HTTP /healthz, /readyz, /metrics. Empty: off.
  std::string monitor_listen;

  // kube-scheduler's extender webhook served by the server itself (the webhook library over the
  // extender, in process: no gRPC hop). Empty listen: off (use fitledger-shim).
  HttpListenerConfig webhook;

  bool ledger_enabled = true;
  bool accounting_all = true;
  std::vector<std::string> managed_resources;
  // NodeResourcesFitArgs ignoredResources / ignoredResourceGroups: extended resources Filter
  // does not check (exact names / the part before "/").
  std::vector<std::string> ignored_resources;
  std::vector<std::string> ignored_resource_groups;
  std::string scoring = "LeastAllocated";  // or MostAllocated
  // NodeResourcesFitArgs scoringStrategy.resources. Empty: cpu and memory with weight 1 (accounting
  // all), or each managed resource with weight 1.
  struct ScoringResource {
    std::string name;
    int64_t weight = 1;
  };
  std::vector<ScoringResource> scoring_resources;
  absl::Duration reconcile_period = absl::Seconds(10);
  // Pods whose requests Filter remembers for Bind (0: none; Bind then reads the watch's view or
  // GETs the pod).
  int64_t filter_cache_size = 10000;
  // An unknown bind outcome is only settled after this long: it must exceed the time the API
  // server may still take to apply a binding the client gave up on (at least 2 x bind_timeout).
  absl::Duration assumed_reconcile_age = absl::Seconds(60);

  // The scheduler's leader-election Lease (coordination.k8s.io/v1). Empty lease_name: off, the
  // verbs are answered whenever the view is synced (one replica, the demo). Set: the verbs are
  // answered only while this pod's kube-scheduler holds the Lease, after a consistent re-list of
  // the pods each time it becomes the holder (server/service/leader_fence.h).
  std::string lease_name;
  std::string lease_namespace;
  // kube-scheduler's identity is "<hostname>_<uuid>" (cmd/kube-scheduler/app/options/options.go,
  // makeLeaderElectionConfig). Empty: this host's name (gethostname: in a pod, the pod's hostname,
  // which its containers share).
  std::string leader_identity;

  std::string log_level = "info";
};

// Why grpc.unaryListen (and --grpc-unary-listen) is refused, and what to use instead.
extern const char kUnaryListenRemoved[];

// Reads and validates `file`. InvalidArgument naming the key and line for unknown keys, wrong
// types and bad values; NotFound for a missing file.
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& file);
absl::StatusOr<ServerConfig> ParseServerConfig(const std::string& yaml, const std::string& name);

// Checks cross-field rules (after flags are applied): listeners, TLS for non-loopback, managed
// resource names.
absl::Status ValidateServerConfig(const ServerConfig& config);

// True for "unix:///..." and for TCP addresses on 127.0.0.0/8, [::1] or localhost.
bool IsLocalAddress(const std::string& address);

}  // namespace fitledger::config

#endif  // FITLEDGER_CONFIG_SERVER_CONFIG_H_
