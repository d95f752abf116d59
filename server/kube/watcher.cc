#include "server/kube/watcher.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/kube/api_client.h"
#include "server/kube/json_walk.h"
#include "server/kube/objects.h"
#include "server/kube/protobuf_objects.h"
#include "server/kube/streamed_state.h"
#include "simdjson.h"

namespace fitledger::kube {
namespace {

using simdjson::ondemand::value;

constexpr size_t kMaxRejectionsKept = 1000;

struct NodeKey {
  const std::string& operator()(const NodeRecord& node) const { return node.name; }
};
struct UidKey {  // a PodRecord's or a Pod's
  template <typename P>
  const std::string& operator()(const P& pod) const {
    return pod.uid;
  }
};

const char* StreamName(bool nodes, bool failed) {
  return nodes ? "nodes" : failed ? "failed pods" : "pods";
}

}  // namespace

static_assert(kStreamLinePadding >= kWatchLinePadding);

namespace {

// One event of a Stream, as ApiClient::Stream handed it on: a JSON line (padded) or a protobuf
// frame.
absl::StatusOr<WatchEvent> DecodeStreamEvent(StreamFormat format, bool nodes,
                                             absl::string_view event,
                                             std::string* resource_version) {
  if (format == StreamFormat::kProtobufFrames) {
    return DecodeProtobufWatchEvent(nodes, event, resource_version);
  }
  return DecodePaddedWatchEvent(nodes, event, resource_version);
}

}  // namespace

bool IsKubeletRejection(const Pod& pod, const std::vector<std::string>& scheduler_names) {
  if (pod.phase != "Failed") return false;
  if (!absl::StartsWith(pod.status_reason, "OutOf") &&
      pod.status_reason != "UnexpectedAdmissionError") {
    return false;
  }
  return scheduler_names.empty() || std::find(scheduler_names.begin(), scheduler_names.end(),
                                              pod.scheduler_name) != scheduler_names.end();
}

Watcher::Watcher(ApiClient* client, Ledger* ledger, WatcherOptions options)
    : client_(client), ledger_(ledger), options_(std::move(options)) {}

Watcher::~Watcher() { Stop(); }

void Watcher::Start() {
  nodes_thread_ = std::thread([this] { Run(Stream::kNodes); });
  pods_thread_ = std::thread([this] { Run(Stream::kPods); });
  failed_pods_thread_ = std::thread([this] { Run(Stream::kFailedPods); });
}

void Watcher::Stop() {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
    stop_ = true;
  }
  pods_interrupt_ = true;
  stop_cv_.SignalAll();
  client_->InterruptStreams(&stop_);
  client_->InterruptStreams(&pods_interrupt_);
  if (nodes_thread_.joinable()) nodes_thread_.join();
  if (pods_thread_.joinable()) pods_thread_.join();
  if (failed_pods_thread_.joinable()) failed_pods_thread_.join();
}

bool Watcher::WaitOrStop(absl::Duration d) {
  const absl::Time wake = absl::Now() + d;
  MutexLock lock(&stop_mu_);
  while (!stopping_ && absl::Now() < wake) {
    stop_cv_.WaitFor(&stop_mu_, absl::ToChronoNanoseconds(wake - absl::Now()));
  }
  return stopping_;
}

bool Watcher::synced() const {
  ReaderMutexLock lock(&mu_);
  return stats_.nodes_synced && stats_.pods_synced;
}

WatcherStats Watcher::stats() const {
  ReaderMutexLock lock(&mu_);
  return stats_;
}

std::deque<KubeletRejection> Watcher::rejections() const {
  ReaderMutexLock lock(&mu_);
  return rejections_;
}

std::string Watcher::BasePath(Stream stream, absl::string_view query) const {
  std::string path =
      absl::StrCat(stream == Stream::kNodes ? "/api/v1/nodes" : "/api/v1/pods", "?", query);
  const std::string& selector = stream == Stream::kNodes        ? std::string()
                                : stream == Stream::kFailedPods ? options_.failed_pod_field_selector
                                                                : options_.pod_field_selector;
  if (!selector.empty()) absl::StrAppend(&path, "&fieldSelector=", UrlEncode(selector));
  return path;
}

