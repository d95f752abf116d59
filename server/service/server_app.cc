#include "server/service/server_app.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/shim/http1.h"
#include "client/shim/http_server.h"
#include "client/shim/logger.h"
#include "client/shim/metrics.h"
#include "client/shim/webhook.h"
#include "common/log.h"
#include "common/metrics.h"
#include "config/shim_config.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/kube/api_client.h"
#include "server/kube/binder.h"
#include "server/kube/watcher.h"
#include "server/service/extender_wire.h"
#include "server/service/grpc_h2_server.h"
#include "server/service/grpc_services.h"
#include "server/service/reconciler.h"

namespace fitledger {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The webhook's Extender stub, answered in process by the ExtenderService: no serialization,
// no socket, no thread hand-off.
class InProcessExtender final : public shim::SyncExtenderStub {
 public:
  explicit InProcessExtender(ExtenderService* service) : service_(service) {}
  grpc::Status Filter(grpc::ClientContext*, const v1::ExtenderArgs& request,
                      v1::ExtenderFilterResult* response) override {
    return service_->DoFilter(&request, response);
  }
  grpc::Status Prioritize(grpc::ClientContext*, const v1::ExtenderArgs& request,
                          v1::HostPriorityList* response) override {
    return service_->DoPrioritize(&request, response);
  }
  grpc::Status Bind(grpc::ClientContext*, const v1::ExtenderBindingArgs& request,
                    v1::ExtenderBindingResult* response) override {
    return service_->Bind(nullptr, &request, response);
  }
  grpc::Status Preempt(grpc::ClientContext*, const v1::ExtenderPreemptionArgs& request,
                       v1::ExtenderPreemptionResult* response) override {
    return service_->Preempt(nullptr, &request, response);
  }

 private:
  ExtenderService* const service_;
};

// The largest request message, on both listeners.
constexpr int kMaxMessageBytes = 64 << 20;

// A unary method for the own HTTP/2 listener: parse, run `call` (the gRPC service's own code),
// serialize.
template <typename Request, typename Reply, typename Call>
GrpcUnaryMethod Unary(Call call) {
  return [call](absl::string_view bytes, std::string* out) -> absl::Status {
    Request request;
    Reply reply;
    if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot parse ", Request::descriptor()->full_name()));
    }
    absl::Status status = FromGrpcStatus(call(&request, &reply));
    if (status.ok()) reply.SerializeToString(out);
    return status;
  };
}

// Filter and Prioritize: as Unary, on messages each connection thread keeps and reuses (as the
// gRPC server's MessagePool does), unless a call was large: a thread keeps at most ~5,000
// candidates' worth (a few hundred KB), however many connections are open.
constexpr int kThreadPooledCandidateNames = 5000;
constexpr size_t kThreadPooledPodBytes = 1 << 20;
template <typename Reply, typename Call>
GrpcUnaryMethod PooledUnary(Call call) {
  return [call](absl::string_view bytes, std::string* out) -> absl::Status {
    thread_local v1::ExtenderArgs request;
    thread_local Reply reply;
    reply.Clear();
    absl::Status status;
    if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      status = absl::InvalidArgumentError("cannot parse fitledger.v1.ExtenderArgs");
    } else {
      status = FromGrpcStatus(call(&request, &reply));
      if (status.ok()) reply.SerializeToString(out);
    }
    if (!ExtenderService::KeepPooled(request) ||
        request.node_names_size() > kThreadPooledCandidateNames) {
      request = v1::ExtenderArgs();
      reply = Reply();
    }
    return status;
  };
}

// Filter and Prioritize: a request of the usual shape (a pod and candidate names) is read in
// place and answered as bytes, with no request or reply message (extender_wire.h); any other
// goes to `pooled`. The pod message and the names' vector stay with the thread unless they grew
// large, whichever way the call went (a request the reader gave up on may have grown them).
template <typename InPlace>
GrpcUnaryMethod InPlaceOrPooled(InPlace in_place, GrpcUnaryMethod pooled) {
  return [in_place, pooled](absl::string_view bytes, std::string* out) -> absl::Status {
    thread_local v1::Pod pod;
    thread_local std::vector<absl::string_view> names;
    absl::Cleanup trim = [bytes] {
      if (names.capacity() > kThreadPooledCandidateNames) names = {};
      names.clear();  // views into `bytes`
      if (bytes.size() > kThreadPooledPodBytes && pod.ByteSizeLong() > kThreadPooledPodBytes) {
        pod = v1::Pod();
      }
    };
    bool by_index = false;
    if (!ReadExtenderArgs(bytes, &pod, &names, &by_index)) return pooled(bytes, out);
    return FromGrpcStatus(in_place(pod, absl::Span<const absl::string_view>(names), by_index, out));
  };
}

