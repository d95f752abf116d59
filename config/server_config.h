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
  absl::Duration bind_timeout = absl::Seconds(3);
  // kubernetes.bindThreads: binds (a binding POST each) running at once; more wait in order.
  int64_t bind_threads = 64;
  int64_t list_page_size = 500;

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
  std::string scoring = "LeastAllocated";  // or MostAllocated
  absl::Duration reconcile_period = absl::Seconds(10);
  // An unknown bind outcome is only settled after this long: it must exceed the time the API
  // server may still take to apply a binding the client gave up on (at least 2 x bind_timeout).
  absl::Duration assumed_reconcile_age = absl::Seconds(60);

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
