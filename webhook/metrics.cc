#include "webhook/metrics.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace fitledger::webhook {

Metrics::Metrics(MetricsRegistry* registry)
    : requests_(registry->Counter("fitledger_webhook_requests_total",
                                  "Webhook HTTP requests by extender verb and status code.",
                                  {"verb", "code"})),
      durations_(registry->Histogram("fitledger_webhook_request_duration_seconds",
                                     "Webhook time from a request's first byte to its reply.",
                                     {"verb"}, LatencyBuckets())),
      handling_(registry->Histogram(
          "fitledger_webhook_handling_duration_seconds",
          "Webhook time from a request's last byte to its reply: the handling, without the "
          "client's sending.",
          {"verb"}, LatencyBuckets())),
      backend_errors_(registry->Counter(
          "fitledger_webhook_backend_errors_total",
          "Verbs the extender behind the webhook failed, by canonical status code.",
          {"verb", "code"})) {}

void Metrics::ObserveRequest(absl::string_view verb, int code, absl::Duration duration,
                             absl::Duration handling) {
  requests_->Increment({std::string(verb), absl::StrCat(code)});
  const Labels by_verb = {std::string(verb)};  // one label list for both histograms
  durations_->Observe(by_verb, absl::ToDoubleSeconds(duration));
  handling_->Observe(by_verb, absl::ToDoubleSeconds(handling));
}

void Metrics::CountBackendError(absl::string_view verb, absl::string_view code) {
  backend_errors_->Increment({std::string(verb), std::string(code)});
}

}  // namespace fitledger::webhook
