#include "server/kube/watcher.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "server/kube/objects.h"
#include "server/kube/streamed_state.h"

namespace fitledger::kube {
namespace {

struct NodeKey {
  const std::string& operator()(const NodeRecord& node) const { return node.name; }
};
struct UidKey {
  const std::string& operator()(const PodRecord& pod) const { return pod.uid; }
};

// An object put into a StreamedState: appended if ADDED (new to the state: see StreamedState),
// else replacing the one with its key.
template <typename State, typename T>
void Put(State& state, bool added, T value) {
  if (added) {
    state.Add(std::move(value));
  } else {
    state.Put(std::move(value));
  }
}

}  // namespace

// The ledger's nodes.
class Watcher::NodeSink final : public ReflectorSink {
 public:
  explicit NodeSink(Ledger* ledger) : ledger_(ledger) {}

  class State final : public ReflectorState {
   public:
    explicit State(Ledger* ledger) : ledger_(ledger) {}
    bool Add(WatchEvent& event) override {
      if (event.type == WatchEvent::Type::kDeleted) {
        nodes_.Remove(event.node.has_value() ? event.node->name : event.deleted_key);
      } else if (event.node.has_value()) {
        Put(nodes_, event.type == WatchEvent::Type::kAdded, *std::move(event.node));
      }
      return true;
    }
    size_t Commit(uint64_t) override {
      std::vector<NodeRecord> nodes = nodes_.Take();
      ledger_->ReplaceNodes(nodes);
      return nodes.size();
    }

   private:
    Ledger* const ledger_;
    StreamedState<NodeRecord, NodeKey> nodes_;
  };

  std::unique_ptr<ReflectorState> NewState() override { return std::make_unique<State>(ledger_); }
  bool Apply(WatchEvent& event) override {
    if (event.type == WatchEvent::Type::kDeleted) {
      ledger_->DeleteNode(event.node.has_value() ? event.node->name : event.deleted_key);
    } else if (event.node.has_value()) {
      ledger_->UpsertNode(*event.node);
    }
    return true;
  }

 private:
  Ledger* const ledger_;
};

// The ledger's pods (the scheduler's selector: not finished).
class Watcher::PodSink final : public ReflectorSink {
 public:
  explicit PodSink(Ledger* ledger) : ledger_(ledger) {}

  class State final : public ReflectorState {
   public:
    explicit State(Ledger* ledger) : ledger_(ledger) {}
    bool Add(WatchEvent& event) override {
      if (event.type == WatchEvent::Type::kDeleted) {
        pods_.Remove(event.pod.has_value() ? event.pod->uid : event.deleted_key);
        return true;
      }
      if (!event.pod.has_value()) return false;
      absl::StatusOr<PodRecord> record = ToPodRecord(*std::move(event.pod));
      if (!record.ok()) return false;
      Put(pods_, event.type == WatchEvent::Type::kAdded, *std::move(record));
      return true;
    }
    size_t Commit(uint64_t token) override {
      std::deque<PodRecord> pods = pods_.Take();
      const size_t count = pods.size();
      ledger_->ReplacePods(std::move(pods), token);
      return count;
    }

   private:
    Ledger* const ledger_;
    StreamedState<PodRecord, UidKey, std::deque<PodRecord>> pods_;
  };

  // A consistent read sent after a bind was known holds it, so a bound pod it lacks is gone
  // (Ledger::ReplacePods); a read from the watch cache may predate the bind.
  uint64_t BeginState(bool consistent) override { return consistent ? ledger_->BeginPodList() : 0; }
  std::unique_ptr<ReflectorState> NewState() override { return std::make_unique<State>(ledger_); }
  bool Apply(WatchEvent& event) override {
    if (event.type == WatchEvent::Type::kDeleted) {
      // Removal whatever the event carries: the API server sends a pod that finished (left the
      // selector) with its previous, non-terminal content.
      ledger_->DeletePod(event.pod.has_value() ? event.pod->uid : event.deleted_key);
      return true;
    }
    if (!event.pod.has_value()) return false;
    absl::StatusOr<PodRecord> record = ToPodRecord(*std::move(event.pod));
    if (!record.ok()) return false;
    ledger_->UpsertPod(*std::move(record));
    return true;
  }

