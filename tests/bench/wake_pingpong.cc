// wake_pingpong: the cost of one thread waking another through a Unix socket, the unit every
// hop of a Filter call is made of (kube-scheduler -> shim -> server -> shim -> kube-scheduler).
// Used by tests/perf/run.sh:
//
//   wake_pingpong                  # the kernel places the two threads (free)
//   wake_pingpong --cpus 0         # both threads on CPU 0
//   wake_pingpong --cpus 0,1       # one thread on each CPU
//   wake_pingpong --cpus first     # both on the first CPU this process may run on
//
// Two threads pass one byte back and forth over a socketpair `--round_trips` times (after
// `--warmup` untimed ones). Prints one PINGPONG_JSON line: the CPUs used (-1: free), the round
// trip's p50 / p99 and the CPU time of both threads per round trip. Nothing else runs: a thread
// sleeps in recv() until the other sends, as the shim's and the server's threads do.
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

ABSL_FLAG(int, round_trips, 20000, "timed round trips");
ABSL_FLAG(int, warmup, 500, "untimed round trips first");
ABSL_FLAG(std::string, cpus, "",
          "empty: free; N: both threads on CPU N; N,M: the caller on N, the echo on M; first: "
          "both on the first CPU of this process's affinity");

namespace fitledger::bench {
namespace {

int64_t Nanos(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

bool Pin(int cpu) {
  if (cpu < 0) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

bool Exchange(int fd, char* byte, bool send_first) {
  if (send_first && send(fd, byte, 1, MSG_NOSIGNAL) != 1) return false;
  if (recv(fd, byte, 1, 0) != 1) return false;
  return send_first || send(fd, byte, 1, MSG_NOSIGNAL) == 1;
}

int Run() {
  const int n = absl::GetFlag(FLAGS_round_trips);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const std::string cpus = absl::GetFlag(FLAGS_cpus);
  int caller_cpu = -1, echo_cpu = -1;
  if (cpus == "first") {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int cpu = 0; cpu < CPU_SETSIZE && caller_cpu < 0; ++cpu) {
        if (CPU_ISSET(cpu, &set)) caller_cpu = echo_cpu = cpu;
      }
    }
    if (caller_cpu < 0) {
      std::fprintf(stderr, "wake_pingpong: cannot read this process's CPU affinity\n");
      return 1;
    }
  } else if (!cpus.empty()) {
    const std::vector<std::string> parts = absl::StrSplit(cpus, ',');
    if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &caller_cpu) ||
        !absl::SimpleAtoi(parts.back(), &echo_cpu) || caller_cpu < 0 || echo_cpu < 0) {
      std::fprintf(stderr, "wake_pingpong: --cpus takes N or N,M (got \"%s\")\n", cpus.c_str());
      return 2;
    }
  }
  if (n <= 0 || warmup < 0) {
    std::fprintf(stderr, "wake_pingpong: --round_trips must be > 0 and --warmup >= 0\n");
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    std::perror("wake_pingpong: socketpair");
    return 1;
  }
  const int total = n + warmup;
  bool echo_ok = true;
  std::thread echo([&] {
    echo_ok = Pin(echo_cpu);
    char byte = 0;
    for (int i = 0; i < total && echo_ok; ++i) echo_ok = Exchange(sv[1], &byte, false);
    if (!echo_ok) shutdown(sv[1], SHUT_RDWR);  // lets the caller's recv() return
  });
  bool ok = Pin(caller_cpu);
  std::vector<int64_t> rtt(n);
  char byte = 'x';
  int64_t cpu_start = 0;
  for (int i = 0; i < total && ok; ++i) {
    if (i == warmup) cpu_start = Nanos(CLOCK_PROCESS_CPUTIME_ID);
    const int64_t start = Nanos(CLOCK_MONOTONIC);
    ok = Exchange(sv[0], &byte, true);
    if (i >= warmup) rtt[i - warmup] = Nanos(CLOCK_MONOTONIC) - start;
  }
  const int64_t cpu_ns = Nanos(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
  if (!ok) shutdown(sv[0], SHUT_RDWR);  // lets the echo thread's recv() return
  echo.join();
  close(sv[0]);
  close(sv[1]);
  if (!ok || !echo_ok) {
    std::fprintf(stderr, "wake_pingpong: the exchange failed (or a CPU in --cpus is not ours)\n");
    return 1;
  }
  std::sort(rtt.begin(), rtt.end());
  const auto pct = [&](int p) {
    return rtt[std::min<size_t>(n - 1, size_t{1} * n * p / 100)] / 1e3;
  };
  std::printf(
      "PINGPONG_JSON {\"cpus\":\"%s\",\"caller_cpu\":%d,\"echo_cpu\":%d,\"round_trips\":%d,"
      "\"p50_us\":%.1f,\"p99_us\":%.1f,\"cpu_us_per_round_trip\":%.1f}\n",
      cpus.empty() ? "free" : cpus.c_str(), caller_cpu, echo_cpu, n, pct(50), pct(99),
      cpu_ns / 1e3 / n);
  return 0;
}

}  // namespace
}  // namespace fitledger::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return fitledger::bench::Run();
}
