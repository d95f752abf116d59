#include "server/kube/reflector.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/kube/api_client.h"
#include "server/kube/json_walk.h"
#include "server/kube/objects.h"
#include "server/kube/protobuf_objects.h"
#include "simdjson.h"

namespace fitledger::kube {

static_assert(kStreamLinePadding >= kWatchLinePadding);

namespace {

using simdjson::ondemand::value;

// One event of a Stream, as ApiTransport::Stream handed it on: a JSON line (padded) or a
// protobuf frame.
absl::StatusOr<WatchEvent> DecodeStreamEvent(StreamFormat format, ObjectKind kind,
                                             absl::string_view event,
                                             std::string* resource_version) {
  if (format == StreamFormat::kProtobufFrames) {
    return DecodeProtobufWatchEvent(kind, event, resource_version);
  }
  return DecodePaddedWatchEvent(kind, event, resource_version);
}

// A LIST item decoded as the ADDED event a WatchList would have sent for it.
bool DecodeListItem(ObjectKind kind, value v, WatchEvent* event) {
  event->type = WatchEvent::Type::kAdded;
  if (kind == ObjectKind::kNode) {
    absl::StatusOr<DecodedNode> node = DecodeNode(v);
    if (!node.ok()) return false;
    event->node = std::move(node->node);
    return true;
  }
  if (kind == ObjectKind::kLease) {
    simdjson::ondemand::object fields;
    std::string_view text;
    if (v.get_object().get(fields) || fields.raw_json().get(text)) return false;
    absl::StatusOr<LeaseRecord> lease = ParseLease(absl::string_view(text.data(), text.size()));
    if (!lease.ok()) return false;
    event->lease = *std::move(lease);
    return true;
  }
  absl::StatusOr<Pod> pod = DecodePod(v, nullptr);
  if (!pod.ok()) return false;
  event->pod = *std::move(pod);
  return true;
}

}  // namespace

Reflector::Reflector(ApiTransport* api, ReflectorSink* sink, ReflectorOptions options)
    : api_(api),
      sink_(sink),
      options_(std::move(options)),
      watch_list_refused_(options_.watch_list_refused != nullptr ? options_.watch_list_refused
                                                                 : &own_watch_list_refused_) {}

Reflector::~Reflector() { Stop(); }

void Reflector::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Reflector::Stop() {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
    stop_ = true;
  }
  interrupt_ = true;
  stop_cv_.SignalAll();
  api_->InterruptStreams(&interrupt_);
  if (thread_.joinable()) thread_.join();
}

bool Reflector::WaitOrStop(absl::Duration d) {
  const absl::Time wake = absl::Now() + d;
  MutexLock lock(&stop_mu_);
  while (!stopping_ && absl::Now() < wake) {
    stop_cv_.WaitFor(&stop_mu_, absl::ToChronoNanoseconds(wake - absl::Now()));
  }
  return stopping_;
}

ReflectorStats Reflector::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

bool Reflector::synced() const {
  MutexLock lock(&mu_);
  return stats_.synced;
}

std::string Reflector::Path(absl::string_view query) const {
  std::string path = absl::StrCat(options_.path, "?", query);
  if (!options_.field_selector.empty()) {
    absl::StrAppend(&path, "&fieldSelector=", UrlEncode(options_.field_selector));
  }
  return path;
}

