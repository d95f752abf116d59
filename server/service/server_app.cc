#include "server/service/server_app.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file.h"
#include "common/heap_trim.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/worker_pool.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/kube/api_client.h"
#include "server/kube/binder.h"
#include "server/kube/lease_watcher.h"
#include "server/kube/watcher.h"
#include "server/service/extender_backend.h"
#include "server/service/grpc_services.h"
#include "server/service/leader_fence.h"
#include "server/service/reconciler.h"
#include "webhook/http_server.h"
#include "webhook/listener_options.h"
#include "webhook/metrics.h"
#include "webhook/webhook.h"

namespace fitledger {
namespace {

// The largest request message on the gRPC listeners.
constexpr int kMaxMessageBytes = 64 << 20;

class ServerAppImpl : public ServerApp {
 public:
  explicit ServerAppImpl(config::ServerConfig config, kube::Connection connection)
      : config_(std::move(config)),
        client_(std::move(connection), ApiClientOptionsFor(config_)),
        ledger_(Policy(config_),
                config_.scoring == "MostAllocated" ? ScoringStrategy::kMostAllocated
                                                   : ScoringStrategy::kLeastAllocated,
                ScoringResources(config_)),
        watcher_(&client_, &ledger_, WatcherOptionsFor(config_)),
        binder_(&client_, config_.bind_timeout),
        fence_(MakeFence()),
        lease_watcher_(MakeLeaseWatcher()),
        extender_(
            &ledger_, &binder_, ExtenderOptionsFor(config_), [this] { return watcher_.synced(); },
            fence_.get()),
        reconciler_(&extender_, config_.reconcile_period, config_.assumed_reconcile_age),
        rpc_metrics_(&metrics_),
        bind_pool_("bind", static_cast<int>(config_.bind_threads)),
        backend_(&extender_, &bind_pool_, &rpc_metrics_, [this] { return Ready(); }),
        extender_service_(&backend_),
        introspection_service_(
            &ledger_, config_.ledger_enabled, [this] { return watcher_.synced(); },
            [this] { return watcher_.stats().pods_resource_version; },
            [this] {
              return std::make_pair(watcher_.rejections(), watcher_.stats().rejections_total);
            },
            &rpc_metrics_),
        webhook_metrics_(&metrics_),
        webhook_(config_.webhook.prefix, &backend_, &webhook_metrics_,
                 [this] { return metrics_.Render(); }) {
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
        // The default (/run/fitledger/server.sock) is in a folder a fresh machine lacks.
        const std::filesystem::path folder = std::filesystem::path(path).parent_path();
        std::error_code ec;
        if (!folder.empty() && !std::filesystem::is_directory(folder, ec)) {
          std::filesystem::create_directories(folder, ec);
          if (ec) {
            return absl::FailedPreconditionError(absl::StrCat(
                "grpc.listen ", address, ": cannot create its folder ", folder.string(), ": ",
                ec.message(),
                "; set grpc.listen (or --grpc-listen) to a socket path in a folder this user can "
                "create, e.g. unix:///tmp/fitledger/server.sock"));
          }
        }
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
    bind_pool_.Start();
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
    if (!config_.monitor_listen.empty()) {
      webhook::HttpServerOptions options;
      options.io_threads = 1;
      options.max_body_bytes = 64 << 10;
      absl::StatusOr<int> port =
          Listen(&monitor_, "monitor.listen", config_.monitor_listen, options,
                 [this](webhook::HttpCall call) { webhook_.ServeMonitor(std::move(call)); });
      if (!port.ok()) return port.status();
      monitor_port_ = *port;
    }
    watcher_.Start();
    if (lease_watcher_ != nullptr) {
      lease_watcher_->Start();
      LogInfo("serving only while this pod's kube-scheduler holds the Lease",
              {{"lease", config_.lease_namespace + "/" + config_.lease_name},
               {"identity", fence_->options().identity + "_*"}});
    }
    if (config_.ledger_enabled) reconciler_.Start();
    health_thread_ = std::thread([this] { HealthLoop(); });
    heap_trimmer_.Start();
    if (!config_.webhook.listen.empty()) {
      absl::StatusOr<int> port =
          Listen(&webhook_server_, "webhook.listen", config_.webhook.listen,
                 webhook::ListenerOptions(config_.webhook),
                 [this](webhook::HttpCall call) { webhook_.Serve(std::move(call)); });
      if (!port.ok()) return port.status();
    }
    LogInfo("fitledger-server started",
            {{"grpc", absl::StrJoin(config_.grpc_listen, ",")},
             {"webhook", config_.webhook.listen.empty() ? "off" : config_.webhook.listen},
             {"kubernetes", client_.connection().server},
             {"ledger", config_.ledger_enabled ? "enabled" : "DISABLED (--no-ledger)"}});
    return absl::OkStatus();
  }

