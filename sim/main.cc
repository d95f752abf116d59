// fitledger-sim: a simulated Kubernetes API server with a simulated kubelet (sim/README.md).
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file.h"
#include "common/flags.h"
#include "sim/admit_command.h"
#include "sim/config.h"
#include "sim/kubeconfig.h"
#include "sim/server.h"
#include "sim/store.h"

ABSL_FLAG(std::string, config, "", "YAML config: nodes, watchLag, kubelet, generate, tls, token");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "HOST:PORT to serve on; port 0 picks a free port");
ABSL_FLAG(bool, allow_non_loopback, false, "Allow --listen on a non-loopback address");
ABSL_FLAG(std::string, kubeconfig_out, "",
          "Write a kubeconfig for the served address here (atomically) once serving");
ABSL_FLAG(std::string, watch_lag, "", "Override the config's watchLag (e.g. 2s, 500ms)");

namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int Fail(const std::string& message) {
  std::cerr << "fitledger-sim: " << message << std::endl;
  return 1;
}

// `fitledger-sim admit`: reads the input on stdin, writes the verdicts on stdout.
int Admit() {
  std::ostringstream input;
  input << std::cin.rdbuf();
  absl::StatusOr<std::string> output = fitledger::sim::RunAdmitCommand(input.str());
  if (!output.ok()) return Fail(absl::StrCat("admit: ", output.status().message()));
  std::cout << *output << std::flush;
  return std::cout ? 0 : Fail("admit: cannot write the output");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = fitledger::ParseFlags(
      argc, argv,
      "A simulated Kubernetes API server (core/v1 pods, nodes, binding, watch) with a simulated "
      "kubelet, for fitledger tests and demos.\n"
      "Usage: fitledger-sim [--config FILE] [--listen HOST:PORT] [--kubeconfig-out PATH] "
      "[--watch-lag DURATION] [--allow-non-loopback]\n"
      "       fitledger-sim admit < INPUT.json  (the simulated kubelet's admission of pods on one "
      "node: {\"node\": ..., \"devices\": {...}, \"pods\": [...]} in, a verdict per pod out)\n"
      "Admin API, config keys and the admit command: sim/README.md",
      "sim/main.cc");
  if (args.size() == 2 && absl::string_view(args[1]) == "admit") return Admit();
  if (args.size() > 1) {
    return Fail(absl::StrCat("unexpected argument \"", args[1],
                             "\"; the only command is \"admit\" (see --help)"));
  }

  // Block the shutdown signals before any thread starts; main waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  fitledger::sim::SimConfig config;
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    auto loaded = fitledger::sim::LoadSimConfigFile(path);
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    config = *std::move(loaded);
  }
  if (const std::string lag = absl::GetFlag(FLAGS_watch_lag); !lag.empty()) {
    auto parsed = fitledger::ParseDuration(lag);
    if (!parsed.ok()) return Fail(absl::StrCat("--watch-lag: ", parsed.status().message()));
    config.watch_lag = *parsed;
  }
  const std::string listen = absl::GetFlag(FLAGS_listen);
  const size_t colon = listen.rfind(':');
  int port = -1;
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return Fail(absl::StrCat("--listen wants HOST:PORT, got \"", listen, "\""));
  }
  if (!IsLoopback(host) && !absl::GetFlag(FLAGS_allow_non_loopback)) {
    return Fail(absl::StrCat("refusing to listen on non-loopback address ", host,
                             " (pass --allow-non-loopback)"));
  }

  fitledger::sim::ClusterStore store(
      {.event_window = config.event_window, .event_ttl = config.event_ttl});
  for (const auto& node : config.nodes) {
    if (absl::Status s = store.AddNode(node); !s.ok()) return Fail(std::string(s.message()));
  }
  if (absl::Status s = store.Generate(config.generate); !s.ok()) {
    return Fail(absl::StrCat("generate: ", s.message()));
  }
  fitledger::sim::SimServer server(config, &store);
  if (absl::Status s = server.Start(host, port); !s.ok()) return Fail(std::string(s.message()));

  std::cout << "fitledger-sim listening on " << server.url() << std::endl;
  if (!config.token.empty() && !config.tls.enabled()) {
    // client-go reads a kubeconfig's credentials only over TLS (tools/clientcmd/client_config.go
    // ClientConfig), so kubectl would send no token and get 401.
    std::cerr << "fitledger-sim: note: a token over http:// is not sent by kubectl (it reads a "
                 "kubeconfig's credentials only over TLS); configure tls: for kubectl "
                 "(sim/README.md)"
              << std::endl;
  }
  if (const std::string out = absl::GetFlag(FLAGS_kubeconfig_out); !out.empty()) {
    absl::Status s =
        fitledger::WriteFileAtomically(out, fitledger::sim::KubeconfigYaml(server.url(), config));
    if (!s.ok()) return Fail(std::string(s.message()));
  }

  int received = 0;
  sigwait(&signals, &received);
  // Idle keep-alive connections can hold the HTTP server's threads for a couple of seconds
  // after it stops; do not make the caller wait for them.
  std::thread stopper([&server] {
    server.Stop();
    std::_Exit(0);
  });
  stopper.detach();
  absl::SleepFor(absl::Seconds(3));
  std::_Exit(0);
}
