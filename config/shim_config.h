// Configuration of fitledger-shim, the extender webhook in front of fitledger-server. Loaded
// strictly from YAML (config/shim.yaml is the annotated example); flags may override a few keys.
#ifndef FITLEDGER_CONFIG_SHIM_CONFIG_H_
#define FITLEDGER_CONFIG_SHIM_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fitledger::config {

// A parsed "HOST:PORT" ("127.0.0.1:8888", "[::1]:0", "0.0.0.0:8082"). Port 0 picks a free port.
struct HostPort {
  std::string host;  // without brackets
  int port = 0;
};

// InvalidArgument unless `text` is HOST:PORT with a non-empty host and a port in 0..65535.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text);

// True for "localhost", 127.0.0.0/8 and ::1.
bool IsLoopbackHost(absl::string_view host);

// A plain value; thread-compatible. Field comments give the YAML key and the default.
struct ShimConfig {
  // listen: where kube-scheduler reaches the webhook.
  std::string listen = "127.0.0.1:8888";
  // prefix: the URL path prefix of the verbs ("/" serves /filter; "/fitledger" serves
  // /fitledger/filter). Stored without a trailing slash except for "/" itself.
  std::string prefix = "/";
  // server: fitledger-server's gRPC address, "unix:///path" or "host:port" (plaintext).
  std::string server = "unix:///run/fitledger/server.sock";
  // serverTimeout: the deadline of each gRPC call (kube-scheduler gives the extender 5 s).
  absl::Duration server_timeout = absl::Seconds(4);
  // maxBodyBytes: larger request bodies are answered 413.
  int64_t max_body_bytes = 16 << 20;
  // threads: the most requests handled at once, a worker thread each (a request holds its
  // thread while it waits on the gRPC call). Idle keep-alive connections hold no thread.
  int threads = 64;
  // readTimeout: a request (head and body) must arrive within this of its first byte, else
  // 408. writeTimeout: a reply must be written within this, else the connection closes.
  absl::Duration read_timeout = absl::Seconds(5);
  absl::Duration write_timeout = absl::Seconds(5);
  // idleTimeout: an idle keep-alive connection is closed after this. Shutdown closes idle
  // connections at once.
  absl::Duration idle_timeout = absl::Seconds(10);
  // keepAliveMaxRequests: a connection is closed after this many requests.
  int keep_alive_max_requests = 10000;

  // tls: HTTPS for kube-scheduler's extender tlsConfig. Off when cert_file is empty.
  struct Tls {
    std::string cert_file;       // certFile (PEM)
    std::string key_file;        // keyFile (PEM)
    std::string client_ca_file;  // clientCAFile: when set, clients must present a cert it signed
  } tls;

  // monitor.listen: a second listener for /healthz, /readyz and /metrics; empty = off.
  std::string monitor_listen;

  // log.level: debug | info | warn | error.
  std::string log_level = "info";
};

// Checks the cross-field rules and values (listen addresses, prefix form, tls pairs, log level).
// InvalidArgument naming the key.
absl::Status ValidateShimConfig(const ShimConfig& config);

// Loads `file` on top of the defaults. InvalidArgument "FILE:LINE: key K: ..." for unknown keys,
// wrong types and bad values; NotFound when the file cannot be read.
absl::StatusOr<ShimConfig> LoadShimConfig(const std::string& file);
// The same from YAML text (`name` is used as the file name in messages).
absl::StatusOr<ShimConfig> ParseShimConfig(const std::string& text, const std::string& name);

}  // namespace fitledger::config

#endif  // FITLEDGER_CONFIG_SHIM_CONFIG_H_
