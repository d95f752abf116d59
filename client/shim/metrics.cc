#include "client/shim/metrics.h"

#include "absl/strings/str_cat.h"

namespace fitledger::shim {

Metrics::Metrics()
    : requests_(registry_.Counter("fitledger_shim_requests_total",
                                  "HTTP requests by extender verb and status code.",
                                  {"verb", "code"})),
      durations_(registry_.Histogram("fitledger_shim_request_duration_seconds",
                                     "Time from request read to reply.", {"verb"},
                                     LatencyBuckets())),
      server_errors_(registry_.Counter("fitledger_shim_server_errors_total",
                                       "Failed gRPC calls to fitledger-server.",
                                       {"verb", "grpc_code"})) {}

void Metrics::ObserveRequest(absl::string_view verb, int code, absl::Duration duration) {
  requests_->Increment({std::string(verb), absl::StrCat(code)});
  durations_->Observe({std::string(verb)}, absl::ToDoubleSeconds(duration));
}

void Metrics::CountServerError(absl::string_view verb, absl::string_view grpc_code) {
  server_errors_->Increment({std::string(verb), std::string(grpc_code)});
}

}  // namespace fitledger::shim
