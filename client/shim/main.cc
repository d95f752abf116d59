// fitledger-shim: kube-scheduler's extender webhook (HTTP/JSON, the webhook library) in front of
// fitledger-server (gRPC). Parses flags, loads the config, serves until SIGTERM / SIGINT, then
// drains and exits 0.
#include <pthread.h>
#include <signal.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/shim/grpc_backend.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/heap_trim.h"
#include "common/log.h"
#include "common/metrics.h"
#include "config/shim_config.h"
#include "webhook/http_server.h"
#include "webhook/listener_options.h"
#include "webhook/metrics.h"
#include "webhook/webhook.h"

ABSL_FLAG(std::string, config, "", "YAML config file (see config/shim.yaml); defaults if empty");
ABSL_FLAG(std::string, listen, "", "override listen: HOST:PORT for the webhook (port 0 = any)");
ABSL_FLAG(std::string, server, "",
          "override server: unix:///path or host:port of fitledger-server (gRPC)");
ABSL_FLAG(std::string, prefix, "",
          "override prefix: URL path prefix of the verbs, e.g. /fitledger");
ABSL_FLAG(std::string, monitor_listen, "",
          "override monitor.listen: HOST:PORT for /healthz, /readyz, /metrics");
ABSL_FLAG(std::string, port_file, "",
          "once serving, write the bound webhook port to this file (atomically)");

namespace fitledger::shim {
namespace {

int Run(int argc, char** argv) {
  ParseFlags(argc, argv,
             "fitledger-shim --config FILE [--listen HOST:PORT] [--server ADDR] [--prefix /path] "
             "[--monitor-listen HOST:PORT] [--port-file PATH]",
             "shim/main.cc");

  config::ShimConfig config;
  if (const std::string file = absl::GetFlag(FLAGS_config); !file.empty()) {
    absl::StatusOr<config::ShimConfig> loaded = config::LoadShimConfig(file);
    if (!loaded.ok()) {
      LogError("fitledger-shim: bad config", {{"error", loaded.status().ToString()}});
      return 2;
    }
    config = *std::move(loaded);
  }
  if (auto v = absl::GetFlag(FLAGS_listen); !v.empty()) config.webhook.listen = v;
  if (auto v = absl::GetFlag(FLAGS_server); !v.empty()) config.server = v;
  if (auto v = absl::GetFlag(FLAGS_prefix); !v.empty()) {
    while (v.size() > 1 && v.back() == '/') v.pop_back();
    config.webhook.prefix = v;
  }
  if (auto v = absl::GetFlag(FLAGS_monitor_listen); !v.empty()) config.monitor_listen = v;
  if (absl::Status s = config::ValidateShimConfig(config); !s.ok()) {
    LogError("fitledger-shim: bad config", {{"error", std::string(s.message())}});
    return 2;
  }
  SetLogLevel(config.log_level);

  // Block the stop signals in every thread; the main thread waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  RaiseOpenFileLimit();
  KeepFreedMemoryForReuse();  // the HeapTrimmer below gives it back
  // Abseil checks every absl::Mutex acquisition (gRPC's, here) for lock-order cycles unless built
  // with NDEBUG, and Debian's libabsl is not: that bookkeeping, under one global lock, is a
  // measurable share of each call (docs/performance.md). fitledger-server turns it off too.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  MetricsRegistry registry;
  webhook::Metrics metrics(&registry);
  GrpcBackend backend(config.server, DialServer(config.server),
                      GrpcBackend::Options{.timeout = config.server_timeout});
  const webhook::Webhook hook(config.webhook.prefix, &backend, &metrics,
                              [&registry] { return registry.Render(); });
  auto observe = [&hook](const webhook::HttpRequest& request, const webhook::HttpReply& reply,
                         absl::Duration elapsed) { hook.Observe(request, reply, elapsed); };

  webhook::HttpServer server(
      webhook::ListenerOptions(config.webhook),
      [&hook](webhook::HttpCall call) { hook.Serve(std::move(call)); },
      &webhook::Webhook::FormatError, observe);
  const config::HostPort listen = *config::ParseHostPort(config.webhook.listen);
  absl::StatusOr<int> port = server.Start(listen.host, listen.port);
  if (!port.ok()) {
    LogError("fitledger-shim: cannot serve",
             {{"listen", config.webhook.listen}, {"error", std::string(port.status().message())}});
    return absl::IsInvalidArgument(port.status()) ? 2 : 1;
  }
  if (!config::IsLoopbackHost(listen.host) && !config.webhook.tls.enabled()) {
    LogWarn(
        "fitledger-shim: listening on a non-loopback address without tls: anyone who can "
        "reach it can bind pods",
        {{"listen", config.webhook.listen}});
  }
  std::unique_ptr<webhook::HttpServer> monitor;
  int monitor_port = -1;
  if (!config.monitor_listen.empty()) {
    webhook::HttpServerOptions options;
    options.io_threads = 1;
    options.max_body_bytes = 64 << 10;
    monitor = std::make_unique<webhook::HttpServer>(
        options, [&hook](webhook::HttpCall call) { hook.ServeMonitor(std::move(call)); },
        &webhook::Webhook::FormatError, observe);
    const config::HostPort hp = *config::ParseHostPort(config.monitor_listen);
    absl::StatusOr<int> bound = monitor->Start(hp.host, hp.port);
    if (!bound.ok()) {
      LogError(
          "fitledger-shim: cannot serve the monitor",
          {{"listen", config.monitor_listen}, {"error", std::string(bound.status().message())}});
      return 1;
    }
    monitor_port = *bound;
  }
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    if (!WriteFileAtomically(path, absl::StrCat(*port, "\n")).ok()) {
      LogError("fitledger-shim: cannot write the port file", {{"path", path}});
      return 1;
    }
  }
  const std::string url =
      absl::StrCat(server.tls() ? "https" : "http", "://",
                   listen.host.find(':') != std::string::npos ? absl::StrCat("[", listen.host, "]")
                                                              : listen.host,
                   ":", *port);
  std::printf("fitledger-shim listening on %s\n", url.c_str());
  std::fflush(stdout);
  LogInfo("fitledger-shim serving",
          {{"url", url},
           {"prefix", config.webhook.prefix},
           {"server", config.server},
           {"monitor", config.monitor_listen.empty()
                           ? std::string("off")
                           : absl::StrCat(config.monitor_listen, " (port ", monitor_port, ")")}});

  // Full-Nodes requests' freed buffers go back to the kernel (common/heap_trim.h).
  HeapTrimmer heap_trimmer(absl::Seconds(5), size_t{16} << 20);
  heap_trimmer.Start();

  int signal = 0;
  sigwait(&stop_signals, &signal);
  LogInfo("fitledger-shim stopping: draining requests in flight",
          {{"signal", signal == SIGTERM ? "SIGTERM" : "SIGINT"}});
  server.Stop();  // the replies still due come from gRPC's threads; the backend is still here
  if (monitor != nullptr) monitor->Stop();
  LogInfo("fitledger-shim stopped");
  // Every request is answered: exit without tearing the gRPC channel down. Its teardown at exit
  // once aborted the process in gRPC core ("ref_counted.h:183 assertion failed: prior > 0", a
  // chart test's SIGTERM of an idle shim over TLS, 2026-12-07), a signal instead of exit code 0.
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace
}  // namespace fitledger::shim

int main(int argc, char** argv) { return fitledger::shim::Run(argc, argv); }
