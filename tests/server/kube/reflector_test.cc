// The Reflector against a scripted API (ScriptedApi below): every request it makes is recorded
// and answered by the next reply the test queued, so each protocol path (LIST, WatchList, WATCH,
// 410 mid-stream, a WatchList refused, a too-large resourceVersion, a bookmark without the end
// annotation, a damaged line, a relist on demand) is driven exactly. Labelled concurrency: the
// reflector's thread, the test's thread and Stop meet here, and the TSan suite runs it.
#include "server/kube/reflector.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/kube/lease_watcher.h"

namespace fitledger::kube {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Long enough for a loaded machine (the sanitizer suites); every wait ends as soon as its
// condition holds.
constexpr absl::Duration kDeadline = absl::Seconds(30);

// One scripted answer.
struct Reply {
  long code = 200;
  // Stream: the event lines; GetStreamed: the body's fragments.
  std::vector<std::string> lines;
  std::string error_body;
  // After the lines, the stream stays open until the reflector cancels it (or EndStreams).
  bool hold = false;
};

// The Kubernetes API as a script. Requests are answered in order, from one queue; a request that
// finds the queue empty waits for a reply (or for its cancel flag).
class ScriptedApi final : public ApiTransport {
 public:
  void Push(Reply reply) {
    MutexLock lock(&mu_);
    replies_.push_back(std::move(reply));
    cv_.SignalAll();
  }
  // Ends every held stream (as an API server's timeoutSeconds would).
  void EndStreams() {
    MutexLock lock(&mu_);
    ++generation_;
    cv_.SignalAll();
  }
  // Waits until `n` requests have been made; returns their paths.
  std::vector<std::string> WaitForRequests(size_t n) {
    const absl::Time deadline = absl::Now() + kDeadline;
    MutexLock lock(&mu_);
    while (paths_.size() < n && absl::Now() < deadline) {
      cv_.WaitFor(&mu_, std::chrono::milliseconds(50));
    }
    return paths_;
  }
  std::vector<std::string> paths() {
    MutexLock lock(&mu_);
    return paths_;
  }

  absl::StatusOr<HttpResponse> Request(absl::string_view, const std::string&, const std::string&,
                                       absl::Duration) override {
    return absl::UnimplementedError("the reflector makes no plain request");
  }

  absl::StatusOr<long> Stream(const std::string& path,
                              const std::function<bool(absl::string_view)>& on_line,
                              const std::atomic<bool>* cancel, absl::Duration,
                              size_t max_line_bytes, std::string* error_body, absl::string_view,
                              StreamFormat* format) override {
    if (format != nullptr) *format = StreamFormat::kJsonLines;
    std::optional<Reply> reply = Next(path, cancel);
    if (!reply.has_value()) return 200L;  // cancelled while waiting: an empty stream
    if (reply->code != 200) {
      *error_body = reply->error_body;
      return reply->code;
    }
    uint64_t generation;
    {
      MutexLock lock(&mu_);
      generation = generation_;
    }
    for (const std::string& line : reply->lines) {
      if (cancel->load()) return 200L;
      if (line.size() > max_line_bytes) return absl::ResourceExhaustedError("line too long");
      // Each line is followed by kStreamLinePadding readable bytes, as ApiClient promises.
      const std::string padded = line + "\n" + std::string(kStreamLinePadding, ' ');
      if (!on_line(absl::string_view(padded.data(), line.size()))) return 200L;
    }
    if (reply->hold) {
      MutexLock lock(&mu_);
      while (!cancel->load() && generation_ == generation) {
        cv_.WaitFor(&mu_, std::chrono::milliseconds(50));
      }
    }
    return 200L;
  }

  void InterruptStreams(const std::atomic<bool>*) override {
    MutexLock lock(&mu_);
    cv_.SignalAll();
  }

