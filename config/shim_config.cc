#include "config/shim_config.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"

namespace fitledger::config {

absl::Status CheckServerAddress(absl::string_view address) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", address, "\" ", why, ": use unix:///absolute/path or host:port (gRPC, plaintext)"));
  };
  if (address.empty()) return bad("is empty");
  absl::string_view rest = address;
  if (absl::ConsumePrefix(&rest, "unix://")) {
    if (!absl::StartsWith(rest, "/") || rest.size() < 2) return bad("needs an absolute path");
    return absl::OkStatus();
  }
  if (absl::StartsWith(rest, "unix:")) return bad("needs unix:///absolute/path");
  absl::ConsumePrefix(&rest, "dns:///");
  if (absl::StrContains(rest, "://")) return bad("is a URL, not a gRPC target");
  const size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos) return bad("has no port");
  absl::string_view host = rest.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return bad("has an unclosed [");
  }
  int port = 0;
  if (host.empty() || !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return bad("is not host:port with a port in 1..65535");
  }
  return absl::OkStatus();
}

absl::Status ValidateShimConfig(const ShimConfig& c) {
  if (c.webhook.listen.empty()) return absl::InvalidArgumentError("key listen: must not be empty");
  RETURN_IF_ERROR(ValidateHttpListener(c.webhook, ""));
  if (!c.monitor_listen.empty()) {
    if (auto hp = ParseHostPort(c.monitor_listen); !hp.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("key monitor.listen: ", hp.status().message()));
    }
  }
  if (absl::Status s = CheckServerAddress(c.server); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("key server: ", s.message()));
  }
  if (c.server_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("key serverTimeout: must be positive");
  }
  if (c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" &&
      c.log_level != "error") {
    return absl::InvalidArgumentError(absl::StrCat("key log.level: \"", c.log_level,
                                                   "\" must be one of debug, info, warn, error"));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ReadConfig(Fields& f, ShimConfig* c) {
  RETURN_IF_ERROR(ReadHttpListener(f, &c->webhook));
  if (c->webhook.listen.empty()) return f.Error("listen", "must not be empty");
  RETURN_IF_ERROR(f.String("server", &c->server));
  if (absl::Status s = CheckServerAddress(c->server); !s.ok()) {
    return f.Error("server", s.message());
  }
  RETURN_IF_ERROR(f.Duration("serverTimeout", &c->server_timeout));
  if (c->server_timeout <= absl::ZeroDuration()) return f.Error("serverTimeout", "must be > 0");
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
