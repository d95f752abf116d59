#include "client/ctl/scheduler.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/json_access.h"
#include "common/mutex.h"
#include "nlohmann/json.hpp"
#include "server/kube/api_client.h"
#include "server/kube/connection.h"

namespace fitledger::ctl {
namespace {

using nlohmann::json;
constexpr auto& Member = JsonMember;
constexpr auto& Str = JsonStr;

// pkg/scheduler/framework/plugins/nodeunschedulable ErrReasonUnschedulable.
constexpr char kReasonNodeUnschedulable[] = "node(s) were unschedulable";

std::string Timestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

// A JSON answer of the API or the webhook; an error for a transport failure, a status other
// than `want_code` (when not 0), or a body that is not JSON.
absl::StatusOr<json> Call(kube::ApiClient& client, const std::string& method,
                          const std::string& path, const json& body, long want_code,
                          absl::Duration timeout) {
  absl::StatusOr<kube::HttpResponse> r =
      client.Request(method, path, body.is_null() ? "" : body.dump(), timeout);
  if (!r.ok()) return r.status();
  if (want_code != 0 && r->code != want_code) {
    return absl::UnavailableError(
        absl::StrCat(method, " ", path, ": HTTP ", r->code, ": ", r->body.substr(0, 300)));
  }
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) {
    return absl::UnavailableError(absl::StrCat(method, " ", path, ": HTTP ", r->code,
                                               ": not JSON: ", r->body.substr(0, 200)));
  }
  return j;
}

// A webhook call's transport error, without ApiClient's "kubernetes API: " prefix (ApiClient
// words its errors for the API server; these are the webhook's).
std::string WebhookError(const absl::Status& s) {
  absl::string_view detail = s.message();
  absl::ConsumePrefix(&detail, "kubernetes API: ");
  return std::string(detail);
}

// An extender answer's Error field, if set.
std::string ExtenderError(const json& answer) {
  const json& e = Member(answer, "Error");
  return e.is_string() ? e.get<std::string>() : "";
}

// What the scheduler remembers about a pending pod (the scheduling queue's entry).
struct Entry {
  int attempts = 0;
  absl::Time ready_at = absl::InfinitePast();  // backoff: not before
  bool unschedulable = false;                  // waits for a cluster change
  absl::Time unschedulable_since;
  // The PodScheduled=False condition last written (reason, message), to write it only when it
  // changes (podutil.UpdatePodCondition), and when its status last changed.
  std::string condition_reason;
  std::string condition_message;
  std::string transition_time;
};

struct BindJob {
  json pod;
  std::string node;
};

class DemoScheduler {
 public:
  DemoScheduler(const SchedulerOptions& options, kube::Connection api_conn,
                kube::Connection webhook_conn)
      : o_(options), api_(std::move(api_conn)), webhook_(std::move(webhook_conn)) {}

  void Run(const std::atomic<bool>* stop) {
    std::vector<std::thread> workers;
    for (int i = 0; i < o_.bind_workers; ++i) workers.emplace_back([this] { BindWorker(); });
    while (!stop->load()) {
      Cycle(stop);
      MutexLock lock(&mu_);
      cv_.WaitFor(&mu_, absl::ToChronoNanoseconds(o_.poll_interval));
    }
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    for (std::thread& t : workers) t.join();
  }

 private:
  void Log(const std::string& line) {
    if (o_.log) o_.log(line);
  }

