// A small Prometheus registry: counters and histograms with labels, and gauges computed at
// scrape time. Rendered in the text exposition format (version 0.0.4).
#ifndef FITLEDGER_COMMON_METRICS_H_
#define FITLEDGER_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace fitledger {

using Labels = std::vector<std::string>;  // values, in the order of the family's label names

// Thread-safe. Children are created on first use and live as long as the family.
class CounterFamily {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> label_names);
  void Increment(const Labels& labels, uint64_t by = 1);
  uint64_t Value(const Labels& labels) const;
  void Render(std::string* out) const;

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  mutable SharedMutex mu_;
  std::map<Labels, std::unique_ptr<std::atomic<uint64_t>>> children_ ABSL_GUARDED_BY(mu_);
};

// Thread-safe. `bounds` are the upper bounds of the buckets, ascending (+Inf is implied).
class HistogramFamily {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> bounds);
  void Observe(const Labels& labels, double value);
  uint64_t Count(const Labels& labels) const;
  void Render(std::string* out) const;

 private:
  // Counted with atomics, so observing takes the family's lock shared only.
  struct Child {
    explicit Child(size_t bounds);
    std::vector<std::atomic<uint64_t>> buckets;  // cumulative: observations <= bounds_[i]
    std::atomic<uint64_t> count{0};
    std::atomic<double> sum{0};
  };
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable SharedMutex mu_;
  std::map<Labels, std::unique_ptr<Child>> children_ ABSL_GUARDED_BY(mu_);
};

// A gauge family whose samples are computed at scrape time by `collect`.
struct GaugeSample {
  Labels labels;
  double value = 0;
};

// Owns the families; renders them all. Thread-safe; register everything before serving.
class MetricsRegistry {
 public:
  CounterFamily* Counter(std::string name, std::string help, std::vector<std::string> label_names);
  HistogramFamily* Histogram(std::string name, std::string help,
                             std::vector<std::string> label_names, std::vector<double> bounds);
  void Gauge(std::string name, std::string help, std::vector<std::string> label_names,
             std::function<std::vector<GaugeSample>()> collect);
  // A counter whose (monotonic) values are kept elsewhere and read at scrape time.
  void CounterFunc(std::string name, std::string help, std::vector<std::string> label_names,
                   std::function<std::vector<GaugeSample>()> collect);
  std::string Render() const;

 private:
  struct GaugeFamily {
    const char* type;
    std::string name;
    std::string help;
    std::vector<std::string> label_names;
    std::function<std::vector<GaugeSample>()> collect;
  };
  mutable SharedMutex mu_;
  std::vector<std::unique_ptr<CounterFamily>> counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<HistogramFamily>> histograms_ ABSL_GUARDED_BY(mu_);
  std::vector<GaugeFamily> gauges_ ABSL_GUARDED_BY(mu_);
};

// Latency buckets in seconds from 50 us to 5 s.
std::vector<double> LatencyBuckets();

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_METRICS_H_
