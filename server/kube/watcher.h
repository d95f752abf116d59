// The server's view of the cluster: LIST + WATCH of nodes and pods, applied to the ledger, and of
// the pods the kubelet failed, for the kubelet-rejection detector.
#ifndef FITLEDGER_SERVER_KUBE_WATCHER_H_
#define FITLEDGER_SERVER_KUBE_WATCHER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "model/pod.h"
#include "server/kube/watch_event.h"
#include "server/ledger/ledger.h"

namespace fitledger::kube {

class ApiClient;
enum class StreamFormat;  // api_client.h

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

// A pod the kubelet refused at admission: phase Failed with a reason starting "OutOf" (OutOfcpu,
// OutOfmemory, OutOfpods, OutOf<extended resource>; kubelet lifecycle/predicate.go and
// kubelet.go rejectPod), or "UnexpectedAdmissionError", the device manager's refusal of a
// device-plugin resource it has too few devices of (kubelet cm/devicemanager/manager.go,
// cm/admission/errors.go): the scheduler was satisfied and the node said no. Other Failed pods
// (evictions, failed jobs, node affinity or OS mismatches at admission) are not overcommit and
// are not counted.
struct KubeletRejection {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::string node;
  std::string reason;
  std::string message;
  absl::Time seen_at;
  // Already in the API when this server first listed Failed pods: it happened before this process
  // started (a previous process may have counted it), so it is listed but never counted.
  bool before_start = false;
};

// True for a pod the kubelet rejected at admission (see KubeletRejection) whose schedulerName is
// one of scheduler_names (any, when empty).
bool IsKubeletRejection(const Pod& pod, const std::vector<std::string>& scheduler_names = {});

struct WatcherStats {
  uint64_t lists = 0;        // states read by a complete LIST (every stream)
  uint64_t watch_lists = 0;  // states read by a WatchList (every stream)
  // False once the API server refused a WatchList (then every stream lists).
  bool watch_list_supported = true;
  uint64_t relists_gone = 0;    // LISTs forced by 410 Gone
  uint64_t watch_restarts = 0;  // watches resumed after they ended or dropped
  uint64_t events = 0;          // watch events applied (bookmarks excluded)
  uint64_t bookmarks = 0;
  uint64_t decode_errors = 0;
  // Watch streams (WatchLists and watches) the API server answered, by encoding: Kubernetes'
  // protobuf (WatcherOptions::protobuf, where the server speaks it) or JSON.
  uint64_t streams_protobuf = 0;
  uint64_t streams_json = 0;
  // Kubelet rejections that happened while this process ran, each pod once (by UID): the ones
  // the Failed-pods watch showed, and the ones a relist found that the last state did not have.
  // Rejected pods already in the API at the first list are not counted (before_start).
  uint64_t rejections_total = 0;
  // The same by (reason, node): monotonic, for the alerting counter.
  std::map<std::pair<std::string, std::string>, uint64_t> rejections_by_reason_node;
  // Rejected pods the API shows now (counted or before_start), as of the last event or list.
  uint64_t rejected_pods_in_api = 0;
  bool rejections_synced = false;  // the first list of Failed pods has been applied
  absl::Time last_event;           // the last event or bookmark of either kind
  bool nodes_synced = false;
  bool pods_synced = false;
  // The last pods resourceVersion applied (list, event or bookmark).
  std::string pods_resource_version;
};

// What RequestConsistentPodList's LIST read.
struct ConsistentPodList {
  size_t pods = 0;               // pods in the state (the pod stream's selector)
  std::string resource_version;  // the state's; the watch resumed from it
};

// Keeps the ledger in step with the API, and counts kubelet rejections. Three list + watch
// streams, one thread each: nodes and pods (pod_field_selector) feed the ledger; Failed pods
// (failed_pod_field_selector) feed the rejection detector.
//
// Each stream reads its state the way client-go's reflector does (tools/cache/reflector.go),
// so the API server serves it from its watch cache rather than etcd:
//   - a WatchList first (watch, sendInitialEvents=true, resourceVersionMatch=NotOlderThan,
//     allowWatchBookmarks=true, from the last resourceVersion or ""): the state streams as ADDED
//     events and ends with a BOOKMARK annotated k8s.io/initial-events-end; the state replaces the
//     stream's and the same watch goes on. A server that refuses it (a 4xx other than 410 / 429:
//     the WatchList feature gate off, or a server too old to know it) is not asked again; any
//     other failure falls back to a LIST this time.
//   - otherwise a LIST: resourceVersion=0 at first (from the cache, which ignores limit; if the
//     server pages anyway, the continue tokens are followed), the last resourceVersion after a
//     410 from a watch (not older than it, unpaged, from the cache), and "" (a consistent read,
//     paged by page_size) when the one asked was refused with 410 Expired or 504 "too large
//     resource version". An expired continue token restarts the list.
// Then WATCH from the state's resourceVersion with bookmarks, resuming from the last seen
// resourceVersion when the stream ends or drops (capped exponential backoff with jitter on
// errors); a 410 (HTTP status or ERROR event) means a new state, and so does a line longer than
// max_event_bytes (then by a paged consistent LIST, which makes progress where the stream cannot).
// Events are applied in order, each once. A damaged line (not JSON) ends the stream and the watch
// resumes before it; a well-formed event whose object cannot be decoded is counted in
// decode_errors and skipped (a DELETED one still removes the pod or node by UID / name), as a
// LIST skips such items: it must not stall every later event.
//
// RequestConsistentPodList forces the pod stream to read a new state by a consistent LIST and
// goes on from it, on the same thread as every other pod state and event (below).
//
// On the ledger's pod stream a DELETED event removes the pod whatever phase it carries (the API
// server sends a pod that leaves the selector with its previous content). The rejection detector
// keeps the UIDs of the rejected pods the API shows: a pod is counted the first time it appears,
// from a watch event or in a new state, and forgotten when it is deleted (a UID never comes
// back); the first state after start records what is already there without counting it.
//
// Thread-safe. Start() spawns the threads, Stop() joins them; the constructor spawns nothing.
class Watcher {
 public:
  // `client` and `ledger` must outlive this.
  Watcher(ApiClient* client, Ledger* ledger, WatcherOptions options);
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  void Start();
  void Stop();

