// churn_load: pod updates at a steady rate, the background of a busy cluster (issue 49 item 3).
// Each update is a JSON merge patch of one annotation on a pod that is already there, so the API
// server sends every watcher a MODIFIED event carrying the whole pod, as it does for a kubelet's
// status update; nothing the ledger counts changes. Used by tests/perf/run.sh --churn.
//
//   churn_load --api_port SIM --rate 200 [--pods 5000] [--threads 2] [--seconds 0]
//
// Lists up to `--pods` pods (one page), then PATCHes them round-robin, each thread on its own
// connection and its own share of the rate, paced against an absolute schedule (a late update
// is sent at once, so the average holds). Runs `--seconds`, or until SIGTERM / SIGINT when 0,
// then prints one line: CHURN_JSON {"updates":N,"seconds":S,"rate":R,"errors":E,"p50_us":...,
// "p99_us":...}. Exits non-zero when any PATCH failed.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int, api_port, 0, "fitledger-sim (or kube-apiserver without auth) port on 127.0.0.1");
ABSL_FLAG(double, rate, 200, "pod updates per second, all threads together");
ABSL_FLAG(int, pods, 5000, "how many existing pods to update, round-robin");
ABSL_FLAG(int, threads, 2, "connections, each with its share of the rate");
ABSL_FLAG(double, seconds, 0, "how long; 0 runs until SIGTERM or SIGINT");

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

struct PodRef {
  std::string path;  // /api/v1/namespaces/NS/pods/NAME
};

std::unique_ptr<httplib::Client> Client(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  // httplib writes a request's headers and body separately: without TCP_NODELAY, Nagle's
  // algorithm holds the body until the headers' delayed ACK (40 ms here), so each PATCH took 44 ms.
  c->set_tcp_nodelay(true);
  c->set_read_timeout(30, 0);
  return c;
}

struct ThreadResult {
  std::vector<double> latencies_us;
  long errors = 0;
  std::string first_error;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int port = absl::GetFlag(FLAGS_api_port);
  const double rate = absl::GetFlag(FLAGS_rate);
  const int threads = absl::GetFlag(FLAGS_threads);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  if (port <= 0 || rate <= 0 || threads <= 0 || absl::GetFlag(FLAGS_pods) <= 0 || seconds < 0) {
    std::fprintf(stderr, "churn_load: --api_port, --rate, --pods and --threads must be > 0\n");
    return 2;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);

  std::vector<PodRef> pods;
  {
    auto api = Client(port);
    auto res = api->Get(absl::StrCat("/api/v1/pods?limit=", absl::GetFlag(FLAGS_pods)));
    if (!res || res->status != 200) {
      std::fprintf(
          stderr, "churn_load: listing pods failed: %s\n",
          res ? res->body.substr(0, 200).c_str() : httplib::to_string(res.error()).c_str());
      return 1;
    }
    auto list = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (list.is_discarded() || !list.contains("items")) {
      std::fprintf(stderr, "churn_load: the pod list is not a PodList\n");
      return 1;
    }
    for (const auto& item : list["items"]) {
      const auto& meta = item["metadata"];
      pods.push_back({absl::StrCat("/api/v1/namespaces/", meta["namespace"].get<std::string>(),
                                   "/pods/", meta["name"].get<std::string>())});
    }
  }
  if (pods.empty()) {
    std::fprintf(stderr, "churn_load: no pods to update\n");
    return 1;
  }

  const absl::Duration interval = absl::Seconds(threads / rate);
  const absl::Time start = absl::Now();
  const absl::Time end = seconds > 0 ? start + absl::Seconds(seconds) : absl::InfiniteFuture();
  std::vector<ThreadResult> results(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto api = Client(port);
      ThreadResult& out = results[t];
      // Thread t takes updates t, t + threads, ...; its first is offset so the threads interleave.
      absl::Time next = start + interval * t / threads;
      for (long n = t; !g_stop.load() && next < end; n += threads, next += interval) {
        // Sleep in slices of at most 100 ms, so a stop is seen promptly.
        for (absl::Time now = absl::Now(); now < next && !g_stop.load(); now = absl::Now()) {
          absl::SleepFor(std::min(next - now, absl::Milliseconds(100)));
        }
        if (g_stop.load()) break;
        const PodRef& pod = pods[n % pods.size()];
        const std::string patch = absl::StrCat(
            R"({"metadata":{"annotations":{"churn.fitledger.test/seq":")", n, R"("}}})");
        const absl::Time sent = absl::Now();
        auto res = api->Patch(pod.path, patch, "application/merge-patch+json");
        out.latencies_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - sent));
        if (!res || res->status != 200) {
          if (out.errors++ == 0) {
            out.first_error = res ? absl::StrCat(res->status, " ", res->body.substr(0, 200))
                                  : httplib::to_string(res.error());
          }
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);

  std::vector<double> all;
  long errors = 0;
  for (const auto& r : results) {
    all.insert(all.end(), r.latencies_us.begin(), r.latencies_us.end());
    errors += r.errors;
    if (r.errors > 0)
      std::fprintf(stderr, "churn_load: a PATCH failed: %s\n", r.first_error.c_str());
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  std::printf(
      "CHURN_JSON {\"updates\":%zu,\"seconds\":%.2f,\"rate\":%.1f,\"errors\":%ld,\"pods\":%zu,"
      "\"p50_us\":%.0f,\"p99_us\":%.0f}\n",
      all.size(), elapsed, elapsed > 0 ? all.size() / elapsed : 0.0, errors, pods.size(), pct(0.50),
      pct(0.99));
  return errors == 0 ? 0 : 1;
}