void Watcher::Run(Stream stream) {
  const bool nodes = stream == Stream::kNodes;
  const bool failed = stream == Stream::kFailedPods;
  std::mt19937 rng(std::random_device{}());
  absl::Duration backoff = options_.initial_backoff;
  auto fail_wait = [&](const absl::Status& status) {
    // Capped exponential backoff with jitter in [backoff/2, backoff].
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    absl::Duration d = backoff * jitter(rng);
    LogWarn("kubernetes API error", {{"resource", StreamName(nodes, failed)},
                                     {"error", std::string(status.message())},
                                     {"retry_in", absl::FormatDuration(d)}});
    backoff = std::min(backoff * 2, options_.max_backoff);
    return WaitOrStop(d);
  };
  // After a watch stream ended: back off on errors, and on streams that end at once repeatedly.
  auto after_stream = [&](const absl::Status& status, absl::Time started) {
    {
      MutexLock lock(&mu_);
      ++stats_.watch_restarts;
    }
    if (!status.ok()) return fail_wait(status);
    if (absl::Now() - started < absl::Seconds(1)) {
      return fail_wait(absl::UnavailableError("watch ended immediately"));
    }
    backoff = options_.initial_backoff;
    return false;
  };
  Cursor cursor;
  while (!stop_) {
    const absl::Time started = absl::Now();
    if (stream == Stream::kPods && ConsistentPodListPending()) {
      absl::Status listed = ForcedPodList(&cursor);
      if (stop_) return;
      if (absl::IsCancelled(listed)) continue;  // asked again meanwhile: LIST again
      if (!listed.ok()) {
        if (fail_wait(listed)) return;
        continue;
      }
      backoff = options_.initial_backoff;
    }
    if (cursor.need_state && options_.watch_list && !cursor.list_only && !watch_list_refused_) {
      absl::Status streamed = WatchList(stream, &cursor);
      if (stop_) return;
      if (Cancelled(stream)) continue;  // a consistent LIST was asked for
      if (absl::IsUnimplemented(streamed)) {
        if (!watch_list_refused_.exchange(true)) {
          LogWarn("the API server refused a WatchList; listing instead",
                  {{"resource", StreamName(nodes, failed)},
                   {"error", std::string(streamed.message())}});
        }
        MutexLock lock(&mu_);
        stats_.watch_list_supported = false;
        continue;
      }
      if (absl::IsOutOfRange(streamed)) {  // the resourceVersion asked for: gone, or ahead
        cursor.version_unavailable = true;
        continue;
      }
      if (!cursor.need_state) {
        if (after_stream(streamed, started)) return;
        continue;
      }
      // No state came: a LIST now (client-go: "making progress is better than deadlocking").
      LogWarn("WatchList failed; listing", {{"resource", StreamName(nodes, failed)},
                                            {"error", std::string(streamed.message())}});
    }
    if (cursor.need_state) {
      // client-go reflector.go relistResourceVersion: "0" at first, the last resourceVersion
      // after a watch's 410, "" once a version was refused (and for a list forced by overflow).
      const std::string version = cursor.version_unavailable || cursor.list_only ? ""
                                  : cursor.resource_version.empty()              ? "0"
                                                                    : cursor.resource_version;
      absl::Status listed = List(stream, version, &cursor);
      if (stop_) return;
      if (Cancelled(stream)) continue;
      if (absl::IsOutOfRange(listed) && !version.empty()) {
        cursor.version_unavailable = true;  // retry at once, consistently
        continue;
      }
      if (!listed.ok()) {
        if (fail_wait(listed)) return;
        continue;
      }
      backoff = options_.initial_backoff;
    }
    const absl::Time watch_started = absl::Now();
    absl::Status watched = Watch(stream, &cursor);
    if (stop_) return;
    if (Cancelled(stream)) continue;
    if (after_stream(watched, watch_started)) return;
  }
}

