#include "server/kube/watcher.h"

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "server/kube/api_client.h"
#include "server/kube/objects.h"
#include "simdjson.h"

namespace fitledger::kube {
namespace {

using simdjson::ondemand::value;

const char* KindName(bool nodes) { return nodes ? "nodes" : "pods"; }

constexpr size_t kMaxRejectionsKept = 1000;

std::string UrlEncode(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  return out;
}

// metadata.resourceVersion of an object value (consumes the value).
std::string ResourceVersionOf(value v) {
  std::string_view rv;
  value metadata;
  if (v.find_field_unordered("metadata").get(metadata)) return "";
  if (metadata.find_field_unordered("resourceVersion").get_string().get(rv)) return "";
  return std::string(rv);
}

// Calls `on_field(key, value)` for each field of `object` until it returns false; stops at the
// first error. (After an error On Demand may have abandoned the document: nothing may touch it
// again, so every reader here makes one forward pass.)
template <typename F>
void ForEachField(simdjson::ondemand::object object, F on_field) {
  for (auto field : object) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return;
    std::string k(key);
    value v;
    if (field.value().get(v)) return;
    if (!on_field(k, v)) return;
  }
}

// metadata.resourceVersion, uid and name of the event's object, from a fresh iteration of the
// line (a failed decode may have abandoned the first one: rewinding it is not allowed).
void ObjectKeys(simdjson::ondemand::parser& parser, const simdjson::padded_string& line,
                std::string* rv, std::string* uid, std::string* name) {
  simdjson::ondemand::document doc;
  if (parser.iterate(line).get(doc)) return;
  simdjson::ondemand::object object, metadata;
  if (doc.find_field_unordered("object").get_object().get(object)) return;
  if (object.find_field_unordered("metadata").get_object().get(metadata)) return;
  ForEachField(metadata, [&](const std::string& key, value v) {
    std::string* out = key == "resourceVersion" ? rv
                       : key == "uid"           ? uid
                       : key == "name"          ? name
                                                : nullptr;
    if (out == nullptr) return true;
    std::string_view text;
    if (v.get_string().get(text)) return false;
    *out = std::string(text);
    return true;
  });
}

const char* StreamName(bool nodes, bool failed) {
  return nodes ? "nodes" : failed ? "failed pods" : "pods";
}

}  // namespace

absl::StatusOr<WatchEvent> DecodeWatchEvent(bool nodes, absl::string_view line,
                                            std::string* resource_version) {
  thread_local simdjson::ondemand::parser parser;
  simdjson::padded_string padded(line.data(), line.size());
  simdjson::ondemand::document doc;
  auto damaged = [](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("undecodable watch line: ", why));
  };
  if (auto err = parser.iterate(padded).get(doc)) return damaged(simdjson::error_message(err));
  std::string_view type;
  if (auto err = doc.find_field_unordered("type").get_string().get(type)) {
    return damaged(absl::StrCat("type: ", simdjson::error_message(err)));
  }
  const std::string type_name(type);  // `type` points into the parser's reused string buffer
  WatchEvent event;
  if (type == "ADDED") {
    event.type = WatchEvent::Type::kAdded;
  } else if (type == "MODIFIED") {
    event.type = WatchEvent::Type::kModified;
  } else if (type == "DELETED") {
    event.type = WatchEvent::Type::kDeleted;
  } else if (type == "BOOKMARK") {
    event.type = WatchEvent::Type::kBookmark;
  } else if (type == "ERROR") {
    event.type = WatchEvent::Type::kError;
  } else {
    return damaged(absl::StrCat("unknown event type \"", type_name, "\""));
  }
  value object;
  if (auto err = doc.find_field_unordered("object").get(object)) {
    return damaged(absl::StrCat("object: ", simdjson::error_message(err)));
  }
  switch (event.type) {
    case WatchEvent::Type::kError: {
      simdjson::ondemand::object status;
      if (object.get_object().get(status)) return event;
      ForEachField(status, [&](const std::string& key, value v) {
        if (key == "code") {
          if (v.get_int64().get(event.error_code)) {
            event.error_code = 0;
            return false;
          }
        } else if (key == "message") {
          std::string_view message;
          if (v.get_string().get(message)) return false;
          event.error_message = std::string(message);
        }
        return true;
      });
      return event;
    }
    case WatchEvent::Type::kBookmark:
      event.resource_version = ResourceVersionOf(object);
      return event;
    default:
      break;
  }
  absl::Status decoded;
  if (nodes) {
    absl::StatusOr<DecodedNode> node = DecodeNode(object);
    if (node.ok()) {
      event.node = std::move(node->node);
      event.resource_version = std::move(node->resource_version);
    }
    decoded = node.status();
  } else {
    std::string rv;
    absl::StatusOr<Pod> pod = DecodePod(object, &rv);
    if (pod.ok()) {
      event.pod = *std::move(pod);
      event.resource_version = std::move(rv);
    }
    decoded = pod.status();
  }
  if (decoded.ok()) return event;
  std::string rv, uid, name;
  ObjectKeys(parser, padded, &rv, &uid, &name);
  if (resource_version != nullptr) *resource_version = rv;
  std::string key = nodes ? name : uid;
  if (event.type == WatchEvent::Type::kDeleted && !key.empty()) {
    event.deleted_key = std::move(key);
    event.resource_version = std::move(rv);
    return event;
  }
  return absl::InvalidArgumentError(absl::StrCat("watch ", KindName(nodes),
                                                 ": undecodable object in a ", type_name,
                                                 " event: ", decoded.message()));
}