class ServerAppImpl : public ServerApp {
 public:
  explicit ServerAppImpl(config::ServerConfig config, kube::Connection connection)
      : config_(std::move(config)),
        client_(std::move(connection)),
        ledger_(Policy(config_), config_.scoring == "MostAllocated"
                                     ? ScoringStrategy::kMostAllocated
                                     : ScoringStrategy::kLeastAllocated),
        watcher_(&client_, &ledger_, WatcherOptionsFor(config_)),
        binder_(&client_, config_.bind_timeout),
        extender_(&ledger_, &binder_, ExtenderOptionsFor(config_),
                  [this] { return watcher_.synced(); }),
        reconciler_(&extender_, config_.reconcile_period, config_.assumed_reconcile_age),
        rpc_metrics_(&metrics_),
        extender_service_(&extender_, &rpc_metrics_),
        introspection_service_(
            &ledger_, config_.ledger_enabled, [this] { return watcher_.synced(); },
            [this] { return watcher_.stats().pods_resource_version; },
            [this] {
              return std::make_pair(watcher_.rejections(), watcher_.stats().rejections_total);
            },
            &rpc_metrics_) {
    RegisterMetrics();
  }

  ~ServerAppImpl() override { Shutdown(); }

  absl::Status Start() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    // gRPC's built-in health service has no protobuf descriptor of its own; linking the
    // generated grpc.health.v1 messages puts health.proto in the pool reflection serves, so
    // grpcurl and reflection clients can call grpc.health.v1.Health/Check.
    (void)grpc::health::v1::HealthCheckRequest::descriptor();
    grpc::ServerBuilder builder;
    grpc_ports_.assign(config_.grpc_listen.size(), 0);
    std::shared_ptr<grpc::ServerCredentials> tls;
    if (config_.grpc_tls.enabled()) {
      grpc::SslServerCredentialsOptions options(
          config_.grpc_tls.client_ca_file.empty()
              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      absl::StatusOr<std::string> cert = ReadFile(config_.grpc_tls.cert_file);
      absl::StatusOr<std::string> key = ReadFile(config_.grpc_tls.key_file);
      if (!cert.ok()) return cert.status();
      if (!key.ok()) return key.status();
      options.pem_key_cert_pairs.push_back({*key, *cert});
      if (!config_.grpc_tls.client_ca_file.empty()) {
        absl::StatusOr<std::string> ca = ReadFile(config_.grpc_tls.client_ca_file);
        if (!ca.ok()) return ca.status();
        options.pem_root_certs = *ca;
      }
      tls = grpc::SslServerCredentials(options);
    }
    for (size_t i = 0; i < config_.grpc_listen.size(); ++i) {
      const std::string& address = config_.grpc_listen[i];
      if (absl::StartsWith(address, "unix://")) {
        std::string path = address.substr(strlen("unix://"));
        unlink(path.c_str());  // a stale socket from a previous run
        builder.AddListeningPort(address, grpc::InsecureServerCredentials());
      } else {
        // TLS on every TCP listener when configured; loopback may be plaintext.
        builder.AddListeningPort(address, tls ? tls : grpc::InsecureServerCredentials(),
                                 &grpc_ports_[i]);
      }
    }
    builder.RegisterService(&extender_service_);
    builder.RegisterService(&introspection_service_);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", absl::StrJoin(config_.grpc_listen, ", ")));
    }
    for (size_t i = 0; i < config_.grpc_listen.size(); ++i) {
      if (!absl::StartsWith(config_.grpc_listen[i], "unix://") && grpc_ports_[i] == 0) {
        return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.grpc_listen[i]));
      }
    }
    health_ = server_->GetHealthCheckService();
    SetServing(false);
    absl::Status unary = StartUnary();  // before the monitor, whose /metrics reads it
    if (!unary.ok()) return unary;
    absl::Status monitor = StartMonitor();
    if (!monitor.ok()) return monitor;
    watcher_.Start();
    if (config_.ledger_enabled) reconciler_.Start();
    health_thread_ = std::thread([this] { HealthLoop(); });
    absl::Status webhook = StartWebhook();
    if (!webhook.ok()) return webhook;
    LogInfo("fitledger-server started",
            {{"grpc", absl::StrJoin(config_.grpc_listen, ",")},
             {"kubernetes", client_.connection().server},
             {"ledger", config_.ledger_enabled ? "enabled" : "DISABLED (--no-ledger)"}});
    return absl::OkStatus();
  }

  void Shutdown() override {
    if (shut_down_.exchange(true)) return;
    LogInfo("shutting down: finishing in-flight binds");
    if (webhook_server_ != nullptr) webhook_server_->Stop();
    extender_.BeginShutdown();
    stop_health_ = true;
    if (health_thread_.joinable()) health_thread_.join();
    SetServing(false);
    // Each unary connection finishes its call (a bind: bounded by the bind timeout); then gRPC's.
    if (unary_server_ != nullptr) unary_server_->Stop();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
    }
    extender_.WaitForBinds();
    LogDebug("shutdown: gRPC stopped, binds finished");
    reconciler_.Stop();
    watcher_.Stop();
    LogDebug("shutdown: watcher stopped");
    if (monitor_ != nullptr) monitor_->Stop();
    for (const std::string& address : config_.grpc_listen) {
      if (absl::StartsWith(address, "unix://")) unlink(address.substr(strlen("unix://")).c_str());
    }
  }

  std::vector<int> grpc_ports() const override {
    std::vector<int> out;
    for (size_t i = 0; i < config_.grpc_listen.size(); ++i) {
      if (!absl::StartsWith(config_.grpc_listen[i], "unix://")) out.push_back(grpc_ports_[i]);
    }
    return out;
  }
  std::vector<int> unary_ports() const override { return unary_ports_; }
  int monitor_port() const override { return monitor_port_; }
  int webhook_port() const override {
    return webhook_server_ != nullptr ? webhook_server_->port() : 0;
  }

 private:
  static AccountingPolicy Policy(const config::ServerConfig& c) {
    AccountingPolicy p;
    p.all = c.accounting_all;
    p.managed = c.managed_resources;
    return p;
  }
  static ExtenderOptions ExtenderOptionsFor(const config::ServerConfig& c) {
    ExtenderOptions o;
    o.ledger_enabled = c.ledger_enabled;
    o.settle_unbound_after = c.assumed_reconcile_age;
    return o;
  }
  static kube::WatcherOptions WatcherOptionsFor(const config::ServerConfig& c) {
    kube::WatcherOptions o;
    o.page_size = c.list_page_size;
    return o;
  }

  void SetServing(bool serving) {
    serving_ = serving;
    if (health_ == nullptr) return;
    health_->SetServingStatus(serving);
    health_->SetServingStatus("fitledger.v1.Extender", serving);
    health_->SetServingStatus("fitledger.v1.Introspection", serving);
  }

  void HealthLoop() {
    bool serving = false;
    while (!stop_health_) {
      bool synced = watcher_.synced();
      if (synced != serving) {
        serving = synced;
        SetServing(serving);
        if (serving) LogInfo("synced: the view is complete, serving");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // grpc.unaryListen: the Extender and Introspection methods and Health/Check on the own
  // HTTP/2 server, running the same service code as the gRPC server.
  absl::Status StartUnary() {
    if (config_.grpc_unary_listen.empty()) return absl::OkStatus();
    using grpc::health::v1::HealthCheckRequest;
    using grpc::health::v1::HealthCheckResponse;
    ExtenderService* extender = &extender_service_;
    IntrospectionService* introspection = &introspection_service_;
    std::vector<std::pair<std::string, GrpcUnaryMethod>> methods = {
        {"/fitledger.v1.Extender/Filter",
         InPlaceOrPooled(
             [extender](const v1::Pod& pod, auto names, bool by_index, std::string* out) {
               return extender->FilterToWire(pod, names, by_index, out);
             },
             PooledUnary<v1::ExtenderFilterResult>([extender](auto* request, auto* reply) {
               return extender->DoFilter(request, reply);
             }))},
        {"/fitledger.v1.Extender/Prioritize",
         InPlaceOrPooled(
             [extender](const v1::Pod& pod, auto names, bool /*by_index: Filter's*/,
                        std::string* out) { return extender->PrioritizeToWire(pod, names, out); },
             PooledUnary<v1::HostPriorityList>([extender](auto* request, auto* reply) {
               return extender->DoPrioritize(request, reply);
             }))},
        {"/fitledger.v1.Extender/Bind", Unary<v1::ExtenderBindingArgs, v1::ExtenderBindingResult>(
                                            [extender](auto* request, auto* reply) {
                                              return extender->Bind(nullptr, request, reply);
                                            })},
        {"/fitledger.v1.Extender/Preempt",
         Unary<v1::ExtenderPreemptionArgs, v1::ExtenderPreemptionResult>(
             [extender](auto* request, auto* reply) {
               return extender->Preempt(nullptr, request, reply);
             })},
        {"/fitledger.v1.Introspection/ListNodes",
         Unary<v1::ListNodesRequest, v1::ListNodesResponse>(
             [introspection](auto* request, auto* reply) {
               return introspection->ListNodes(nullptr, request, reply);
             })},
        {"/fitledger.v1.Introspection/ListAssumed",
         Unary<v1::ListAssumedRequest, v1::ListAssumedResponse>(
             [introspection](auto* request, auto* reply) {
               return introspection->ListAssumed(nullptr, request, reply);
             })},
        {"/fitledger.v1.Introspection/Explain", Unary<v1::ExplainRequest, v1::ExplainResponse>(
                                                    [introspection](auto* request, auto* reply) {
                                                      return introspection->Explain(nullptr,
                                                                                    request, reply);
                                                    })},
        {"/fitledger.v1.Introspection/ListRejections",
         Unary<v1::ListRejectionsRequest, v1::ListRejectionsResponse>(
             [introspection](auto* request, auto* reply) {
               return introspection->ListRejections(nullptr, request, reply);
             })},
        // As gRPC's default health service answers on grpc.listen.
        {"/grpc.health.v1.Health/Check",
         Unary<HealthCheckRequest, HealthCheckResponse>(
             [this](const HealthCheckRequest* request, HealthCheckResponse* reply) {
               const std::string& service = request->service();
               if (!service.empty() && service != "fitledger.v1.Extender" &&
                   service != "fitledger.v1.Introspection") {
                 return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
               }
               reply->set_status(serving_ ? HealthCheckResponse::SERVING
                                          : HealthCheckResponse::NOT_SERVING);
               return grpc::Status::OK;
             })},
    };
    GrpcH2ServerOptions options;
    options.max_message_bytes = kMaxMessageBytes;  // as on grpc.listen
    unary_server_ = std::make_unique<GrpcH2Server>(options, std::move(methods));
    for (const std::string& address : config_.grpc_unary_listen) {
      absl::StatusOr<int> port = unary_server_->Listen(address);
      if (!port.ok()) return port.status();
      if (!absl::StartsWith(address, "unix://")) unary_ports_.push_back(*port);
    }
    return absl::OkStatus();
  }

  // kube-scheduler's webhook on this process: the shim's HTTP server and codec over the
  // ExtenderService, in process.
  absl::Status StartWebhook() {
    if (config_.webhook.listen.empty()) return absl::OkStatus();
    config::ShimConfig shim;
    shim.listen = config_.webhook.listen;
    shim.prefix = config_.webhook.prefix;
    shim.server = "unix:///in-process";  // unused: the stub below answers in process
    shim.max_body_bytes = config_.webhook.max_body_bytes;
    shim.threads = static_cast<int>(config_.webhook.threads);
    shim.tls.cert_file = config_.webhook.tls.cert_file;
    shim.tls.key_file = config_.webhook.tls.key_file;
    shim.tls.client_ca_file = config_.webhook.tls.client_ca_file;
    shim.monitor_listen.clear();
    shim.log_level = config_.log_level;
    absl::Status valid = config::ValidateShimConfig(shim);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("webhook: ", valid.message()));
    }
    webhook_ = std::make_unique<shim::Webhook>(
        std::make_unique<InProcessExtender>(&extender_service_),
        grpc::health::v1::Health::NewStub(server_->InProcessChannel(grpc::ChannelArguments())),
        shim::Webhook::Options{}, &webhook_metrics_, &webhook_logger_);
    webhook_server_ = std::make_unique<shim::ShimServer>(shim, webhook_.get(), &webhook_metrics_,
                                                         &webhook_logger_);
    return webhook_server_->Start();
  }

  absl::Status StartMonitor() {
    if (config_.monitor_listen.empty()) return absl::OkStatus();
    size_t colon = config_.monitor_listen.rfind(':');
    int port = -1;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(config_.monitor_listen.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("monitor.listen: \"", config_.monitor_listen, "\" is not host:port"));
    }
    std::string host = config_.monitor_listen.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    shim::HttpOptions options;
    options.threads = 4;
    options.max_body_bytes = 64 << 10;
    monitor_ = std::make_unique<shim::HttpServer>(
        options,
        [this](const shim::HttpRequest& req, shim::HttpResponse& res) {
          res.content_type = "text/plain; charset=utf-8";
          const bool known =
              req.path == "/healthz" || req.path == "/readyz" || req.path == "/metrics";
          if (!known) {
            res.status = 404;
            res.body = absl::StrCat("no such path \"", req.path,
                                    "\": the monitor serves /healthz, /readyz, /metrics\n");
          } else if (req.method != "GET" && req.method != "HEAD") {
            res.status = 405;
            res.body = absl::StrCat("method ", req.method, " is not allowed: use GET\n");
            res.headers.emplace_back("Allow", "GET, HEAD");
          } else if (req.path == "/healthz") {
            res.body = "ok\n";
          } else if (req.path == "/readyz") {
            const bool ready = watcher_.synced() && !shut_down_;
            res.status = ready ? 200 : 503;
            res.body = ready ? "ok\n" : "not synced\n";
          } else {
            res.content_type = "text/plain; version=0.0.4; charset=utf-8";
            res.body = metrics_.Render();
            if (webhook_server_ != nullptr) res.body += webhook_metrics_.Render();
          }
        },
        [](shim::HttpResponse& res, int status, absl::string_view message) {
          res.status = status;
          res.content_type = "text/plain; charset=utf-8";
          res.body = absl::StrCat(message, "\n");
        },
        nullptr);
    absl::StatusOr<int> bound = monitor_->Start(host, port);
    if (!bound.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.monitor_listen, ": ",
                                                 bound.status().message()));
    }
    monitor_port_ = *bound;
    return absl::OkStatus();
  }

  void RegisterMetrics() {
    metrics_.Gauge("fitledger_synced", "1 once the first full list of nodes and pods is applied.",
                   {}, [this] {
                     return std::vector<GaugeSample>{{{}, watcher_.synced() ? 1.0 : 0.0}};
                   });
    metrics_.Gauge(
        "fitledger_assumed_pods", "Pods bound by fitledger not yet seen by the watch.", {}, [this] {
          return std::vector<GaugeSample>{{{}, static_cast<double>(ledger_.Assumed().size())}};
        });
    metrics_.Gauge("fitledger_oldest_assumption_age_seconds",
                   "Age of the oldest assumed pod (0 when none).", {}, [this] {
                     std::vector<AssumedPod> all = ledger_.Assumed();
                     double age = all.empty()
                                      ? 0
                                      : absl::ToDoubleSeconds(absl::Now() - all.front().assumed_at);
                     return std::vector<GaugeSample>{{{}, age}};
                   });
    metrics_.Gauge("fitledger_server_unary_connections",
                   "Open connections on grpc.unaryListen (fitledger-shim keeps one per call in "
                   "flight, and idle ones for reuse).",
                   {}, [this] {
                     const double open =
                         unary_server_ != nullptr ? unary_server_->connections() : 0;
                     return std::vector<GaugeSample>{{{}, open}};
                   });
    metrics_.Gauge(
        "fitledger_counted_pods", "Pods counted on nodes (assumed + confirmed).", {}, [this] {
          return std::vector<GaugeSample>{{{}, static_cast<double>(ledger_.pod_count())}};
        });
    metrics_.CounterFunc("fitledger_ledger_transitions_total",
                         "Ledger transitions since start, by kind.", {"kind"}, [this] {
                           LedgerCounters c = ledger_.counters();
                           return std::vector<GaugeSample>{
                               {{"assumed"}, double(c.assumed)},
                               {{"confirmed"}, double(c.confirmed)},
                               {{"forgotten"}, double(c.forgotten)},
                               {{"assume_rejected"}, double(c.assume_rejected)},
                               {{"reconcile_confirmed"}, double(c.reconcile_confirmed)},
                               {{"reconcile_forgotten"}, double(c.reconcile_forgotten)}};
                         });
    metrics_.CounterFunc("fitledger_bind_outcomes_total", "Bind outcomes since start, by reason.",
                         {"reason"}, [this] {
                           std::vector<GaugeSample> out;
                           for (const auto& [reason, n] : extender_.bind_counters().outcomes) {
                             out.push_back({{reason}, double(n)});
                           }
                           return out;
                         });
    metrics_.CounterFunc(
        "fitledger_watch_total", "Watch activity since start, by kind.", {"kind"}, [this] {
          kube::WatcherStats s = watcher_.stats();
          return std::vector<GaugeSample>{{{"lists"}, double(s.lists)},
                                          {{"watch_lists"}, double(s.watch_lists)},
                                          {{"relists_gone"}, double(s.relists_gone)},
                                          {{"watch_restarts"}, double(s.watch_restarts)},
                                          {{"events"}, double(s.events)},
                                          {{"bookmarks"}, double(s.bookmarks)},
                                          {{"decode_errors"}, double(s.decode_errors)}};
        });
    metrics_.Gauge(
        "fitledger_seconds_since_last_watch_event",
        "Seconds since the last watch event or bookmark (-1 before the first).", {}, [this] {
          absl::Time last = watcher_.stats().last_event;
          double v = last == absl::Time() ? -1 : absl::ToDoubleSeconds(absl::Now() - last);
          return std::vector<GaugeSample>{{{}, v}};
        });
    metrics_.CounterFunc(
        "fitledger_kubelet_rejections_total",
        "Pods the kubelet rejected (phase Failed, reason OutOf*) seen by the watch, "
        "by reason and node. Alert on any increase.",
        {"reason", "node"}, [this] {
          std::vector<GaugeSample> out;
          for (const auto& [key, n] : watcher_.stats().rejections_by_reason_node) {
            out.push_back({{key.first, key.second}, double(n)});
          }
          return out;
        });
    metrics_.Gauge("fitledger_node_resource",
                   "Per node and resource: allocatable, confirmed, assumed "
                   "(cpu in millicores, the rest in units).",
                   {"node", "resource", "kind"}, [this] {
                     std::vector<GaugeSample> out;
                     for (const NodeSummary& n : ledger_.Nodes()) {
                       for (const char* r : {"cpu", "memory", "pods"}) {
                         if (!ledger_.policy().all && !ledger_.policy().Accounts(r)) continue;
                         out.push_back({{n.name, r, "allocatable"}, double(n.allocatable.Get(r))});
                         out.push_back({{n.name, r, "confirmed"}, double(n.confirmed.Get(r))});
                         out.push_back({{n.name, r, "assumed"}, double(n.assumed.Get(r))});
                       }
                       for (const std::string& r : ledger_.policy().managed) {
                         out.push_back({{n.name, r, "allocatable"}, double(n.allocatable.Get(r))});
                         out.push_back({{n.name, r, "confirmed"}, double(n.confirmed.Get(r))});
                         out.push_back({{n.name, r, "assumed"}, double(n.assumed.Get(r))});
                       }
                     }
                     return out;
                   });
  }

  const config::ServerConfig config_;
  kube::ApiClient client_;
  Ledger ledger_;
  kube::Watcher watcher_;
  kube::ApiBinder binder_;
  Extender extender_;
  Reconciler reconciler_;
  MetricsRegistry metrics_;
  RpcMetrics rpc_metrics_;
  ExtenderService extender_service_;
  IntrospectionService introspection_service_;

  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcH2Server> unary_server_;
  std::vector<int> unary_ports_;
  std::atomic<bool> serving_{false};
  shim::Metrics webhook_metrics_;
  const shim::Logger webhook_logger_{shim::LogLevel::kWarn};
  std::unique_ptr<shim::Webhook> webhook_;
  std::unique_ptr<shim::ShimServer> webhook_server_;
  grpc::HealthCheckServiceInterface* health_ = nullptr;
  std::vector<int> grpc_ports_;
  std::unique_ptr<shim::HttpServer> monitor_;
  int monitor_port_ = 0;
  std::thread health_thread_;
  std::atomic<bool> stop_health_{false};
  std::atomic<bool> shut_down_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<ServerApp>> ServerApp::Create(const config::ServerConfig& config) {
  absl::Status valid = config::ValidateServerConfig(config);
  if (!valid.ok()) return valid;
  SetLogLevel(config.log_level);
  absl::StatusOr<kube::Connection> connection = kube::ResolveConnection(config.kubeconfig);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<ServerApp>(new ServerAppImpl(config, *std::move(connection)));
}

}  // namespace fitledger
