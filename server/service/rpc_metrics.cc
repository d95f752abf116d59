#include "server/service/rpc_metrics.h"

namespace fitledger {

RpcMetrics::RpcMetrics(MetricsRegistry* registry)
    : requests(registry->Counter("fitledger_server_requests_total",
                                 "Verbs and introspection calls by method and status code.",
                                 {"method", "code"})),
      latency(registry->Histogram("fitledger_server_request_duration_seconds",
                                  "Verb and introspection latency in seconds by method.",
                                  {"method"}, LatencyBuckets())) {}

void RpcMetrics::Record(const char* method, const absl::Status& status, absl::Duration elapsed) {
  requests->Increment({method, absl::StatusCodeToString(status.code())});
  latency->Observe({method}, absl::ToDoubleSeconds(elapsed));
}

}  // namespace fitledger