  // True once the first full LIST of both nodes and pods has been applied.
  bool synced() const;

  // Asks the pod stream for a consistent LIST sent after this call: resourceVersion unset (the
  // latest state, read from etcd or from a cache proven as fresh; paged by page_size), whatever
  // the stream was doing. The pods thread interrupts its watch (or the LIST it was reading),
  // takes Ledger::BeginPodList's token, LISTs, applies the state with Ledger::ReplacePods (so
  // assumptions it lacks that were bound before it was sent are released, the others kept) and
  // watches on from the LIST's resourceVersion: an event is applied before the state (from the
  // interrupted watch) or after it (from the new one), never lost, and one the state already
  // holds is at most applied again (events carry whole objects: idempotent). `done` runs on the
  // pods thread once such a LIST has been applied; requests made while one is pending share the
  // next LIST; a LIST that fails is retried with backoff, and `done` never runs after Stop.
  // Thread-safe; does not block.
  void RequestConsistentPodList(std::function<void(const ConsistentPodList&)> done);
  WatcherStats stats() const;
  // The most recent kubelet rejections (at most 1000), oldest first, including the ones already
  // in the API at start (before_start).
  std::deque<KubeletRejection> rejections() const;

 private:
  // One list + watch: the ledger's nodes, the ledger's pods, or the detector's Failed pods.
  enum class Stream { kNodes, kPods, kFailedPods };
  // Where a stream is. `resource_version` is the last one applied ("" before the first state).
  struct Cursor {
    std::string resource_version;
    bool need_state = true;  // the next request reads a whole state (start, 410, overflow)
    // The last state read at `resource_version` was refused (410 / too large): read at "".
    bool version_unavailable = false;
    bool list_only = false;  // read the next state by a paged LIST, not a WatchList
  };
  // The cancel flag of `stream`'s requests: stop_, or for pods pods_interrupt_ (Stop and
  // RequestConsistentPodList set it).
  const std::atomic<bool>* CancelFlag(Stream stream) const {
    return stream == Stream::kPods ? &pods_interrupt_ : &stop_;
  }
  bool Cancelled(Stream stream) const { return CancelFlag(stream)->load(); }
  // The pods thread: true if a consistent LIST was asked for and not yet applied.
  bool ConsistentPodListPending() const;
  // The pods thread: LIST consistently for the requests made so far, then run their `done`.
  absl::Status ForcedPodList(Cursor* cursor);
  // A stream's state as one of the three replace calls takes it.
  struct State {
    std::vector<NodeRecord> nodes;
    std::deque<PodRecord> pods;  // see Ledger::ReplacePods
    std::vector<Pod> rejected;   // the Failed-pods stream keeps kubelet rejections only
  };
  void Run(Stream stream);
  // LIST every page at `version` ("", "0" or N; see the class comment); on success applies the
  // state, sets cursor->resource_version and `*listed` (if not null) to the objects in it.
  // OutOfRange when the server refused `version` (410 Expired, 504 too large resource version);
  // Cancelled when the stream's cancel flag was set.
  absl::Status List(Stream stream, const std::string& version, Cursor* cursor,
                    size_t* listed = nullptr);
  // A WatchList from cursor->resource_version: applies the initial state at its end bookmark, then
  // events until the stream ends. Unimplemented when the server refuses WatchList; OutOfRange
  // when it refused the resourceVersion before the state was complete.
  absl::Status WatchList(Stream stream, Cursor* cursor);
  // WATCH from cursor->resource_version until the stream ends; a 410 sets need_state.
  absl::Status Watch(Stream stream, Cursor* cursor);
  // Counts a stream the API server answered in `format` (at its first event); sets *counted.
  void CountStream(StreamFormat format, bool* counted);
  // The Accept header of the watches (WatcherOptions::protobuf).
  const char* Accept() const {
    return options_.protobuf ? "application/vnd.kubernetes.protobuf, application/json"
                             : "application/json";
  }
  // Applies one event from ApiClient::Stream in `format`: a JSON line (kStreamLinePadding
  // readable bytes follow it: it is decoded in place) or a protobuf frame; returns false to stop
  // the stream (ERROR event).
  bool ApplyEvent(Stream stream, StreamFormat format, std::string_view line,
                  std::string* resource_version, bool* gone, std::string* error);
  // Replaces the state of `stream` (the ledger's nodes or pods, or the rejection detector's).
  // `list_started`: Ledger::BeginPodList's token when the state is a consistent read sent after
  // it, else 0 (Ledger::ReplacePods).
  void ReplaceState(Stream stream, State* state, uint64_t list_started);
  // A damaged or undecodable item of a state: counted, skipped.
  void AddDecodeErrors(uint64_t n);
  // The path of a LIST or WATCH of `stream`, with its field selector.
  std::string BasePath(Stream stream, absl::string_view query) const;
  // The rejection detector's state after a LIST of Failed pods: `rejected` are the kubelet
  // rejections in it.
  void ReplaceRejections(const std::vector<Pod>& rejected);
  // A kubelet rejection seen by a watch event (counted if its UID is new).
  void NoteRejection(const Pod& pod);
  // A Failed pod deleted from the API.
  void ForgetRejection(const std::string& uid);
  // Records `pod` as known and, unless `before_start`, counts it. Returns false if known already.
  bool AddRejectionLocked(const Pod& pod, bool before_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotePodsResourceVersion(const std::string& resource_version);
  // Sleeps up to `d`; returns true if stopping.
  bool WaitOrStop(absl::Duration d);

  // Constant after construction.
  ApiClient* const client_;
  Ledger* const ledger_;
  const WatcherOptions options_;

  std::atomic<bool> stop_{false};
  // The pods stream's cancel flag (CancelFlag).
  std::atomic<bool> pods_interrupt_{false};
  // Set when the API server refused a WatchList: every stream lists from then on.
  std::atomic<bool> watch_list_refused_{false};
  Mutex stop_mu_;
  CondVar stop_cv_;  // signalled when stopping_ is set
  // Stop() was called: what WaitOrStop waits on (stop_ is its lock-free copy, the streams'
  // cancel flag).
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread nodes_thread_;
  std::thread pods_thread_;
  std::thread failed_pods_thread_;

  mutable SharedMutex mu_;
  WatcherStats stats_ ABSL_GUARDED_BY(mu_);
  // The last 1000 rejections, for ListRejections.
  std::deque<KubeletRejection> rejections_ ABSL_GUARDED_BY(mu_);
  // UIDs of the rejected pods the API shows (the dedup set; independent of the deque's bound).
  absl::flat_hash_set<std::string> rejected_uids_ ABSL_GUARDED_BY(mu_);

  // RequestConsistentPodList: requests are numbered; the pods thread applies a LIST sent after
  // request N, then sets consistent_lists_done_ to N and runs the `done` of requests <= N.
  mutable Mutex lists_mu_;
  uint64_t consistent_lists_asked_ ABSL_GUARDED_BY(lists_mu_) = 0;
  uint64_t consistent_lists_done_ ABSL_GUARDED_BY(lists_mu_) = 0;
  std::vector<std::pair<uint64_t, std::function<void(const ConsistentPodList&)>>> list_waiters_
      ABSL_GUARDED_BY(lists_mu_);
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_WATCHER_H_