void Watcher::RequestConsistentPodList(std::function<void(const ConsistentPodList&)> done) {
  {
    MutexLock lock(&lists_mu_);
    ++consistent_lists_asked_;
    list_waiters_.emplace_back(consistent_lists_asked_, std::move(done));
  }
  pods_interrupt_ = true;
  client_->InterruptStreams(&pods_interrupt_);
}

bool Watcher::ConsistentPodListPending() const {
  MutexLock lock(&lists_mu_);
  return consistent_lists_done_ < consistent_lists_asked_;
}

absl::Status Watcher::ForcedPodList(Cursor* cursor) {
  // Clear the interrupt, then read how many LISTs were asked for: a request made after the
  // clear sets it again and interrupts the LIST below (it asks for a later one). Stop may have
  // set it between the load and the store: set it again then.
  pods_interrupt_ = stop_.load();
  if (stop_) pods_interrupt_ = true;
  uint64_t asked;
  {
    MutexLock lock(&lists_mu_);
    asked = consistent_lists_asked_;
  }
  size_t count = 0;
  RETURN_IF_ERROR(List(Stream::kPods, "", cursor, &count));
  std::vector<std::function<void(const ConsistentPodList&)>> done;
  {
    MutexLock lock(&lists_mu_);
    consistent_lists_done_ = std::max(consistent_lists_done_, asked);
    auto it = list_waiters_.begin();
    while (it != list_waiters_.end() && it->first <= asked) {
      done.push_back(std::move(it->second));
      ++it;
    }
    list_waiters_.erase(list_waiters_.begin(), it);
  }
  const ConsistentPodList result{count, cursor->resource_version};
  for (auto& f : done) f(result);
  return absl::OkStatus();
}

void Watcher::AddDecodeErrors(uint64_t n) {
  if (n == 0) return;
  MutexLock lock(&mu_);
  stats_.decode_errors += n;
}

void Watcher::ReplaceState(Stream stream, State* state, uint64_t list_started) {
  switch (stream) {
    case Stream::kNodes:
      ledger_->ReplaceNodes(state->nodes);
      break;
    case Stream::kPods:
      ledger_->ReplacePods(std::move(state->pods), list_started);
      break;
    case Stream::kFailedPods:
      ReplaceRejections(state->rejected);
      break;
  }
  MutexLock lock(&mu_);
  switch (stream) {
    case Stream::kNodes:
      stats_.nodes_synced = true;
      break;
    case Stream::kPods:
      stats_.pods_synced = true;
      break;
    case Stream::kFailedPods:
      stats_.rejections_synced = true;
      break;
  }
}