void Reflector::Run() {
  const std::string& name = options_.name;
  std::mt19937 rng(std::random_device{}());
  absl::Duration backoff = options_.initial_backoff;
  auto fail_wait = [&](const absl::Status& status) {
    // Capped exponential backoff with jitter in [backoff/2, backoff].
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    absl::Duration d = backoff * jitter(rng);
    LogWarn("kubernetes API error", {{"resource", name},
                                     {"error", std::string(status.message())},
                                     {"retry_in", absl::FormatDuration(d)}});
    backoff = std::min(backoff * 2, options_.max_backoff);
    return WaitOrStop(d);
  };
  Cursor cursor;
  // After a watch stream ended: back off on errors, and on a stream that ended within a second
  // carrying nothing (client-go reflector.go watchHandler: "very short watch ... no items
  // received"). One that carried events resumes at once from its last resourceVersion: a
  // stream cut after its first event (as the gzip members once did) costs no backoff of lag.
  auto after_stream = [&](const absl::Status& status, absl::Time started) {
    {
      MutexLock lock(&mu_);
      ++stats_.watch_restarts;
    }
    if (!status.ok()) return fail_wait(status);
    if (absl::Now() - started < absl::Seconds(1) && cursor.stream_items == 0) {
      return fail_wait(absl::UnavailableError("watch ended immediately"));
    }
    backoff = options_.initial_backoff;
    return false;
  };
  while (!stop_) {
    const absl::Time started = absl::Now();
    if (ConsistentListPending()) {
      absl::Status listed = ForcedList(&cursor);
      if (stop_) return;
      if (absl::IsCancelled(listed)) continue;  // asked again meanwhile: LIST again
      if (!listed.ok()) {
        if (fail_wait(listed)) return;
        continue;
      }
      backoff = options_.initial_backoff;
    }
    if (cursor.need_state && options_.watch_list && !cursor.list_only && !*watch_list_refused_) {
      absl::Status streamed = WatchList(&cursor);
      if (stop_) return;
      if (Cancelled()) continue;  // a consistent LIST was asked for
      if (absl::IsUnimplemented(streamed)) {
        if (!watch_list_refused_->exchange(true)) {
          LogWarn("the API server refused a WatchList; listing instead",
                  {{"resource", name}, {"error", std::string(streamed.message())}});
        }
        continue;
      }
      if (absl::IsOutOfRange(streamed)) {  // the resourceVersion asked for: gone, or ahead
        cursor.version_unavailable = true;
        continue;
      }
      // The state came and its watch ended (a 410 after it asks for the next state, again by a
      // WatchList).
      if (streamed.ok() || !cursor.need_state) {
        if (after_stream(streamed, started)) return;
        continue;
      }
      // No state came: a LIST now (client-go: "making progress is better than deadlocking").
      LogWarn("WatchList failed; listing",
              {{"resource", name}, {"error", std::string(streamed.message())}});
    }
    if (cursor.need_state) {
      // client-go reflector.go relistResourceVersion: "0" at first, the last resourceVersion
      // after a watch's 410, "" once a version was refused (and for a list forced by overflow).
      const std::string version = cursor.version_unavailable || cursor.list_only ? ""
                                  : cursor.resource_version.empty()              ? "0"
                                                                    : cursor.resource_version;
      absl::Status listed = List(version, &cursor);
      if (stop_) return;
      if (Cancelled()) continue;
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
    absl::Status watched = Watch(&cursor);
    if (stop_) return;
    if (Cancelled()) continue;
    if (after_stream(watched, watch_started)) return;
  }
}

void Reflector::RequestConsistentList(std::function<void(const ConsistentList&)> done) {
  {
    MutexLock lock(&lists_mu_);
    ++lists_asked_;
    list_waiters_.emplace_back(lists_asked_, std::move(done));
  }
  interrupt_ = true;
  api_->InterruptStreams(&interrupt_);
}

bool Reflector::ConsistentListPending() const {
  MutexLock lock(&lists_mu_);
  return lists_done_ < lists_asked_;
}

absl::Status Reflector::ForcedList(Cursor* cursor) {
  // Clear the interrupt, then read how many LISTs were asked for: a request made after the
  // clear sets it again and interrupts the LIST below (it asks for a later one). Stop may have
  // set it between the load and the store: set it again then.
  interrupt_ = stop_.load();
  if (stop_) interrupt_ = true;
  uint64_t asked;
  {
    MutexLock lock(&lists_mu_);
    asked = lists_asked_;
  }
  size_t count = 0;
  RETURN_IF_ERROR(List("", cursor, &count));
  std::vector<std::function<void(const ConsistentList&)>> done;
  {
    MutexLock lock(&lists_mu_);
    lists_done_ = std::max(lists_done_, asked);
    auto it = list_waiters_.begin();
    while (it != list_waiters_.end() && it->first <= asked) {
      done.push_back(std::move(it->second));
      ++it;
    }
    list_waiters_.erase(list_waiters_.begin(), it);
  }
  const ConsistentList result{count, cursor->resource_version};
  for (auto& f : done) f(result);
  return absl::OkStatus();
}

void Reflector::AddDecodeErrors(uint64_t n) {
  if (n == 0) return;
  MutexLock lock(&mu_);
  stats_.decode_errors += n;
}

void Reflector::NoteResourceVersion(const std::string& resource_version) {
  if (resource_version.empty()) return;
  MutexLock lock(&mu_);
  if (stats_.resource_version != resource_version) stats_.resource_version = resource_version;
}

void Reflector::Committed(const std::string& resource_version, Cursor* cursor) {
  cursor->resource_version = resource_version;
  cursor->need_state = false;
  cursor->version_unavailable = false;
  cursor->list_only = false;
  NoteResourceVersion(resource_version);
  MutexLock lock(&mu_);
  stats_.synced = true;
}

absl::Status Reflector::List(const std::string& version, Cursor* cursor, size_t* listed) {
  const std::string& name = options_.name;
  // resourceVersion "" (consistent) and "0" ask for pages; N does not, so the API server answers
  // from its watch cache (a limit with N would make it an exact read from etcd).
  const std::string first_query =
      version.empty()  ? absl::StrCat("limit=", options_.page_size)
      : version == "0" ? absl::StrCat("limit=", options_.page_size, "&resourceVersion=0")
                       : absl::StrCat("resourceVersion=", UrlEncode(version));
  std::unique_ptr<ReflectorState> state = sink_->NewState();
  std::string continue_token;
  std::string list_rv;
  simdjson::ondemand::parser parser;
  uint64_t decode_errors = 0;
  // A consistent read ("") sent after a bind was known holds it, so a bound pod it lacks is
  // gone (Ledger::ReplacePods); a read from the watch cache ("0", N) may predate the bind.
  const uint64_t token = sink_->BeginState(version.empty());
  // Decodes one item as it arrives: a LIST served from the watch cache at "0" or N comes in one
  // piece (150,000 pods are ~300 MB), so the body is never held whole.
  auto on_item = [&](absl::string_view text) {
    const simdjson::padded_string_view padded = PaddedCopy(text);
    simdjson::ondemand::document doc;
    value v;
    WatchEvent event;
    if (parser.iterate(padded).get(doc) || doc.get_value().get(v) ||
        !DecodeListItem(options_.kind, v, &event) || !state->Add(event)) {
      ++decode_errors;
    }
    return !Cancelled();
  };
  for (;;) {
    // Later pages: the token alone (a resourceVersion with continue is refused, etcd3/store.go).
    std::string path = continue_token.empty()
                           ? Path(first_query)
                           : Path(absl::StrCat("limit=", options_.page_size,
                                               "&continue=", UrlEncode(continue_token)));
    ListSplitter splitter(on_item);
    std::string error_body;
    absl::StatusOr<long> code = api_->GetStreamed(
        path, [&](absl::string_view bytes) { return splitter.Feed(bytes); }, &interrupt_,
        options_.request_timeout, &error_body);
    if (Cancelled()) return absl::CancelledError("interrupted");
    if (!code.ok()) {
      if (absl::IsCancelled(code.status())) {  // the splitter gave up: a malformed body
        return absl::UnavailableError(
            absl::StrCat("LIST ", name, ": ", splitter.Finish().message()));
      }
      return code.status();
    }
    if (*code == 410 && !continue_token.empty()) {
      // The continue token expired: start the list again (from its first page).
      continue_token.clear();
      state = sink_->NewState();
      decode_errors = 0;
      continue;
    }
    if (*code == 410 ||
        (*code == 504 && absl::StrContains(error_body, "Too large resource version"))) {
      return absl::OutOfRangeError(absl::StrCat("LIST ", name, " at resourceVersion \"", version,
                                                "\": HTTP ", *code, ": ",
                                                error_body.substr(0, 300)));
    }
    if (*code != 200) {
      return absl::UnavailableError(
          absl::StrCat("LIST ", name, ": HTTP ", *code, ": ", error_body.substr(0, 300)));
    }
    if (absl::Status finished = splitter.Finish(); !finished.ok()) {
      return absl::UnavailableError(absl::StrCat("LIST ", name, ": ", finished.message()));
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
    if (continue_token.empty() || Cancelled()) break;
  }
  if (Cancelled()) return absl::CancelledError("interrupted");
  if (list_rv.empty()) {
    // Every API server's list has one; without it the watch would start from "now" and lose
    // what happened since the state.
    return absl::UnavailableError(absl::StrCat("LIST ", name, ": no metadata.resourceVersion"));
  }
  const size_t count = state->Commit(token);
  if (listed != nullptr) *listed = count;
  Committed(list_rv, cursor);
  AddDecodeErrors(decode_errors);
  {
    MutexLock lock(&mu_);
    ++stats_.lists;
  }
  LogInfo("listed", {{"resource", name},
                     {"count", std::to_string(count)},
                     {"asked", version.empty() ? "\"\"" : version},
                     {"resourceVersion", list_rv}});
  return absl::OkStatus();
}

absl::Status Reflector::WatchList(Cursor* cursor) {
  const std::string& name = options_.name;
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
  const uint64_t token = sink_->BeginState(consistent);
  // The initial state, as events apply to it until the end bookmark (changes after the state's
  // version may come before it).
  std::unique_ptr<ReflectorState> state = sink_->NewState();
  bool initial = true;
  bool gone = false;
  bool too_large = false;
  bool refused_by_bookmark = false;
  uint64_t decode_errors = 0;
  std::string error;
  std::string error_body;
  auto on_initial_line = [&](StreamFormat format, absl::string_view line) {
    std::string object_rv;
    absl::StatusOr<WatchEvent> event = DecodeStreamEvent(format, options_.kind, line, &object_rv);
    if (!event.ok()) {
      ++decode_errors;
      if (absl::IsDataLoss(event.status())) {
        error = absl::StrCat("WatchList ", name, ": ", event.status().message());
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
          error = absl::StrCat("WatchList ", name, ": ERROR event: ", event->error_message);
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
        const size_t count = state->Commit(token);
        state.reset();
        Committed(event->resource_version, cursor);
        {
          MutexLock lock(&mu_);
          ++stats_.watch_lists;
          ++stats_.bookmarks;
          stats_.last_event = absl::Now();
        }
        LogInfo("streamed the state (WatchList)", {{"resource", name},
                                                   {"count", std::to_string(count)},
                                                   {"resourceVersion", event->resource_version}});
        initial = false;
        return true;
      }
      default:
        break;
    }
    if (!state->Add(*event)) ++decode_errors;
    return true;
  };
  absl::StatusOr<long> code =
      StreamEvents(Path(query), cursor, on_initial_line, &initial, &gone, &error, &error_body);
  AddDecodeErrors(decode_errors);
  if (!code.ok()) return code.status();
  const std::string what = absl::StrCat("WatchList ", name);
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
    if (options_.consistent_after_gone) cursor->version_unavailable = true;  // as Watch
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

absl::Status Reflector::Watch(Cursor* cursor) {
  const std::string path = Path(absl::StrCat(
      "watch=true&allowWatchBookmarks=true&resourceVersion=", UrlEncode(cursor->resource_version),
      "&timeoutSeconds=", options_.watch_timeout_seconds));
  bool gone = false;
  std::string error;
  std::string error_body;
  absl::StatusOr<long> code =
      StreamEvents(path, cursor, nullptr, nullptr, &gone, &error, &error_body);
  if (!code.ok()) return code.status();
  if (*code == 410 || gone) {
    // A new state. client-go asks for one not older than the last resourceVersion (from the
    // watch cache); with consistent_after_gone the most recent (a consistent read), so that a
    // pod known bound that the state lacks is known gone and its room comes back at once
    // (Ledger::ReplacePods). A 410 is rare; the read is paged.
    cursor->need_state = true;
    if (options_.consistent_after_gone) cursor->version_unavailable = true;
    MutexLock lock(&mu_);
    ++stats_.relists_gone;
    return absl::OkStatus();
  }
  if (*code != 200) {
    return absl::UnavailableError(absl::StrCat("WATCH ", options_.name, ": HTTP ", *code, ": ",
                                               ErrorBodyText(error_body).substr(0, 300)));
  }
  if (!error.empty()) return absl::UnavailableError(error);
  return absl::OkStatus();
}

absl::StatusOr<long> Reflector::StreamEvents(
    const std::string& path, Cursor* cursor,
    const std::function<bool(StreamFormat, absl::string_view)>& initial_line, const bool* initial,
    bool* gone, std::string* error, std::string* error_body) {
  StreamFormat format = StreamFormat::kJsonLines;
  bool counted = false;
  cursor->stream_items = 0;
  absl::StatusOr<long> code = api_->Stream(
      path,
      [&](absl::string_view line) {
        if (!counted) CountStream(format, &counted);
        ++cursor->stream_items;
        if (initial != nullptr && *initial) return initial_line(format, line);
        bool go_on = ApplyEvent(format, std::string_view(line.data(), line.size()),
                                &cursor->resource_version, gone, error);
        NoteResourceVersion(cursor->resource_version);
        return go_on;
      },
      &interrupt_, absl::Seconds(options_.watch_timeout_seconds + 30), options_.max_event_bytes,
      error_body, Accept(), &format);
  if (absl::IsResourceExhausted(code.status())) {
    cursor->need_state = true;
    cursor->list_only = true;  // a paged LIST makes progress where the stream cannot
  }
  return code;
}

void Reflector::CountStream(StreamFormat format, bool* counted) {
  *counted = true;
  MutexLock lock(&mu_);
  ++(format == StreamFormat::kProtobufFrames ? stats_.streams_protobuf : stats_.streams_json);
}

bool Reflector::ApplyEvent(StreamFormat format, std::string_view line,
                           std::string* resource_version, bool* gone, std::string* error) {
  const std::string& name = options_.name;
  std::string object_rv;
  absl::StatusOr<WatchEvent> event = DecodeStreamEvent(
      format, options_.kind, absl::string_view(line.data(), line.size()), &object_rv);
  if (!event.ok()) {
    AddDecodeErrors(1);
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
  if (!sink_->Apply(*event)) {
    AddDecodeErrors(1);
    LogWarn("skipping an undecodable watch event", {{"resource", name}});
  }
  if (!event->resource_version.empty()) *resource_version = event->resource_version;
  MutexLock lock(&mu_);
  ++stats_.events;
  stats_.last_event = absl::Now();
  return true;
}

}  // namespace fitledger::kube
