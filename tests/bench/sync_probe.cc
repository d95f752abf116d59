// sync_probe: how long a freshly started fitledger-server takes to list the cluster and report
// SERVING, and its memory. Used by tests/perf/run.sh, which starts the server itself:
//
//   start_ns=$(date +%s%N); fitledger-server ... --ready-file F & pid=$!
//   sync_probe --pid $pid --ready_file F --start_ns $start_ns
//
// Polls grpc.health.v1 Check("") every 5 ms on the server's first TCP port (from the ready
// file), then waits `--settle_seconds` and reads /proc/PID/status: VmHWM (the kernel's peak
// RSS, so the sync's peak is caught without sampling) and VmRSS. Prints one SYNC_JSON line.
#include <time.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int, pid, 0, "fitledger-server's pid");
ABSL_FLAG(std::string, ready_file, "", "the server's --ready-file");
ABSL_FLAG(int64_t, start_ns, 0, "when the server was started (date +%s%N)");
ABSL_FLAG(double, settle_seconds, 2, "wait after SERVING before reading VmRSS");
ABSL_FLAG(double, timeout_seconds, 60, "give up after this long");

namespace fitledger::bench {
namespace {

int64_t StatusKib(int pid, const char* key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::string digits;
    for (char ch : line) {
      if (ch >= '0' && ch <= '9') digits.push_back(ch);
    }
    int64_t kib = 0;
    return absl::SimpleAtoi(digits, &kib) ? kib : 0;
  }
  return 0;
}

int Run() {
  const int pid = absl::GetFlag(FLAGS_pid);
  const absl::Time start = absl::FromUnixNanos(absl::GetFlag(FLAGS_start_ns));
  const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  int port = 0;
  while (port == 0) {
    if (absl::Now() > deadline) {
      std::fprintf(stderr, "sync_probe: no ready file\n");
      return 1;
    }
    std::ifstream in(absl::GetFlag(FLAGS_ready_file));
    std::stringstream text;
    text << in.rdbuf();
    auto ready = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (ready.is_object() && ready.contains("grpc_ports") && !ready["grpc_ports"].empty()) {
      port = ready["grpc_ports"][0].get<int>();
    } else {
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  absl::Time serving_at;
  while (true) {
    if (absl::Now() > deadline) {
      std::fprintf(stderr, "sync_probe: never SERVING\n");
      return 1;
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    if (health->Check(&context, request, &response).ok() &&
        response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      serving_at = absl::Now();
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  const int64_t hwm_at_serving = StatusKib(pid, "VmHWM:");
  const int64_t rss_at_serving = StatusKib(pid, "VmRSS:");
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_settle_seconds)));
  const int64_t rss = StatusKib(pid, "VmRSS:");
  const int64_t hwm = StatusKib(pid, "VmHWM:");
  const double ms = absl::ToDoubleMilliseconds(serving_at - start);
  std::printf(
      "sync: SERVING %.0f ms after start; VmRSS %lld MiB at SERVING, %lld MiB after %.0fs; "
      "VmHWM %lld MiB\n",
      ms, (long long)rss_at_serving / 1024, (long long)rss / 1024,
      absl::GetFlag(FLAGS_settle_seconds), (long long)hwm / 1024);
  std::printf(
      "SYNC_JSON {\"serving_ms\":%.1f,\"rss_at_serving_kib\":%lld,\"hwm_at_serving_kib\":%lld,"
      "\"rss_kib\":%lld,\"hwm_kib\":%lld}\n",
      ms, (long long)rss_at_serving, (long long)hwm_at_serving, (long long)rss, (long long)hwm);
  return 0;
}

}  // namespace
}  // namespace fitledger::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return fitledger::bench::Run();
}
