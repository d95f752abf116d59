// cycle_load: full scheduling cycles through kube-scheduler's extender webhook (fitledger-server's
// own, or fitledger-shim's) against fitledger-sim, shaped like kube-scheduler: one serial
// scheduling loop (Filter of each pod on its candidate nodes, choose a node) feeding concurrent
// binding cycles (Bind). Used by tests/perf/run.sh.
//
//   cycle_load --api_port SIM --webhook_port W --pods 5000 --binders 16 --pod POD.json
//              --node_names NAMES.txt
//
// 1. Creates `--pods` pods in the sim from the `--pod` template (not timed) and waits
//    `--settle_seconds` so the server's watch has seen them.
// 2. Timed: the scheduling loop POSTs /filter with the created pod and `--candidates` node names
//    (a window spread over the cluster's nodes: `--node_names`, one a line, or `node-<i>` for
//    `--nodes` generated ones), picks one passing node, and queues the bind; `--binders` threads
//    POST /bind. Both carry the headers kube-scheduler's Go client sends. Reports pods/s = pods /
//    (first filter .. last bind).
//
// `--skip_filter`: bind only (the node is chosen without asking), for the memory-per-assumed-pod
// measurement: with `--rss_pid` the server's VmRSS is read before and after the binds, and with
// `--watch_lag` the sim's watch lag is raised first so the binds stay Assumed while measured.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int, api_port, 0, "fitledger-sim port on 127.0.0.1");
ABSL_FLAG(int, webhook_port, 0, "the extender webhook's port on 127.0.0.1");
ABSL_FLAG(std::string, pod, "", "pod template JSON (metadata.name is replaced)");
ABSL_FLAG(std::string, namespace_name, "default", "namespace of the created pods");
ABSL_FLAG(std::string, prefix, "cycle", "name prefix of the created pods");
ABSL_FLAG(int, pods, 2000, "pods to create and schedule");
ABSL_FLAG(int, binders, 16, "concurrent binding cycles");
ABSL_FLAG(int, nodes, 5000, "without --node_names: generated nodes node-0 .. node-(N-1)");
ABSL_FLAG(std::string, node_names, "", "the cluster's node names, one a line");
ABSL_FLAG(int, candidates, 500, "candidate NodeNames per Filter");
ABSL_FLAG(int, create_threads, 4, "threads creating pods");
ABSL_FLAG(double, settle_seconds, 2, "wait after creating, for the server's watch");
ABSL_FLAG(bool, skip_filter, false, "bind only (memory per assumed pod)");
ABSL_FLAG(int, rss_pid, 0, "report this process's VmRSS before and after the binds");
ABSL_FLAG(std::string, watch_lag, "", "set the sim's watch lag (e.g. 120s) before the binds");
ABSL_FLAG(std::string, started_file, "", "written when the timed part starts (for CPU accounting)");

