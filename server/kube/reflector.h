// One list + watch of one kind of object, kept in step with the API the way client-go's reflector
// is (tools/cache/reflector.go), feeding a sink: it knows the protocol (WatchList, LIST pages,
// WATCH, 410, bookmarks, backoff, a relist on demand), and nothing of what the objects are for.
// The Watcher (watcher.h) runs three: nodes and pods for the ledger, Failed pods for the
// rejection detector; the LeaseWatcher (lease_watcher.h) one, the leader fence's Lease.
#ifndef FITLEDGER_SERVER_KUBE_REFLECTOR_H_
#define FITLEDGER_SERVER_KUBE_REFLECTOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "server/kube/api_transport.h"
#include "server/kube/watch_event.h"

namespace fitledger::kube {

// One state as a Reflector reads it: a LIST's items (each as an ADDED event), or a WatchList's
// initial events, where a later event for an object replaces (MODIFIED) or removes (DELETED) the
// earlier one. Used by the reflector's thread only.
class ReflectorState {
 public:
  virtual ~ReflectorState() = default;
  // One object or event of the state, in order (ADDED, MODIFIED or DELETED; a DELETED one may
  // carry only `deleted_key`). The object may be moved from. False if it could not be used (it is
  // skipped and counted as a decode error).
  virtual bool Add(WatchEvent& event) = 0;
  // The state is complete: it replaces the sink's. `token` is what ReflectorSink::BeginState
  // returned for this read. Returns how many objects the state holds.
  virtual size_t Commit(uint64_t token) = 0;
};

// Where a Reflector's states and events go. Called from the reflector's thread only, in order.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // A state is about to be requested; `consistent`: at resourceVersion "" (the most recent, sent
  // after this call), else from the watch cache (may be older). The result is handed to
  // ReflectorState::Commit (Ledger::BeginPodList's token, for one).
  virtual uint64_t BeginState(bool consistent) {
    (void)consistent;
    return 0;
  }
  // An empty state to read the next one into.
  virtual std::unique_ptr<ReflectorState> NewState() = 0;
  // One event after the state: ADDED, MODIFIED or DELETED (a DELETED one may carry only
  // `deleted_key`). The object may be moved from. False if it could not be used (skipped,
  // counted as a decode error).
  virtual bool Apply(WatchEvent& event) = 0;
};

struct ReflectorOptions {
  // For logs: "nodes", "pods", "failed pods".
  std::string name;
  // The collection's path ("/api/v1/pods") and the objects it holds (the decoder).
  std::string path;
  ObjectKind kind = ObjectKind::kPod;
  // fieldSelector of every LIST and WATCH; empty: none.
  std::string field_selector;
  // Pages of a consistent LIST (resourceVersion=""); also sent with resourceVersion=0, which the
  // API server's watch cache serves whole (it ignores limit there).
  int64_t page_size = 500;
  // Read states as WatchLists (a watch with sendInitialEvents=true) where the API server
  // supports it; false: LIST + WATCH only.
  bool watch_list = true;
  // Shared by the reflectors of one process: set once the API server refused a WatchList (every
  // reflector lists from then on). Null: this reflector's own flag.
  std::atomic<bool>* watch_list_refused = nullptr;
  // Ask for Kubernetes' protobuf on the watches; the answer's Content-Type decides the decoding.
  // Leases are read as JSON only (false).
  bool protobuf = true;
  // After a 410 from a watch, read the next state at "" (the most recent, paged) rather than
  // not older than the last resourceVersion: a consistent read sent after a bind holds it (the
  // ledger's pods).
  bool consistent_after_gone = false;
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(10);
  absl::Duration request_timeout = absl::Seconds(60);
  // Asked of the API server (timeoutSeconds); the watch is then resumed.
  int64_t watch_timeout_seconds = 300;
  // A watch line (one event) longer than this aborts the stream and forces a paged relist.
  size_t max_event_bytes = 16 << 20;
};

struct ReflectorStats {
  uint64_t lists = 0;           // states read by a complete LIST
  uint64_t watch_lists = 0;     // states read by a WatchList
  uint64_t relists_gone = 0;    // states forced by 410 Gone
  uint64_t watch_restarts = 0;  // watches resumed after they ended or dropped
  uint64_t events = 0;          // watch events applied (bookmarks excluded)
  uint64_t bookmarks = 0;
  uint64_t decode_errors = 0;
  // Watch streams the API server answered, by encoding.
  uint64_t streams_protobuf = 0;
  uint64_t streams_json = 0;
  bool synced = false;    // a state has been committed
  absl::Time last_event;  // the last event or bookmark
  // The last resourceVersion applied (state, event or bookmark).
  std::string resource_version;
};

// What RequestConsistentList's LIST read.
struct ConsistentList {
  size_t objects = 0;            // in the state
  std::string resource_version;  // the state's; the watch resumed from it
};

