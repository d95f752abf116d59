#include "client/ctl/burst.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/ctl/scheduler.h"
#include "common/mutex.h"
#include "model/quantity.h"
#include "nlohmann/json.hpp"
#include "server/kube/api_client.h"
#include "server/kube/connection.h"

namespace fitledger::ctl {
namespace {

using nlohmann::json;

constexpr absl::Duration kRequestTimeout = absl::Seconds(10);

absl::StatusOr<json> Call(kube::ApiClient& client, const std::string& method,
                          const std::string& path, const json& body, long want_code = 0) {
  absl::StatusOr<kube::HttpResponse> r =
      client.Request(method, path, body.is_null() ? "" : body.dump(), kRequestTimeout);
  if (!r.ok()) return r.status();
  // An answer that is not the expected one is Internal; Unavailable, DeadlineExceeded and Unknown
  // stay the transport's (nothing answered: see IsTransportError).
  if (want_code != 0 && r->code != want_code) {
    return absl::InternalError(
        absl::StrCat(method, " ", path, ": HTTP ", r->code, ": ", r->body.substr(0, 300)));
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) {
    return absl::InternalError(absl::StrCat(method, " ", path, ": HTTP ", r->code,
                                            ": not JSON: ", r->body.substr(0, 200)));
  }
  return j;
}

// Whether `s` is ApiClient's transport failure (no answer at all), as opposed to an answer.
bool IsTransportError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded || s.code() == absl::StatusCode::kUnknown;
}

std::string PodsPath(const BurstOptions& o) {
  return absl::StrCat("/api/v1/namespaces/", o.namespace_name, "/pods");
}

absl::StatusOr<json> ListBurstPods(kube::ApiClient& api, const BurstOptions& o) {
  return Call(api, "GET", PodsPath(o) + "?labelSelector=app%3D" + o.app, nullptr, 200);
}

absl::Status DeletePrevious(kube::ApiClient& api, const BurstOptions& o) {
  absl::StatusOr<json> list = ListBurstPods(api, o);
  if (!list.ok()) return list.status();
  for (const json& pod : (*list)["items"]) {
    std::string name = pod["metadata"]["name"];
    absl::StatusOr<kube::HttpResponse> r =
        api.Request("DELETE", PodsPath(o) + "/" + name, "", kRequestTimeout);
    if (!r.ok()) return r.status();
  }
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    list = ListBurstPods(api, o);
    if (!list.ok()) return list.status();
    if ((*list)["items"].empty()) return absl::OkStatus();
    usleep(100 * 1000);
  }
  return absl::DeadlineExceededError("the previous burst's pods were not deleted within 30s");
}

json PodManifest(const BurstOptions& o, int i) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", absl::StrFormat("%s-%02d", o.app, i)},
        {"namespace", o.namespace_name},
        {"labels", {{"app", o.app}}}}},
      {"spec",
       {{"schedulerName", o.scheduler_name},
        {"containers",
         json::array({{{"name", "pause"},
                       {"image", "registry.k8s.io/pause:3.9"},
                       {"resources", {{"requests", {{"cpu", o.cpu}, {"memory", o.memory}}}}}}})}}},
  };
}

absl::Status WebhookUnreachable(const BurstOptions& o, const absl::Status& s) {
  // ApiClient words its transport errors for the Kubernetes API; this one is the webhook's.
  absl::string_view detail = s.message();
  absl::ConsumePrefix(&detail, "kubernetes API: ");
  return absl::UnavailableError(absl::StrCat("the fitledger webhook at ", o.webhook_url,
                                             " does not answer (check --webhook / "
                                             "$FITLEDGER_WEBHOOK): ",
                                             detail));
}

struct Work {
  json pod;
  int index = 0;
};

// What the scheduling loop shares with the binding threads.
struct Cycles {
  Mutex mu;
  CondVar cv;  // signalled when a bind ends
  std::deque<Work> queue ABSL_GUARDED_BY(mu);
  int binds_in_flight ABSL_GUARDED_BY(mu) = 0;
  absl::Status fatal ABSL_GUARDED_BY(mu);  // the webhook stopped answering
  BurstReport* const report ABSL_PT_GUARDED_BY(mu);