  absl::StatusOr<long> GetStreamed(const std::string& path,
                                   const std::function<bool(absl::string_view)>& on_bytes,
                                   const std::atomic<bool>* cancel, absl::Duration,
                                   std::string* error_body) override {
    std::optional<Reply> reply = Next(path, cancel);
    if (!reply.has_value()) return absl::CancelledError("cancelled");
    if (reply->code != 200) {
      *error_body = reply->error_body;
      return reply->code;
    }
    for (const std::string& fragment : reply->lines) {
      if (!on_bytes(fragment)) return absl::CancelledError("stopped by the reader");
    }
    return 200L;
  }

 private:
  std::optional<Reply> Next(const std::string& path, const std::atomic<bool>* cancel) {
    MutexLock lock(&mu_);
    paths_.push_back(path);
    cv_.SignalAll();
    while (replies_.empty() && !cancel->load()) cv_.WaitFor(&mu_, std::chrono::milliseconds(50));
    if (replies_.empty()) return std::nullopt;
    Reply reply = std::move(replies_.front());
    replies_.erase(replies_.begin());
    return reply;
  }

  Mutex mu_;
  CondVar cv_;
  std::vector<Reply> replies_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> paths_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// What the sink holds: pod names by UID, as of the last state and the events after it.
class RecordingSink final : public ReflectorSink {
 public:
  class State final : public ReflectorState {
   public:
    explicit State(RecordingSink* sink) : sink_(sink) {}
    bool Add(WatchEvent& event) override {
      if (event.type == WatchEvent::Type::kDeleted) {
        pods_.erase(event.pod.has_value() ? event.pod->uid : event.deleted_key);
      } else {
        pods_[event.pod->uid] = event.pod->name;
      }
      return true;
    }
    size_t Commit(uint64_t token) override {
      MutexLock lock(&sink_->mu_);
      sink_->pods_ = pods_;
      sink_->commit_tokens_.push_back(token);
      sink_->cv_.SignalAll();
      return pods_.size();
    }

   private:
    RecordingSink* const sink_;
    std::map<std::string, std::string> pods_;
  };

  uint64_t BeginState(bool consistent) override {
    MutexLock lock(&mu_);
    begins_.push_back(consistent);
    return ++tokens_;
  }
  std::unique_ptr<ReflectorState> NewState() override { return std::make_unique<State>(this); }
  bool Apply(WatchEvent& event) override {
    MutexLock lock(&mu_);
    if (event.type == WatchEvent::Type::kDeleted) {
      pods_.erase(event.pod.has_value() ? event.pod->uid : event.deleted_key);
    } else {
      pods_[event.pod->uid] = event.pod->name;
    }
    ++events_;
    cv_.SignalAll();
    return true;
  }

