#include "client/shim/metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fitledger::shim {

void Metrics::ObserveRequest(absl::string_view verb, int code, absl::Duration duration) {
  const double seconds = absl::ToDoubleSeconds(duration);
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(kBuckets.begin(), kBuckets.end(), seconds) - kBuckets.begin());
  MutexLock lock(&mu_);
  ++requests_[{std::string(verb), code}];
  Histogram& h = durations_[std::string(verb)];
  if (bucket < kBuckets.size()) ++h.counts[bucket];
  ++h.count;
  h.sum += seconds;
}

void Metrics::CountServerError(absl::string_view verb, absl::string_view grpc_code) {
  MutexLock lock(&mu_);
  ++server_errors_[{std::string(verb), std::string(grpc_code)}];
}

std::string Metrics::Render() const {
  std::string out;
  MutexLock lock(&mu_);
  out.append(
      "# HELP fitledger_shim_requests_total HTTP requests by extender verb and status code.\n"
      "# TYPE fitledger_shim_requests_total counter\n");
  for (const auto& [key, n] : requests_) {
    absl::StrAppend(&out, "fitledger_shim_requests_total{verb=\"", key.first, "\",code=\"",
                    key.second, "\"} ", n, "\n");
  }
  out.append(
      "# HELP fitledger_shim_request_duration_seconds Time from request read to reply.\n"
      "# TYPE fitledger_shim_request_duration_seconds histogram\n");
  for (const auto& [verb, h] : durations_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.counts[i];
      absl::StrAppend(&out, "fitledger_shim_request_duration_seconds_bucket{verb=\"", verb,
                      "\",le=\"", kBuckets[i], "\"} ", cumulative, "\n");
    }
    absl::StrAppend(&out, "fitledger_shim_request_duration_seconds_bucket{verb=\"", verb,
                    "\",le=\"+Inf\"} ", h.count, "\n");
    absl::StrAppend(&out, "fitledger_shim_request_duration_seconds_sum{verb=\"", verb, "\"} ",
                    h.sum, "\n");
    absl::StrAppend(&out, "fitledger_shim_request_duration_seconds_count{verb=\"", verb, "\"} ",
                    h.count, "\n");
  }
  out.append(
      "# HELP fitledger_shim_server_errors_total Failed gRPC calls to fitledger-server.\n"
      "# TYPE fitledger_shim_server_errors_total counter\n");
  for (const auto& [key, n] : server_errors_) {
    absl::StrAppend(&out, "fitledger_shim_server_errors_total{verb=\"", key.first,
                    "\",grpc_code=\"", key.second, "\"} ", n, "\n");
  }
  return out;
}

}  // namespace fitledger::shim