  void Shutdown() override {
    if (shut_down_.exchange(true)) return;
    LogInfo("shutting down: finishing in-flight binds");
    // The webhook first: its requests in flight are answered (binds run on the pool), new
    // connections are refused; then gRPC's calls; then the binds still running.
    if (webhook_server_ != nullptr) webhook_server_->Stop();
    extender_.BeginShutdown();
    stop_health_ = true;
    if (health_thread_.joinable()) health_thread_.join();
    SetServing(false);
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
    }
    bind_pool_.Stop();
    heap_trimmer_.Stop();
    extender_.WaitForBinds();
    LogDebug("shutdown: gRPC stopped, binds finished");
    reconciler_.Stop();
    if (lease_watcher_ != nullptr) lease_watcher_->Stop();
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
  int monitor_port() const override { return monitor_port_; }
  int webhook_port() const override {
    return webhook_server_ != nullptr ? webhook_server_->port() : 0;
  }

 private:
  static AccountingPolicy Policy(const config::ServerConfig& c) {
    AccountingPolicy p;
    p.all = c.accounting_all;
    p.managed = c.managed_resources;
    p.ignored_resources = c.ignored_resources;
    p.ignored_resource_groups = c.ignored_resource_groups;
    return p;
  }
  static std::vector<ResourceWeight> ScoringResources(const config::ServerConfig& c) {
    std::vector<ResourceWeight> out;
    for (const auto& r : c.scoring_resources) out.push_back({r.name, r.weight});
    return out;
  }
  static ExtenderOptions ExtenderOptionsFor(const config::ServerConfig& c) {
    ExtenderOptions o;
    o.ledger_enabled = c.ledger_enabled;
    o.settle_unbound_after = c.assumed_reconcile_age;
    o.bind_budget = c.bind_budget;
    o.filter_cache_size = static_cast<size_t>(c.filter_cache_size);
    return o;
  }
  // Every bind thread holds one connection while it binds; the rest (the reconciler's reads, the
  // lists before the watches, the lease) a few more. With fewer kept idle, a burst of binds
  // closed and reopened connections (and paid a TLS handshake each on a real API server).
  static kube::ApiClientOptions ApiClientOptionsFor(const config::ServerConfig& c) {
    kube::ApiClientOptions o;
    o.max_idle_connections = static_cast<size_t>(c.bind_threads) + 8;
    return o;
  }
  static kube::WatcherOptions WatcherOptionsFor(const config::ServerConfig& c) {
    kube::WatcherOptions o;
    o.page_size = c.list_page_size;
    o.protobuf = c.content_type == "application/vnd.kubernetes.protobuf";
    o.scheduler_names = c.scheduler_names;
    return o;
  }

  // The leader fence over leaderElection's Lease; null when no Lease is configured.
  std::unique_ptr<LeaderFence> MakeFence() {
    if (config_.lease_name.empty()) return nullptr;
    std::string identity = config_.leader_identity;
    if (identity.empty()) {
      // kube-scheduler's os.Hostname(): the pod's hostname, which its containers share.
      char host[256] = {0};
      if (gethostname(host, sizeof(host) - 1) == 0) identity = host;
    }
    return std::make_unique<LeaderFence>(
        LeaderFenceOptions{config_.lease_namespace, config_.lease_name, identity,
                           // The previous leader's binds in flight end within the bind budget.
                           config_.bind_budget + absl::Seconds(1)},
        [this](std::function<void(const kube::ConsistentPodList&)> done) {
          watcher_.RequestConsistentPodList(std::move(done));
        },
        [this] { lease_watcher_->Refresh(); });
  }
  std::unique_ptr<kube::LeaseWatcher> MakeLeaseWatcher() {
    if (fence_ == nullptr) return nullptr;
    kube::LeaseWatcherOptions options;
    options.namespace_name = config_.lease_namespace;
    options.name = config_.lease_name;
    return std::make_unique<kube::LeaseWatcher>(
        &client_, options, [this](const std::optional<kube::LeaseRecord>& lease) {
          fence_->OnLease(lease, absl::Now());
        });
  }

  // Whether the verbs can be answered: the view is complete and the server is not stopping.
  // (Not whether this server's scheduler leads: a standby must be ready too, or its
  // kube-scheduler, which starts after the probes pass, would never run for the Lease.)
  absl::Status Ready() const {
    if (shut_down_) return absl::UnavailableError("fitledger-server is shutting down");
    if (!watcher_.synced()) {
      return absl::UnavailableError(
          "fitledger-server has not finished listing the cluster yet (not synced)");
    }
    return absl::OkStatus();
  }