// Reads states and events into `sink` on its own thread:
//   - a WatchList first (watch, sendInitialEvents=true, resourceVersionMatch=NotOlderThan,
//     allowWatchBookmarks=true, from the last resourceVersion or ""): the state streams as events
//     and ends with a BOOKMARK annotated k8s.io/initial-events-end; the state is committed and
//     the same watch goes on. A server that refuses it (a 4xx other than 401 / 408 / 410 / 429:
//     the WatchList feature gate off, or a server too old to know it), or that sends a bookmark
//     without the annotation before the state's end (it ignored sendInitialEvents), is not asked
//     again (watch_list_refused); any other failure falls back to a LIST this time.
//   - otherwise a LIST: resourceVersion=0 at first (from the cache, which ignores limit; if the
//     server pages anyway, the continue tokens are followed), the last resourceVersion after a
//     410 from a watch (not older than it, unpaged, from the cache), and "" (a consistent read,
//     paged by page_size) when the one asked was refused with 410 Expired or 504 "too large
//     resource version", after a line longer than max_event_bytes, or (consistent_after_gone)
//     after any 410. An expired continue token restarts the list.
// Then WATCH from the state's resourceVersion with bookmarks, resuming from the last seen
// resourceVersion when the stream ends or drops (capped exponential backoff with jitter on
// errors, and on streams that end at once). A damaged line (not an event) ends the stream and
// the watch resumes before it; a well-formed event whose object cannot be decoded is counted and
// skipped (a DELETED one still reaches the sink with its key), as a LIST skips such items.
//
// Thread-safe. Start() spawns the thread, Stop() joins it; the constructor spawns nothing.
class Reflector {
 public:
  // `api` and `sink` must outlive this.
  Reflector(ApiTransport* api, ReflectorSink* sink, ReflectorOptions options);
  ~Reflector();
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void Start();
  void Stop();

  // Asks for a consistent LIST sent after this call (resourceVersion unset: the latest state,
  // paged), whatever the reflector was doing: its watch or LIST is interrupted, the LIST's state
  // is committed (BeginState(true)'s token taken before it is sent) and the watch goes on from its
  // resourceVersion, so an event is applied before the state or after it, never lost. `done` runs
  // on the reflector's thread once such a LIST has been committed; requests made while one is
  // pending share the next LIST; a LIST that fails is retried with backoff, and `done` never runs
  // after Stop. Does not block.
  void RequestConsistentList(std::function<void(const ConsistentList&)> done);

  ReflectorStats stats() const;
  bool synced() const;
  bool watch_list_refused() const { return watch_list_refused_->load(); }

 private:
  // Where the stream is. `resource_version` is the last one applied ("" before the first state).
  struct Cursor {
    std::string resource_version;
    bool need_state = true;  // the next request reads a whole state (start, 410, overflow)
    // The last state read at `resource_version` was refused (410 / too large): read at "".
    bool version_unavailable = false;
    bool list_only = false;     // read the next state by a paged LIST, not a WatchList
    uint64_t stream_items = 0;  // lines (events, bookmarks) the last watch stream carried
  };
  bool Cancelled() const { return interrupt_.load(); }
  void Run();
  // True if a consistent LIST was asked for and not yet committed.
  bool ConsistentListPending() const;
  // LIST consistently for the requests made so far, then run their `done`.
  absl::Status ForcedList(Cursor* cursor);
  // LIST every page at `version` ("", "0" or N); commits the state and sets the cursor, and
  // `*listed` (if not null) to the objects in it. OutOfRange when the server refused `version`
  // (410 Expired, 504 too large resource version); Cancelled when interrupted.
  absl::Status List(const std::string& version, Cursor* cursor, size_t* listed = nullptr);
  // A WatchList from the cursor: commits the initial state at its end bookmark, then applies
  // events until the stream ends. Unimplemented when the server refuses WatchList; OutOfRange
  // when it refused the resourceVersion before the state was complete.
  absl::Status WatchList(Cursor* cursor);
  // WATCH from cursor->resource_version until the stream ends; a 410 sets need_state.
  absl::Status Watch(Cursor* cursor);
  // Reads a watch stream at `path`: each line goes to `initial_line` while `*initial` is true
  // (a WatchList's state; both may be null), then to ApplyEvent. A line too long
  // (ResourceExhausted) asks the cursor for a paged LIST.
  absl::StatusOr<long> StreamEvents(
      const std::string& path, Cursor* cursor,
      const std::function<bool(StreamFormat, absl::string_view)>& initial_line, const bool* initial,
      bool* gone, std::string* error, std::string* error_body);
  // One event after the state; false stops the stream (ERROR event, damaged line).
  bool ApplyEvent(StreamFormat format, std::string_view line, std::string* resource_version,
                  bool* gone, std::string* error);
  // The state read: set the cursor and the stats.
  void Committed(const std::string& resource_version, Cursor* cursor);
  void CountStream(StreamFormat format, bool* counted);
  void AddDecodeErrors(uint64_t n);
  void NoteResourceVersion(const std::string& resource_version);
  std::string Path(absl::string_view query) const;
  const char* Accept() const {
    return options_.protobuf ? "application/vnd.kubernetes.protobuf, application/json"
                             : "application/json";
  }
  // Sleeps up to `d`; returns true if stopping.
  bool WaitOrStop(absl::Duration d);

  // Constant after construction.
  ApiTransport* const api_;
  ReflectorSink* const sink_;
  const ReflectorOptions options_;
  std::atomic<bool> own_watch_list_refused_{false};
  std::atomic<bool>* const watch_list_refused_;

  std::atomic<bool> stop_{false};
  // The cancel flag of every request: set by Stop and by RequestConsistentList.
  std::atomic<bool> interrupt_{false};
  Mutex stop_mu_;
  CondVar stop_cv_;  // signalled when stopping_ is set
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_;

  mutable Mutex mu_;
  ReflectorStats stats_ ABSL_GUARDED_BY(mu_);

  // RequestConsistentList: requests are numbered; the thread commits a LIST sent after request
  // N, then sets lists_done_ to N and runs the `done` of requests <= N.
  mutable Mutex lists_mu_;
  uint64_t lists_asked_ ABSL_GUARDED_BY(lists_mu_) = 0;
  uint64_t lists_done_ ABSL_GUARDED_BY(lists_mu_) = 0;
  std::vector<std::pair<uint64_t, std::function<void(const ConsistentList&)>>> list_waiters_
      ABSL_GUARDED_BY(lists_mu_);
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_REFLECTOR_H_