  // Waits until the pods held are exactly `names` (by UID "u-<name>"); false at the deadline.
  bool WaitForPods(const std::vector<std::string>& names) {
    std::map<std::string, std::string> want;
    for (const std::string& name : names) want["u-" + name] = name;
    const absl::Time deadline = absl::Now() + kDeadline;
    MutexLock lock(&mu_);
    while (pods_ != want && absl::Now() < deadline) {
      cv_.WaitFor(&mu_, std::chrono::milliseconds(50));
    }
    return pods_ == want;
  }
  std::vector<bool> begins() {
    MutexLock lock(&mu_);
    return begins_;
  }
  std::vector<uint64_t> commit_tokens() {
    MutexLock lock(&mu_);
    return commit_tokens_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::string> pods_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> begins_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> commit_tokens_ ABSL_GUARDED_BY(mu_);
  uint64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t events_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string PodObject(const std::string& name, const std::string& rv) {
  return absl::StrCat(
      R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")", name,
      R"(","namespace":"default","uid":"u-)", name, R"(","resourceVersion":")", rv,
      R"("},"spec":{"nodeName":"node-1","containers":[{"name":"c",)",
      R"("resources":{"requests":{"cpu":"100m"}}}]},"status":{"phase":"Running"}})");
}
std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return absl::StrCat(R"({"type":")", type, R"(","object":)", PodObject(name, rv), "}");
}
std::string Bookmark(const std::string& rv, bool initial_events_end) {
  return absl::StrCat(
      R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":")",
      rv, R"(")",
      initial_events_end ? R"(,"annotations":{"k8s.io/initial-events-end":"true"})" : "", "}}}");
}
std::string ErrorEvent(int code, const std::string& reason, const std::string& message) {
  return absl::StrCat(
      R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")",
      message, R"(","reason":")", reason, R"(","code":)", code, "}}");
}
std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return absl::StrCat(
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")", message,
      R"(","reason":")", reason, R"(","code":)", code, "}");
}
// A LIST's body in two fragments (split inside the first item, as a network would).
Reply ListReply(const std::vector<std::string>& names, const std::string& rv,
                const std::string& continue_token = "") {
  std::string body = absl::StrCat(
      R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":")", rv, R"(")");
  if (!continue_token.empty()) absl::StrAppend(&body, R"(,"continue":")", continue_token, R"(")");
  absl::StrAppend(&body, R"(},"items":[)");
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&body, i == 0 ? "" : ",", PodObject(names[i], rv));
  }
  absl::StrAppend(&body, "]}");
  Reply reply;
  const size_t cut = body.size() / 2;
  reply.lines = {body.substr(0, cut), body.substr(cut)};
  return reply;
}
Reply StreamReply(std::vector<std::string> lines, bool hold = true) {
  Reply reply;
  reply.lines = std::move(lines);
  reply.hold = hold;
  return reply;
}
Reply ErrorReply(long code, const std::string& reason, const std::string& message) {
  Reply reply;
  reply.code = code;
  reply.error_body = StatusBody(static_cast<int>(code), reason, message);
  return reply;
}

ReflectorOptions Options(bool watch_list, bool consistent_after_gone = false) {
  ReflectorOptions o;
  o.name = "pods";
  o.path = "/api/v1/pods";
  o.field_selector = "status.phase!=Failed";
  o.watch_list = watch_list;
  o.protobuf = false;
  o.consistent_after_gone = consistent_after_gone;
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(5);
  return o;
}

bool IsWatchList(const std::string& path) {
  return absl::StrContains(path, "sendInitialEvents=true");
}
bool IsWatch(const std::string& path) {
  return absl::StrContains(path, "watch=true") && !IsWatchList(path);
}
bool IsList(const std::string& path) { return !absl::StrContains(path, "watch=true"); }

TEST(ReflectorTest, ListsThenWatchesFromTheListsResourceVersion) {
  ScriptedApi api;
  RecordingSink sink;
  api.Push(ListReply({"a", "b"}, "10"));
  api.Push(StreamReply(
      {Event("ADDED", "c", "11"), Event("MODIFIED", "a", "12"), Event("DELETED", "b", "13")}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/false));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "c"}));
  const std::vector<std::string> paths = api.WaitForRequests(2);
  ASSERT_GE(paths.size(), 2u);
  EXPECT_TRUE(IsList(paths[0]));
  EXPECT_THAT(paths[0], HasSubstr("limit=500&resourceVersion=0"));
  EXPECT_THAT(paths[0], HasSubstr("fieldSelector=status.phase%21%3dFailed"));
  EXPECT_TRUE(IsWatch(paths[1]));
  EXPECT_THAT(paths[1], HasSubstr("resourceVersion=10&"));
  EXPECT_THAT(paths[1], HasSubstr("allowWatchBookmarks=true"));
  EXPECT_TRUE(reflector.synced());
  reflector.Stop();
  const ReflectorStats stats = reflector.stats();
  EXPECT_EQ(stats.lists, 1u);
  EXPECT_EQ(stats.events, 3u);
  EXPECT_EQ(stats.resource_version, "13");
  EXPECT_EQ(sink.begins(), std::vector<bool>({false}));  // "0": from the cache, not consistent
}

