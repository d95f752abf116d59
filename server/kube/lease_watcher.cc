#include "server/kube/lease_watcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/kube/api_client.h"
#include "server/kube/reflector.h"

namespace fitledger::kube {

// The Lease named `name` in what the reflector reads (the field selector names it; the check is
// for a server that ignored the selector).
class LeaseWatcher::Sink : public ReflectorSink {
 public:
  Sink(std::string name, OnChange on_change)
      : name_(std::move(name)), on_change_(std::move(on_change)) {}

  std::unique_ptr<ReflectorState> NewState() override { return std::make_unique<State>(this); }

  bool Apply(WatchEvent& event) override {
    if (event.type == WatchEvent::Type::kDeleted) {
      const std::string& name = event.lease.has_value() ? event.lease->name : event.deleted_key;
      if (name == name_) on_change_(std::nullopt);
      return true;
    }
    if (!event.lease.has_value()) return false;
    if (event.lease->name == name_) on_change_(event.lease);
    return true;
  }

 private:
  class State : public ReflectorState {
   public:
    explicit State(Sink* sink) : sink_(sink) {}
    bool Add(WatchEvent& event) override {
      const bool deleted = event.type == WatchEvent::Type::kDeleted;
      const std::string& name = event.lease.has_value() ? event.lease->name : event.deleted_key;
      if (!deleted && !event.lease.has_value()) return false;
      if (name != sink_->name_) return true;
      if (deleted) {
        lease_.reset();
      } else {
        lease_ = std::move(event.lease);
      }
      return true;
    }
    size_t Commit(uint64_t) override {
      sink_->on_change_(lease_);
      return lease_.has_value() ? 1 : 0;
    }

   private:
    Sink* const sink_;
    std::optional<LeaseRecord> lease_;
  };

  const std::string name_;
  const OnChange on_change_;
};

namespace {

ReflectorOptions LeaseReflectorOptions(const LeaseWatcherOptions& lease) {
  ReflectorOptions o;
  o.name = "lease";
  o.path = absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", UrlEncode(lease.namespace_name),
                        "/leases");
  o.kind = ObjectKind::kLease;
  o.field_selector = absl::StrCat("metadata.name=", lease.name);
  o.watch_list = false;
  o.protobuf = false;
  o.consistent_after_gone = true;
  o.initial_backoff = lease.initial_backoff;
  o.max_backoff = lease.max_backoff;
  o.request_timeout = lease.request_timeout;
  o.watch_timeout_seconds = lease.watch_timeout_seconds;
  o.max_event_bytes = 1 << 20;
  return o;
}

void Ignore(const ConsistentList&) {}

}  // namespace

LeaseWatcher::LeaseWatcher(ApiTransport* client, LeaseWatcherOptions options, OnChange on_change)
    : min_refresh_interval_(options.min_refresh_interval),
      sink_(std::make_unique<Sink>(options.name, std::move(on_change))),
      reflector_(std::make_unique<Reflector>(client, sink_.get(), LeaseReflectorOptions(options))) {
}

LeaseWatcher::~LeaseWatcher() { Stop(); }

void LeaseWatcher::Start() {
  // The first state is a consistent read too, not the watch cache's (the reflector's own first
  // LIST is at resourceVersion 0): the fence decides who leads from it.
  reflector_->RequestConsistentList(Ignore);
  reflector_->Start();
}

void LeaseWatcher::Stop() { reflector_->Stop(); }

bool LeaseWatcher::synced() const { return reflector_->synced(); }

void LeaseWatcher::Refresh() {
  const int64_t now = absl::ToUnixNanos(absl::Now());
  int64_t last = last_refresh_ns_.load();
  if (now - last < absl::ToInt64Nanoseconds(min_refresh_interval_)) return;
  if (!last_refresh_ns_.compare_exchange_strong(last, now)) return;  // another caller won
  reflector_->RequestConsistentList(Ignore);
}

}  // namespace fitledger::kube
