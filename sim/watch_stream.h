// One watch stream of fitledger-sim, for every kind it serves (the objects of ClusterStore): its
// state, and the step the HTTP server calls until
// the stream ends. The rules are the API server's (cacher/cache_watcher.go): a watch from "" or
// "0", or a WatchList, gets the current objects as ADDED first (a WatchList with bookmarks then a
// BOOKMARK annotated k8s.io/initial-events-end); then the events as they become visible, a
// BOOKMARK every bookmark interval when asked for, an ERROR 410 Expired when the cursor fell out
// of the history, and the end at the request's timeout or when the sim drops every watch.
// A stream is JSON lines, or, for pods and nodes when the client prefers it, Kubernetes'
// protobuf frames (sim/protobuf.h).
#ifndef FITLEDGER_SIM_WATCH_STREAM_H_
#define FITLEDGER_SIM_WATCH_STREAM_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "sim/objects.h"
#include "sim/protobuf.h"
#include "sim/status.h"
#include "sim/tables.h"

namespace fitledger::sim {

template <typename Ptr, typename Filter>
struct WatchStream {
  Filter filter;
  bool table = false;  // a Table watch (kubectl get -w): rows, the columns once
  TableObject table_object = TableObject::kMetadata;  // a Table row's object (includeObject)
  // Kubernetes' protobuf frames (AppendWatchFrame) instead of JSON lines; the feed has
  // Envelope(object). `error_line` is then a frame too.
  bool protobuf = false;
  bool bookmarks = false;
  uint64_t epoch = 0;  // the sim's watch epoch at the start: a newer one closes the stream
  uint64_t cursor = 0;
  absl::Time deadline;
  absl::Time next_bookmark;
  std::vector<Ptr> initial;         // sent as ADDED first
  bool initial_events_end = false;  // after `initial`: the annotated BOOKMARK
  std::string error_line;           // sent, then the stream ends (410, 504)
  bool started = false;
  bool sent_columns = false;
  std::string stats_key;  // the request's line in /sim/requests
  bool gzip = false;      // each write is one gzip member (SimConfig::watch_list_compression)
};

// What a step reads of the sim, once per step.
struct WatchGate {
  bool closed = false;  // the sim stops, or dropped every watch since the stream began
  bool bookmarks_only = false;
  absl::Duration lag;
  absl::Duration bookmark_interval;
};

// The longest a step waits before it looks again (for the deadline, a drop, a fault).
inline constexpr absl::Duration kMaxWatchWait = absl::Seconds(1);

// One step: writes what is due on `sink` (httplib's DataSink: write(data, size), done()), then
// waits for the next change (or the next bookmark, the deadline, kMaxWatchWait). False when the
// client is gone. `feed` is the kind's store:
//   feed.AppendObject(stream, ptr, &out)  appends the object as this stream shows it (its JSON,
//                                or a Table row)
//   feed.Envelope(ptr)           the object's protobuf envelope (protobuf streams only; a feed
//                                without it never has one)
//   feed.kind, feed.api_version  for bookmarks
//   feed.signal()                the store's ChangeSignal for this kind
//   feed.Poll(stream, now, lag)  a batch: events (type, object), cursor, next_visible, expired
//   feed.TypeName(event)         "ADDED", "MODIFIED" or "DELETED"
//   feed.max_batch               a full batch means more is waiting (0: no limit)
//   feed.resource_version()      the store's newest, for the 410's message
// `write(text)` writes and counts the bytes; `gate()` reads the sim's state.
template <typename Stream, typename Sink, typename Feed, typename Write, typename Gate>
bool WatchStep(Stream& s, Sink& sink, const Feed& feed, Write write, Gate gate) {
  // Appended where it goes: an object's JSON is copied once here (a WatchList's initial state
  // is every object of the kind).
  auto append_event = [&](std::string* out, absl::string_view type, const auto& object) {
    if constexpr (requires { feed.Envelope(object); }) {
      if (s.protobuf) return AppendWatchFrame(type, feed.Envelope(object), out);
    }
    absl::StrAppend(out, "{\"type\":\"", type, "\",\"object\":");
    feed.AppendObject(s, object, out);
    out->append("}\n");
  };
  // An event of an object built here (a bookmark, a Status) in the stream's encoding.
  auto event_of = [&](absl::string_view type, const nlohmann::json& object) {
    std::string out;
    if (s.protobuf) {
      AppendWatchFrame(type, ProtobufEnvelope(object).value_or(""), &out);
    } else {
      absl::StrAppend(&out, "{\"type\":\"", type, "\",\"object\":", Dump(object), "}\n");
    }
    return out;
  };
  auto bookmark_line = [&](bool initial_events_end) {
    if (s.protobuf) {
      // The same object as the JSON bookmark: kind, apiVersion, metadata.resourceVersion (and
      // the annotation).
      nlohmann::json object = {{"kind", std::string(feed.kind)},
                               {"apiVersion", std::string(feed.api_version)},
                               {"metadata", {{"resourceVersion", absl::StrCat(s.cursor)}}}};
      if (initial_events_end) {
        object["metadata"]["annotations"] = {{"k8s.io/initial-events-end", "true"}};
      }
      return event_of("BOOKMARK", object);
    }
    return absl::StrCat(
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"", feed.kind, "\",\"apiVersion\":\"",
        feed.api_version, "\",\"metadata\":{\"resourceVersion\":\"", s.cursor, "\"",
        initial_events_end ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}" : "",
        "}}}\n");
  };
  if (!s.started) {
    s.started = true;
    if (!s.error_line.empty()) {
      if (!write(s.error_line)) return false;
      sink.done();
      return true;
    }
    std::string out;
    for (const auto& object : s.initial) {
      append_event(&out, "ADDED", object);
      // A large list goes out in pieces of about 128 KiB: httplib copies each piece twice more to
      // frame it as a chunk, and pieces this size keep those copies in the cache.
      if (out.size() > (1 << 17)) {
        if (!write(out)) return false;
        out.clear();
      }
    }
    s.initial.clear();
    if (s.initial_events_end) out += bookmark_line(true);
    return out.empty() || write(out);
  }
  const uint64_t generation = feed.signal().generation();
  const absl::Time now = absl::Now();
  const WatchGate g = gate();
  if (g.closed || now >= s.deadline) {
    sink.done();
    return true;
  }
  absl::Time wake = std::min(s.deadline, now + kMaxWatchWait);
  if (s.bookmarks) wake = std::min(wake, s.next_bookmark);
  if (!g.bookmarks_only) {
    auto batch = feed.Poll(s, now, g.lag);
    if (batch.expired) {
      const std::string line =
          event_of("ERROR", StatusObject(410, "Expired",
                                         absl::StrCat("too old resource version: ", s.cursor, " (",
                                                      feed.resource_version(), ")")));
      if (!write(line)) return false;
      sink.done();
      return true;
    }
    s.cursor = batch.cursor;
    if (!batch.events.empty()) {
      std::string out;
      for (const auto& e : batch.events) append_event(&out, feed.TypeName(e), e.object);
      if (!write(out)) return false;
    }
    if (feed.max_batch > 0 && batch.events.size() >= feed.max_batch) return true;  // more waits
    if (batch.next_visible.has_value()) wake = std::min(wake, *batch.next_visible);
  }
  if (s.bookmarks && now >= s.next_bookmark) {
    if (!write(bookmark_line(false))) return false;
    s.next_bookmark = now + g.bookmark_interval;
    wake = std::min(wake, s.next_bookmark);
  }
  feed.signal().WaitForChange(generation, wake);
  return true;
}

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_WATCH_STREAM_H_
