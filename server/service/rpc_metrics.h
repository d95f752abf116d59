// Per-method request counts and latency of fitledger-server's verbs and introspection calls,
// whichever door they came through (the in-process webhook or gRPC).
#ifndef FITLEDGER_SERVER_SERVICE_RPC_METRICS_H_
#define FITLEDGER_SERVER_SERVICE_RPC_METRICS_H_

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics.h"

namespace fitledger {

// Thread-safe.
struct RpcMetrics {
  // Registers fitledger_server_requests_total{method,code} and
  // fitledger_server_request_duration_seconds{method} on `registry` (which must outlive this).
  explicit RpcMetrics(MetricsRegistry* registry);
  void Record(const char* method, const absl::Status& status, absl::Duration elapsed);
  CounterFamily* requests;
  HistogramFamily* latency;
};

// Records one call's outcome and latency when Done is called.
class RpcScope {
 public:
  RpcScope(RpcMetrics* metrics, const char* method)
      : metrics_(metrics), method_(method), start_(absl::Now()) {}
  // Records `status`; returns it.
  const absl::Status& Done(const absl::Status& status) {
    metrics_->Record(method_, status, absl::Now() - start_);
    return status;
  }

 private:
  RpcMetrics* const metrics_;
  const char* const method_;
  const absl::Time start_;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_RPC_METRICS_H_