TEST(ReflectorTest, WatchListAppliesEventsToTheStateUntilTheEndBookmark) {
  ScriptedApi api;
  RecordingSink sink;
  api.Push(
      StreamReply({Event("ADDED", "a", "5"), Event("ADDED", "b", "6"), Event("MODIFIED", "a", "7"),
                   Event("DELETED", "b", "8"), Event("ADDED", "c", "9"), Bookmark("20", true),
                   Event("ADDED", "d", "21")}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/true));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "c", "d"}));
  reflector.Stop();
  const std::vector<std::string> paths = api.paths();
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_TRUE(IsWatchList(paths[0]));
  EXPECT_THAT(paths[0], HasSubstr("resourceVersionMatch=NotOlderThan"));
  EXPECT_THAT(paths[0], Not(HasSubstr("&resourceVersion=")));  // the first: the most recent
  const ReflectorStats stats = reflector.stats();
  EXPECT_EQ(stats.watch_lists, 1u);
  EXPECT_EQ(stats.lists, 0u);
  EXPECT_EQ(stats.events, 1u);  // d: the state's own events are not counted as applied events
  EXPECT_EQ(stats.resource_version, "21");
  EXPECT_EQ(sink.begins(), std::vector<bool>({true}));
  EXPECT_EQ(sink.commit_tokens(), std::vector<uint64_t>({1}));
}

TEST(ReflectorTest, ARefusedWatchListFallsBackToListAndIsNotAskedAgain) {
  ScriptedApi api;
  RecordingSink sink;
  // The WatchList feature gate off: 422 Invalid.
  api.Push(ErrorReply(422, "Invalid", "sendInitialEvents is forbidden"));
  api.Push(ListReply({"a"}, "10"));
  api.Push(StreamReply({Event("ADDED", "b", "11"), ErrorEvent(410, "Expired", "too old")},
                       /*hold=*/false));
  api.Push(ListReply({"a", "b", "c"}, "30"));
  api.Push(StreamReply({}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/true));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "b", "c"}));
  const std::vector<std::string> paths = api.WaitForRequests(5);
  reflector.Stop();
  ASSERT_GE(paths.size(), 5u);
  EXPECT_TRUE(IsWatchList(paths[0]));
  EXPECT_TRUE(IsList(paths[1]));
  EXPECT_TRUE(IsWatch(paths[2]));
  // After the 410 the state is read by a LIST again (not a WatchList), not older than the last
  // resourceVersion seen (client-go's relistResourceVersion).
  EXPECT_TRUE(IsList(paths[3]));
  EXPECT_THAT(paths[3], HasSubstr("?resourceVersion=11&"));
  EXPECT_THAT(paths[3], Not(HasSubstr("limit=")));  // unpaged: from the watch cache
  EXPECT_TRUE(IsWatch(paths[4]));
  EXPECT_THAT(paths[4], HasSubstr("resourceVersion=30&"));
  EXPECT_TRUE(reflector.watch_list_refused());
  EXPECT_EQ(reflector.stats().relists_gone, 1u);
}

TEST(ReflectorTest, ABookmarkWithoutTheEndAnnotationMeansWatchListIsIgnored) {
  ScriptedApi api;
  RecordingSink sink;
  // A server that ignores sendInitialEvents: a plain watch, whose bookmark is not the end.
  api.Push(StreamReply({Event("ADDED", "x", "40"), Bookmark("41", false)}));
  api.Push(ListReply({"a"}, "50"));
  api.Push(StreamReply({}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/true));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a"}));
  const std::vector<std::string> paths = api.WaitForRequests(3);
  reflector.Stop();
  ASSERT_GE(paths.size(), 3u);
  EXPECT_TRUE(IsWatchList(paths[0]));
  EXPECT_TRUE(IsList(paths[1]));
  EXPECT_TRUE(IsWatch(paths[2]));
  EXPECT_TRUE(reflector.watch_list_refused());
  EXPECT_EQ(reflector.stats().watch_lists, 0u);
  EXPECT_EQ(sink.commit_tokens().size(), 1u);  // x was never committed
}

