#include "config/http_listener.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"

namespace fitledger::config {

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not HOST:PORT (", why, ")"));
  };
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return bad("missing :PORT");
  absl::string_view host = text.substr(0, colon);
  absl::string_view port_text = text.substr(colon + 1);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  } else if (absl::StrContains(host, ':')) {
    return bad("an IPv6 host needs brackets, e.g. [::1]:8888");
  }
  if (host.empty()) return bad("empty host");
  int port = 0;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    return bad("port must be 0..65535");
  }
  return HostPort{std::string(host), port};
}

bool IsLoopbackHost(absl::string_view host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::Status ReadHttpListener(Fields& f, HttpListenerConfig* c) {
  RETURN_IF_ERROR(f.String("listen", &c->listen));
  if (!c->listen.empty()) {
    if (auto hp = ParseHostPort(c->listen); !hp.ok()) {
      return f.Error("listen", hp.status().message());
    }
  }
  RETURN_IF_ERROR(f.String("prefix", &c->prefix));
  if (!absl::StartsWith(c->prefix, "/") || c->prefix.find_first_of(" ?#\t") != std::string::npos) {
    return f.Error("prefix", "must be a URL path starting with /");
  }
  while (c->prefix.size() > 1 && c->prefix.back() == '/') c->prefix.pop_back();
  RETURN_IF_ERROR(f.Int("maxBodyBytes", &c->max_body_bytes, 1024, int64_t{1} << 30));
  int64_t threads = -1;
  RETURN_IF_ERROR(f.Int("threads", &threads, -1, int64_t{1} << 30));
  if (threads != -1) {
    return f.Error("threads",
                   "was removed: connections no longer hold a thread each; remove the key (the "
                   "webhook runs on ioThreads I/O threads, default one per CPU, and "
                   "maxConnections caps the open connections)");
  }
  RETURN_IF_ERROR(f.Int("ioThreads", &c->io_threads, 0, 256));
  RETURN_IF_ERROR(f.Int("maxConnections", &c->max_connections, 1, 1 << 20));
  for (auto [key, out] :
       {std::pair{"readTimeout", &c->read_timeout}, std::pair{"writeTimeout", &c->write_timeout},
        std::pair{"idleTimeout", &c->idle_timeout},
        std::pair{"tlsHandshakeTimeout", &c->handshake_timeout}}) {
    RETURN_IF_ERROR(f.Duration(key, out));
    if (*out <= absl::ZeroDuration()) return f.Error(key, "must be > 0");
  }
  RETURN_IF_ERROR(f.Int("keepAliveMaxRequests", &c->keep_alive_max_requests, 1, 1 << 30));
  return f.Map("tls", [c](Fields& t) {
    RETURN_IF_ERROR(t.String("certFile", &c->tls.cert_file));
    RETURN_IF_ERROR(t.String("keyFile", &c->tls.key_file));
    RETURN_IF_ERROR(t.String("clientCAFile", &c->tls.client_ca_file));
    if (c->tls.cert_file.empty() != c->tls.key_file.empty()) {
      return t.Error(c->tls.cert_file.empty() ? "certFile" : "keyFile",
                     "certFile and keyFile must be set together");
    }
    if (!c->tls.client_ca_file.empty() && c->tls.cert_file.empty()) {
      return t.Error("clientCAFile", "needs certFile and keyFile");
    }
    return absl::OkStatus();
  });
}

absl::Status ValidateHttpListener(const HttpListenerConfig& c, absl::string_view key_prefix) {
  const auto invalid = [&](absl::string_view key, absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat("key ", key_prefix, key, ": ", message));
  };
  if (!c.listen.empty()) {
    if (auto hp = ParseHostPort(c.listen); !hp.ok())
      return invalid("listen", hp.status().message());
  }
  if (!absl::StartsWith(c.prefix, "/") || c.prefix.find_first_of(" ?#\t") != std::string::npos) {
    return invalid("prefix", absl::StrCat("\"", c.prefix, "\" must be a URL path starting with /"));
  }
  if (c.tls.cert_file.empty() != c.tls.key_file.empty()) {
    return invalid("tls", "certFile and keyFile must be set together");
  }
  if (!c.tls.client_ca_file.empty() && c.tls.cert_file.empty()) {
    return invalid("tls.clientCAFile", "needs tls.certFile and tls.keyFile");
  }
  return absl::OkStatus();
}

}  // namespace fitledger::config
