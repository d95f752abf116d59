#include "common/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fitledger {
namespace {

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string LabelText(const std::vector<std::string>& names, const Labels& values,
                      const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", names[i], "=\"", Escape(values[i]), "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, out.empty() ? "" : ",", extra);
  return out.empty() ? "" : absl::StrCat("{", out, "}");
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrFormat("%.9g", v);
}

void Header(std::string* out, const std::string& name, const std::string& help, const char* type) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

CounterFamily::CounterFamily(std::string name, std::string help,
                             std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

void CounterFamily::Increment(const Labels& labels, uint64_t by) {
  std::atomic<uint64_t>* child = nullptr;
  {
    ReaderMutexLock lock(&mu_);  // the common case: the child exists; counting takes no writer
    auto it = children_.find(labels);
    if (it != children_.end()) child = it->second.get();
  }
  if (child == nullptr) {
    MutexLock lock(&mu_);
    auto& slot = children_[labels];
    if (!slot) slot = std::make_unique<std::atomic<uint64_t>>(0);
    child = slot.get();
  }
  child->fetch_add(by, std::memory_order_relaxed);
}

uint64_t CounterFamily::Value(const Labels& labels) const {
  ReaderMutexLock lock(&mu_);
  auto it = children_.find(labels);
  return it == children_.end() ? 0 : it->second->load();
}

void CounterFamily::Render(std::string* out) const {
  Header(out, name_, help_, "counter");
  ReaderMutexLock lock(&mu_);
  for (const auto& [labels, value] : children_) {
    absl::StrAppend(out, name_, LabelText(label_names_, labels), " ", value->load(), "\n");
  }
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names, std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

HistogramFamily::Child::Child(size_t bounds) : buckets(bounds) {}

void HistogramFamily::Observe(const Labels& labels, double value) {
  Child* child = nullptr;
  {
    ReaderMutexLock lock(&mu_);  // the common case: the child exists; observing takes no writer
    auto it = children_.find(labels);
    if (it != children_.end()) child = it->second.get();
  }
  if (child == nullptr) {
    MutexLock lock(&mu_);
    auto& slot = children_[labels];
    if (!slot) slot = std::make_unique<Child>(bounds_.size());
    child = slot.get();
  }
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) child->buckets[i].fetch_add(1, std::memory_order_relaxed);
  }
  child->sum.fetch_add(value, std::memory_order_relaxed);
  child->count.fetch_add(1, std::memory_order_relaxed);
}

uint64_t HistogramFamily::Count(const Labels& labels) const {
  ReaderMutexLock lock(&mu_);
  auto it = children_.find(labels);
  return it == children_.end() ? 0 : it->second->count.load();
}

void HistogramFamily::Render(std::string* out) const {
  Header(out, name_, help_, "histogram");
  ReaderMutexLock lock(&mu_);
  for (const auto& [labels, child] : children_) {
    // An observation racing the scrape may show in some buckets and not yet in the count: keep
    // the buckets cumulative (non-decreasing, none above the count).
    const uint64_t count = child->count.load();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      cumulative = std::min(std::max(cumulative, child->buckets[i].load()), count);
      absl::StrAppend(
          out, name_, "_bucket",
          LabelText(label_names_, labels, absl::StrCat("le=\"", Number(bounds_[i]), "\"")), " ",
          cumulative, "\n");
    }
    absl::StrAppend(out, name_, "_bucket", LabelText(label_names_, labels, "le=\"+Inf\""), " ",
                    count, "\n");
    absl::StrAppend(out, name_, "_sum", LabelText(label_names_, labels), " ",
                    Number(child->sum.load()), "\n");
    absl::StrAppend(out, name_, "_count", LabelText(label_names_, labels), " ", count, "\n");
  }
}

CounterFamily* MetricsRegistry::Counter(std::string name, std::string help,
                                        std::vector<std::string> label_names) {
  MutexLock lock(&mu_);
  counters_.push_back(
      std::make_unique<CounterFamily>(std::move(name), std::move(help), std::move(label_names)));
  return counters_.back().get();
}

HistogramFamily* MetricsRegistry::Histogram(std::string name, std::string help,
                                            std::vector<std::string> label_names,
                                            std::vector<double> bounds) {
  MutexLock lock(&mu_);
  histograms_.push_back(std::make_unique<HistogramFamily>(
      std::move(name), std::move(help), std::move(label_names), std::move(bounds)));
  return histograms_.back().get();
}

void MetricsRegistry::Gauge(std::string name, std::string help,
                            std::vector<std::string> label_names,
                            std::function<std::vector<GaugeSample>()> collect) {
  MutexLock lock(&mu_);
  gauges_.push_back(
      {"gauge", std::move(name), std::move(help), std::move(label_names), std::move(collect)});
}

void MetricsRegistry::CounterFunc(std::string name, std::string help,
                                  std::vector<std::string> label_names,
                                  std::function<std::vector<GaugeSample>()> collect) {
  MutexLock lock(&mu_);
  gauges_.push_back(
      {"counter", std::move(name), std::move(help), std::move(label_names), std::move(collect)});
}

std::string MetricsRegistry::Render() const {
  std::string out;
  ReaderMutexLock lock(&mu_);
  for (const auto& c : counters_) c->Render(&out);
  for (const auto& h : histograms_) h->Render(&out);
  for (const auto& g : gauges_) {
    Header(&out, g.name, g.help, g.type);
    for (const GaugeSample& s : g.collect()) {
      absl::StrAppend(&out, g.name, LabelText(g.label_names, s.labels), " ", Number(s.value), "\n");
    }
  }
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
          0.025,   0.05,   0.1,     0.25,   0.5,   1,      2.5,   5};
}

}  // namespace fitledger
