// The webhook listener's settings, shared by fitledger-server (under `webhook:`) and
// fitledger-shim (at the top level of its file): one set of keys, one reader.
#ifndef FITLEDGER_CONFIG_HTTP_LISTENER_H_
#define FITLEDGER_CONFIG_HTTP_LISTENER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fitledger {
class Fields;  // common/yaml_fields.h
}  // namespace fitledger

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

struct TlsFiles {
  std::string cert_file;       // certFile (PEM)
  std::string key_file;        // keyFile (PEM)
  std::string client_ca_file;  // clientCAFile: set, clients must present a certificate it signed
  bool enabled() const { return !cert_file.empty(); }
};

// A plain value. Field comments give the YAML key; the defaults are the keys' defaults.
struct HttpListenerConfig {
  std::string listen;        // listen: HOST:PORT (port 0: any free port); empty: off
  std::string prefix = "/";  // prefix: the verbs' URL path prefix, without a trailing slash
  int64_t max_body_bytes = 16 << 20;                // maxBodyBytes: larger bodies are answered 413
  int64_t io_threads = 0;                           // ioThreads: the I/O threads; 0 = one per CPU
  int64_t max_connections = 1024;                   // maxConnections: more are closed at accept
  absl::Duration read_timeout = absl::Seconds(5);   // readTimeout: headers, then body
  absl::Duration write_timeout = absl::Seconds(5);  // writeTimeout: each reply
  absl::Duration idle_timeout = absl::Seconds(10);  // idleTimeout: a request's first byte
  absl::Duration handshake_timeout = absl::Seconds(5);  // tlsHandshakeTimeout
  int64_t keep_alive_max_requests = 10000;              // keepAliveMaxRequests
  TlsFiles tls;                                         // tls: HTTPS when certFile is set
};

// Reads the keys above from `f` (the mapping that holds them) into `*c`. The removed key
// `threads` is an error that says what replaced it. InvalidArgument naming key and line.
absl::Status ReadHttpListener(Fields& f, HttpListenerConfig* c);

// Cross-field rules (after flags): listen is HOST:PORT when set, prefix is a path, TLS files
// come in pairs. InvalidArgument naming `key_prefix` + the key ("webhook.listen").
absl::Status ValidateHttpListener(const HttpListenerConfig& c, absl::string_view key_prefix);

}  // namespace fitledger::config

#endif  // FITLEDGER_CONFIG_HTTP_LISTENER_H_