namespace fitledger::bench {
namespace {

using nlohmann::json;

// What Go's net/http client sends with kube-scheduler's requests, besides Content-Type.
const httplib::Headers kGoHeaders = {{"User-Agent", "Go-http-client/1.1"},
                                     {"Accept-Encoding", "gzip"}};

std::unique_ptr<httplib::Client> Client(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  c->set_read_timeout(30, 0);
  c->set_connection_timeout(5, 0);
  return c;
}

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

// The `k`-th name in the reply's "NodeNames" array (k modulo its length); empty if none.
std::string PickNode(const std::string& reply, size_t k, size_t* count) {
  *count = 0;
  size_t pos = reply.find("\"NodeNames\":[");
  if (pos == std::string::npos) return "";
  pos += 13;
  std::vector<std::pair<size_t, size_t>> names;
  while (pos < reply.size() && reply[pos] == '"') {
    size_t end = reply.find('"', pos + 1);
    if (end == std::string::npos) break;
    names.emplace_back(pos + 1, end - pos - 1);
    pos = end + 1;
    if (pos < reply.size() && reply[pos] == ',') ++pos;
  }
  *count = names.size();
  if (names.empty()) return "";
  const auto& [start, len] = names[k % names.size()];
  return reply.substr(start, len);
}

// This process's CPU time (user + system, all threads) in microseconds.
int64_t SelfCpuUs() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000LL + usage.ru_utime.tv_usec +
         usage.ru_stime.tv_usec;
}

int64_t Percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Pod {
  std::string name;
  std::string uid;
  std::string json;  // as the sim returned it
};

struct BindWork {
  size_t index;
  std::string node;
};

int Run() {
  const int api_port = absl::GetFlag(FLAGS_api_port);
  const int webhook_port = absl::GetFlag(FLAGS_webhook_port);
  const int n = absl::GetFlag(FLAGS_pods);
  std::vector<std::string> node_names;
  if (const std::string path = absl::GetFlag(FLAGS_node_names); !path.empty()) {
    std::ifstream names(path);
    for (std::string line; std::getline(names, line);) {
      if (!line.empty()) node_names.push_back(line);
    }
    if (node_names.empty()) {
      std::fprintf(stderr, "--node_names %s: no names\n", path.c_str());
      return 2;
    }
  } else {
    for (int i = 0; i < absl::GetFlag(FLAGS_nodes); ++i)
      node_names.push_back(absl::StrCat("node-", i));
  }
  const int nodes = static_cast<int>(node_names.size());
  const int candidates = std::min(absl::GetFlag(FLAGS_candidates), nodes);
  const std::string ns = absl::GetFlag(FLAGS_namespace_name);
  const bool skip_filter = absl::GetFlag(FLAGS_skip_filter);
  if (api_port <= 0 || webhook_port <= 0 || absl::GetFlag(FLAGS_pod).empty() || n <= 0 ||
      nodes <= 0) {
    std::fprintf(stderr,
                 "usage: cycle_load --api_port P --webhook_port P --pod FILE [--pods N] "
                 "[--node_names FILE]\n");
    return 2;
  }
  std::ifstream in(absl::GetFlag(FLAGS_pod));
  json pod_template = json::parse(in);
  json& meta = pod_template["metadata"];
  for (const char* key : {"uid", "resourceVersion", "creationTimestamp", "generateName"}) {
    meta.erase(key);
  }
  meta["namespace"] = ns;
  pod_template["spec"].erase("nodeName");
  pod_template.erase("status");

  // 1. Create the pods (not timed).
  std::vector<Pod> pods(static_cast<size_t>(n));
  std::atomic<int> next{0};
  std::atomic<int> create_errors{0};
  const absl::Time create_start = absl::Now();
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < absl::GetFlag(FLAGS_create_threads); ++t) {
      threads.emplace_back([&] {
        auto api = Client(api_port);
        json pod = pod_template;
        for (int i; (i = next++) < n;) {
          Pod& p = pods[static_cast<size_t>(i)];
          p.name = absl::StrCat(absl::GetFlag(FLAGS_prefix), "-", i);
          pod["metadata"]["name"] = p.name;
          auto res = api->Post(absl::StrCat("/api/v1/namespaces/", ns, "/pods"), pod.dump(),
                               "application/json");
          if (!res || res->status != 201) {
            if (create_errors++ == 0) {
              std::fprintf(stderr, "create %s: %d %s\n", p.name.c_str(), res ? res->status : -1,
                           res ? res->body.substr(0, 300).c_str() : "no reply");
            }
            continue;
          }
          p.json = std::move(res->body);
          p.uid = json::parse(p.json)["metadata"]["uid"].get<std::string>();
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  if (create_errors > 0) {
    std::fprintf(stderr, "%d pods could not be created\n", create_errors.load());
    return 1;
  }
  std::fprintf(stderr, "created %d pods in %.1fs\n", n,
               absl::ToDoubleSeconds(absl::Now() - create_start));
  // The Filter bodies, built before the clock starts.
  std::vector<std::string> bodies;
  if (!skip_filter) {
    bodies.reserve(pods.size());
    const int stride = std::max(1, nodes / candidates);
    for (size_t i = 0; i < pods.size(); ++i) {
      std::string body = absl::StrCat("{\"Pod\":", pods[i].json, ",\"Nodes\":null,\"NodeNames\":[");
      const size_t offset = (i * 7) % static_cast<size_t>(nodes);
      for (int c = 0; c < candidates; ++c) {
        absl::StrAppend(
            &body, c ? ",\"" : "\"",
            node_names[(offset + static_cast<size_t>(c * stride)) % static_cast<size_t>(nodes)],
            "\"");
      }
      body += "]}";
      bodies.push_back(std::move(body));
    }
  }
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_settle_seconds)));

  if (!absl::GetFlag(FLAGS_watch_lag).empty()) {
    auto api = Client(api_port);
    json lag = {{"lag", absl::GetFlag(FLAGS_watch_lag)}};
    auto res = api->Post("/sim/watch-lag", lag.dump(), "application/json");
    if (!res || res->status != 200) {
      std::fprintf(stderr, "POST /sim/watch-lag failed\n");
      return 1;
    }
  }
  const int rss_pid = absl::GetFlag(FLAGS_rss_pid);
  const int64_t rss_before = rss_pid > 0 ? StatusKib(rss_pid, "VmRSS:") : 0;

  // 2. The timed cycles.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<BindWork> queue;
  bool closed = false;
  std::atomic<int> bind_errors{0};
  // Binds the extender refused because the node no longer fits the pod: the loop chose a node for
  // a pod before the binds queued ahead of it were answered (kube-scheduler's own cache would
  // have counted them; this loop keeps none), and the ledger's re-check refused the overcommit.
  // kube-scheduler would schedule such a pod again; here it is counted, not bound, not an error.
  std::atomic<int> bind_refused{0};
  std::atomic<int> filter_errors{0};
  std::vector<int64_t> filter_ns;
  std::vector<std::vector<int64_t>> bind_ns(static_cast<size_t>(absl::GetFlag(FLAGS_binders)));
  std::string first_error;
  auto note_error = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty()) first_error = what;
  };

  if (const std::string path = absl::GetFlag(FLAGS_started_file); !path.empty()) {
    std::ofstream(path) << "started\n";
  }
  const absl::Time start = absl::Now();
  const int64_t cpu_start_us = SelfCpuUs();
  std::vector<std::thread> binders;
  for (size_t b = 0; b < bind_ns.size(); ++b) {
    binders.emplace_back([&, b] {
      auto webhook = Client(webhook_port);
      while (true) {
        BindWork work;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return closed || !queue.empty(); });
          if (queue.empty()) return;
          work = std::move(queue.front());
          queue.pop_front();
        }
        const Pod& p = pods[work.index];
        json args = {
            {"PodName", p.name}, {"PodNamespace", ns}, {"PodUID", p.uid}, {"Node", work.node}};
        const absl::Time t0 = absl::Now();
        auto res = webhook->Post("/bind", kGoHeaders, args.dump(), "application/json");
        bind_ns[b].push_back(absl::ToInt64Nanoseconds(absl::Now() - t0));
        // FAILED_PRECONDITION also means "bound to another node" (docs/api.md), which would be a
        // bug here: only the ledger's "no longer fits" refusal is counted apart.
        if (res && res->status == 200 &&
            res->body.find("FAILED_PRECONDITION: pod ") != std::string::npos &&
            res->body.find(" no longer fits node ") != std::string::npos) {
          ++bind_refused;
        } else if (!res || res->status != 200 || res->body != "{\"Error\":\"\"}") {
          ++bind_errors;
          note_error(absl::StrCat("bind ", p.name, ": ", res ? res->body : "no reply"));
        }
      }
    });
  }
  {
    auto webhook = Client(webhook_port);
    for (size_t i = 0; i < pods.size(); ++i) {
      std::string node;
      if (skip_filter) {
        node = node_names[(i * 7) % static_cast<size_t>(nodes)];
      } else {
        const absl::Time t0 = absl::Now();
        auto res = webhook->Post("/filter", kGoHeaders, bodies[i], "application/json");
        filter_ns.push_back(absl::ToInt64Nanoseconds(absl::Now() - t0));
        size_t count = 0;
        if (res && res->status == 200) node = PickNode(res->body, i, &count);
        if (node.empty()) {
          ++filter_errors;
          note_error(absl::StrCat("filter ", pods[i].name, ": ",
                                  res ? res->body.substr(0, 300) : "no reply"));
          continue;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        queue.push_back({i, std::move(node)});
      }
      cv.notify_one();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
  }
  cv.notify_all();
  for (std::thread& t : binders) t.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  const int64_t load_cpu_us = SelfCpuUs() - cpu_start_us;

  std::vector<int64_t> all_binds;
  for (const auto& v : bind_ns) all_binds.insert(all_binds.end(), v.begin(), v.end());
  const int bound = static_cast<int>(all_binds.size()) - bind_errors.load() - bind_refused.load();
  const double pods_per_s = bound / elapsed;
  std::printf(
      "cycle: %d pods (%s), %d binders: %.2fs = %.0f pods/s; filter p50 %lld us p99 %lld us; "
      "bind p50 %lld us p99 %lld us; %d filter errors, %d bind errors, %d binds refused (no longer "
      "fits)\n",
      n, skip_filter ? "bind only" : "filter + bind", static_cast<int>(bind_ns.size()), elapsed,
      pods_per_s, (long long)Percentile(filter_ns, 50) / 1000,
      (long long)Percentile(filter_ns, 99) / 1000, (long long)Percentile(all_binds, 50) / 1000,
      (long long)Percentile(all_binds, 99) / 1000, filter_errors.load(), bind_errors.load(),
      bind_refused.load());
  if (!first_error.empty()) std::printf("first error: %s\n", first_error.c_str());
  int64_t rss_after = 0;
  if (rss_pid > 0) {
    absl::SleepFor(absl::Milliseconds(500));
    rss_after = StatusKib(rss_pid, "VmRSS:");
    std::printf("server VmRSS %lld KiB -> %lld KiB: %.0f bytes per bound pod\n",
                (long long)rss_before, (long long)rss_after,
                bound > 0 ? (rss_after - rss_before) * 1024.0 / bound : 0.0);
  }
  std::printf(
      "CYCLE_JSON {\"pods\":%d,\"bound\":%d,\"seconds\":%.3f,\"pods_per_s\":%.1f,"
      "\"filter_p50_us\":%lld,\"filter_p99_us\":%lld,\"bind_p50_us\":%lld,\"bind_p99_us\":%lld,"
      "\"filter_errors\":%d,\"bind_errors\":%d,\"bind_refused\":%d,\"rss_before_kib\":%lld,"
      "\"rss_after_kib\":%lld,"
      "\"load_cpu_us_per_pod\":%.1f}\n",
      n, bound, elapsed, pods_per_s, (long long)Percentile(filter_ns, 50) / 1000,
      (long long)Percentile(filter_ns, 99) / 1000, (long long)Percentile(all_binds, 50) / 1000,
      (long long)Percentile(all_binds, 99) / 1000, filter_errors.load(), bind_errors.load(),
      bind_refused.load(), (long long)rss_before, (long long)rss_after,
      bound > 0 ? static_cast<double>(load_cpu_us) / bound : 0.0);
  return bind_errors > 0 || filter_errors > 0 ? 1 : 0;
}

}  // namespace
}  // namespace fitledger::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return fitledger::bench::Run();
}