absl::Status Watcher::List(Stream stream, const std::string& version, Cursor* cursor,
                           size_t* listed) {
  const bool nodes = stream == Stream::kNodes;
  const bool failed = stream == Stream::kFailedPods;
  // resourceVersion "" (consistent) and "0" ask for pages; N does not, so the API server answers
  // from its watch cache (a limit with N would make it an exact read from etcd).
  const std::string first_query =
      version.empty()  ? absl::StrCat("limit=", options_.page_size)
      : version == "0" ? absl::StrCat("limit=", options_.page_size, "&resourceVersion=0")
                       : absl::StrCat("resourceVersion=", UrlEncode(version));
  State state;
  std::string continue_token;
  std::string list_rv;
  simdjson::ondemand::parser parser;
  uint64_t decode_errors = 0;
  // A consistent read ("") sent after a bind was known holds it, so a bound pod it lacks is
  // gone (Ledger::ReplacePods); a read from the watch cache ("0", N) may predate the bind.
  const uint64_t list_started =
      stream == Stream::kPods && version.empty() ? ledger_->BeginPodList() : 0;
  // Decodes one item as it arrives: a LIST served from the watch cache at "0" or N comes in one
  // piece (150,000 pods are ~300 MB), so the body is never held whole.
  auto on_item = [&](absl::string_view text) {
    const simdjson::padded_string_view padded = PaddedCopy(text);
    simdjson::ondemand::document doc;
    value v;
    if (parser.iterate(padded).get(doc) || doc.get_value().get(v)) {
      ++decode_errors;
      return !Cancelled(stream);
    }
    if (nodes) {
      absl::StatusOr<DecodedNode> node = DecodeNode(v);
      if (node.ok()) {
        state.nodes.push_back(std::move(node->node));
      } else {
        ++decode_errors;
      }
      return !Cancelled(stream);
    }
    absl::StatusOr<Pod> pod = DecodePod(v, nullptr);
    if (!pod.ok()) {
      ++decode_errors;
      return !Cancelled(stream);
    }
    if (failed) {
      if (IsKubeletRejection(*pod, options_.scheduler_names)) {
        state.rejected.push_back(*std::move(pod));
      }
      return !Cancelled(stream);
    }
    absl::StatusOr<PodRecord> record = ToPodRecord(*std::move(pod));
    if (record.ok()) {
      state.pods.push_back(std::move(*record));
    } else {
      ++decode_errors;
    }
    return !Cancelled(stream);
  };
  do {
    // Later pages: the token alone (a resourceVersion with continue is refused, etcd3/store.go).
    std::string path =
        continue_token.empty()
            ? BasePath(stream, first_query)
            : BasePath(stream, absl::StrCat("limit=", options_.page_size,
                                            "&continue=", UrlEncode(continue_token)));
    ListSplitter splitter(on_item);
    std::string error_body;
    absl::StatusOr<long> code = client_->GetStreamed(
        path, [&](absl::string_view bytes) { return splitter.Feed(bytes); }, CancelFlag(stream),
        options_.request_timeout, &error_body);
    if (Cancelled(stream)) return absl::CancelledError("interrupted");
    if (!code.ok()) {
      if (absl::IsCancelled(code.status())) {  // the splitter gave up: a malformed body
        return absl::UnavailableError(
            absl::StrCat("LIST ", StreamName(nodes, failed), ": ", splitter.Finish().message()));
      }
      return code.status();
    }
    if (*code == 410 && !continue_token.empty()) {
      // The continue token expired: start the list again.
      continue_token.clear();
      state = State();
      decode_errors = 0;
      continue;
    }
    if (*code == 410 ||
        (*code == 504 && absl::StrContains(error_body, "Too large resource version"))) {
      return absl::OutOfRangeError(absl::StrCat("LIST ", StreamName(nodes, failed),
                                                " at resourceVersion \"", version, "\": HTTP ",
                                                *code, ": ", error_body.substr(0, 300)));
    }
    if (*code != 200) {
      return absl::UnavailableError(absl::StrCat("LIST ", StreamName(nodes, failed), ": HTTP ",
                                                 *code, ": ", error_body.substr(0, 300)));
    }
    if (absl::Status finished = splitter.Finish(); !finished.ok()) {
      return absl::UnavailableError(
          absl::StrCat("LIST ", StreamName(nodes, failed), ": ", finished.message()));
    }
    // ListMeta: the state's resourceVersion and the next page's token.
    continue_token.clear();
    simdjson::padded_string meta_text(splitter.metadata());
    simdjson::ondemand::document meta_doc;
    simdjson::ondemand::object meta;
    if (!parser.iterate(meta_text).get(meta_doc) && !meta_doc.get_object().get(meta)) {
      ForEachField(meta, [&](const std::string& key, value v) {
        std::string_view text;
        if (key == "resourceVersion" && !v.get_string().get(text)) list_rv = std::string(text);
        if (key == "continue" && !v.get_string().get(text)) continue_token = std::string(text);
        return true;
      });
    }
  } while (!continue_token.empty() && !Cancelled(stream));
  if (Cancelled(stream)) return absl::CancelledError("interrupted");
  const size_t count = nodes    ? state.nodes.size()
                       : failed ? state.rejected.size()
                                : state.pods.size();
  if (listed != nullptr) *listed = count;
  ReplaceState(stream, &state, list_started);
  cursor->resource_version = list_rv;
  cursor->need_state = false;
  cursor->version_unavailable = false;
  cursor->list_only = false;
  if (stream == Stream::kPods) NotePodsResourceVersion(list_rv);
  AddDecodeErrors(decode_errors);
  {
    MutexLock lock(&mu_);
    ++stats_.lists;
  }
  LogInfo("listed", {{"resource", StreamName(nodes, failed)},
                     {"count", std::to_string(count)},
                     {"asked", version.empty() ? "\"\"" : version},
                     {"resourceVersion", list_rv}});
  return absl::OkStatus();
}

