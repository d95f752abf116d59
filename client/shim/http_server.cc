#include "client/shim/http_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/shim/http1.h"
#include "client/shim/json_codec.h"
#include "client/shim/logger.h"
#include "client/shim/metrics.h"
#include "client/shim/webhook.h"

namespace fitledger::shim {
namespace {

// kube-scheduler decodes any JSON reply; the charset is said for curl and browsers.
constexpr char kJson[] = "application/json; charset=utf-8";
constexpr char kText[] = "text/plain; charset=utf-8";

constexpr std::pair<absl::string_view, Verb> kVerbs[] = {
    {"filter", Verb::kFilter},
    {"prioritize", Verb::kPrioritize},
    {"bind", Verb::kBind},
    {"preempt", Verb::kPreempt},
};

void SetJsonError(HttpResponse& res, int status, absl::string_view message) {
  res.status = status;
  res.body.clear();
  EncodeError(message, &res.body);
  res.content_type = kJson;
}

}  // namespace

struct ShimServer::Impl {
  Impl(const config::ShimConfig& config, const Webhook* webhook, Metrics* metrics,
       const Logger* logger)
      : config(config), webhook(webhook), metrics(metrics), logger(logger) {
    const std::string base = config.prefix == "/" ? "" : config.prefix;
    for (const auto& [name, verb] : kVerbs) {
      verb_paths.emplace_back(absl::StrCat(base, "/", name), verb);
    }
  }

  // The verb served at `path`, if any.
  const Verb* VerbAt(absl::string_view path) const {
    for (const auto& [verb_path, verb] : verb_paths) {
      if (path == verb_path) return &verb;
    }
    return nullptr;
  }

  absl::string_view MetricVerb(absl::string_view path) const {
    if (const Verb* verb = VerbAt(path)) return VerbName(*verb);
    if (path == "/healthz") return "healthz";
    if (path == "/readyz") return "readyz";
    return "other";
  }

  void Probe(const HttpRequest& req, HttpResponse& res) const {
    res.content_type = kText;
    if (req.path == "/healthz") {
      res.body = "ok\n";
      return;
    }
    absl::Status ready = webhook->CheckReady();
    if (ready.ok()) {
      res.body = "ok\n";
    } else {
      res.status = 503;
      res.body = absl::StrCat("not ready: ", ready.message(), "\n");
    }
  }

  void NotFound(const HttpRequest& req, HttpResponse& res) const {
    SetJsonError(res, 404,
                 absl::StrCat("no such path \"", req.path, "\": the extender verbs are POST ",
                              verb_paths[0].first, ", ", verb_paths[1].first, ", ",
                              verb_paths[2].first, ", ", verb_paths[3].first));
  }

  // Everything that is not a POST to a verb or a probe.
  void Other(const HttpRequest& req, HttpResponse& res) const {
    if (req.path == "/healthz" || req.path == "/readyz") {
      SetJsonError(
          res, 405,
          absl::StrCat("method ", req.method, " is not allowed on ", req.path, ": use GET"));
      res.headers.emplace_back("Allow", "GET, HEAD");
      return;
    }
    if (VerbAt(req.path) != nullptr) {
      SetJsonError(
          res, 405,
          absl::StrCat("method ", req.method, " is not allowed on ", req.path, ": use POST"));
      res.headers.emplace_back("Allow", "POST");
      return;
    }
    NotFound(req, res);
  }

  static bool IsGet(const HttpRequest& req) { return req.method == "GET" || req.method == "HEAD"; }

  HttpOptions Options(int threads, int64_t max_body) const {
    HttpOptions o;
    o.threads = threads;
    o.max_body_bytes = max_body;
    o.read_timeout = config.read_timeout;
    o.write_timeout = config.write_timeout;
    o.idle_timeout = config.idle_timeout;
    o.keep_alive_max_requests = config.keep_alive_max_requests;
    return o;
  }

  std::unique_ptr<HttpServer> MakeMain() const {
    HttpOptions o = Options(config.threads, config.max_body_bytes);
    o.cert_file = config.tls.cert_file;
    o.key_file = config.tls.key_file;
    o.client_ca_file = config.tls.client_ca_file;
    return std::make_unique<HttpServer>(
        std::move(o),
        HttpDeferringHandler([this](const HttpRequest& req, HttpResponse& res, HttpLater later) {
          if (req.method == "POST") {
            const Verb* verb = VerbAt(req.path);
            if (verb == nullptr) {
              Other(req, res);
              return true;
            }
            // Swapped, not moved: the reply buffers go round and allocate nothing per call.
            auto answer = [&res](Reply& reply) {
              res.status = reply.status;
              res.body.swap(reply.body);
              res.content_type = kJson;
            };
            Reply reply;
            reply.body.swap(res.body);
            if (webhook->HandleLater(*verb, req.body, &reply, [answer, later](Reply& r) {
                  answer(r);
                  later.Finish();
                })) {
              answer(reply);
              return true;
            }
            return false;
          }
          if (IsGet(req) && (req.path == "/healthz" || req.path == "/readyz")) {
            Probe(req, res);
            return true;
          }
          Other(req, res);
          return true;
        }),
        SetJsonError,
        [this](const HttpRequest& req, const HttpResponse& res, absl::Duration elapsed) {
          metrics->ObserveRequest(MetricVerb(req.path), res.status, elapsed);
        });
  }

