// fitledger-server: parse flags, load config, wire, serve, wait for SIGTERM.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/heap_trim.h"
#include "common/log.h"
#include "config/server_config.h"
#include "server/service/server_app.h"

ABSL_FLAG(std::string, config, "", "YAML configuration file (see config/server.yaml)");
ABSL_FLAG(std::string, kubeconfig, "",
          "kubeconfig to reach the Kubernetes API (default: config, then $KUBECONFIG, then "
          "in-cluster)");
ABSL_FLAG(std::vector<std::string>, grpc_listen, {},
          "gRPC listen addresses, comma-separated: unix:///path or host:port (overrides "
          "grpc.listen)");
ABSL_FLAG(std::string, monitor_listen, "",
          "HTTP host:port for /healthz, /readyz, /metrics (overrides monitor.listen)");
ABSL_FLAG(std::string, webhook_listen, "",
          "serve kube-scheduler's extender webhook on this HOST:PORT in the server itself, "
          "without fitledger-shim (overrides webhook.listen)");
ABSL_FLAG(bool, no_ledger, false,
          "decide from the watch alone, never assume (demonstrates the burst overcommit)");
ABSL_FLAG(std::string, log_level, "", "debug, info, warn or error (overrides log.level)");
ABSL_FLAG(std::string, leader_identity, "",
          "the hostname part of this pod's kube-scheduler identity \"<hostname>_<uuid>\" in the "
          "Lease (overrides leaderElection.identity; default: this host's name)");
ABSL_FLAG(std::string, ready_file, "",
          "once listening, write {\"grpc_ports\":[..],\"monitor_port\":N,\"webhook_port\":N} "
          "to this file");

int main(int argc, char** argv) {
  // Debian's absl is built without NDEBUG, so absl::Mutex checks lock order on every Lock. Only
  // gRPC's internals lock an absl::Mutex here (fitledger's own locks are std), and the check
  // costs CPU on every gRPC call (docs/performance.md).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // A removed flag gets its own answer rather than abseil's "unknown flag" (and stays out of
  // --help).
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    for (absl::string_view removed : {"--grpc-unary-listen", "--grpc_unary_listen"}) {
      if (arg == removed || absl::StartsWith(arg, absl::StrCat(removed, "="))) {
        fprintf(stderr, "fitledger-server: --grpc-unary-listen %s\n",
                fitledger::config::kUnaryListenRemoved);
        return 2;
      }
    }
  }
  fitledger::ParseFlags(
      argc, argv,
      "fitledger-server: the assumed-pod ledger behind kube-scheduler's extender.\n"
      "Usage: fitledger-server [--config FILE] [--kubeconfig PATH] [--grpc-listen ADDR] "
      "[--monitor-listen HOST:PORT] [--webhook-listen HOST:PORT] [--no-ledger] "
      "[--log-level LEVEL] [--leader-identity HOSTNAME] [--ready-file PATH]\n"
      "Without --config, every key has its default (config/server.yaml lists them).",
      "server/main.cc");

  fitledger::config::ServerConfig config;
  if (!absl::GetFlag(FLAGS_config).empty()) {
    absl::StatusOr<fitledger::config::ServerConfig> loaded =
        fitledger::config::LoadServerConfig(absl::GetFlag(FLAGS_config));
    if (!loaded.ok()) {
      fprintf(stderr, "fitledger-server: %s\n", std::string(loaded.status().message()).c_str());
      return 2;
    }
    config = *loaded;
  }
  if (!absl::GetFlag(FLAGS_kubeconfig).empty()) config.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
  if (!absl::GetFlag(FLAGS_grpc_listen).empty())
    config.grpc_listen = absl::GetFlag(FLAGS_grpc_listen);
  if (!absl::GetFlag(FLAGS_monitor_listen).empty()) {
    config.monitor_listen = absl::GetFlag(FLAGS_monitor_listen);
  }
  if (!absl::GetFlag(FLAGS_webhook_listen).empty()) {
    config.webhook.listen = absl::GetFlag(FLAGS_webhook_listen);
  }
  if (absl::GetFlag(FLAGS_no_ledger)) config.ledger_enabled = false;
  if (const std::string level = absl::GetFlag(FLAGS_log_level); !level.empty()) {
    // Checked as the config's log.level is (common/log ParseLogLevel).
    if (absl::Status valid = fitledger::ParseLogLevel(level).status(); !valid.ok()) {
      fprintf(stderr, "fitledger-server: --log-level: %s\n", std::string(valid.message()).c_str());
      return 2;
    }
    config.log_level = level == "warning" ? "warn" : level;
  }
  if (!absl::GetFlag(FLAGS_leader_identity).empty()) {
    config.leader_identity = absl::GetFlag(FLAGS_leader_identity);
  }

  // Block the stop signals in every thread; main waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  fitledger::RaiseOpenFileLimit();
  fitledger::KeepFreedMemoryForReuse();  // the app's HeapTrimmer gives it back

  absl::StatusOr<std::unique_ptr<fitledger::ServerApp>> app = fitledger::ServerApp::Create(config);
  if (!app.ok()) {
    fprintf(stderr, "fitledger-server: %s\n", std::string(app.status().message()).c_str());
    return 2;
  }
  absl::Status started = (*app)->Start();
  if (!started.ok()) {
    fprintf(stderr, "fitledger-server: %s\n", std::string(started.message()).c_str());
    return 1;
  }
  std::string ports = absl::StrJoin((*app)->grpc_ports(), ",");
  printf("fitledger-server listening on %s (tcp ports: [%s], monitor port: %d, webhook port: %d)\n",
         absl::StrJoin(config.grpc_listen, ",").c_str(), ports.c_str(), (*app)->monitor_port(),
         (*app)->webhook_port());
  fflush(stdout);
  if (!absl::GetFlag(FLAGS_ready_file).empty()) {
    absl::Status written = fitledger::WriteFileAtomically(
        absl::GetFlag(FLAGS_ready_file),
        absl::StrCat("{\"grpc_ports\":[", ports, "],\"monitor_port\":", (*app)->monitor_port(),
                     ",\"webhook_port\":", (*app)->webhook_port(), "}\n"));
    if (!written.ok()) {
      fprintf(stderr, "fitledger-server: --ready-file: %s\n",
              std::string(written.message()).c_str());
      return 1;
    }
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  fprintf(stderr, "fitledger-server: signal %d, shutting down\n", signal_number);
  (*app)->Shutdown();
  return 0;
}