absl::Status Watcher::WatchList(Stream stream, Cursor* cursor) {
  const bool nodes = stream == Stream::kNodes;
  const bool failed = stream == Stream::kFailedPods;
  // client-go reflector.go watchList: from the last resourceVersion ("" at first, or once it
  // was refused), not older than it.
  std::string query = absl::StrCat(
      "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks="
      "true&timeoutSeconds=",
      options_.watch_timeout_seconds);
  const bool consistent = cursor->version_unavailable || cursor->resource_version.empty();
  if (!consistent) {
    absl::StrAppend(&query, "&resourceVersion=", UrlEncode(cursor->resource_version));
  }
  // Without a resourceVersion the state is the most recent (a consistent read), so it holds
  // every bind known before now: see List.
  const uint64_t list_started = stream == Stream::kPods && consistent ? ledger_->BeginPodList() : 0;
  // The initial state, as events apply to it until the end bookmark (changes after the state's
  // version may come before it).
  StreamedState<NodeRecord, NodeKey> node_state;
  StreamedState<PodRecord, UidKey, std::deque<PodRecord>> pod_state;
  StreamedState<Pod, UidKey> rejected_state;
  bool initial = true;
  bool gone = false;
  bool too_large = false;
  bool refused_by_bookmark = false;
  uint64_t decode_errors = 0;
  std::string error;
  std::string error_body;
  StreamFormat format = StreamFormat::kJsonLines;
  bool counted = false;
  auto on_initial_line = [&](absl::string_view line) {
    std::string object_rv;
    absl::StatusOr<WatchEvent> event = DecodeStreamEvent(format, nodes, line, &object_rv);
    if (!event.ok()) {
      ++decode_errors;
      if (absl::IsDataLoss(event.status())) {
        error =
            absl::StrCat("WatchList ", StreamName(nodes, failed), ": ", event.status().message());
        return false;
      }
      return true;
    }
    switch (event->type) {
      case WatchEvent::Type::kError:
        if (event->error_code == 410) {
          gone = true;
        } else if (event->error_code == 504 &&
                   absl::StrContains(event->error_message, "Too large resource version")) {
          too_large = true;
        } else {
          error = absl::StrCat("WatchList ", StreamName(nodes, failed),
                               ": ERROR event: ", event->error_message);
        }
        return false;
      case WatchEvent::Type::kBookmark: {
        if (!event->initial_events_end) {
          // A server that speaks WatchList sends no bookmark before the annotated one (the
          // cacher holds them back until the state is sent, cacher/cache_watcher.go); one that
          // ignores sendInitialEvents would never send the end.
          refused_by_bookmark = true;
          return false;
        }
        State state;
        state.nodes = node_state.Take();
        state.pods = pod_state.Take();
        state.rejected = rejected_state.Take();
        const size_t count = nodes    ? state.nodes.size()
                             : failed ? state.rejected.size()
                                      : state.pods.size();
        ReplaceState(stream, &state, list_started);
        cursor->resource_version = event->resource_version;
        cursor->need_state = false;
        cursor->version_unavailable = false;
        if (stream == Stream::kPods) NotePodsResourceVersion(event->resource_version);
        {
          MutexLock lock(&mu_);
          ++stats_.watch_lists;
          ++stats_.bookmarks;
          stats_.last_event = absl::Now();
        }
        LogInfo("streamed the state (WatchList)", {{"resource", StreamName(nodes, failed)},
                                                   {"count", std::to_string(count)},
                                                   {"resourceVersion", event->resource_version}});
        initial = false;
        return true;
      }
      default:
        break;
    }
    const bool deleted = event->type == WatchEvent::Type::kDeleted;
    // An ADDED object is new to the state (StreamedState::Add): nothing is looked up for it.
    const bool added = event->type == WatchEvent::Type::kAdded;
    auto put = [added](auto& state, auto value) {
      if (added) {
        state.Add(std::move(value));
      } else {
        state.Put(std::move(value));
      }
    };
    if (nodes) {
      // A view: used only by Remove, before anything is moved out of the event.
      const absl::string_view name = event->node.has_value()
                                         ? absl::string_view(event->node->name)
                                         : absl::string_view(event->deleted_key);
      if (deleted) {
        node_state.Remove(name);
      } else {
        put(node_state, *std::move(event->node));
      }
      return true;
    }
    const absl::string_view uid = event->pod.has_value() ? absl::string_view(event->pod->uid)
                                                         : absl::string_view(event->deleted_key);
    if (failed) {
      if (!deleted && IsKubeletRejection(*event->pod, options_.scheduler_names)) {
        put(rejected_state, *std::move(event->pod));
      } else if (!added) {
        rejected_state.Remove(uid);  // no longer a rejection, or gone
      }
      return true;
    }
    if (deleted) {
      pod_state.Remove(uid);
      return true;
    }
    absl::StatusOr<PodRecord> record = ToPodRecord(*std::move(event->pod));
    if (record.ok()) {
      put(pod_state, *std::move(record));
    } else {
      ++decode_errors;
    }
    return true;
  };
  absl::StatusOr<long> code = client_->Stream(
      BasePath(stream, query),
      [&](absl::string_view line) {
        if (!counted) CountStream(format, &counted);
        if (initial) return on_initial_line(line);
        bool go_on = ApplyEvent(stream, format, std::string_view(line.data(), line.size()),
                                &cursor->resource_version, &gone, &error);
        if (stream == Stream::kPods) NotePodsResourceVersion(cursor->resource_version);
        return go_on;
      },
      CancelFlag(stream), absl::Seconds(options_.watch_timeout_seconds + 30),
      options_.max_event_bytes, &error_body, Accept(), &format);
  AddDecodeErrors(decode_errors);
  if (absl::IsResourceExhausted(code.status())) {
    cursor->need_state = true;
    cursor->list_only = true;  // a paged LIST makes progress where the stream cannot
    return code.status();
  }
  if (!code.ok()) return code.status();
  const std::string what = absl::StrCat("WatchList ", StreamName(nodes, failed));
  if (refused_by_bookmark) {
    return absl::UnimplementedError(absl::StrCat(
        what,
        ": a bookmark without k8s.io/initial-events-end before the state's end (the server "
        "ignores sendInitialEvents)"));
  }
  if (*code == 410 || gone || too_large) {
    if (initial) {
      return absl::OutOfRangeError(
          absl::StrCat(what, ": the resourceVersion asked for is not available"));
    }
    cursor->need_state = true;
    if (stream == Stream::kPods) cursor->version_unavailable = true;  // as Watch: consistent
    MutexLock lock(&mu_);
    ++stats_.relists_gone;
    return absl::OkStatus();
  }
  if (*code != 200) {
    const std::string message =
        absl::StrCat(what, ": HTTP ", *code, ": ", ErrorBodyText(error_body).substr(0, 300));
    // Refused: the WatchList feature gate off (422 Invalid, "sendInitialEvents is forbidden"),
    // or a server that does not know the parameters (400 / 422). Not: expired, throttled,
    // unauthenticated, timed out, or a server error.
    if (*code >= 400 && *code < 500 && *code != 401 && *code != 408 && *code != 429) {
      return absl::UnimplementedError(message);
    }
    return absl::UnavailableError(message);
  }
  if (!error.empty()) return absl::UnavailableError(error);
  if (initial) {
    return absl::UnavailableError(absl::StrCat(what, ": the stream ended before the state did"));
  }
  return absl::OkStatus();
}