  std::unique_ptr<HttpServer> MakeMonitor() const {
    return std::make_unique<HttpServer>(
        Options(4, 64 << 10),
        [this](const HttpRequest& req, HttpResponse& res) {
          if (!IsGet(req)) {
            SetJsonError(res, 405, absl::StrCat("method ", req.method, " is not allowed: use GET"));
            res.headers.emplace_back("Allow", "GET");
            return;
          }
          if (req.path == "/healthz" || req.path == "/readyz") return Probe(req, res);
          if (req.path == "/metrics") {
            res.content_type = "text/plain; version=0.0.4; charset=utf-8";
            res.body = metrics->Render();
            return;
          }
          SetJsonError(res, 404,
                       absl::StrCat("no such path \"", req.path,
                                    "\": the monitor serves /healthz, /readyz, /metrics"));
        },
        SetJsonError, nullptr);
  }

  // Starts `server` on `address`; returns the bound port.
  static absl::StatusOr<int> Serve(HttpServer& server, const std::string& key,
                                   const std::string& address) {
    absl::StatusOr<config::HostPort> hp = config::ParseHostPort(address);
    if (!hp.ok()) return absl::InvalidArgumentError(absl::StrCat(key, ": ", hp.status().message()));
    absl::StatusOr<int> port = server.Start(hp->host, hp->port);
    if (!port.ok() && absl::IsUnavailable(port.status())) {
      return absl::UnavailableError(
          absl::StrCat(key, ": cannot listen on ", address, ": ", port.status().message()));
    }
    return port;
  }

  // Constant after construction.
  const config::ShimConfig config;
  const Webhook* const webhook;
  Metrics* const metrics;
  const Logger* const logger;
  std::vector<std::pair<std::string, Verb>> verb_paths;

  // Owned by the thread calling Start / Stop.
  std::unique_ptr<HttpServer> main;
  std::unique_ptr<HttpServer> monitor;
  int main_port = -1;
  int monitor_port = -1;
  std::string host;
};

ShimServer::ShimServer(const config::ShimConfig& config, const Webhook* webhook, Metrics* metrics,
                       const Logger* logger)
    : impl_(std::make_unique<Impl>(config, webhook, metrics, logger)) {}

ShimServer::~ShimServer() { Stop(); }

absl::Status ShimServer::Start() {
  Impl& d = *impl_;
  const config::ShimConfig& c = d.config;
  d.main = d.MakeMain();
  absl::StatusOr<int> port = d.Serve(*d.main, "listen", c.listen);
  if (!port.ok()) {
    if (absl::IsInvalidArgument(port.status()) && !c.tls.cert_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tls: cannot load certFile ", c.tls.cert_file, ", keyFile ", c.tls.key_file,
          c.tls.client_ca_file.empty() ? ""
                                       : absl::StrCat(" or clientCAFile ", c.tls.client_ca_file)));
    }
    return port.status();
  }
  d.main_port = *port;
  d.host = config::ParseHostPort(c.listen)->host;
  if (!config::IsLoopbackHost(d.host) && c.tls.cert_file.empty()) {
    d.logger->Log(LogLevel::kWarn,
                  "listening on a non-loopback address without tls: anyone who can reach it "
                  "can bind pods",
                  {{"listen", c.listen}});
  }
  if (!c.monitor_listen.empty()) {
    d.monitor = d.MakeMonitor();
    port = d.Serve(*d.monitor, "monitor.listen", c.monitor_listen);
    if (!port.ok()) {
      Stop();
      return port.status();
    }
    d.monitor_port = *port;
  }
  return absl::OkStatus();
}

void ShimServer::Stop() {
  Impl& d = *impl_;
  if (d.main != nullptr) d.main->Stop();
  if (d.monitor != nullptr) d.monitor->Stop();
}

int ShimServer::port() const { return impl_->main_port; }
int ShimServer::monitor_port() const { return impl_->monitor_port; }

std::string ShimServer::url() const {
  const std::string& host = impl_->host;
  return absl::StrCat(impl_->config.tls.cert_file.empty() ? "http" : "https", "://",
                      host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host,
                      ":", impl_->main_port);
}

}  // namespace fitledger::shim