  // One pass: read the cluster, requeue unschedulable pods if it changed, and run a scheduling
  // cycle for each pod whose turn it is.
  void Cycle(const std::atomic<bool>* stop) {
    absl::StatusOr<json> nodes =
        Call(api_, "GET", "/api/v1/nodes", nullptr, 200, o_.request_timeout);
    absl::StatusOr<json> pods = Call(api_, "GET", "/api/v1/pods", nullptr, 200, o_.request_timeout);
    if (!nodes.ok() || !pods.ok()) {
      const std::string error(!nodes.ok() ? nodes.status().message() : pods.status().message());
      if (error != last_api_error_) Log(absl::StrCat("the Kubernetes API: ", error));
      last_api_error_ = error;
      return;
    }
    last_api_error_.clear();
    // What the retry of unschedulable pods waits for: the cluster events the plugins that can
    // reject a pod here register for (noderesources/fit.go EventsToRegister: a node added or
    // updated, an assigned pod deleted, which includes one that finished; nodeunschedulable:
    // a node added or updated). A pod being bound frees nothing, so it triggers no retry.
    std::vector<std::string> node_versions;
    std::set<std::string> bound_pods;
    std::vector<std::string> all_nodes;
    std::vector<std::string> usable;
    for (const json& node : Member(*nodes, "items")) {
      const json& metadata = Member(node, "metadata");
      const std::string name = Str(metadata, "name");
      node_versions.push_back(absl::StrCat(name, " ", Str(metadata, "resourceVersion")));
      all_nodes.push_back(name);
      if (Member(Member(node, "spec"), "unschedulable") != json(true)) usable.push_back(name);
    }
    std::sort(all_nodes.begin(), all_nodes.end());
    std::sort(usable.begin(), usable.end());
    std::vector<const json*> pending;
    std::set<std::string> pending_uids;
    for (const json& pod : Member(*pods, "items")) {
      const json& metadata = Member(pod, "metadata");
      const std::string uid = Str(metadata, "uid");
      const std::string phase = Str(Member(pod, "status"), "phase");
      const bool terminal = phase == "Succeeded" || phase == "Failed";
      if (!Str(Member(pod, "spec"), "nodeName").empty()) {
        if (!terminal) bound_pods.insert(uid);
        continue;
      }
      if (Str(Member(pod, "spec"), "schedulerName") != o_.scheduler_name || terminal ||
          !Member(metadata, "deletionTimestamp").is_null()) {
        continue;
      }
      pending_uids.insert(uid);
      MutexLock lock(&mu_);
      if (in_flight_.count(uid) > 0 || bound_.count(uid) > 0) continue;
      pending.push_back(&pod);
    }
    std::sort(node_versions.begin(), node_versions.end());
    const std::string nodes_now = absl::StrJoin(node_versions, "\n");
    bool changed = nodes_now != last_nodes_;
    for (const std::string& uid : last_bound_pods_) {
      if (bound_pods.count(uid) == 0) changed = true;  // deleted or finished: room freed
    }
    last_nodes_ = nodes_now;
    last_bound_pods_ = std::move(bound_pods);
    const absl::Time now = absl::Now();
    if (changed) last_change_ = now;
    {
      MutexLock lock(&mu_);
      // Forget pods that are gone or bound.
      for (auto it = entries_.begin(); it != entries_.end();) {
        it = pending_uids.count(it->first) > 0 ? std::next(it) : entries_.erase(it);
      }
      for (auto it = bound_.begin(); it != bound_.end();) {
        it = pending_uids.count(*it) > 0 ? std::next(it) : bound_.erase(it);
      }
      for (auto& [uid, entry] : entries_) {
        // A pod that failed soon after a change may have been judged by an extender whose view
        // had not caught up yet (fitledger-server's watch lags the API): it is retried too.
        const bool early = entry.unschedulable_since - last_change_ < o_.settle_window;
        if (entry.unschedulable &&
            (changed || early || now - entry.unschedulable_since >= o_.max_unschedulable)) {
          entry.unschedulable = false;  // moved to the backoff / active queue
        }
      }
    }
    std::sort(pending.begin(), pending.end(), [](const json* a, const json* b) {
      const json& ma = Member(*a, "metadata");
      const json& mb = Member(*b, "metadata");
      return std::make_pair(Str(ma, "creationTimestamp"), Str(ma, "name")) <
             std::make_pair(Str(mb, "creationTimestamp"), Str(mb, "name"));
    });
    for (const json* pod : pending) {
      if (stop->load()) return;
      const std::string uid = Str(Member(*pod, "metadata"), "uid");
      {
        MutexLock lock(&mu_);
        Entry& entry = entries_[uid];
        if (entry.unschedulable || absl::Now() < entry.ready_at) continue;
        ++entry.attempts;
      }
      ScheduleOne(*pod, all_nodes, usable);
    }
  }