absl::Status Watcher::Watch(Stream stream, Cursor* cursor) {
  const bool nodes = stream == Stream::kNodes;
  const bool failed = stream == Stream::kFailedPods;
  const std::string path =
      BasePath(stream, absl::StrCat("watch=true&allowWatchBookmarks=true&resourceVersion=",
                                    UrlEncode(cursor->resource_version),
                                    "&timeoutSeconds=", options_.watch_timeout_seconds));
  bool gone = false;
  std::string error;
  std::string error_body;
  StreamFormat format = StreamFormat::kJsonLines;
  bool counted = false;
  absl::StatusOr<long> code = client_->Stream(
      path,
      [&](absl::string_view line) {
        if (!counted) CountStream(format, &counted);
        bool go_on = ApplyEvent(stream, format, std::string_view(line.data(), line.size()),
                                &cursor->resource_version, &gone, &error);
        if (stream == Stream::kPods) NotePodsResourceVersion(cursor->resource_version);
        return go_on;
      },
      CancelFlag(stream), absl::Seconds(options_.watch_timeout_seconds + 30),
      options_.max_event_bytes, &error_body, Accept(), &format);
  if (absl::IsResourceExhausted(code.status())) {
    cursor->need_state = true;
    cursor->list_only = true;  // a paged LIST makes progress where the stream cannot
    return code.status();
  }
  if (!code.ok()) return code.status();
  if (*code == 410 || gone) {
    // A new state. client-go asks for one not older than the last resourceVersion (from the
    // watch cache); for pods fitledger asks for the most recent (a consistent read), so that a
    // pod known bound that the state lacks is known gone and its room comes back at once
    // (Ledger::ReplacePods). A 410 is rare; the read is paged.
    cursor->need_state = true;
    if (stream == Stream::kPods) cursor->version_unavailable = true;
    MutexLock lock(&mu_);
    ++stats_.relists_gone;
    return absl::OkStatus();
  }
  if (*code != 200) {
    return absl::UnavailableError(absl::StrCat("WATCH ", StreamName(nodes, failed), ": HTTP ",
                                               *code, ": ",
                                               ErrorBodyText(error_body).substr(0, 300)));
  }
  if (!error.empty()) return absl::UnavailableError(error);
  return absl::OkStatus();
}