bool IsKubeletRejection(const Pod& pod) {
  return pod.phase == "Failed" && absl::StartsWith(pod.status_reason, "OutOf");
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
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (nodes_thread_.joinable()) nodes_thread_.join();
  if (pods_thread_.joinable()) pods_thread_.join();
  if (failed_pods_thread_.joinable()) failed_pods_thread_.join();
}

bool Watcher::WaitOrStop(absl::Duration d) {
  std::unique_lock<std::mutex> lock(stop_mu_);
  stop_cv_.wait_for(lock, absl::ToChronoNanoseconds(d), [this] { return stop_.load(); });
  return stop_.load();
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
  std::string resource_version;
  while (!stop_) {
    if (resource_version.empty()) {
      absl::Status listed = List(stream, &resource_version);
      if (!listed.ok()) {
        if (fail_wait(listed)) return;
        continue;
      }
      backoff = options_.initial_backoff;
    }
    absl::Time started = absl::Now();
    absl::Status watched = Watch(stream, &resource_version);
    if (stop_) return;
    {
      MutexLock lock(&mu_);
      ++stats_.watch_restarts;
    }
    if (!watched.ok()) {
      if (fail_wait(watched)) return;
    } else if (absl::Now() - started < absl::Seconds(1)) {
      // A stream that ends at once repeatedly must not spin.
      if (fail_wait(absl::UnavailableError("watch ended immediately"))) return;
    } else {
      backoff = options_.initial_backoff;
    }
  }
}

absl::Status Watcher::List(Stream stream, std::string* resource_version) {
  const bool nodes = stream == Stream::kNodes;
  const bool failed = stream == Stream::kFailedPods;
  const std::string base = nodes ? "/api/v1/nodes" : "/api/v1/pods";
  const std::string& selector = nodes    ? std::string()
                                : failed ? options_.failed_pod_field_selector
                                         : options_.pod_field_selector;
  std::vector<NodeRecord> node_records;
  std::vector<PodRecord> pod_records;
  std::vector<Pod> rejected;
  std::string continue_token;
  std::string list_rv;
  simdjson::ondemand::parser parser;
  uint64_t decode_errors = 0;
  do {
    std::string path = absl::StrCat(base, "?limit=", options_.page_size);
    if (!selector.empty()) absl::StrAppend(&path, "&fieldSelector=", UrlEncode(selector));
    if (!continue_token.empty()) absl::StrAppend(&path, "&continue=", UrlEncode(continue_token));
    absl::StatusOr<HttpResponse> response =
        client_->Request("GET", path, "", options_.request_timeout);
    if (!response.ok()) return response.status();
    if (response->code == 410 && !continue_token.empty()) {
      // The continue token expired: start the list again.
      continue_token.clear();
      node_records.clear();
      pod_records.clear();
      rejected.clear();
      continue;
    }
    if (response->code != 200) {
      return absl::UnavailableError(absl::StrCat("LIST ", base, ": HTTP ", response->code, ": ",
                                                 response->body.substr(0, 300)));
    }
    simdjson::padded_string padded(response->body);
    response->body.clear();
    response->body.shrink_to_fit();
    simdjson::ondemand::document doc;
    if (auto err = parser.iterate(padded).get(doc)) {
      return absl::UnavailableError(
          absl::StrCat("LIST ", base, ": ", simdjson::error_message(err)));
    }
    continue_token.clear();
    simdjson::ondemand::object obj;
    if (auto err = doc.get_object().get(obj)) {
      return absl::UnavailableError(
          absl::StrCat("LIST ", base, ": ", simdjson::error_message(err)));
    }
    for (auto field : obj) {
      std::string_view key;
      if (field.unescaped_key().get(key)) break;
      if (key == "metadata") {
        value meta;
        if (field.value().get(meta)) continue;
        simdjson::ondemand::object meta_obj;
        if (meta.get_object().get(meta_obj)) continue;
        for (auto m : meta_obj) {
          std::string_view mk, mv;
          if (m.unescaped_key().get(mk)) break;
          if (mk == "resourceVersion" && !m.value().get_string().get(mv)) list_rv = std::string(mv);
          if (mk == "continue" && !m.value().get_string().get(mv)) continue_token = std::string(mv);
        }
      } else if (key == "items") {
        simdjson::ondemand::array items;
        if (field.value().get_array().get(items)) continue;
        for (auto item : items) {
          value v;
          if (item.get(v)) {
            ++decode_errors;
            continue;
          }
          if (nodes) {
            absl::StatusOr<DecodedNode> node = DecodeNode(v);
            if (node.ok()) {
              node_records.push_back(std::move(node->node));
            } else {
              ++decode_errors;
            }
            continue;
          }
          absl::StatusOr<Pod> pod = DecodePod(v, nullptr);
          if (!pod.ok()) {
            ++decode_errors;
            continue;
          }
          if (failed) {
            if (IsKubeletRejection(*pod)) rejected.push_back(*std::move(pod));
            continue;
          }
          absl::StatusOr<PodRecord> record = ToPodRecord(*pod);
          if (record.ok()) {
            pod_records.push_back(std::move(*record));
          } else {
            ++decode_errors;
          }
        }
      }
    }
  } while (!continue_token.empty() && !stop_);
  if (stop_) return absl::CancelledError("stopping");
  if (nodes) {
    ledger_->ReplaceNodes(node_records);
  } else if (failed) {
    ReplaceRejections(rejected);
  } else {
    ledger_->ReplacePods(pod_records);
  }
  *resource_version = list_rv;
  if (stream == Stream::kPods) NotePodsResourceVersion(list_rv);
  {
    MutexLock lock(&mu_);
    ++stats_.lists;
    stats_.decode_errors += decode_errors;
    if (nodes) {
      stats_.nodes_synced = true;
    } else if (failed) {
      stats_.rejections_synced = true;
    } else {
      stats_.pods_synced = true;
    }
  }
  const size_t count = nodes ? node_records.size() : failed ? rejected.size() : pod_records.size();
  LogInfo("listed", {{"resource", StreamName(nodes, failed)},
                     {"count", std::to_string(count)},
                     {"resourceVersion", list_rv}});
  return absl::OkStatus();
}

