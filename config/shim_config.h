// Configuration of fitledger-shim, the extender webhook in front of fitledger-server. Loaded
// strictly from YAML (config/shim.yaml is the annotated example); flags may override a few keys.
#ifndef FITLEDGER_CONFIG_SHIM_CONFIG_H_
#define FITLEDGER_CONFIG_SHIM_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/http_listener.h"

namespace fitledger::config {

// A plain value; thread-compatible. Field comments give the YAML key and the default.
struct ShimConfig {
  // The webhook listener: listen, prefix, maxBodyBytes, ioThreads, maxConnections, readTimeout,
  // writeTimeout, idleTimeout, tlsHandshakeTimeout, keepAliveMaxRequests, tls (top-level keys).
  HttpListenerConfig webhook = [] {
    HttpListenerConfig c;
    c.listen = "127.0.0.1:8888";
    return c;
  }();
  // server: fitledger-server's gRPC address, "unix:///path" or "host:port" (plaintext).
  std::string server = "unix:///run/fitledger/server.sock";
  // serverTimeout: the deadline of each gRPC call (kube-scheduler gives the extender 5 s).
  absl::Duration server_timeout = absl::Seconds(4);
  // monitor.listen: a second listener for /healthz, /readyz and /metrics; empty = off.
  std::string monitor_listen;
  // log.level: debug | info | warn | error.
  std::string log_level = "info";
};

// Checks the cross-field rules and values (listen addresses, prefix form, tls pairs, the server
// address, log level). InvalidArgument naming the key.
absl::Status ValidateShimConfig(const ShimConfig& config);

// InvalidArgument unless `address` is a gRPC target the shim can dial: "unix:///absolute/path"
// or "host:port".
absl::Status CheckServerAddress(absl::string_view address);

// Loads `file` on top of the defaults. InvalidArgument "FILE:LINE: key K: ..." for unknown keys,
// wrong types and bad values; NotFound when the file cannot be read.
absl::StatusOr<ShimConfig> LoadShimConfig(const std::string& file);
// The same from YAML text (`name` is used as the file name in messages).
absl::StatusOr<ShimConfig> ParseShimConfig(const std::string& text, const std::string& name);

}  // namespace fitledger::config

#endif  // FITLEDGER_CONFIG_SHIM_CONFIG_H_
