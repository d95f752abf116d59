// kube-scheduler's extender webhook over a Backend, and the probes:
//
//   POST <prefix>/filter|prioritize|bind|preempt   the verbs (webhook listener)
//   GET  /healthz                                  200 "ok" while the process serves
//   GET  /readyz                                   200 once the backend can answer, else 503
//   GET  /metrics                                  Prometheus text (monitor listener only)
//
// Reply rules (kube-scheduler treats any non-200 as an error):
//   a body that does not decode      -> 400 {"Error":"<field>: <what is wrong>"} (every verb)
//   filter / bind, backend failure   -> 200 {"Error":"fitledger <verb>: <CODE>: <message>"}
//   prioritize / preempt, failure    -> 503 (400 for INVALID_ARGUMENT) {"Error":"..."}: their
//                                       results have no Error field
//   misfits                          -> 200 with FailedNodes / FailedAndUnresolvableNodes
//   prioritize                       -> 200, the scores less the lowest (ShiftPriorities)
//   other paths 404, other methods 405, all with a JSON {"Error":"..."} body.
#ifndef FITLEDGER_WEBHOOK_WEBHOOK_H_
#define FITLEDGER_WEBHOOK_WEBHOOK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "webhook/backend.h"
#include "webhook/http_server.h"
#include "webhook/metrics.h"

namespace fitledger::webhook {

// The HostPriorityList kube-scheduler is sent for `scores` (candidate position -> score, as the
// backend answers; a candidate it leaves out scores 0, one it lists twice the sum, as
// kube-scheduler adds every entry) over `candidates`: one entry per candidate above the lowest
// candidate's total, with its total less that lowest, in the candidates' order. kube-scheduler adds
// weight x score to the nodes a HostPriorityList names and nothing to the others (prioritizeNodes
// in pkg/scheduler/schedule_one.go), so this lowers every candidate's total by the same amount
// and changes no ranking; what it saves is kube-scheduler decoding an entry per candidate in its
// serial scheduling cycle (500 with 5,000 nodes), on a quiet cluster where most score the same.
// The one difference: kube-scheduler breaks ties between equal totals with a random number it
// draws only for the nodes listed, so an unlisted node loses an exact tie to a listed one, and
// ties among unlisted nodes go as they do with no extender. Positions out of range are dropped.
// Sums past int64 saturate. `totals` is scratch space. Appends to `out`.
void ShiftPriorities(absl::Span<const std::pair<size_t, int64_t>> scores,
                     absl::Span<const absl::string_view> candidates, std::vector<int64_t>* totals,
                     std::vector<std::pair<absl::string_view, int64_t>>* out);

enum class Verb { kFilter, kPrioritize, kBind, kPreempt };
// "filter", "prioritize", "bind", "preempt".
absl::string_view VerbName(Verb verb);

// The HTTP handlers of the webhook and monitor listeners. Thread-safe: constant after
// construction but for an atomic log-rate limiter.
class Webhook {
 public:
  // `prefix`: the verbs' URL path prefix ("/" serves /filter). `backend` and `metrics` must
  // outlive this. `render_metrics` renders /metrics (monitor listener).
  Webhook(std::string prefix, Backend* backend, Metrics* metrics,
          std::function<std::string()> render_metrics);

  // The webhook listener: the verbs, /healthz, /readyz.
  void Serve(HttpCall call) const;
  // The monitor listener: /healthz, /readyz, /metrics.
  void ServeMonitor(HttpCall call) const;
  // Counts each reply (HttpObserver).
  void Observe(const HttpRequest& request, const HttpReply& reply, absl::Duration elapsed) const;
  // Fills a reply the HTTP server refuses itself (HttpErrorFormatter): {"Error":"..."}.
  static void FormatError(HttpReply& reply, absl::string_view message);

 private:
  // Per connection: the current request's candidates and what their answer needs.
  struct Scratch;
  Scratch& ScratchOf(const HttpCall& call) const;

  void Filter(const HttpCall& call) const;
  void Prioritize(const HttpCall& call) const;
  void Bind(const HttpCall& call) const;
  void Preempt(const HttpCall& call) const;
  void Probe(const HttpCall& call) const;

  void BadRequest(Verb verb, const absl::Status& status, const HttpCall& call) const;
  // Fills the reply for a failed verb (the status codes above), counts and logs it.
  void BackendFailure(Verb verb, const absl::Status& status, absl::string_view pod,
                      HttpReply& reply) const;
  // True at most once per second, so a flood of failures does not flood the log.
  bool LogNow() const;

  const Verb* VerbAt(absl::string_view path) const;
  absl::string_view MetricVerb(absl::string_view path) const;

  // Constant after construction.
  Backend* const backend_;
  Metrics* const metrics_;
  const std::function<std::string()> render_metrics_;
  std::vector<std::pair<std::string, Verb>> verb_paths_;

  mutable std::atomic<int64_t> last_log_ns_{0};
};

}  // namespace fitledger::webhook

#endif  // FITLEDGER_WEBHOOK_WEBHOOK_H_
