// The shim's Prometheus metrics:
//   fitledger_shim_requests_total{verb,code}             counter
//   fitledger_shim_request_duration_seconds{verb}        histogram, 50us .. 5s
//   fitledger_shim_server_errors_total{verb,grpc_code}   counter (failed gRPC calls)
#ifndef FITLEDGER_CLIENT_SHIM_METRICS_H_
#define FITLEDGER_CLIENT_SHIM_METRICS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics.h"

namespace fitledger::shim {

// The shim's families on the common registry (common/metrics.h). Thread-safe.
class Metrics {
 public:
  Metrics();

  // Counts one HTTP request for `verb` ("filter", ..., or "other") answered with `code`.
  void ObserveRequest(absl::string_view verb, int code, absl::Duration duration);
  // Counts one failed gRPC call; `grpc_code` is the canonical name, e.g. "UNAVAILABLE".
  void CountServerError(absl::string_view verb, absl::string_view grpc_code);

  // The Prometheus text exposition (version 0.0.4).
  std::string Render() const { return registry_.Render(); }

 private:
  MetricsRegistry registry_;
  CounterFamily* const requests_;
  HistogramFamily* const durations_;
  CounterFamily* const server_errors_;
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_METRICS_H_