 private:
  Ledger* const ledger_;
};

ReflectorOptions Watcher::StreamOptions(const char* name, bool nodes, std::string selector,
                                        bool consistent_after_gone) {
  ReflectorOptions o;
  o.name = name;
  o.path = nodes ? "/api/v1/nodes" : "/api/v1/pods";
  o.kind = nodes ? ObjectKind::kNode : ObjectKind::kPod;
  o.field_selector = std::move(selector);
  o.page_size = options_.page_size;
  o.watch_list = options_.watch_list;
  o.watch_list_refused = &watch_list_refused_;
  o.consistent_after_gone = consistent_after_gone;
  o.protobuf = options_.protobuf;
  o.initial_backoff = options_.initial_backoff;
  o.max_backoff = options_.max_backoff;
  o.request_timeout = options_.request_timeout;
  o.watch_timeout_seconds = options_.watch_timeout_seconds;
  o.max_event_bytes = options_.max_event_bytes;
  return o;
}

Watcher::Watcher(ApiTransport* client, Ledger* ledger, WatcherOptions options)
    : options_(std::move(options)),
      node_sink_(std::make_unique<NodeSink>(ledger)),
      pod_sink_(std::make_unique<PodSink>(ledger)),
      detector_(options_.scheduler_names),
      nodes_(client, node_sink_.get(), StreamOptions("nodes", true, "", false)),
      pods_(client, pod_sink_.get(),
            StreamOptions("pods", false, options_.pod_field_selector, true)),
      failed_pods_(client, &detector_,
                   StreamOptions("failed pods", false, options_.failed_pod_field_selector, false)) {
}

Watcher::~Watcher() { Stop(); }

void Watcher::Start() {
  nodes_.Start();
  pods_.Start();
  failed_pods_.Start();
}

void Watcher::Stop() {
  nodes_.Stop();
  pods_.Stop();
  failed_pods_.Stop();
}

bool Watcher::synced() const { return nodes_.synced() && pods_.synced(); }

void Watcher::RequestConsistentPodList(std::function<void(const ConsistentPodList&)> done) {
  pods_.RequestConsistentList([done = std::move(done)](const ConsistentList& list) {
    done(ConsistentPodList{list.objects, list.resource_version});
  });
}

WatcherStats Watcher::stats() const {
  WatcherStats s;
  const ReflectorStats nodes = nodes_.stats();
  const ReflectorStats pods = pods_.stats();
  const ReflectorStats failed = failed_pods_.stats();
  for (const ReflectorStats* r : {&nodes, &pods, &failed}) {
    s.lists += r->lists;
    s.watch_lists += r->watch_lists;
    s.relists_gone += r->relists_gone;
    s.watch_restarts += r->watch_restarts;
    s.events += r->events;
    s.bookmarks += r->bookmarks;
    s.decode_errors += r->decode_errors;
    s.streams_protobuf += r->streams_protobuf;
    s.streams_json += r->streams_json;
    s.last_event = std::max(s.last_event, r->last_event);
  }
  s.watch_list_supported = !watch_list_refused_.load();
  s.nodes_synced = nodes.synced;
  s.pods_synced = pods.synced;
  s.rejections_synced = failed.synced;
  s.pods_resource_version = pods.resource_version;
  RejectionStats rejections = detector_.stats();
  s.rejections_total = rejections.total;
  s.rejections_by_reason_node = std::move(rejections.by_reason_node);
  s.rejected_pods_in_api = rejections.in_api;
  return s;
}

std::deque<KubeletRejection> Watcher::rejections() const { return detector_.rejections(); }

}  // namespace fitledger::kube
