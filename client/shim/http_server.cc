#include "client/shim/http_server.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "client/shim/json_codec.h"
#include "client/shim/logger.h"
#include "client/shim/metrics.h"
#include "client/shim/webhook.h"
#include "httplib.h"

namespace fitledger::shim {
namespace {

// Not "application/json" exactly: cpp-httplib gzips that content type whenever the client
// accepts gzip (Go's transport always does), which costs more than the whole request.
constexpr char kJson[] = "application/json; charset=utf-8";
constexpr char kText[] = "text/plain; charset=utf-8";

constexpr std::pair<absl::string_view, Verb> kVerbs[] = {
    {"filter", Verb::kFilter},
    {"prioritize", Verb::kPrioritize},
    {"bind", Verb::kBind},
    {"preempt", Verb::kPreempt},
};

void SetJsonError(httplib::Response& res, int status, absl::string_view message) {
  res.status = status;
  res.body.clear();
  EncodeError(message, &res.body);
  res.set_header("Content-Type", kJson);
}

// When the current request started (set before its body is read), per pool thread.
thread_local absl::Time request_start = absl::InfinitePast();

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

  void Probe(const httplib::Request& req, httplib::Response& res) const {
    if (req.path == "/healthz") {
      res.set_content("ok\n", kText);
      return;
    }
    absl::Status ready = webhook->CheckReady();
    if (ready.ok()) {
      res.set_content("ok\n", kText);
    } else {
      res.status = 503;
      res.set_content(absl::StrCat("not ready: ", ready.message(), "\n"), kText);
    }
  }

  void NotFound(const httplib::Request& req, httplib::Response& res) const {
    SetJsonError(res, 404,
                 absl::StrCat("no such path \"", req.path, "\": the extender verbs are POST ",
                              verb_paths[0].first, ", ", verb_paths[1].first, ", ",
                              verb_paths[2].first, ", ", verb_paths[3].first));
  }

  // Everything that is not a POST to a verb or a probe.
  void Other(const httplib::Request& req, httplib::Response& res) const {
    if (VerbAt(req.path) != nullptr) {
      SetJsonError(
          res, 405,
          absl::StrCat("method ", req.method, " is not allowed on ", req.path, ": use POST"));
      res.set_header("Allow", "POST");
      return;
    }
    NotFound(req, res);
  }