  // The scheduling cycle of one pod (schedulePod + the extender calls of findNodesThatPassExtenders
  // and prioritizeNodes, then selectHost).
  void ScheduleOne(const json& pod, const std::vector<std::string>& all_nodes,
                   const std::vector<std::string>& usable) {
    std::map<std::string, std::vector<std::string>> failed;
    for (const std::string& node : all_nodes) {
      if (std::find(usable.begin(), usable.end(), node) == usable.end()) {
        failed[node].push_back(kReasonNodeUnschedulable);
      }
    }
    if (all_nodes.empty()) {
      // schedule_one.go: ErrNoNodesAvailable.
      return Fail(pod, "Unschedulable", "no nodes available to schedule pods", true);
    }
    std::vector<std::string> feasible;
    if (!usable.empty()) {
      absl::StatusOr<json> filtered =
          Call(webhook_, "POST", "/filter", json{{"Pod", pod}, {"NodeNames", usable}}, 200,
               o_.request_timeout);
      if (!filtered.ok()) {
        return Fail(pod, "SchedulerError",
                    absl::StrCat("extender filter: ", WebhookError(filtered.status())), false);
      }
      if (std::string error = ExtenderError(*filtered); !error.empty()) {
        return Fail(pod, "SchedulerError", absl::StrCat("extender filter: ", error), false);
      }
      for (const json& name : Member(*filtered, "NodeNames")) {
        if (name.is_string()) feasible.push_back(name.get<std::string>());
      }
      for (const char* key : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
        const json& map = Member(*filtered, key);
        if (!map.is_object()) continue;
        for (const auto& [node, reason] : map.items()) {
          failed[node].push_back(reason.is_string() ? reason.get<std::string>() : reason.dump());
        }
      }
    }
    if (feasible.empty()) {
      return Fail(pod, "Unschedulable", FitErrorMessage(static_cast<int>(all_nodes.size()), failed),
                  true);
    }
    std::string chosen = feasible.front();
    if (feasible.size() > 1) {
      absl::StatusOr<json> scores =
          Call(webhook_, "POST", "/prioritize", json{{"Pod", pod}, {"NodeNames", feasible}}, 200,
               o_.request_timeout);
      chosen = BestScored(feasible, scores.ok() ? *scores : json());
    }
    MutexLock lock(&mu_);
    in_flight_.insert(Str(Member(pod, "metadata"), "uid"));
    binds_.push_back({pod, chosen});
    cv_.SignalAll();
  }

  void BindWorker() {
    while (true) {
      BindJob job;
      {
        MutexLock lock(&mu_);
        while (!stopping_ && binds_.empty()) cv_.Wait(&mu_);
        if (binds_.empty()) return;  // stopping, nothing left
        job = std::move(binds_.front());
        binds_.pop_front();
      }
      const json& metadata = Member(job.pod, "metadata");
      const std::string ns = Str(metadata, "namespace");
      const std::string name = Str(metadata, "name");
      const std::string uid = Str(metadata, "uid");
      absl::StatusOr<json> result =
          Call(webhook_, "POST", "/bind",
               json{{"PodName", name}, {"PodNamespace", ns}, {"PodUID", uid}, {"Node", job.node}},
               200, o_.request_timeout);
      std::string error = result.ok() ? ExtenderError(*result) : WebhookError(result.status());
      if (error.empty()) {
        {
          MutexLock lock(&mu_);
          bound_.insert(uid);
          entries_.erase(uid);
        }
        // schedule_one.go finishBinding.
        RecordEvent(job.pod, "Normal", "Scheduled",
                    absl::StrCat("Successfully assigned ", ns, "/", name, " to ", job.node));
        Log(absl::StrCat("bound ", ns, "/", name, " to ", job.node));
      } else {
        // handleBindingCycleError: the pod goes back to the queue with a backoff.
        Fail(job.pod, "SchedulerError", absl::StrCat("binding rejected: ", error), false);
      }
      MutexLock lock(&mu_);
      in_flight_.erase(uid);
      cv_.SignalAll();
    }
  }