  explicit Cycles(BurstReport* r) : report(r) {}
  void Progress(const BurstOptions& o) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!o.progress) return;
    int bound = 0;
    for (const BurstPod& p : report->pods) bound += p.node.empty() ? 0 : 1;
    fprintf(stderr, "\rburst: %d/%d pods bound, %zu queued, %d binds in flight   ", bound,
            o.replicas, queue.size(), binds_in_flight);
  }
};

}  // namespace

absl::StatusOr<BurstReport> RunBurst(const BurstOptions& o) {
  if (o.replicas <= 0 || o.replicas > 10000) {
    return absl::InvalidArgumentError("--replicas must be between 1 and 10000");
  }
  absl::StatusOr<Quantity> cpu = Quantity::Parse(o.cpu);
  if (!cpu.ok()) return absl::InvalidArgumentError(absl::StrCat("--cpu: ", cpu.status().message()));
  absl::StatusOr<Quantity> memory = Quantity::Parse(o.memory);
  if (!memory.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--memory: ", memory.status().message()));
  }
  absl::StatusOr<kube::Connection> conn = kube::ResolveConnection(o.kubeconfig);
  if (!conn.ok()) return conn.status();
  kube::ApiClient api(*conn);
  kube::Connection webhook_conn;
  webhook_conn.server = o.webhook_url;
  while (!webhook_conn.server.empty() && webhook_conn.server.back() == '/') {
    webhook_conn.server.pop_back();
  }
  kube::ApiClient webhook(webhook_conn);

  if (absl::Status s = DeletePrevious(api, o); !s.ok()) return s;
  if (o.await_view) {
    if (absl::Status s = o.await_view(); !s.ok()) return s;
  }
  absl::Time start = absl::Now();

  // The scheduler's node list.
  absl::StatusOr<json> nodes = Call(api, "GET", "/api/v1/nodes", nullptr, 200);
  if (!nodes.ok()) return nodes.status();
  BurstReport report;
  std::vector<std::string> node_names;
  for (const json& n : (*nodes)["items"]) {
    BurstNode bn;
    bn.name = n["metadata"]["name"];
    const json& alloc = n["status"]["allocatable"];
    if (alloc.contains("cpu")) {
      absl::StatusOr<Quantity> q = Quantity::Parse(alloc["cpu"].get<std::string>());
      if (q.ok()) bn.allocatable_milli_cpu = q->MilliValue().value_or(0);
    }
    if (alloc.contains("memory")) {
      absl::StatusOr<Quantity> q = Quantity::Parse(alloc["memory"].get<std::string>());
      if (q.ok()) bn.allocatable_memory_bytes = q->Value().value_or(0);
    }
    node_names.push_back(bn.name);
    report.nodes.push_back(bn);
  }
  std::sort(node_names.begin(), node_names.end());
  std::sort(report.nodes.begin(), report.nodes.end(),
            [](const BurstNode& a, const BurstNode& b) { return a.name < b.name; });

  // Create the burst "in one write" (as fast as we can).
  report.pods.resize(o.replicas);
  Cycles c(&report);
  for (int i = 0; i < o.replicas; ++i) {
    absl::StatusOr<json> created = Call(api, "POST", PodsPath(o), PodManifest(o, i), 201);
    if (!created.ok()) return created.status();
    MutexLock lock(&c.mu);
    c.report->pods[i].name = (*created)["metadata"]["name"];
    c.queue.push_back({*std::move(created), i});
  }

  // Scheduling cycles run one at a time; binding cycles run concurrently.
  std::vector<std::thread> binders;
  c.mu.Lock();
  while (true) {
    while (c.queue.empty() && c.binds_in_flight != 0) c.cv.Wait(&c.mu);
    if (!c.fatal.ok()) break;
    if (c.queue.empty()) break;  // and nothing in flight
    Work work = std::move(c.queue.front());
    c.queue.pop_front();
    BurstPod* pod = &c.report->pods[work.index];
    ++pod->attempts;
    c.mu.Unlock();

    json args = {{"Pod", work.pod}, {"NodeNames", node_names}};
    absl::StatusOr<json> filtered = Call(webhook, "POST", "/filter", args, 200);
    if (!filtered.ok() && IsTransportError(filtered.status())) {
      // The webhook does not answer: say so (not a scheduling outcome), and stop.
      c.mu.Lock();
      if (c.fatal.ok()) c.fatal = WebhookUnreachable(o, filtered.status());
      break;
    }
    std::string error;
    std::vector<std::string> feasible;
    if (!filtered.ok()) {
      error = std::string(filtered.status().message());
    } else if (filtered->contains("Error") && (*filtered)["Error"].is_string() &&
               !(*filtered)["Error"].get<std::string>().empty()) {
      error = (*filtered)["Error"];
    } else if (filtered->contains("NodeNames") && (*filtered)["NodeNames"].is_array()) {
      feasible = (*filtered)["NodeNames"].get<std::vector<std::string>>();
    }
    std::string chosen;
    if (error.empty() && !feasible.empty()) {
      json prioritize_args = {{"Pod", work.pod}, {"NodeNames", feasible}};
      absl::StatusOr<json> scores = Call(webhook, "POST", "/prioritize", prioritize_args, 200);
      chosen = BestScored(feasible, scores.ok() ? *scores : json());
    } else if (error.empty() && filtered.ok()) {
      std::vector<std::string> why;
      for (const char* key : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
        if (!filtered->contains(key) || !(*filtered)[key].is_object()) continue;
        for (auto& [node, reason] : (*filtered)[key].items()) {
          why.push_back(absl::StrCat(node, ": ", reason.get<std::string>()));
        }
      }
      std::sort(why.begin(), why.end());
      error =
          absl::StrCat("0/", node_names.size(), " nodes are available: ", absl::StrJoin(why, "; "));
    }

    c.mu.Lock();
    if (chosen.empty()) {
      pod->pending_reason = error;
      bool retry = !absl::StartsWith(error, "0/") && pod->attempts < o.max_attempts;
      if (retry) c.queue.push_back(std::move(work));
      c.Progress(o);
      continue;
    }
    while (c.binds_in_flight >= o.bind_workers) c.cv.Wait(&c.mu);
    ++c.binds_in_flight;
    c.Progress(o);
    c.mu.Unlock();
    // The binding cycle, concurrently.
    binders.emplace_back([&c, &o, &webhook, work = std::move(work), chosen]() mutable {
      const json& meta = work.pod["metadata"];
      json bind_args = {{"PodName", meta["name"]},
                        {"PodNamespace", meta["namespace"]},
                        {"PodUID", meta["uid"]},
                        {"Node", chosen}};
      absl::StatusOr<json> result = Call(webhook, "POST", "/bind", bind_args, 200);
      std::string bind_error;
      if (!result.ok()) {
        bind_error = std::string(result.status().message());
      } else if (result->contains("Error") && (*result)["Error"].is_string()) {
        bind_error = (*result)["Error"];
      }
      MutexLock guard(&c.mu);
      if (!result.ok() && IsTransportError(result.status()) && c.fatal.ok()) {
        c.fatal = WebhookUnreachable(o, result.status());
      }
      BurstPod& p = c.report->pods[work.index];
      if (bind_error.empty()) {
        p.node = chosen;
        p.pending_reason.clear();
      } else {
        ++c.report->bind_errors;
        p.pending_reason = "bind failed: " + bind_error;
        if (p.attempts < o.max_attempts) c.queue.push_back(std::move(work));
      }
      --c.binds_in_flight;
      c.cv.SignalAll();
    });
    c.mu.Lock();
  }
  absl::Status fatal = c.fatal;
  c.mu.Unlock();
  for (std::thread& t : binders) t.join();
  if (!fatal.ok()) return fatal;

  // Wait for the kubelet's verdict on every bound pod.
  absl::Time deadline = absl::Now() + o.verdict_timeout;
  while (true) {
    absl::StatusOr<json> list = ListBurstPods(api, o);
    if (!list.ok()) return list.status();
    bool settled = true;
    for (const json& item : (*list)["items"]) {
      std::string name = item["metadata"]["name"];
      for (BurstPod& p : report.pods) {
        if (p.name != name) continue;
        const json& status = item.value("status", json::object());
        p.phase = status.value("phase", "");
        p.reason = status.value("reason", "");
        p.message = status.value("message", "");
        std::string bound_to = item["spec"].value("nodeName", "");
        if (!bound_to.empty()) p.node = bound_to;
        if (!p.node.empty() && p.phase != "Running" && p.phase != "Failed") settled = false;
      }
    }
    if (settled) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("the kubelet did not decide on every bound pod in time");
    }
    usleep(100 * 1000);
  }
  if (o.progress) fprintf(stderr, "\r%80s\r", "");

  for (const BurstPod& p : report.pods) {
    if (p.node.empty()) {
      ++report.pending;
      continue;
    }
    ++report.bound;
    for (BurstNode& n : report.nodes) {
      if (n.name != p.node) continue;
      ++n.bound;
      if (p.phase == "Running") {
        ++n.running;
        n.running_milli_cpu += cpu->MilliValue().value_or(0);
      }
      if (p.phase == "Failed") ++n.failed;
    }
    if (p.phase == "Running") ++report.running;
    if (p.phase == "Failed" && absl::StartsWith(p.reason, "OutOf")) ++report.rejected;
  }
  report.elapsed = absl::Now() - start;
  return report;
}