  // Starts `*server` on `address` (HOST:PORT) with `handler`; returns the bound port.
  absl::StatusOr<int> Listen(std::unique_ptr<webhook::HttpServer>* server, absl::string_view key,
                             const std::string& address, webhook::HttpServerOptions options,
                             webhook::HttpHandler handler) {
    absl::StatusOr<config::HostPort> hp = config::ParseHostPort(address);
    if (!hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(key, ": ", hp.status().message()));
    }
    *server = std::make_unique<webhook::HttpServer>(
        std::move(options), std::move(handler), &webhook::Webhook::FormatError,
        [this](const webhook::HttpRequest& request, const webhook::HttpReply& reply,
               absl::Duration elapsed) { webhook_.Observe(request, reply, elapsed); });
    absl::StatusOr<int> port = (*server)->Start(hp->host, hp->port);
    if (!port.ok())
      return absl::Status(port.status().code(), absl::StrCat(key, ": ", port.status().message()));
    return port;
  }

  void SetServing(bool serving) {
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

  void RegisterMetrics() {
    metrics_.Gauge("fitledger_synced", "1 once the first full list of nodes and pods is applied.",
                   {}, [this] {
                     return std::vector<GaugeSample>{{{}, watcher_.synced() ? 1.0 : 0.0}};
                   });
    metrics_.Gauge("fitledger_leader",
                   "1 while this pod's kube-scheduler holds leaderElection's Lease and the pods "
                   "were re-listed since it became the holder (always 0 without a Lease).",
                   {}, [this] {
                     const bool serving = fence_ != nullptr && fence_->stats().serving;
                     return std::vector<GaugeSample>{{{}, serving ? 1.0 : 0.0}};
                   });
    metrics_.Gauge("fitledger_leader_resync_seconds",
                   "How long the last leader resync took: from the Lease showing this pod's "
                   "kube-scheduler as the new holder to a consistent LIST of pods applied (0 "
                   "before the first).",
                   {}, [this] {
                     const double s =
                         fence_ != nullptr ? absl::ToDoubleSeconds(fence_->stats().last_resync) : 0;
                     return std::vector<GaugeSample>{{{}, s}};
                   });
    metrics_.CounterFunc("fitledger_leader_resyncs_total",
                         "Leader resyncs completed (consistent LISTs of pods applied after this "
                         "pod's kube-scheduler became the Lease holder).",
                         {}, [this] {
                           const double n = fence_ != nullptr ? double(fence_->stats().resyncs) : 0;
                           return std::vector<GaugeSample>{{{}, n}};
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
    // One family each, a sample per listener: a family registered twice would be rendered with
    // two HELP and TYPE lines, which Prometheus' text parser (expfmt) refuses.
    const auto per_listener = [this](double (*read)(const webhook::HttpServer&)) {
      return [this, read] {
        std::vector<GaugeSample> samples;
        for (auto [name, server] :
             {std::pair{"webhook", &webhook_server_}, std::pair{"monitor", &monitor_}}) {
          samples.push_back({{name}, *server != nullptr ? read(**server) : 0});
        }
        return samples;
      };
    };
    metrics_.Gauge(
        "fitledger_http_open_connections", "Open connections on the server's HTTP listeners.",
        {"listener"},
        per_listener([](const webhook::HttpServer& s) -> double { return s.open_connections(); }));
    metrics_.CounterFunc("fitledger_http_refused_connections_total",
                         "Connections closed at accept because maxConnections were open.",
                         {"listener"}, per_listener([](const webhook::HttpServer& s) -> double {
                           return s.refused_connections();
                         }));
    metrics_.Gauge("fitledger_filter_cache_entries",
                   "Pods whose requests are remembered from Filter for Bind "
                   "(at most ledger.filterCacheSize).",
                   {}, [this] {
                     return std::vector<GaugeSample>{
                         {{}, static_cast<double>(extender_.filter_cache_entries())}};
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
                               {{"reconcile_forgotten"}, double(c.reconcile_forgotten)},
                               {{"moved"}, double(c.moved)},
                               {{"released_at_relist"}, double(c.released_at_relist)}};
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
                                          {{"decode_errors"}, double(s.decode_errors)},
                                          {{"streams_protobuf"}, double(s.streams_protobuf)},
                                          {{"streams_json"}, double(s.streams_json)}};
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
  // The leader fence and the Lease it reads (leaderElection.leaseName); null without one.
  std::unique_ptr<LeaderFence> fence_;
  std::unique_ptr<kube::LeaseWatcher> lease_watcher_;
  Extender extender_;
  Reconciler reconciler_;
  MetricsRegistry metrics_;
  RpcMetrics rpc_metrics_;
  WorkerPool bind_pool_;
  // The relists' and full-Nodes requests' freed buffers go back to the kernel (common/heap_trim.h).
  HeapTrimmer heap_trimmer_{absl::Seconds(5), size_t{16} << 20};
  ExtenderBackend backend_;
  ExtenderService extender_service_;
  IntrospectionService introspection_service_;
  webhook::Metrics webhook_metrics_;
  webhook::Webhook webhook_;

  std::unique_ptr<grpc::Server> server_;
  grpc::HealthCheckServiceInterface* health_ = nullptr;
  std::vector<int> grpc_ports_;
  std::unique_ptr<webhook::HttpServer> webhook_server_;
  std::unique_ptr<webhook::HttpServer> monitor_;
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