TEST(ReflectorTest, GoneMidStreamThenATooLargeResourceVersionReadsConsistently) {
  ScriptedApi api;
  RecordingSink sink;
  api.Push(ListReply({"a"}, "10"));
  api.Push(StreamReply({Event("ADDED", "b", "11"), ErrorEvent(410, "Expired", "too old")},
                       /*hold=*/false));
  // The LIST at 11 is refused as a resourceVersion the server's cache has not reached.
  api.Push(ErrorReply(504, "Timeout", "Too large resource version: 11, current: 9"));
  api.Push(ListReply({"b", "c"}, "60"));
  api.Push(StreamReply({}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/false));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"b", "c"}));
  const std::vector<std::string> paths = api.WaitForRequests(5);
  reflector.Stop();
  ASSERT_GE(paths.size(), 5u);
  EXPECT_THAT(paths[2], HasSubstr("?resourceVersion=11&"));
  // Refused: the next read is the most recent state, paged (resourceVersion unset).
  EXPECT_TRUE(IsList(paths[3]));
  EXPECT_THAT(paths[3], HasSubstr("?limit=500&fieldSelector="));
  EXPECT_THAT(paths[3], Not(HasSubstr("resourceVersion")));
  EXPECT_THAT(paths[4], HasSubstr("resourceVersion=60&"));
  EXPECT_EQ(sink.begins(), std::vector<bool>({false, false, true}));
  EXPECT_EQ(reflector.stats().relists_gone, 1u);
}

TEST(ReflectorTest, ConsistentAfterGoneReadsTheMostRecentStateAfterA410) {
  ScriptedApi api;
  RecordingSink sink;
  api.Push(ListReply({"a"}, "10"));
  Reply gone = ErrorReply(410, "Expired", "too old resource version");  // as an HTTP status
  api.Push(gone);
  api.Push(ListReply({"a", "d"}, "70"));
  api.Push(StreamReply({}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/false, /*consistent_after_gone=*/true));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "d"}));
  const std::vector<std::string> paths = api.WaitForRequests(4);
  reflector.Stop();
  ASSERT_GE(paths.size(), 4u);
  EXPECT_TRUE(IsWatch(paths[1]));
  EXPECT_TRUE(IsList(paths[2]));
  EXPECT_THAT(paths[2], Not(HasSubstr("resourceVersion")));
  // The consistent read's token (BeginState(true)) reaches its commit.
  EXPECT_EQ(sink.begins(), std::vector<bool>({false, true}));
  EXPECT_EQ(sink.commit_tokens(), std::vector<uint64_t>({1, 2}));
}

TEST(ReflectorTest, AVersionGoneBeforeAWatchListsStateEndsIsReadConsistently) {
  ScriptedApi api;
  RecordingSink sink;
  // A state at 10, then the watch's 410: a new WatchList, not older than 10 ...
  api.Push(StreamReply(
      {Event("ADDED", "a", "5"), Bookmark("10", true), ErrorEvent(410, "Expired", "too old")},
      /*hold=*/false));
  // ... which the server cannot serve (gone before its state was complete) ...
  api.Push(StreamReply({ErrorEvent(410, "Expired", "too old resource version")}, /*hold=*/false));
  // ... so the next is the most recent state.
  api.Push(
      StreamReply({Event("ADDED", "a", "5"), Event("ADDED", "e", "80"), Bookmark("81", true)}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/true));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "e"}));
  const std::vector<std::string> paths = api.WaitForRequests(3);
  reflector.Stop();
  ASSERT_EQ(paths.size(), 3u);
  for (const std::string& path : paths) EXPECT_TRUE(IsWatchList(path)) << path;
  EXPECT_THAT(paths[0], Not(HasSubstr("&resourceVersion=")));
  EXPECT_THAT(paths[1], HasSubstr("&resourceVersion=10&"));
  EXPECT_THAT(paths[2], Not(HasSubstr("&resourceVersion=")));
  EXPECT_EQ(sink.begins(), std::vector<bool>({true, false, true}));
  EXPECT_EQ(sink.commit_tokens(), std::vector<uint64_t>({1, 3}));
  EXPECT_EQ(reflector.stats().watch_lists, 2u);
  EXPECT_EQ(reflector.stats().relists_gone, 1u);
}