std::string FormatReport(const BurstReport& r, const BurstOptions& o, bool ledger_enabled) {
  std::string out = absl::StrFormat(
      "burst: %d pods x cpu=%s memory=%s, ledger %s, %.1fs\n\n", o.replicas, o.cpu, o.memory,
      ledger_enabled ? "ON" : "OFF (--no-ledger: the server decides from its watch alone)",
      absl::ToDoubleSeconds(r.elapsed));
  absl::StrAppendFormat(&out, "%-12s %6s %8s %8s %22s\n", "NODE", "BOUND", "RUNNING", "FAILED",
                        "CPU RUNNING/ALLOCATABLE");
  for (const BurstNode& n : r.nodes) {
    absl::StrAppendFormat(&out, "%-12s %6d %8d %8d %22s\n", n.name, n.bound, n.running, n.failed,
                          absl::StrCat(n.running_milli_cpu, "m/", n.allocatable_milli_cpu, "m"));
  }
  absl::StrAppendFormat(&out, "\nbound %d, running %d, rejected by the kubelet %d, pending %d\n",
                        r.bound, r.running, r.rejected, r.pending);
  bool any_failed = false;
  for (const BurstPod& p : r.pods) {
    if (p.phase != "Failed") continue;
    if (!any_failed) absl::StrAppend(&out, "\npods the kubelet rejected:\n");
    any_failed = true;
    absl::StrAppendFormat(&out, "  %s  node=%s  phase=%s  reason=%s\n    message: %s\n", p.name,
                          p.node, p.phase, p.reason, p.message);
  }
  if (!any_failed) absl::StrAppend(&out, "\npods the kubelet rejected: none\n");
  bool any_pending = false;
  for (const BurstPod& p : r.pods) {
    if (!p.node.empty()) continue;
    if (!any_pending) absl::StrAppend(&out, "\npending (never bound):\n");
    any_pending = true;
    absl::StrAppendFormat(&out, "  %s  %s\n", p.name, p.pending_reason);
  }
  return out;
}

std::string ReportJson(const BurstReport& r) {
  json pods = json::array();
  for (const BurstPod& p : r.pods) {
    pods.push_back({{"name", p.name},
                    {"node", p.node},
                    {"phase", p.phase},
                    {"reason", p.reason},
                    {"message", p.message},
                    {"pendingReason", p.pending_reason},
                    {"attempts", p.attempts}});
  }
  json nodes = json::array();
  for (const BurstNode& n : r.nodes) {
    nodes.push_back({{"name", n.name},
                     {"bound", n.bound},
                     {"running", n.running},
                     {"failed", n.failed},
                     {"runningMilliCpu", n.running_milli_cpu},
                     {"allocatableMilliCpu", n.allocatable_milli_cpu}});
  }
  json out = {{"bound", r.bound},
              {"running", r.running},
              {"rejected", r.rejected},
              {"pending", r.pending},
              {"bindErrors", r.bind_errors},
              {"elapsedSeconds", absl::ToDoubleSeconds(r.elapsed)},
              {"nodes", nodes},
              {"pods", pods}};
  return out.dump();
}

}  // namespace fitledger::ctl
