// The shim's Prometheus metrics:
//   fitledger_shim_requests_total{verb,code}             counter
//   fitledger_shim_request_duration_seconds{verb}        histogram, 50us .. 5s
//   fitledger_shim_server_errors_total{verb,grpc_code}   counter (failed gRPC calls)
#ifndef FITLEDGER_CLIENT_SHIM_METRICS_H_
#define FITLEDGER_CLIENT_SHIM_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace fitledger::shim {

// Thread-safe: every method takes mu_ briefly and never calls out while holding it.
class Metrics {
 public:
  // Upper bounds of the duration buckets, in seconds (+Inf is implicit).
  static constexpr std::array<double, 16> kBuckets = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,   0.05,   0.1,     0.25,   0.5,   1.0,   2.5,   5.0};

  // Counts one HTTP request for `verb` ("filter", ..., or "other") answered with `code`.
  void ObserveRequest(absl::string_view verb, int code, absl::Duration duration);
  // Counts one failed gRPC call; `grpc_code` is the canonical name, e.g. "UNAVAILABLE".
  void CountServerError(absl::string_view verb, absl::string_view grpc_code);

  // The Prometheus text exposition (version 0.0.4).
  std::string Render() const;

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> counts{};  // per bucket, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };

  mutable Mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Histogram> durations_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, uint64_t> server_errors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_METRICS_H_
