#include "webhook/webhook.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "webhook/json_codec.h"

namespace fitledger::webhook {
namespace {

constexpr char kJson[] = "application/json";
constexpr char kText[] = "text/plain; charset=utf-8";

constexpr std::pair<absl::string_view, Verb> kVerbs[] = {
    {"filter", Verb::kFilter},
    {"prioritize", Verb::kPrioritize},
    {"bind", Verb::kBind},
    {"preempt", Verb::kPreempt},
};

// Per I/O thread: the JSON decoder (not cheap to create). A request is decoded, and its backend
// call started, on one thread without a break.
JsonDecoder& ThisThreadDecoder() {
  thread_local JsonDecoder decoder;
  return decoder;
}

// "namespace/name", reusing `out`'s buffer.
void SetPodKey(const Pod& pod, std::string* out) {
  out->clear();
  absl::StrAppend(out, pod.namespace_name, "/", pod.name);
}

bool IsGet(const HttpRequest& r) { return r.method == "GET" || r.method == "HEAD"; }

// a + b, held to int64's range (a backend's scores are not trusted to be small).
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

}  // namespace

void ShiftPriorities(absl::Span<const std::pair<size_t, int64_t>> scores,
                     absl::Span<const absl::string_view> candidates, std::vector<int64_t>* totals,
                     std::vector<std::pair<absl::string_view, int64_t>>* out) {
  // What kube-scheduler would add to each candidate: the sum of its entries (0 with none).
  totals->assign(candidates.size(), 0);
  for (const auto& [i, score] : scores) {
    if (i < candidates.size()) (*totals)[i] = SaturatingAdd((*totals)[i], score);
  }
  if (totals->empty()) return;
  const int64_t lowest = *std::min_element(totals->begin(), totals->end());
  for (size_t i = 0; i < candidates.size(); ++i) {
    int64_t above;  // >= 0, as the total is >= lowest; past int64's max, its max
    if (__builtin_sub_overflow((*totals)[i], lowest, &above)) {
      above = std::numeric_limits<int64_t>::max();
    }
    if (above > 0) out->emplace_back(candidates[i], above);
  }
}

// The candidates of the connection's current Filter or Prioritize, valid until its reply is
// written: views into the request body, or into `owned` (names the body does not hold as they
// are: escaped ones, and the names of full Node objects).
struct Webhook::Scratch : HttpConnectionState {
  std::vector<absl::string_view> names;
  std::string owned;
  std::vector<absl::string_view> raw_nodes;  // with full Nodes: each item's JSON, in the body
  bool with_nodes = false;                   // the request carried Nodes, not NodeNames
  bool plain = false;                        // no name needs escaping in JSON
  Pod args_pod;                              // the request's pod, until the backend has it
  std::string pod;                           // "namespace/name", for the log
  FilterResultView filter_view;
  HostPriorityView priority_view;
  std::vector<int64_t> totals;
  std::vector<absl::string_view> passing_nodes;

  // Makes `names` outlive the decoder: a name outside `body` is copied into `owned`.
  void OwnNamesOutside(const std::string& body) {
    const auto begin = reinterpret_cast<uintptr_t>(body.data());
    const auto end = begin + body.size();
    auto outside = [&](absl::string_view name) {
      const auto at = reinterpret_cast<uintptr_t>(name.data());
      return at < begin || at + name.size() > end;
    };
    size_t bytes = 0;
    for (absl::string_view name : names) bytes += outside(name) ? name.size() : 0;
    owned.clear();
    if (bytes == 0) return;
    owned.reserve(bytes);  // no reallocation below: the views stay valid
    for (absl::string_view& name : names) {
      if (!outside(name)) continue;
      const size_t at = owned.size();
      owned.append(name.data(), name.size());
      name = absl::string_view(owned.data() + at, name.size());
    }
  }