  // handleSchedulingFailure: the event, the PodScheduled=False condition, and the queue.
  void Fail(const json& pod, const std::string& reason, const std::string& message,
            bool unschedulable) {
    const json& metadata = Member(pod, "metadata");
    const std::string ns = Str(metadata, "namespace");
    const std::string name = Str(metadata, "name");
    const std::string uid = Str(metadata, "uid");
    const absl::Time now = absl::Now();
    bool write_condition = false;
    std::string transition_time;
    {
      MutexLock lock(&mu_);
      Entry& entry = entries_[uid];
      if (unschedulable) {
        entry.unschedulable = true;
        entry.unschedulable_since = now;
      }
      // The backoff of the pod's attempts: initial * 2^(attempts-1), capped
      // (pkg/scheduler/backend/queue/scheduling_queue.go calculateBackoffDuration).
      absl::Duration backoff = o_.initial_backoff;
      for (int i = 1; i < entry.attempts && backoff < o_.max_backoff; ++i) backoff *= 2;
      entry.ready_at = now + std::min(backoff, o_.max_backoff);
      if (entry.condition_reason != reason || entry.condition_message != message) {
        write_condition = true;
        if (entry.transition_time.empty()) entry.transition_time = Timestamp(now);
        entry.condition_reason = reason;
        entry.condition_message = message;
      }
      transition_time = entry.transition_time;
    }
    RecordEvent(pod, "Warning", "FailedScheduling", message);
    if (write_condition) {
      WriteCondition(ns, name, uid,
                     json{{"type", "PodScheduled"},
                          {"status", "False"},
                          {"reason", reason},
                          {"message", message},
                          {"lastProbeTime", nullptr},
                          {"lastTransitionTime", transition_time}});
    }
    Log(absl::StrCat(reason == "Unschedulable" ? "unschedulable " : "error scheduling ", ns, "/",
                     name, ": ", message));
  }

  // Sets `condition` in the pod's status.conditions (replacing the one of its type), as updatePod
  // does (upstream sends a strategic merge patch of the status; ApiClient sends JSON only, so this
  // reads the status and PUTs it back, again on a 409 Conflict). The pod may be gone or bound
  // meanwhile: then nothing is written and the next cycle sees it.
  void WriteCondition(const std::string& ns, const std::string& name, const std::string& uid,
                      const json& condition) {
    const std::string path = absl::StrCat("/api/v1/namespaces/", ns, "/pods/", name, "/status");
    for (int attempt = 0; attempt < 3; ++attempt) {
      absl::StatusOr<json> pod = Call(api_, "GET", path, nullptr, 200, o_.request_timeout);
      if (!pod.ok()) return;
      if (Str(Member(*pod, "metadata"), "uid") != uid ||
          !Str(Member(*pod, "spec"), "nodeName").empty()) {
        return;
      }
      json& status = (*pod)["status"];
      if (!status.is_object()) status = json::object();
      json conditions = json::array();
      for (const json& c : Member(status, "conditions")) {
        if (Str(c, "type") != Str(condition, "type")) conditions.push_back(c);
      }
      conditions.push_back(condition);
      status["conditions"] = std::move(conditions);
      absl::StatusOr<kube::HttpResponse> r =
          api_.Request("PUT", path, pod->dump(), o_.request_timeout);
      if (!r.ok() || r->code != 409) {
        if (r.ok() && r->code != 200) {
          Log(absl::StrCat("writing the PodScheduled condition of ", ns, "/", name, ": HTTP ",
                           r->code, ": ", r->body.substr(0, 200)));
        }
        return;
      }
    }
  }

