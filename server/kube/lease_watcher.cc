#include "server/kube/lease_watcher.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "nlohmann/json.hpp"
#include "server/kube/api_client.h"

namespace fitledger::kube {
namespace {

using nlohmann::json;

absl::Status WrongType(absl::string_view field, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("Lease ", field, ": not ", want));
}

// A string field of `object`, "" when absent or null.
absl::Status GetString(const json& object, const char* key, absl::string_view path,
                       std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return WrongType(absl::StrCat(path, key), "a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetInt(const json& object, const char* key, int64_t* out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) return WrongType(absl::StrCat("spec.", key), "an integer");
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

// metav1.MicroTime: RFC 3339 with up to nanoseconds ("2024-05-01T10:00:00.123456Z").
absl::Status GetTime(const json& object, const char* key, std::optional<absl::Time>* out) {
  std::string text;
  if (absl::Status s = GetString(object, key, "spec.", &text); !s.ok()) return s;
  if (text.empty()) return absl::OkStatus();
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Lease spec.", key, ": \"", text, "\" is not an RFC 3339 time: ", error));
  }
  *out = t;
  return absl::OkStatus();
}

absl::StatusOr<LeaseRecord> FromJson(const json& lease) {
  if (!lease.is_object()) return WrongType("", "an object");
  LeaseRecord out;
  auto metadata = lease.find("metadata");
  if (metadata != lease.end() && metadata->is_object()) {
    for (auto [key, field] :
         {std::pair{"namespace", &out.namespace_name}, std::pair{"name", &out.name},
          std::pair{"resourceVersion", &out.resource_version}}) {
      if (absl::Status s = GetString(*metadata, key, "metadata.", field); !s.ok()) return s;
    }
  }
  auto spec = lease.find("spec");
  if (spec == lease.end() || spec->is_null()) return out;
  if (!spec->is_object()) return WrongType("spec", "an object");
  if (absl::Status s = GetString(*spec, "holderIdentity", "spec.", &out.holder_identity); !s.ok()) {
    return s;
  }
  if (absl::Status s = GetInt(*spec, "leaseDurationSeconds", &out.lease_duration_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = GetInt(*spec, "leaseTransitions", &out.lease_transitions); !s.ok()) {
    return s;
  }
  if (absl::Status s = GetTime(*spec, "acquireTime", &out.acquire_time); !s.ok()) return s;
  if (absl::Status s = GetTime(*spec, "renewTime", &out.renew_time); !s.ok()) return s;
  return out;
}

}  // namespace

absl::StatusOr<LeaseRecord> ParseLease(absl::string_view text) {
  json lease = json::parse(text.begin(), text.end(), nullptr, false);
  if (lease.is_discarded()) return absl::InvalidArgumentError("Lease: not JSON");
  return FromJson(lease);
}

LeaseWatcher::LeaseWatcher(ApiTransport* client, LeaseWatcherOptions options, OnChange on_change)
    : client_(client), options_(std::move(options)), on_change_(std::move(on_change)) {}

LeaseWatcher::~LeaseWatcher() { Stop(); }

void LeaseWatcher::Start() {
  thread_ = std::thread([this] { Run(); });
}

void LeaseWatcher::Stop() {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
    stop_ = true;
  }
  interrupt_ = true;
  stop_cv_.SignalAll();
  client_->InterruptStreams(&interrupt_);
  if (thread_.joinable()) thread_.join();
}

void LeaseWatcher::Refresh() {
  const int64_t now = absl::ToUnixNanos(absl::Now());
  int64_t last = last_refresh_ns_.load();
  if (now - last < absl::ToInt64Nanoseconds(options_.min_refresh_interval)) return;
  if (!last_refresh_ns_.compare_exchange_strong(last, now)) return;  // another caller won
  interrupt_ = true;
  client_->InterruptStreams(&interrupt_);
}

bool LeaseWatcher::WaitOrStop(absl::Duration d) {
  const absl::Time wake = absl::Now() + d;
  MutexLock lock(&stop_mu_);
  while (!stopping_ && absl::Now() < wake) {
    stop_cv_.WaitFor(&stop_mu_, absl::ToChronoNanoseconds(wake - absl::Now()));
  }
  return stopping_;
}

std::string LeaseWatcher::Path(absl::string_view query) const {
  return absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/",
                      UrlEncode(options_.namespace_name), "/leases?", query,
                      "&fieldSelector=", UrlEncode(absl::StrCat("metadata.name=", options_.name)));
}