  // Releases what one huge request grew, so idle connections stay small.
  void Trim() {
    constexpr size_t kKeepNames = 20000;
    if (names.capacity() > kKeepNames) names = {};
    if (owned.capacity() > (1 << 20)) owned = {};
    if (raw_nodes.capacity() > kKeepNames) raw_nodes = {};
  }
};

absl::string_view VerbName(Verb verb) {
  switch (verb) {
    case Verb::kFilter:
      return "filter";
    case Verb::kPrioritize:
      return "prioritize";
    case Verb::kBind:
      return "bind";
    case Verb::kPreempt:
      return "preempt";
  }
  return "unknown";
}

Webhook::Webhook(std::string prefix, Backend* backend, Metrics* metrics,
                 std::function<std::string()> render_metrics)
    : backend_(backend), metrics_(metrics), render_metrics_(std::move(render_metrics)) {
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  const std::string base = prefix == "/" ? "" : prefix;
  for (const auto& [name, verb] : kVerbs)
    verb_paths_.emplace_back(absl::StrCat(base, "/", name), verb);
}

void Webhook::FormatError(HttpReply& reply, absl::string_view message) {
  reply.content_type = kJson;
  reply.body.clear();
  EncodeError(message, &reply.body);
}

const Verb* Webhook::VerbAt(absl::string_view path) const {
  for (const auto& [verb_path, verb] : verb_paths_) {
    if (path == verb_path) return &verb;
  }
  return nullptr;
}

absl::string_view Webhook::MetricVerb(absl::string_view path) const {
  if (const Verb* verb = VerbAt(path)) return VerbName(*verb);
  if (path == "/healthz") return "healthz";
  if (path == "/readyz") return "readyz";
  return "other";
}

void Webhook::Observe(const HttpRequest& request, const HttpReply& reply,
                      absl::Duration elapsed) const {
  metrics_->ObserveRequest(MetricVerb(request.path), reply.status, elapsed,
                           std::max(absl::ZeroDuration(), elapsed - request.reading));
}

Webhook::Scratch& Webhook::ScratchOf(const HttpCall& call) const {
  std::unique_ptr<HttpConnectionState>& state = call.state();
  if (state == nullptr) state = std::make_unique<Scratch>();
  return static_cast<Scratch&>(*state);
}

void Webhook::Serve(HttpCall call) const {
  const HttpRequest& r = call.request();
  HttpReply& reply = call.reply();
  if (r.method == "POST") {
    if (const Verb* verb = VerbAt(r.path)) {
      switch (*verb) {
        case Verb::kFilter:
          return Filter(call);
        case Verb::kPrioritize:
          return Prioritize(call);
        case Verb::kBind:
          return Bind(call);
        case Verb::kPreempt:
          return Preempt(call);
      }
    }
  } else if (IsGet(r) && (r.path == "/healthz" || r.path == "/readyz")) {
    return Probe(call);
  }
  if (r.path == "/healthz" || r.path == "/readyz") {
    FormatError(reply,
                absl::StrCat("method ", r.method, " is not allowed on ", r.path, ": use GET"));
    reply.status = 405;
    reply.headers.emplace_back("Allow", "GET, HEAD");
  } else if (VerbAt(r.path) != nullptr) {
    FormatError(reply,
                absl::StrCat("method ", r.method, " is not allowed on ", r.path, ": use POST"));
    reply.status = 405;
    reply.headers.emplace_back("Allow", "POST");
  } else {
    FormatError(reply, absl::StrCat("no such path \"", r.path, "\": the extender verbs are POST ",
                                    verb_paths_[0].first, ", ", verb_paths_[1].first, ", ",
                                    verb_paths_[2].first, ", ", verb_paths_[3].first));
    reply.status = 404;
  }
  call.Finish();
}

void Webhook::ServeMonitor(HttpCall call) const {
  const HttpRequest& r = call.request();
  HttpReply& reply = call.reply();
  if (!IsGet(r)) {
    FormatError(reply, absl::StrCat("method ", r.method, " is not allowed: use GET"));
    reply.status = 405;
    reply.headers.emplace_back("Allow", "GET, HEAD");
  } else if (r.path == "/healthz" || r.path == "/readyz") {
    return Probe(call);
  } else if (r.path == "/metrics") {
    reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
    reply.body = render_metrics_ ? render_metrics_() : std::string();
  } else {
    FormatError(reply, absl::StrCat("no such path \"", r.path,
                                    "\": the monitor serves /healthz, /readyz, /metrics"));
    reply.status = 404;
  }
  call.Finish();
}

void Webhook::Probe(const HttpCall& call) const {
  HttpReply& reply = call.reply();
  reply.content_type = kText;
  if (call.request().path == "/healthz") {
    reply.body = "ok\n";
    return call.Finish();
  }
  backend_->CheckReady([call](absl::Status ready) {
    HttpReply& reply = call.reply();
    if (ready.ok()) {
      reply.body = "ok\n";
    } else {
      reply.status = 503;
      reply.body = absl::StrCat("not ready: ", ready.message(), "\n");
    }
    call.Finish();
  });
}

bool Webhook::LogNow() const {
  const int64_t now = absl::ToUnixNanos(absl::Now());
  int64_t last = last_log_ns_.load(std::memory_order_relaxed);
  return now - last >= absl::ToInt64Nanoseconds(absl::Seconds(1)) &&
         last_log_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

void Webhook::BadRequest(Verb verb, const absl::Status& status, const HttpCall& call) const {
  HttpReply& reply = call.reply();
  FormatError(reply, status.message());
  reply.status = 400;
  if (LogNow()) {
    LogWarn("webhook: bad request",
            {{"verb", std::string(VerbName(verb))}, {"error", std::string(status.message())}});
  }
  call.Finish();
}

void Webhook::BackendFailure(Verb verb, const absl::Status& status, absl::string_view pod,
                             HttpReply& reply) const {
  const std::string code = absl::StatusCodeToString(status.code());
  metrics_->CountBackendError(VerbName(verb), code);
  FormatError(reply,
              absl::StrCat("fitledger ", VerbName(verb), ": ", code, ": ", status.message()));
  if (verb == Verb::kFilter || verb == Verb::kBind) {
    reply.status = 200;  // their results carry the Error
  } else {
    reply.status = absl::IsInvalidArgument(status) ? 400 : 503;
  }
  if (LogNow()) {
    LogWarn("webhook: verb failed", {{"verb", std::string(VerbName(verb))},
                                     {"pod", std::string(pod)},
                                     {"code", code},
                                     {"error", std::string(status.message())}});
  }
}

void Webhook::Filter(const HttpCall& call) const {
  Scratch& s = ScratchOf(call);
  JsonDecoder& decoder = ThisThreadDecoder();
  const std::string& body = call.request().body;
  if (absl::Status st = decoder.DecodeExtenderArgs(body, &s.args_pod, &s.names, &s.raw_nodes);
      !st.ok()) {
    return BadRequest(Verb::kFilter, st, call);
  }
  // With full Node objects (nodeCacheCapable: false) s.names holds their names.
  s.with_nodes = decoder.nodes_given();
  s.plain = decoder.node_names_plain();
  s.OwnNamesOutside(body);
  SetPodKey(s.args_pod, &s.pod);
  backend_->Filter(s.args_pod, s.names, [this, call, &s](absl::StatusOr<FilterResult> answer) {
    HttpReply& reply = call.reply();
    if (!answer.ok()) {
      BackendFailure(Verb::kFilter, answer.status(), s.pod, reply);
      s.Trim();
      return call.Finish();
    }
    FilterResultView& view = s.filter_view;
    view.Clear();
    s.passing_nodes.clear();
    const size_t n = s.names.size();
    bool dropped = false;
    for (size_t i : answer->fits) {
      if (i >= n) {
        dropped = true;
        continue;
      }
      view.node_names.push_back(s.names[i]);
      if (s.with_nodes) s.passing_nodes.push_back(s.raw_nodes[i]);
    }
    for (const auto& [i, why] : answer->failed) {
      if (i < n) {
        view.failed_nodes.emplace_back(s.names[i], why);
      } else {
        dropped = true;
      }
    }
    for (const auto& [i, why] : answer->unresolvable) {
      if (i < n) {
        view.failed_and_unresolvable_nodes.emplace_back(s.names[i], why);
      } else {
        dropped = true;
      }
    }
    if (dropped && LogNow()) {
      LogWarn("webhook: the backend answered nodes that are not candidates; dropped",
              {{"verb", "filter"}, {"pod", s.pod}});
    }
    if (s.with_nodes) {
      EncodeFilterResultWithNodes(view, s.passing_nodes, &reply.body);
    } else {
      EncodeFilterResult(view, &reply.body, s.plain);
    }
    s.Trim();
    call.Finish();
  });
}

void Webhook::Prioritize(const HttpCall& call) const {
  Scratch& s = ScratchOf(call);
  const std::string& body = call.request().body;
  if (absl::Status st = ThisThreadDecoder().DecodeExtenderArgs(body, &s.args_pod, &s.names);
      !st.ok()) {
    return BadRequest(Verb::kPrioritize, st, call);
  }
  s.OwnNamesOutside(body);  // with full Node objects, their names
  SetPodKey(s.args_pod, &s.pod);
  backend_->Prioritize(s.args_pod, s.names, [this, call, &s](PrioritizeAnswer answer) {
    HttpReply& reply = call.reply();
    if (!answer.status.ok()) {
      BackendFailure(Verb::kPrioritize, answer.status, s.pod, reply);
    } else {
      s.priority_view.clear();
      ShiftPriorities(answer.scores, s.names, &s.totals, &s.priority_view);
      EncodeHostPriorityList(s.priority_view, &reply.body);
    }
    s.Trim();
    call.Finish();
  });
}

void Webhook::Bind(const HttpCall& call) const {
  BindArgs args;
  if (absl::Status st = ThisThreadDecoder().DecodeBindingArgs(call.request().body, &args);
      !st.ok()) {
    return BadRequest(Verb::kBind, st, call);
  }
  std::string pod = absl::StrCat(args.pod_namespace, "/", args.pod_name);
  std::string node = args.node;
  backend_->Bind(args, [this, call, pod = std::move(pod), node = std::move(node)](absl::Status st) {
    HttpReply& reply = call.reply();
    if (st.ok()) {
      EncodeError("", &reply.body);
      LogDebug("webhook: bound", {{"pod", pod}, {"node", node}});
    } else {
      BackendFailure(Verb::kBind, st, pod, reply);
    }
    call.Finish();
  });
}

void Webhook::Preempt(const HttpCall& call) const {
  PreemptArgs args;
  if (absl::Status st = ThisThreadDecoder().DecodePreemptionArgs(call.request().body, &args);
      !st.ok()) {
    return BadRequest(Verb::kPreempt, st, call);
  }
  std::string pod;
  SetPodKey(args.pod, &pod);
  backend_->Preempt(args, [this, call, pod = std::move(pod)](absl::StatusOr<NodeVictims> result) {
    HttpReply& reply = call.reply();
    if (!result.ok()) {
      BackendFailure(Verb::kPreempt, result.status(), pod, reply);
    } else {
      EncodePreemptionResult(*result, &reply.body);
    }
    call.Finish();
  });
}

}  // namespace fitledger::webhook