void Watcher::CountStream(StreamFormat format, bool* counted) {
  *counted = true;
  MutexLock lock(&mu_);
  ++(format == StreamFormat::kProtobufFrames ? stats_.streams_protobuf : stats_.streams_json);
}

bool Watcher::ApplyEvent(Stream stream, StreamFormat format, std::string_view line,
                         std::string* resource_version, bool* gone, std::string* error) {
  const bool nodes = stream == Stream::kNodes;
  const bool failed = stream == Stream::kFailedPods;
  const char* name = StreamName(nodes, failed);
  std::string object_rv;
  absl::StatusOr<WatchEvent> event =
      DecodeStreamEvent(format, nodes, absl::string_view(line.data(), line.size()), &object_rv);
  if (!event.ok()) {
    {
      MutexLock lock(&mu_);
      ++stats_.decode_errors;
    }
    if (absl::IsDataLoss(event.status())) {
      *error = absl::StrCat("watch ", name, ": ", event.status().message());
      return false;  // resume from the last good resourceVersion
    }
    LogWarn("skipping an undecodable watch event",
            {{"resource", name}, {"error", std::string(event.status().message())}});
    if (!object_rv.empty()) *resource_version = object_rv;
    return true;
  }
  switch (event->type) {
    case WatchEvent::Type::kError:
      if (event->error_code == 410) {
        *gone = true;
      } else {
        *error = absl::StrCat("watch ", name, ": ERROR event: ", event->error_message);
      }
      return false;
    case WatchEvent::Type::kBookmark: {
      if (!event->resource_version.empty()) *resource_version = event->resource_version;
      MutexLock lock(&mu_);
      ++stats_.bookmarks;
      stats_.last_event = absl::Now();
      return true;
    }
    default:
      break;
  }
  const bool deleted = event->type == WatchEvent::Type::kDeleted;
  if (nodes) {
    if (deleted) {
      ledger_->DeleteNode(event->node.has_value() ? event->node->name : event->deleted_key);
    } else {
      ledger_->UpsertNode(*event->node);
    }
  } else if (failed) {
    // Failed is terminal: a pod leaves this watch only by being deleted.
    if (deleted) {
      ForgetRejection(event->pod.has_value() ? event->pod->uid : event->deleted_key);
    } else if (IsKubeletRejection(*event->pod, options_.scheduler_names)) {
      NoteRejection(*event->pod);
    }
  } else if (deleted) {
    // Removal whatever the event carries: the API server sends a pod that finished (left the
    // selector) with its previous, non-terminal content.
    ledger_->DeletePod(event->pod.has_value() ? event->pod->uid : event->deleted_key);
  } else {
    absl::StatusOr<PodRecord> record = ToPodRecord(*std::move(event->pod));
    if (!record.ok()) {
      {
        MutexLock lock(&mu_);
        ++stats_.decode_errors;
      }
      LogWarn("skipping an undecodable watch event",
              {{"resource", name}, {"error", std::string(record.status().message())}});
    } else {
      ledger_->UpsertPod(*std::move(record));
    }
  }
  if (!event->resource_version.empty()) *resource_version = event->resource_version;
  MutexLock lock(&mu_);
  ++stats_.events;
  stats_.last_event = absl::Now();
  return true;
}