absl::Status Watcher::Watch(Stream stream, std::string* resource_version) {
  const bool nodes = stream == Stream::kNodes;
  const bool failed = stream == Stream::kFailedPods;
  const std::string& selector = nodes    ? std::string()
                                : failed ? options_.failed_pod_field_selector
                                         : options_.pod_field_selector;
  std::string path = absl::StrCat(
      nodes ? "/api/v1/nodes" : "/api/v1/pods",
      "?watch=true&allowWatchBookmarks=true&resourceVersion=", UrlEncode(*resource_version),
      "&timeoutSeconds=", options_.watch_timeout_seconds);
  if (!selector.empty()) absl::StrAppend(&path, "&fieldSelector=", UrlEncode(selector));
  bool gone = false;
  std::string error;
  std::string error_body;
  absl::StatusOr<long> code = client_->Stream(
      path,
      [&](absl::string_view line) {
        bool go_on = ApplyEvent(stream, std::string_view(line.data(), line.size()),
                                resource_version, &gone, &error);
        if (stream == Stream::kPods) NotePodsResourceVersion(*resource_version);
        return go_on;
      },
      &stop_, absl::Seconds(options_.watch_timeout_seconds + 30), options_.max_event_bytes,
      &error_body);
  if (absl::IsResourceExhausted(code.status())) {
    resource_version->clear();  // a paged LIST makes progress where the stream cannot
    return code.status();
  }
  if (!code.ok()) return code.status();
  if (*code == 410 || gone) {
    resource_version->clear();  // relist
    MutexLock lock(&mu_);
    ++stats_.relists_gone;
    return absl::OkStatus();
  }
  if (*code != 200) {
    return absl::UnavailableError(absl::StrCat("WATCH ", StreamName(nodes, failed), ": HTTP ",
                                               *code, ": ", error_body.substr(0, 300)));
  }
  if (!error.empty()) return absl::UnavailableError(error);
  return absl::OkStatus();
}

bool Watcher::ApplyEvent(Stream stream, std::string_view line, std::string* resource_version,
                         bool* gone, std::string* error) {
  const bool nodes = stream == Stream::kNodes;
  const bool failed = stream == Stream::kFailedPods;
  const char* name = StreamName(nodes, failed);
  std::string object_rv;
  absl::StatusOr<WatchEvent> event =
      DecodeWatchEvent(nodes, absl::string_view(line.data(), line.size()), &object_rv);
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
    } else if (IsKubeletRejection(*event->pod)) {
      NoteRejection(*event->pod);
    }
  } else if (deleted) {
    // Removal whatever the event carries: the API server sends a pod that finished (left the
    // selector) with its previous, non-terminal content.
    ledger_->DeletePod(event->pod.has_value() ? event->pod->uid : event->deleted_key);
  } else {
    absl::StatusOr<PodRecord> record = ToPodRecord(*event->pod);
    if (!record.ok()) {
      {
        MutexLock lock(&mu_);
        ++stats_.decode_errors;
      }
      LogWarn("skipping an undecodable watch event",
              {{"resource", name}, {"error", std::string(record.status().message())}});
    } else {
      ledger_->UpsertPod(*record);
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
