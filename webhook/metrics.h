// The webhook's Prometheus metrics (on the binary's registry, common/metrics.h):
//   fitledger_webhook_requests_total{verb,code}              counter, by HTTP status code
//   fitledger_webhook_request_duration_seconds{verb}         histogram (LatencyBuckets): from
//                                                            the request's first byte to its reply
//   fitledger_webhook_handling_duration_seconds{verb}        histogram (LatencyBuckets): from
//                                                            the request's last byte to its reply
//   fitledger_webhook_backend_errors_total{verb,code}        counter: verbs the extender behind
//                                                            the webhook failed (canonical code)
// verb: filter | prioritize | bind | preempt | healthz | readyz | other.
#ifndef FITLEDGER_WEBHOOK_METRICS_H_
#define FITLEDGER_WEBHOOK_METRICS_H_

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics.h"

namespace fitledger::webhook {

// Thread-safe.
class Metrics {
 public:
  // Registers the families on `registry`, which must outlive this.
  explicit Metrics(MetricsRegistry* registry);

  // Counts one HTTP request for `verb` answered with `code`: `duration` from its first byte to
  // the reply, `handling` from its last byte.
  void ObserveRequest(absl::string_view verb, int code, absl::Duration duration,
                      absl::Duration handling);
  // Counts one verb the backend failed; `code` is the canonical name, e.g. "UNAVAILABLE".
  void CountBackendError(absl::string_view verb, absl::string_view code);

 private:
  CounterFamily* const requests_;
  HistogramFamily* const durations_;
  HistogramFamily* const handling_;
  CounterFamily* const backend_errors_;
};

}  // namespace fitledger::webhook

#endif  // FITLEDGER_WEBHOOK_METRICS_H_
