#include "config/shim_config.h"

#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/yaml_fields.h"

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

absl::Status ValidateShimConfig(const ShimConfig& c) {
  const auto invalid = [](absl::string_view key, const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat("key ", key, ": ", s.message()));
  };
  if (auto hp = ParseHostPort(c.listen); !hp.ok()) return invalid("listen", hp.status());
  if (!c.monitor_listen.empty()) {
    if (auto hp = ParseHostPort(c.monitor_listen); !hp.ok()) {
      return invalid("monitor.listen", hp.status());
    }
  }
  if (!absl::StartsWith(c.prefix, "/") || c.prefix.find_first_of(" ?#\t") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("key prefix: \"", c.prefix, "\" must be a URL path starting with /"));
  }
  if (c.server.empty()) return absl::InvalidArgumentError("key server: must not be empty");
  if (c.server_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("key serverTimeout: must be positive");
  }
  if (c.read_timeout <= absl::ZeroDuration() || c.write_timeout <= absl::ZeroDuration() ||
      c.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "keys readTimeout, writeTimeout, idleTimeout: must be positive");
  }
  if (c.tls.cert_file.empty() != c.tls.key_file.empty()) {
    return absl::InvalidArgumentError("key tls: certFile and keyFile must be set together");
  }
  if (!c.tls.client_ca_file.empty() && c.tls.cert_file.empty()) {
    return absl::InvalidArgumentError("key tls.clientCAFile: needs tls.certFile and tls.keyFile");
  }
  if (c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" &&
      c.log_level != "error") {
    return absl::InvalidArgumentError(absl::StrCat("key log.level: \"", c.log_level,
                                                   "\" must be one of debug, info, warn, error"));
  }
  return absl::OkStatus();
}

namespace {

// Strips trailing slashes, keeping "/" itself.
std::string NormalizePrefix(std::string prefix) {
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  return prefix;
}

absl::Status ReadConfig(Fields& f, ShimConfig* c) {
  RETURN_IF_ERROR(f.String("listen", &c->listen));
  if (auto hp = ParseHostPort(c->listen); !hp.ok()) {
    return f.Error("listen", hp.status().message());
  }
  RETURN_IF_ERROR(f.String("prefix", &c->prefix));
  if (!absl::StartsWith(c->prefix, "/")) return f.Error("prefix", "must start with /");
  c->prefix = NormalizePrefix(std::move(c->prefix));
  RETURN_IF_ERROR(f.String("server", &c->server));
  if (c->server.empty()) return f.Error("server", "must not be empty");
  RETURN_IF_ERROR(f.Duration("serverTimeout", &c->server_timeout));
  if (c->server_timeout <= absl::ZeroDuration()) return f.Error("serverTimeout", "must be > 0");
  RETURN_IF_ERROR(f.Int("maxBodyBytes", &c->max_body_bytes, 1024, int64_t{1} << 30));
  int64_t threads = c->threads;
  RETURN_IF_ERROR(f.Int("threads", &threads, 1, 4096));
  c->threads = static_cast<int>(threads);
  for (auto [key, out] :
       {std::pair{"readTimeout", &c->read_timeout}, std::pair{"writeTimeout", &c->write_timeout},
        std::pair{"idleTimeout", &c->idle_timeout}}) {
    RETURN_IF_ERROR(f.Duration(key, out));
    if (*out <= absl::ZeroDuration()) return f.Error(key, "must be > 0");
  }
  int64_t max_requests = c->keep_alive_max_requests;
  RETURN_IF_ERROR(f.Int("keepAliveMaxRequests", &max_requests, 1, 1 << 30));
  c->keep_alive_max_requests = static_cast<int>(max_requests);
  RETURN_IF_ERROR(f.Map("tls", [c](Fields& t) {
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
  }));
  RETURN_IF_ERROR(f.Map("monitor", [c](Fields& m) {
    RETURN_IF_ERROR(m.String("listen", &c->monitor_listen));
    if (!c->monitor_listen.empty()) {
      if (auto hp = ParseHostPort(c->monitor_listen); !hp.ok()) {
        return m.Error("listen", hp.status().message());
      }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(f.Map("log", [c](Fields& l) {
    RETURN_IF_ERROR(l.String("level", &c->log_level));
    if (c->log_level == "warning") c->log_level = "warn";  // as the server accepts it
    if (c->log_level != "debug" && c->log_level != "info" && c->log_level != "warn" &&
        c->log_level != "error") {
      return l.Error(
          "level", absl::StrCat("\"", c->log_level, "\" must be one of debug, info, warn, error"));
    }
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShimConfig> LoadShimConfig(const std::string& file) {
  ShimConfig config;
  RETURN_IF_ERROR(LoadYamlFile(file, [&](Fields& f) { return ReadConfig(f, &config); }));
  return config;
}

absl::StatusOr<ShimConfig> ParseShimConfig(const std::string& text, const std::string& name) {
  ShimConfig config;
  RETURN_IF_ERROR(LoadYamlString(text, name, [&](Fields& f) { return ReadConfig(f, &config); }));
  return config;
}

}  // namespace fitledger::config
