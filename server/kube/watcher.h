// The server's view of the cluster: LIST + WATCH of nodes and pods, applied to the ledger, and of
// the pods the kubelet failed, for the kubelet-rejection detector.
#ifndef FITLEDGER_SERVER_KUBE_WATCHER_H_
#define FITLEDGER_SERVER_KUBE_WATCHER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "server/kube/api_transport.h"
#include "server/kube/reflector.h"
#include "server/kube/rejection_detector.h"
#include "server/ledger/ledger.h"

namespace fitledger::kube {

struct WatcherOptions {
  // Pages of a consistent LIST (resourceVersion=""); also sent with resourceVersion=0, which the
  // API server's watch cache serves whole (it ignores limit there).
  int64_t page_size = 500;
  // Get each stream's state as a WatchList (a watch with sendInitialEvents=true) where the API
  // server supports it; false: LIST + WATCH only.
  bool watch_list = true;
  // Ask for Kubernetes' protobuf on the watches (Accept: application/vnd.kubernetes.protobuf,
  // application/json); the answer's Content-Type decides how each stream is decoded. LIST pages
  // are JSON either way.
  bool protobuf = true;
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(10);
  absl::Duration request_timeout = absl::Seconds(60);
  // Asked of the API server (timeoutSeconds); the watch is then resumed.
  int64_t watch_timeout_seconds = 300;
  // Kubernetes' own scheduler selector: finished pods hold nothing. A pod that finishes leaves
  // this watch as DELETED carrying its previous (non-terminal) content (the API server's watch
  // cache, cacher/cache_watcher.go convertToWatchEvent), so the ledger's pod watch never sees
  // `phase: Failed`.
  std::string pod_field_selector = "status.phase!=Succeeded,status.phase!=Failed";
  // The rejection detector's own list + watch: only pods in phase Failed (the API server supports
  // status.phase as a pod field selector, pkg/registry/core/pod/strategy.go ToSelectableFields).
  std::string failed_pod_field_selector = "status.phase=Failed";
  // The rejection detector counts only pods with one of these spec.schedulerName values (the
  // schedulers that call fitledger); empty: every pod.
  std::vector<std::string> scheduler_names;
  // A watch line (one event) longer than this aborts the stream and forces a paged relist, so a
  // runaway stream cannot exhaust memory. Objects are at most ~1.5 MiB (etcd's limit).
  size_t max_event_bytes = 16 << 20;
};

// The three streams' ReflectorStats (counters summed) and the rejection detector's.
struct WatcherStats {
  uint64_t lists = 0;
  uint64_t watch_lists = 0;
  bool watch_list_supported = true;  // false once the API server refused a WatchList
  uint64_t relists_gone = 0;
  uint64_t watch_restarts = 0;
  uint64_t events = 0;
  uint64_t bookmarks = 0;
  uint64_t decode_errors = 0;
  uint64_t streams_protobuf = 0;
  uint64_t streams_json = 0;
  // RejectionStats' total, by_reason_node and in_api.
  uint64_t rejections_total = 0;
  std::map<std::pair<std::string, std::string>, uint64_t> rejections_by_reason_node;
  uint64_t rejected_pods_in_api = 0;
  bool rejections_synced = false;  // the first state of Failed pods has been applied
  absl::Time last_event;           // the last event or bookmark of any stream
  bool nodes_synced = false;
  bool pods_synced = false;
  std::string pods_resource_version;  // the pod stream's last resourceVersion
};

// What RequestConsistentPodList's LIST read.
struct ConsistentPodList {
  size_t pods = 0;               // pods in the state (the pod stream's selector)
  std::string resource_version;  // the state's; the watch resumed from it
};

// Keeps the ledger in step with the API, and counts kubelet rejections: three Reflectors
// (reflector.h: the list + watch protocol), one thread each. Nodes and pods (pod_field_selector)
// feed the ledger; Failed pods (failed_pod_field_selector) feed the RejectionDetector.
//
// On the ledger's pod stream a DELETED event removes the pod whatever phase it carries (the API
// server sends a pod that leaves the selector with its previous content). After a 410 the pod
// stream reads its next state consistently (ReflectorOptions::consistent_after_gone), so that a
// pod known bound that the state lacks is known gone (Ledger::ReplacePods).
//
// RequestConsistentPodList forces the pod stream to read a new state by a consistent LIST and
// goes on from it, on the same thread as every other pod state and event.
//
// Thread-safe. Start() spawns the threads, Stop() joins them; the constructor spawns nothing.
class Watcher {
 public:
  // `client` and `ledger` must outlive this.
  Watcher(ApiTransport* client, Ledger* ledger, WatcherOptions options);
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  void Start();
  void Stop();

  // True once the first full state of both nodes and pods has been applied.
  bool synced() const;

  // Asks the pod stream for a consistent LIST sent after this call (Reflector::
  // RequestConsistentList): the state is applied with Ledger::ReplacePods under
  // Ledger::BeginPodList's token taken before it was sent, so assumptions it lacks that were
  // bound before it was sent are released, the others kept. `done` runs on the pods thread once
  // such a LIST has been applied; never after Stop. Thread-safe; does not block.
  void RequestConsistentPodList(std::function<void(const ConsistentPodList&)> done);
  WatcherStats stats() const;
  // The most recent kubelet rejections (at most 1000), oldest first, including the ones already
  // in the API at start (before_start).
  std::deque<KubeletRejection> rejections() const;

 private:
  class NodeSink;
  class PodSink;
  // A stream's options from options_ (called by the constructor, once options_ is set).
  ReflectorOptions StreamOptions(const char* name, bool nodes, std::string selector,
                                 bool consistent_after_gone);

  // Constant after construction.
  const WatcherOptions options_;
  // Set when the API server refused a WatchList: every stream lists from then on.
  std::atomic<bool> watch_list_refused_{false};
  const std::unique_ptr<NodeSink> node_sink_;
  const std::unique_ptr<PodSink> pod_sink_;
  RejectionDetector detector_;
  Reflector nodes_;
  Reflector pods_;
  Reflector failed_pods_;
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_WATCHER_H_