  void Configure(httplib::Server& server, int threads) const {
    server.set_tcp_nodelay(true);
    server.set_keep_alive_max_count(static_cast<size_t>(config.keep_alive_max_requests));
    server.set_keep_alive_timeout(
        static_cast<time_t>(std::max(1.0, std::ceil(absl::ToDoubleSeconds(config.idle_timeout)))));
    const auto micros = [](absl::Duration d) { return absl::ToInt64Microseconds(d); };
    server.set_read_timeout(micros(config.read_timeout) / 1000000,
                            micros(config.read_timeout) % 1000000);
    server.set_write_timeout(micros(config.write_timeout) / 1000000,
                             micros(config.write_timeout) % 1000000);
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          SetJsonError(res, 500, "internal error");
        });
  }

  void SetUpMain(httplib::Server& server) const {
    Configure(server, config.threads);
    server.set_payload_max_length(static_cast<size_t>(config.max_body_bytes));
    server.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
      request_start = absl::Now();
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      const Verb* verb = VerbAt(req.path);
      if (verb == nullptr) return NotFound(req, res);
      Reply reply;
      webhook->Handle(*verb, req.body, &reply);
      res.status = reply.status;
      res.body = std::move(reply.body);
      res.set_header("Content-Type", kJson);
    });
    server.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/healthz" || req.path == "/readyz") return Probe(req, res);
      Other(req, res);
    });
    const auto other = [this](const httplib::Request& req, httplib::Response& res) {
      Other(req, res);
    };
    server.Put(".*", other);
    server.Patch(".*", other);
    server.Delete(".*", other);
    server.Options(".*", other);
    // Errors cpp-httplib produces itself (413, malformed HTTP, unknown methods) get a JSON body
    // too; replies that already have one pass through.
    const int64_t max_body = config.max_body_bytes;
    server.set_error_handler(httplib::Server::HandlerWithResponse(
        [max_body](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          // cpp-httplib refuses a form-encoded body over 8 KiB (its compiled-in
          // CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) before any handler runs, after its
          // maxBodyBytes check passed. kube-scheduler sends JSON; `curl --data-binary` without
          // -H sends this type.
          constexpr int64_t kFormLimit = 8192;
          int64_t length = -1;
          if (!absl::SimpleAtoi(req.get_header_value("Content-Length"), &length)) length = -1;
          if (res.status == 413 &&
              absl::StartsWith(req.get_header_value("Content-Type"),
                               "application/x-www-form-urlencoded") &&
              length > kFormLimit && length <= max_body) {
            SetJsonError(res, 413,
                         absl::StrCat("request body sent as application/x-www-form-urlencoded, "
                                      "which is refused over ",
                                      kFormLimit,
                                      " bytes: send it with Content-Type: application/json (as "
                                      "kube-scheduler does)"));
          } else if (res.status == 413) {
            SetJsonError(res, 413,
                         absl::StrCat("request body too large: the limit (maxBodyBytes) is ",
                                      max_body, " bytes"));
          } else if (res.status == 400) {
            SetJsonError(res, 400,
                         absl::StrCat("malformed HTTP request (method \"", req.method,
                                      "\", path \"", req.path, "\")"));
          } else {
            SetJsonError(res, res.status, absl::StrCat("HTTP ", res.status));
          }
          return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      const absl::Time now = absl::Now();
      const absl::Duration elapsed =
          request_start == absl::InfinitePast() ? absl::ZeroDuration() : now - request_start;
      request_start = absl::InfinitePast();
      metrics->ObserveRequest(MetricVerb(req.path), res.status, elapsed);
    });
  }

  void SetUpMonitor(httplib::Server& server) const {
    Configure(server, 4);
    server.set_payload_max_length(64 << 10);
    server.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/healthz" || req.path == "/readyz") return Probe(req, res);
      if (req.path == "/metrics") {
        res.set_content(metrics->Render(), "text/plain; version=0.0.4; charset=utf-8");
        return;
      }
      SetJsonError(res, 404,
                   absl::StrCat("no such path \"", req.path,
                                "\": the monitor serves /healthz, /readyz, /metrics"));
    });
  }

  // Binds `server` to `address` and serves it on `thread`; returns the bound port.
  absl::StatusOr<int> Serve(httplib::Server& server, const std::string& key,
                            const std::string& address, std::thread* thread,
                            std::atomic<bool>* done) {
    absl::StatusOr<config::HostPort> hp = config::ParseHostPort(address);
    if (!hp.ok()) return absl::InvalidArgumentError(absl::StrCat(key, ": ", hp.status().message()));
    int port = hp->port;
    if (port == 0) {
      port = server.bind_to_any_port(hp->host);
    } else if (!server.bind_to_port(hp->host, port)) {
      port = -1;
    }
    if (port <= 0) {
      return absl::UnavailableError(absl::StrCat(key, ": cannot listen on ", address));
    }
    *thread = std::thread([&server, done] {
      server.listen_after_bind();
      done->store(true);
    });
    // stop() only takes effect once the accept loop runs, so wait for it.
    while (!server.is_running() && !done->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (done->load()) return absl::UnavailableError(absl::StrCat(key, ": cannot serve ", address));
    return port;
  }

  // Constant after construction.
  const config::ShimConfig config;
  const Webhook* const webhook;
  Metrics* const metrics;
  const Logger* const logger;
  std::vector<std::pair<std::string, Verb>> verb_paths;

  // Owned by the thread calling Start / Stop.
  std::unique_ptr<httplib::Server> main;
  std::unique_ptr<httplib::Server> monitor;
  std::thread main_thread;
  std::thread monitor_thread;
  std::atomic<bool> main_done{false};
  std::atomic<bool> monitor_done{false};
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
  if (!c.tls.cert_file.empty()) {
    d.main = std::make_unique<httplib::SSLServer>(
        c.tls.cert_file.c_str(), c.tls.key_file.c_str(),
        c.tls.client_ca_file.empty() ? nullptr : c.tls.client_ca_file.c_str());
    if (!d.main->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tls: cannot load certFile ", c.tls.cert_file, ", keyFile ", c.tls.key_file,
          c.tls.client_ca_file.empty() ? ""
                                       : absl::StrCat(" or clientCAFile ", c.tls.client_ca_file)));
    }
  } else {
    d.main = std::make_unique<httplib::Server>();
  }
  d.SetUpMain(*d.main);
  absl::StatusOr<int> port = d.Serve(*d.main, "listen", c.listen, &d.main_thread, &d.main_done);
  if (!port.ok()) return port.status();
  d.main_port = *port;
  d.host = config::ParseHostPort(c.listen)->host;
  if (!config::IsLoopbackHost(d.host) && c.tls.cert_file.empty()) {
    d.logger->Log(LogLevel::kWarn,
                  "listening on a non-loopback address without tls: anyone who can reach it "
                  "can bind pods",
                  {{"listen", c.listen}});
  }
  if (!c.monitor_listen.empty()) {
    d.monitor = std::make_unique<httplib::Server>();
    d.SetUpMonitor(*d.monitor);
    port =
        d.Serve(*d.monitor, "monitor.listen", c.monitor_listen, &d.monitor_thread, &d.monitor_done);
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
  if (d.main != nullptr) d.main->stop();
  if (d.monitor != nullptr) d.monitor->stop();
  if (d.main_thread.joinable()) d.main_thread.join();
  if (d.monitor_thread.joinable()) d.monitor_thread.join();
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
