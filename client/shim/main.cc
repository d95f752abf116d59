// fitledger-shim: kube-scheduler's extender webhook (HTTP/JSON) in front of fitledger-server
// (gRPC). Parses flags, loads the config, serves until SIGTERM / SIGINT, then drains and exits 0.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/shim/grpc_h2.h"
#include "client/shim/http_server.h"
#include "client/shim/logger.h"
#include "client/shim/metrics.h"
#include "client/shim/webhook.h"
#include "common/flags.h"
#include "config/shim_config.h"

ABSL_FLAG(std::string, config, "", "YAML config file (see config/shim.yaml); defaults if empty");
ABSL_FLAG(std::string, listen, "", "override listen: HOST:PORT for the webhook (port 0 = any)");
ABSL_FLAG(std::string, server, "",
          "override server: unix:///path or host:port of fitledger-server");
ABSL_FLAG(std::string, prefix, "",
          "override prefix: URL path prefix of the verbs, e.g. /fitledger");
ABSL_FLAG(
    std::string, monitor_listen, "",
    "(also --monitor-listen) override monitor.listen: HOST:PORT for /healthz, /readyz, /metrics");
ABSL_FLAG(
    std::string, port_file, "",
    "(also --port-file) once serving, write the bound webhook port to this file (atomically)");

namespace fitledger::shim {
namespace {

// Writes `port` to `path` through a temporary file and a rename, so readers never see a
// partial file.
bool WritePortFile(const std::string& path, int port) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

int Run(int argc, char** argv) {
  ParseFlags(argc, argv,
             "fitledger-shim --config FILE [--listen HOST:PORT] [--server ADDR] [--prefix /path] "
             "[--monitor-listen HOST:PORT] [--port-file PATH]",
             "shim/main.cc");

  Logger boot_logger(LogLevel::kInfo);
  config::ShimConfig config;
  if (const std::string file = absl::GetFlag(FLAGS_config); !file.empty()) {
    absl::StatusOr<config::ShimConfig> loaded = config::LoadShimConfig(file);
    if (!loaded.ok()) {
      boot_logger.Log(LogLevel::kError, "bad config", {{"error", loaded.status().ToString()}});
      return 2;
    }
    config = *std::move(loaded);
  }
  if (auto v = absl::GetFlag(FLAGS_listen); !v.empty()) config.listen = v;
  if (auto v = absl::GetFlag(FLAGS_server); !v.empty()) config.server = v;
  if (auto v = absl::GetFlag(FLAGS_prefix); !v.empty()) {
    while (v.size() > 1 && v.back() == '/') v.pop_back();
    config.prefix = v;
  }
  if (auto v = absl::GetFlag(FLAGS_monitor_listen); !v.empty()) config.monitor_listen = v;
  if (absl::Status s = config::ValidateShimConfig(config); !s.ok()) {
    boot_logger.Log(LogLevel::kError, "bad config", {{"error", s.message()}});
    return 2;
  }
  if (absl::Status s = GrpcH2Client::CheckTarget(config.server); !s.ok()) {
    boot_logger.Log(LogLevel::kError, "bad config",
                    {{"error", absl::StrCat("key server: ", s.message())}});
    return 2;
  }

  // Block the stop signals in every thread; the main thread waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  const Logger logger(*ParseLogLevel(config.log_level));
  Metrics metrics;
  // fitledger-server is called through the shim's own unary gRPC clients: Filter and Prioritize
  // multiplexed on a few connections, no thread waiting for a reply (grpc_h2_mux.h); the rest,
  // and those two while no multiplexed connection is up, on a connection per call in flight
  // (grpc_h2.h).
  auto client = std::make_shared<GrpcH2Client>(config.server);
  GrpcH2MuxClient::Options mux_options;
  mux_options.connections = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 4);
  auto mux = std::make_shared<GrpcH2MuxClient>(config.server, mux_options);
  mux->Start();
  Webhook webhook(std::make_unique<H2ExtenderStub>(client, mux),
                  std::make_unique<H2HealthStub>(client, mux),
                  Webhook::Options{.server_timeout = config.server_timeout}, &metrics, &logger);
  ShimServer server(config, &webhook, &metrics, &logger);
  if (absl::Status s = server.Start(); !s.ok()) {
    logger.Log(LogLevel::kError, "cannot serve", {{"error", s.ToString()}});
    return 1;
  }
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    if (!WritePortFile(path, server.port())) {
      logger.Log(LogLevel::kError, "cannot write the port file", {{"path", path}});
      return 1;
    }
  }
  std::printf("fitledger-shim listening on %s\n", server.url().c_str());
  std::fflush(stdout);
  logger.Log(
      LogLevel::kInfo, "serving",
      {{"url", server.url()},
       {"prefix", config.prefix},
       {"server", config.server},
       {"monitor", config.monitor_listen.empty() ? std::string("off")
                                                 : absl::StrCat(config.monitor_listen, " (port ",
                                                                server.monitor_port(), ")")}});

  int signal = 0;
  sigwait(&stop_signals, &signal);
  logger.Log(LogLevel::kInfo, "stopping: draining in-flight requests",
             {{"signal", signal == SIGTERM ? "SIGTERM" : "SIGINT"}});
  server.Stop();  // waits for the replies still due from the multiplexed calls
  mux->Stop();
  logger.Log(LogLevel::kInfo, "stopped");
  return 0;
}

}  // namespace
}  // namespace fitledger::shim

int main(int argc, char** argv) { return fitledger::shim::Run(argc, argv); }