TEST(ReflectorTest, ADamagedLineEndsTheStreamAndTheWatchResumesBeforeIt) {
  ScriptedApi api;
  RecordingSink sink;
  api.Push(ListReply({"a"}, "10"));
  api.Push(StreamReply({Event("ADDED", "b", "11"), "{not json", Event("ADDED", "lost", "12")},
                       /*hold=*/false));
  api.Push(StreamReply({Event("ADDED", "c", "12")}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/false));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "b", "c"}));
  const std::vector<std::string> paths = api.WaitForRequests(3);
  reflector.Stop();
  ASSERT_GE(paths.size(), 3u);
  EXPECT_TRUE(IsWatch(paths[2]));
  EXPECT_THAT(paths[2], HasSubstr("resourceVersion=11&"));
  EXPECT_EQ(reflector.stats().decode_errors, 1u);
  EXPECT_EQ(reflector.stats().lists, 1u);  // resumed, not relisted
}

TEST(ReflectorTest, AnExpiredContinueTokenRestartsTheList) {
  ScriptedApi api;
  RecordingSink sink;
  // A server that pages the first LIST (resourceVersion=0) anyway; its continue token expires
  // before the second page is asked for.
  api.Push(ListReply({"a"}, "10", "page-2"));
  api.Push(ErrorReply(410, "Expired", "The provided continue parameter is too old"));
  api.Push(ListReply({"a"}, "20", "page-2b"));
  api.Push(ListReply({"b"}, "20"));
  api.Push(StreamReply({}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/false));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "b"}));
  const std::vector<std::string> paths = api.WaitForRequests(5);
  reflector.Stop();
  ASSERT_GE(paths.size(), 5u);
  EXPECT_THAT(paths[1], HasSubstr("continue=page-2"));
  EXPECT_THAT(paths[1], Not(HasSubstr("resourceVersion")));  // the token alone
  EXPECT_THAT(paths[2], HasSubstr("resourceVersion=0"));     // the list, from its start
  EXPECT_THAT(paths[3], HasSubstr("continue=page-2b"));
  EXPECT_THAT(paths[4], HasSubstr("resourceVersion=20&"));
  EXPECT_EQ(reflector.stats().lists, 1u);
}

TEST(ReflectorTest, RequestConsistentListInterruptsTheWatchAndGoesOnFromTheList) {
  ScriptedApi api;
  RecordingSink sink;
  api.Push(ListReply({"a"}, "10"));
  api.Push(StreamReply({Event("ADDED", "b", "11")}));  // held open
  Reflector reflector(&api, &sink, Options(/*watch_list=*/false));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "b"}));
  api.Push(ListReply({"b", "f"}, "90"));
  api.Push(StreamReply({}));
  Mutex mu;
  CondVar cv;
  std::optional<ConsistentList> got;
  reflector.RequestConsistentList([&](const ConsistentList& list) {
    MutexLock lock(&mu);
    got = list;
    cv.SignalAll();
  });
  {
    const absl::Time deadline = absl::Now() + kDeadline;
    MutexLock lock(&mu);
    while (!got.has_value() && absl::Now() < deadline) {
      cv.WaitFor(&mu, std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->objects, 2u);
    EXPECT_EQ(got->resource_version, "90");
  }
  EXPECT_TRUE(sink.WaitForPods({"b", "f"}));
  const std::vector<std::string> paths = api.WaitForRequests(4);
  reflector.Stop();
  ASSERT_GE(paths.size(), 4u);
  EXPECT_TRUE(IsList(paths[2]));
  EXPECT_THAT(paths[2], Not(HasSubstr("resourceVersion")));
  EXPECT_THAT(paths[3], HasSubstr("resourceVersion=90&"));
  EXPECT_EQ(sink.begins(), std::vector<bool>({false, true}));
}