void Watcher::NotePodsResourceVersion(const std::string& resource_version) {
  if (resource_version.empty()) return;
  MutexLock lock(&mu_);
  if (stats_.pods_resource_version != resource_version) {
    stats_.pods_resource_version = resource_version;
  }
}

bool Watcher::AddRejectionLocked(const Pod& pod, bool before_start) {
  if (!rejected_uids_.insert(pod.uid).second) return false;
  if (!before_start) {
    ++stats_.rejections_total;
    ++stats_.rejections_by_reason_node[{pod.status_reason, pod.node_name}];
  }
  rejections_.push_back({pod.uid, pod.namespace_name, pod.name, pod.node_name, pod.status_reason,
                         pod.status_message, absl::Now(), before_start});
  if (rejections_.size() > kMaxRejectionsKept) rejections_.pop_front();
  stats_.rejected_pods_in_api = rejected_uids_.size();
  return true;
}

void Watcher::ReplaceRejections(const std::vector<Pod>& rejected) {
  std::vector<const Pod*> counted;
  size_t before_start = 0;
  {
    MutexLock lock(&mu_);
    // The first list after start finds what happened before it; later lists (after a 410 or a
    // dropped stream) find what happened while the watch was away: that is counted.
    const bool first = !stats_.rejections_synced;
    absl::flat_hash_set<std::string> listed;
    for (const Pod& pod : rejected) listed.insert(pod.uid);
    // Rejected pods deleted meanwhile: forget them (a UID is never reused).
    for (auto it = rejected_uids_.begin(); it != rejected_uids_.end();) {
      if (!listed.contains(*it)) {
        rejected_uids_.erase(it++);
      } else {
        ++it;
      }
    }
    for (const Pod& pod : rejected) {
      if (!AddRejectionLocked(pod, first)) continue;
      if (first) {
        ++before_start;
      } else {
        counted.push_back(&pod);
      }
    }
    stats_.rejected_pods_in_api = rejected_uids_.size();
  }
  if (before_start > 0) {
    LogInfo("kubelet rejections already in the API at start (listed, not counted)",
            {{"count", std::to_string(before_start)}});
  }
  for (const Pod* pod : counted) {
    LogWarn("kubelet rejected a pod", {{"pod", pod->namespace_name + "/" + pod->name},
                                       {"node", pod->node_name},
                                       {"reason", pod->status_reason},
                                       {"message", pod->status_message}});
  }
}

void Watcher::NoteRejection(const Pod& pod) {
  {
    MutexLock lock(&mu_);
    if (!AddRejectionLocked(pod, /*before_start=*/false)) return;
  }
  LogWarn("kubelet rejected a pod", {{"pod", pod.namespace_name + "/" + pod.name},
                                     {"node", pod.node_name},
                                     {"reason", pod.status_reason},
                                     {"message", pod.status_message}});
}

void Watcher::ForgetRejection(const std::string& uid) {
  MutexLock lock(&mu_);
  rejected_uids_.erase(uid);
  stats_.rejected_pods_in_api = rejected_uids_.size();
}

}  // namespace fitledger::kube