  // A core/v1 Event about `pod` from this scheduler (client-go tools/record: name
  // <object>.<hex nanoseconds>, source.component the scheduler's name, as kube-scheduler's
  // profile recorder names itself after the profile).
  void RecordEvent(const json& pod, const std::string& type, const std::string& reason,
                   const std::string& message) {
    const json& metadata = Member(pod, "metadata");
    const std::string ns = Str(metadata, "namespace");
    const absl::Time now = absl::Now();
    const std::string ts = Timestamp(now);
    json event = {
        {"apiVersion", "v1"},
        {"kind", "Event"},
        {"metadata",
         {{"name", absl::StrFormat("%s.%x", Str(metadata, "name"), absl::ToUnixNanos(now))},
          {"namespace", ns}}},
        {"involvedObject",
         {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"name", Str(metadata, "name")},
          {"namespace", ns},
          {"uid", Str(metadata, "uid")},
          {"resourceVersion", Str(metadata, "resourceVersion")}}},
        {"reason", reason},
        {"message", message},
        {"source", {{"component", o_.scheduler_name}}},
        {"firstTimestamp", ts},
        {"lastTimestamp", ts},
        {"count", 1},
        {"type", type},
        {"reportingComponent", o_.scheduler_name},
        {"reportingInstance", o_.scheduler_name}};
    absl::StatusOr<kube::HttpResponse> r =
        api_.Request("POST", absl::StrCat("/api/v1/namespaces/", ns, "/events"), event.dump(),
                     o_.request_timeout);
    (void)r;  // events are best effort, as the recorder's
  }

  const SchedulerOptions o_;
  kube::ApiClient api_;
  kube::ApiClient webhook_;
  // Owned by the scheduling thread (Run).
  std::string last_nodes_;                 // "name resourceVersion" lines
  std::set<std::string> last_bound_pods_;  // UIDs of bound pods not Succeeded / Failed
  std::string last_api_error_;
  absl::Time last_change_ = absl::InfinitePast();

  Mutex mu_;
  CondVar cv_;
  // Guarded by mu_.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by pod UID
  std::set<std::string> in_flight_ ABSL_GUARDED_BY(mu_);       // pods being bound
  std::set<std::string> bound_ ABSL_GUARDED_BY(mu_);  // bound, until the list shows them bound
  std::deque<BindJob> binds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string FitErrorMessage(int all_nodes,
                            const std::map<std::string, std::vector<std::string>>& failed) {
  std::map<std::string, int> counts;
  for (const auto& [node, reasons] : failed) {
    for (const std::string& reason : reasons) ++counts[reason];
  }
  std::vector<std::string> histogram;
  for (const auto& [reason, count] : counts) histogram.push_back(absl::StrCat(count, " ", reason));
  std::sort(histogram.begin(), histogram.end());
  std::string out = absl::StrCat("0/", all_nodes, " nodes are available");
  if (!histogram.empty()) absl::StrAppend(&out, ": ", absl::StrJoin(histogram, ", "));
  absl::StrAppend(&out, ".");
  return out;
}

std::string BestScored(const std::vector<std::string>& feasible, const json& scores) {
  std::map<std::string, int64_t> score;
  for (const std::string& node : feasible) score.emplace(node, 0);
  if (scores.is_array()) {
    for (const json& host : scores) {
      if (!host.is_object()) continue;
      auto it = score.find(Str(host, "Host"));
      const json& value = Member(host, "Score");
      // Repeated, its scores add up, as kube-scheduler adds them.
      if (it != score.end() && value.is_number_integer()) it->second += value.get<int64_t>();
    }
  }
  auto best = score.begin();  // by name: the first of equal scores stays
  for (auto it = score.begin(); it != score.end(); ++it) {
    if (it->second > best->second) best = it;
  }
  return best == score.end() ? std::string() : best->first;
}

absl::Status RunScheduler(const SchedulerOptions& options, const std::atomic<bool>* stop) {
  if (options.scheduler_name.empty()) {
    return absl::InvalidArgumentError("--scheduler_name must not be empty");
  }
  if (options.bind_workers < 1) return absl::InvalidArgumentError("--bind_workers must be >= 1");
  if (options.webhook_url.empty()) return absl::InvalidArgumentError("--webhook is required");
  absl::StatusOr<kube::Connection> conn = kube::ResolveConnection(options.kubeconfig);
  if (!conn.ok()) return conn.status();
  kube::Connection webhook_conn;
  webhook_conn.server = options.webhook_url;
  while (!webhook_conn.server.empty() && webhook_conn.server.back() == '/') {
    webhook_conn.server.pop_back();
  }
  DemoScheduler scheduler(options, *std::move(conn), std::move(webhook_conn));
  scheduler.Run(stop);
  return absl::OkStatus();
}

}  // namespace fitledger::ctl