void LeaseWatcher::Run() {
  std::mt19937 rng(std::random_device{}());
  absl::Duration backoff = options_.initial_backoff;
  auto fail_wait = [&](const absl::Status& status) {
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    absl::Duration d = backoff * jitter(rng);
    LogWarn("kubernetes API error", {{"resource", "lease"},
                                     {"lease", options_.namespace_name + "/" + options_.name},
                                     {"error", std::string(status.message())},
                                     {"retry_in", absl::FormatDuration(d)}});
    backoff = std::min(backoff * 2, options_.max_backoff);
    return WaitOrStop(d);
  };
  std::string resource_version;
  bool need_list = true;
  while (!stop_) {
    if (need_list || interrupt_) {
      // Clear the interrupt first: a Refresh after this line interrupts the LIST below, or the
      // watch after it, and brings the loop back here.
      interrupt_ = stop_.load();
      if (stop_) return;
      absl::Status listed = List(&resource_version);
      if (stop_) return;
      if (absl::IsCancelled(listed)) continue;
      if (!listed.ok()) {
        if (fail_wait(listed)) return;
        continue;
      }
      need_list = false;
      backoff = options_.initial_backoff;
    }
    const absl::Time started = absl::Now();
    bool gone = false;
    absl::Status watched = Watch(&resource_version, &gone);
    if (stop_) return;
    if (interrupt_) continue;  // Refresh
    if (gone) {
      need_list = true;
      continue;
    }
    if (!watched.ok()) {
      if (fail_wait(watched)) return;
    } else if (absl::Now() - started < absl::Seconds(1)) {
      if (fail_wait(absl::UnavailableError("watch ended immediately"))) return;
    } else {
      backoff = options_.initial_backoff;
    }
  }
}

absl::Status LeaseWatcher::List(std::string* resource_version) {
  // No resourceVersion: the latest state (a consistent read), so a Refresh sees what the API
  // server has now, not what its watch cache has caught up to.
  absl::StatusOr<HttpResponse> r =
      client_->Request("GET", Path("limit=500"), "", options_.request_timeout);
  if (interrupt_) return absl::CancelledError("interrupted");
  if (!r.ok()) return r.status();
  if (r->code != 200) {
    return absl::UnavailableError(
        absl::StrCat("LIST lease: HTTP ", r->code, ": ", r->body.substr(0, 300)));
  }
  json list = json::parse(r->body, nullptr, false);
  if (list.is_discarded() || !list.is_object()) {
    return absl::UnavailableError("LIST lease: the answer is not a JSON object");
  }
  std::optional<LeaseRecord> lease;
  auto items = list.find("items");
  if (items != list.end() && items->is_array()) {
    for (const json& item : *items) {
      absl::StatusOr<LeaseRecord> record = FromJson(item);
      if (!record.ok()) {
        return absl::UnavailableError(absl::StrCat("LIST lease: ", record.status().message()));
      }
      if (record->name == options_.name) lease = *std::move(record);
    }
  }
  auto metadata = list.find("metadata");
  if (metadata != list.end() && metadata->is_object()) {
    std::string rv;
    if (GetString(*metadata, "resourceVersion", "metadata.", &rv).ok()) *resource_version = rv;
  }
  on_change_(lease);
  synced_ = true;
  return absl::OkStatus();
}

absl::Status LeaseWatcher::Watch(std::string* resource_version, bool* gone) {
  std::string error;
  std::string error_body;
  absl::StatusOr<long> code = client_->Stream(
      Path(absl::StrCat(
          "watch=true&allowWatchBookmarks=true&resourceVersion=", UrlEncode(*resource_version),
          "&timeoutSeconds=", options_.watch_timeout_seconds)),
      [&](absl::string_view line) {
        json event = json::parse(line.begin(), line.end(), nullptr, false);
        if (event.is_discarded() || !event.is_object() || !event.contains("type") ||
            !event["type"].is_string() || !event.contains("object")) {
          error = "watch lease: an undecodable line";
          return false;  // resume from the last resourceVersion
        }
        const std::string type = event["type"].get<std::string>();
        const json& object = event["object"];
        if (type == "ERROR") {
          if (object.is_object() && object.value("code", 0) == 410) {
            *gone = true;
          } else {
            error = absl::StrCat("watch lease: ERROR event: ",
                                 object.is_object() ? object.value("message", "") : "");
          }
          return false;
        }
        std::string rv;
        if (object.is_object() && object.contains("metadata") && object["metadata"].is_object()) {
          (void)GetString(object["metadata"], "resourceVersion", "metadata.", &rv);
        }
        if (type == "ADDED" || type == "MODIFIED" || type == "DELETED") {
          absl::StatusOr<LeaseRecord> record = FromJson(object);
          if (!record.ok()) {
            LogWarn("skipping an undecodable Lease",
                    {{"error", std::string(record.status().message())}});
          } else if (record->name == options_.name) {
            on_change_(type == "DELETED" ? std::nullopt : std::optional<LeaseRecord>(*record));
          }
        }
        if (!rv.empty()) *resource_version = rv;
        return true;
      },
      &interrupt_, absl::Seconds(options_.watch_timeout_seconds + 30), 1 << 20, &error_body);
  if (!code.ok()) return code.status();
  if (*code == 410) {
    *gone = true;
    return absl::OkStatus();
  }
  if (*code != 200) {
    return absl::UnavailableError(
        absl::StrCat("WATCH lease: HTTP ", *code, ": ", error_body.substr(0, 300)));
  }
  if (!error.empty()) return absl::UnavailableError(error);
  return absl::OkStatus();
}

}  // namespace fitledger::kube