TEST(ReflectorTest, ServerErrorsAreRetriedWithBackoff) {
  ScriptedApi api;
  RecordingSink sink;
  api.Push(ErrorReply(500, "InternalError", "etcd unavailable"));
  api.Push(ErrorReply(429, "TooManyRequests", "slow down"));
  api.Push(ListReply({"a"}, "10"));
  api.Push(StreamReply({}));
  Reflector reflector(&api, &sink, Options(/*watch_list=*/false));
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a"}));
  const std::vector<std::string> paths = api.WaitForRequests(4);
  reflector.Stop();
  ASSERT_GE(paths.size(), 4u);
  EXPECT_EQ(paths[0], paths[1]);
  EXPECT_EQ(paths[1], paths[2]);
  EXPECT_TRUE(IsWatch(paths[3]));
}

// A watch that ends within a second after carrying events (a stream cut after its first event)
// resumes at once from its last resourceVersion; only an empty one backs off (client-go's "very
// short watch"). The backoff here is an hour: a backoff would leave "c" unseen at the deadline.
TEST(ReflectorTest, AStreamThatEndsAfterEventsResumesWithoutBackoff) {
  ScriptedApi api;
  RecordingSink sink;
  api.Push(ListReply({"a"}, "10"));
  api.Push(StreamReply({Event("ADDED", "b", "11")}, /*hold=*/false));
  api.Push(StreamReply({Event("ADDED", "c", "12")}));
  ReflectorOptions options = Options(/*watch_list=*/false);
  options.initial_backoff = absl::Hours(1);
  options.max_backoff = absl::Hours(1);
  Reflector reflector(&api, &sink, options);
  reflector.Start();
  ASSERT_TRUE(sink.WaitForPods({"a", "b", "c"}));
  const std::vector<std::string> paths = api.WaitForRequests(3);
  ASSERT_GE(paths.size(), 3u);
  EXPECT_TRUE(IsWatch(paths[2]));
  EXPECT_THAT(paths[2], HasSubstr("resourceVersion=11&"));
  reflector.Stop();
  EXPECT_EQ(reflector.stats().watch_restarts, 1u);
}

TEST(ReflectorTest, StopEndsAHeldWatchAndAWaitingRequest) {
  ScriptedApi api;
  RecordingSink sink;
  Reflector reflector(&api, &sink, Options(/*watch_list=*/true));
  reflector.Start();
  ASSERT_EQ(api.WaitForRequests(1).size(), 1u);  // waiting for a reply that never comes
  reflector.Stop();
  EXPECT_FALSE(reflector.synced());
}

// The LeaseWatcher is a Reflector over one Lease: consistent LISTs (at start, on Refresh, after a
// 410), JSON watches by field selector, and only the named Lease handed on.
std::string LeaseObject(const std::string& name, const std::string& holder, const std::string& rv) {
  return absl::StrCat(
      R"({"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":")", name,
      R"(","namespace":"kube-system","resourceVersion":")", rv, R"("},"spec":{"holderIdentity":")",
      holder, R"(","leaseDurationSeconds":15,"renewTime":"2026-12-07T10:00:00.123456Z"}})");
}
std::string LeaseEvent(const std::string& type, const std::string& name, const std::string& holder,
                       const std::string& rv) {
  return absl::StrCat(R"({"type":")", type, R"(","object":)", LeaseObject(name, holder, rv), "}");
}
Reply LeaseList(const std::vector<std::string>& objects, const std::string& rv) {
  Reply reply;
  reply.lines = {absl::StrCat(
      R"({"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{"resourceVersion":")",
      rv, R"("},"items":[)", absl::StrJoin(objects, ","), "]}")};
  return reply;
}

// The holders a LeaseWatcher handed on, one per state ("-" for absent).
class Holders {
 public:
  LeaseWatcher::OnChange OnChange() {
    return [this](const std::optional<LeaseRecord>& lease) {
      MutexLock lock(&mu_);
      holders_.push_back(lease.has_value() ? lease->holder_identity : "-");
      cv_.SignalAll();
    };
  }
  // Waits until they are `want` (or the deadline); returns them.
  std::vector<std::string> WaitFor(const std::vector<std::string>& want) {
    const absl::Time deadline = absl::Now() + kDeadline;
    MutexLock lock(&mu_);
    while (holders_ != want && absl::Now() < deadline) {
      cv_.WaitFor(&mu_, std::chrono::milliseconds(50));
    }
    return holders_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::string> holders_ ABSL_GUARDED_BY(mu_);
};

// The Lease kube-system/sched, retried at once.
LeaseWatcherOptions SchedLease() {
  LeaseWatcherOptions options;
  options.namespace_name = "kube-system";
  options.name = "sched";
  options.initial_backoff = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(5);
  options.min_refresh_interval = absl::ZeroDuration();
  return options;
}

TEST(LeaseWatcherTest, FollowsTheNamedLeaseAndRefreshListsConsistently) {
  ScriptedApi api;
  Holders holders;
  LeaseWatcher watcher(&api, SchedLease(), holders.OnChange());
  // A server that ignored the field selector: the other Lease is never handed on.
  api.Push(LeaseList({LeaseObject("other", "x", "5"), LeaseObject("sched", "a", "6")}, "10"));
  api.Push(StreamReply(
      {LeaseEvent("MODIFIED", "other", "y", "11"), LeaseEvent("MODIFIED", "sched", "b", "12"),
       LeaseEvent("DELETED", "sched", "b", "13"), LeaseEvent("ADDED", "sched", "c", "14")}));
  watcher.Start();
  EXPECT_EQ(holders.WaitFor({"a", "b", "-", "c"}), std::vector<std::string>({"a", "b", "-", "c"}));
  EXPECT_TRUE(watcher.synced());

  api.Push(LeaseList({}, "20"));  // Refresh finds it gone
  api.Push(StreamReply({ErrorEvent(410, "Expired", "too old")}, /*hold=*/false));
  api.Push(LeaseList({LeaseObject("sched", "d", "30")}, "30"));  // after the 410: consistent
  api.Push(StreamReply({}));
  watcher.Refresh();
  EXPECT_EQ(holders.WaitFor({"a", "b", "-", "c", "-", "d"}),
            std::vector<std::string>({"a", "b", "-", "c", "-", "d"}));
  const std::vector<std::string> paths = api.WaitForRequests(6);
  watcher.Stop();
  ASSERT_GE(paths.size(), 6u);
  for (size_t i : {0, 2, 4}) {
    SCOPED_TRACE(paths[i]);
    EXPECT_TRUE(IsList(paths[i]));
    EXPECT_THAT(paths[i], Not(HasSubstr("resourceVersion")));
  }
  for (size_t i : {1, 3, 5}) EXPECT_TRUE(IsWatch(paths[i])) << paths[i];
  for (const std::string& path : paths) {
    EXPECT_THAT(path, HasSubstr("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?"));
    EXPECT_THAT(path, HasSubstr("fieldSelector=metadata.name%3dsched"));
  }
  EXPECT_THAT(paths[1], HasSubstr("resourceVersion=10&"));
  EXPECT_THAT(paths[5], HasSubstr("resourceVersion=30&"));
}

TEST(LeaseWatcherTest, AnUndecodableLeaseIsSkippedAndADeletedOneStillRemoved) {
  ScriptedApi api;
  Holders holders;
  LeaseWatcher watcher(&api, SchedLease(), holders.OnChange());
  const std::string bad = R"({"metadata":{"name":"sched","resourceVersion":"12"},)"
                          R"("spec":{"renewTime":"yesterday"}})";
  api.Push(LeaseList({LeaseObject("sched", "a", "6")}, "10"));
  api.Push(StreamReply({absl::StrCat(R"({"type":"MODIFIED","object":)", bad, "}"),
                        absl::StrCat(R"({"type":"DELETED","object":)", bad, "}")}));
  watcher.Start();
  EXPECT_EQ(holders.WaitFor({"a", "-"}), std::vector<std::string>({"a", "-"}));
  watcher.Stop();
}

}  // namespace
}  // namespace fitledger::kube
