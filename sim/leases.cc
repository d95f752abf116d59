#include "sim/leases.h"

#include <algorithm>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json_access.h"
#include "common/status_macros.h"
#include "httplib.h"
#include "sim/objects.h"
#include "sim/server.h"
#include "sim/status.h"
#include "sim/tables.h"
#include "sim/watch_stream.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

constexpr char kGroup[] = "coordination.k8s.io";
constexpr char kGroupVersion[] = "coordination.k8s.io/v1";

// errors.NewInvalid for a Lease: `Lease.coordination.k8s.io "NAME" is invalid: <errors>`.
absl::Status Invalid(absl::string_view name, const std::vector<std::string>& errors) {
  return absl::FailedPreconditionError(absl::StrCat(
      "Lease.coordination.k8s.io \"", name, "\" is invalid: ",
      errors.size() == 1 ? errors[0] : absl::StrCat("[", absl::StrJoin(errors, ", "), "]")));
}

// A DNS subdomain (apimachinery pkg/util/validation IsDNS1123Subdomain).
bool IsDnsSubdomain(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty()) return false;
    if (!absl::ascii_isalnum(label.front()) || !absl::ascii_isalnum(label.back())) return false;
    for (char c : label) {
      if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
    }
  }
  return true;
}

// The decoding the API server does before validation: known fields must have their types
// ("Lease in version "v1" cannot be handled as a Lease: ...", a 400).
absl::Status CheckTypes(const json& lease) {
  auto bad = [](absl::string_view field, absl::string_view want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Lease in version \"v1\" cannot be handled as a Lease: ", field, ": not ", want));
  };
  if (!lease.is_object()) return bad("the body", "a JSON object");
  if (lease.contains("metadata") && !lease["metadata"].is_object()) {
    return bad("metadata", "an object");
  }
  if (!lease.contains("spec") || lease["spec"].is_null()) return absl::OkStatus();
  const json& spec = lease["spec"];
  if (!spec.is_object()) return bad("spec", "an object");
  for (const char* key :
       {"holderIdentity", "acquireTime", "renewTime", "strategy", "preferredHolder"}) {
    if (spec.contains(key) && !spec[key].is_null() && !spec[key].is_string()) {
      return bad(absl::StrCat("spec.", key), "a string");
    }
  }
  for (const char* key : {"leaseDurationSeconds", "leaseTransitions"}) {
    if (spec.contains(key) && !spec[key].is_null() && !spec[key].is_number_integer()) {
      return bad(absl::StrCat("spec.", key), "an integer");
    }
  }
  for (const char* key : {"acquireTime", "renewTime"}) {
    if (spec.contains(key) && spec[key].is_string()) {
      absl::Time t;
      std::string error;
      if (!absl::ParseTime(absl::RFC3339_full, spec[key].get<std::string>(), &t, &error)) {
        return bad(absl::StrCat("spec.", key), "an RFC 3339 time");
      }
    }
  }
  return absl::OkStatus();
}

// A random (version 4) UUID.
std::string NewUid() {
  static Mutex mu;
  static std::mt19937_64 rng ABSL_GUARDED_BY(mu){std::random_device{}()};
  uint64_t hi, lo;
  {
    MutexLock lock(&mu);
    hi = rng();
    lo = rng();
  }
  return absl::StrFormat("%08x-%04x-4%03x-%04x-%012x", hi >> 32, (hi >> 16) & 0xffff, hi & 0xfff,
                         ((lo >> 48) & 0x3fff) | 0x8000, lo & 0xffffffffffffULL);
}

}  // namespace

bool LeaseFilter::Matches(const StoredLease& lease) const {
  if (!namespace_name.empty() && lease.fields.namespace_name != namespace_name) return false;
  return fields.Matches(lease.fields) && labels.Matches(lease.fields.labels);
}

LeaseStore::LeaseStore(ClusterStore* store, int64_t event_window)
    : store_(store), event_window_(event_window) {}

absl::StatusOr<LeasePtr> LeaseStore::StoreLocked(json lease, LeaseEventType type,
                                                 LeasePtr previous) {
  json& metadata = lease["metadata"];
  const std::string name = JsonStr(metadata, "name");
  // ValidateLease: ObjectMeta (a DNS subdomain name), then ValidateLeaseSpec.
  std::vector<std::string> errors;
  if (!IsDnsSubdomain(name)) {
    errors.push_back(absl::StrCat(
        "metadata.name: Invalid value: \"", name,
        "\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
  }
  const json& spec = lease.contains("spec") ? lease["spec"] : json::object();
  if (spec.is_object()) {
    if (spec.contains("leaseDurationSeconds") && spec["leaseDurationSeconds"].is_number_integer() &&
        spec["leaseDurationSeconds"].get<int64_t>() <= 0) {
      errors.push_back(absl::StrCat(
          "spec.leaseDurationSeconds: Invalid value: ", spec["leaseDurationSeconds"].get<int64_t>(),
          ": must be greater than 0"));
    }
    if (spec.contains("leaseTransitions") && spec["leaseTransitions"].is_number_integer() &&
        spec["leaseTransitions"].get<int64_t>() < 0) {
      errors.push_back(absl::StrCat(
          "spec.leaseTransitions: Invalid value: ", spec["leaseTransitions"].get<int64_t>(),
          ": must be greater than or equal to 0"));
    }
  }
  if (!errors.empty()) return Invalid(name, errors);
  auto stored = std::make_shared<StoredLease>();
  stored->fields.namespace_name = JsonStr(metadata, "namespace");
  stored->fields.name = name;
  if (metadata.contains("labels") && metadata["labels"].is_object()) {
    for (const auto& [k, v] : metadata["labels"].items()) {
      if (v.is_string()) stored->fields.labels.emplace_back(k, v.get<std::string>());
    }
    std::sort(stored->fields.labels.begin(), stored->fields.labels.end());
  }
  lease["apiVersion"] = kGroupVersion;
  lease["kind"] = "Lease";
  if (previous != nullptr) {
    // An update that changes nothing is not written (etcd3/store.go GuaranteedUpdate compares
    // the new bytes with the old): same resourceVersion, no event.
    metadata["resourceVersion"] = absl::StrCat(previous->resource_version);
    if (Dump(lease) == previous->json) return previous;
  }
  stored->resource_version = store_->AllocateResourceVersion();
  metadata["resourceVersion"] = absl::StrCat(stored->resource_version);
  stored->json = Dump(lease);
  LeasePtr published = stored;
  leases_[StoreKey(stored->fields.namespace_name, name)] = published;
  history_.push_back(Event{type, published, std::move(previous), absl::Now()});
  while (static_cast<int64_t>(history_.size()) > event_window_) {
    oldest_ = std::max(oldest_, history_.front().object->resource_version);
    history_.pop_front();
  }
  return published;
}

absl::StatusOr<LeasePtr> LeaseStore::Create(absl::string_view namespace_name,
                                            absl::string_view body) {
  json lease = json::parse(body.begin(), body.end(), nullptr, false);
  if (lease.is_discarded()) {
    return absl::InvalidArgumentError("the request body is not a JSON object");
  }
  RETURN_IF_ERROR(CheckTypes(lease));
  json& metadata = lease["metadata"];
  if (metadata.is_null()) metadata = json::object();
  const std::string ns = JsonStr(metadata, "namespace");
  if (!ns.empty() && ns != namespace_name) {
    return absl::InvalidArgumentError(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  metadata["namespace"] = std::string(namespace_name);
  LeasePtr result;
  {
    MutexLock lock(&mu_);
    std::string name = JsonStr(metadata, "name");
    if (name.empty()) {
      const std::string prefix = JsonStr(metadata, "generateName");
      if (prefix.empty()) {
        return Invalid("", {"metadata.name: Required value: name or generateName is required"});
      }
      // names.SimpleNameGenerator: the prefix and 5 random characters.
      static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
      std::mt19937_64 rng(std::random_device{}());
      do {
        name = prefix;
        for (int i = 0; i < 5; ++i) name.push_back(kAlphabet[rng() % (sizeof(kAlphabet) - 1)]);
      } while (leases_.count(StoreKey(namespace_name, name)) > 0);
      metadata["name"] = name;
    }
    if (leases_.count(StoreKey(namespace_name, name)) > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("leases.coordination.k8s.io \"", name, "\" already exists"));
    }
    metadata.erase("resourceVersion");
    metadata["uid"] = NewUid();
    metadata["creationTimestamp"] = FormatTimestamp(absl::Now());
    absl::StatusOr<LeasePtr> stored =
        StoreLocked(std::move(lease), LeaseEventType::kAdded, nullptr);
    if (!stored.ok()) return stored.status();
    result = *stored;
  }
  signal_.Notify();
  return result;
}

absl::StatusOr<std::pair<LeasePtr, bool>> LeaseStore::Update(absl::string_view namespace_name,
                                                             absl::string_view name,
                                                             absl::string_view body) {
  json lease = json::parse(body.begin(), body.end(), nullptr, false);
  if (lease.is_discarded()) {
    return absl::InvalidArgumentError("the request body is not a JSON object");
  }
  RETURN_IF_ERROR(CheckTypes(lease));
  json& metadata = lease["metadata"];
  if (metadata.is_null()) metadata = json::object();
  const std::string body_name = JsonStr(metadata, "name");
  if (!body_name.empty() && body_name != name) {
    return absl::InvalidArgumentError(absl::StrCat("the name of the object (", body_name,
                                                   ") does not match the name on the URL (", name,
                                                   ")"));
  }
  const std::string ns = JsonStr(metadata, "namespace");
  if (!ns.empty() && ns != namespace_name) {
    return absl::InvalidArgumentError(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  metadata["name"] = std::string(name);
  metadata["namespace"] = std::string(namespace_name);
  std::pair<LeasePtr, bool> result;
  {
    MutexLock lock(&mu_);
    auto it = leases_.find(StoreKey(namespace_name, name));
    if (it == leases_.end()) {
      // AllowCreateOnUpdate: the PUT creates it.
      metadata.erase("resourceVersion");
      metadata["uid"] = NewUid();
      metadata["creationTimestamp"] = FormatTimestamp(absl::Now());
      absl::StatusOr<LeasePtr> stored =
          StoreLocked(std::move(lease), LeaseEventType::kAdded, nullptr);
      if (!stored.ok()) return stored.status();
      result = {*stored, true};
    } else {
      const LeasePtr old = it->second;
      const std::string rv = JsonStr(metadata, "resourceVersion");
      if (rv.empty()) {
        // registry/generic/registry/store.go Update, !AllowUnconditionalUpdate.
        return Invalid(name, {"metadata.resourceVersion: Invalid value: 0x0: must be specified "
                              "for an update"});
      }
      if (rv != absl::StrCat(old->resource_version)) {
        return absl::AbortedError(
            absl::StrCat("Operation cannot be fulfilled on leases.coordination.k8s.io \"", name,
                         "\": the object has been modified; please apply your changes to the "
                         "latest version and try again"));
      }
      const json previous = json::parse(old->json);
      metadata["uid"] = previous["metadata"]["uid"];
      metadata["creationTimestamp"] = previous["metadata"]["creationTimestamp"];
      absl::StatusOr<LeasePtr> stored =
          StoreLocked(std::move(lease), LeaseEventType::kModified, old);
      if (!stored.ok()) return stored.status();
      result = {*stored, false};
    }
  }
  signal_.Notify();
  return result;
}

absl::StatusOr<LeasePtr> LeaseStore::Delete(absl::string_view namespace_name,
                                            absl::string_view name,
                                            absl::string_view uid_precondition,
                                            absl::string_view resource_version_precondition) {
  LeasePtr deleted;
  {
    MutexLock lock(&mu_);
    auto it = leases_.find(StoreKey(namespace_name, name));
    if (it == leases_.end()) {
      return absl::NotFoundError(
          absl::StrCat("leases.coordination.k8s.io \"", name, "\" not found"));
    }
    const LeasePtr old = it->second;
    json object = json::parse(old->json);
    const std::string uid = JsonStr(object["metadata"], "uid");
    const std::string old_rv = absl::StrCat(old->resource_version);
    auto conflict = [&](absl::string_view what, absl::string_view precondition,
                        absl::string_view actual) {
      return absl::AbortedError(absl::StrCat(
          "Operation cannot be fulfilled on leases.coordination.k8s.io \"", name,
          "\": Precondition failed: ", what, " in precondition: ", precondition, ", ", what,
          " in object meta: ", actual));
    };
    if (!uid_precondition.empty() && uid_precondition != uid) {
      return conflict("UID", uid_precondition, uid);
    }
    if (!resource_version_precondition.empty() && resource_version_precondition != old_rv) {
      return conflict("ResourceVersion", resource_version_precondition, old_rv);
    }
    leases_.erase(it);
    // The watch's DELETED object is the last state at the deletion's revision (etcd3 watcher).
    auto stored = std::make_shared<StoredLease>(*old);
    stored->resource_version = store_->AllocateResourceVersion();
    object["metadata"]["resourceVersion"] = absl::StrCat(stored->resource_version);
    stored->json = Dump(object);
    deleted = stored;
    history_.push_back(Event{LeaseEventType::kDeleted, deleted, old, absl::Now()});
    while (static_cast<int64_t>(history_.size()) > event_window_) {
      oldest_ = std::max(oldest_, history_.front().object->resource_version);
      history_.pop_front();
    }
  }
  signal_.Notify();
  return deleted;
}

absl::StatusOr<LeasePtr> LeaseStore::Get(absl::string_view namespace_name,
                                         absl::string_view name) const {
  ReaderMutexLock lock(&mu_);
  auto it = leases_.find(StoreKey(namespace_name, name));
  if (it == leases_.end()) {
    return absl::NotFoundError(absl::StrCat("leases.coordination.k8s.io \"", name, "\" not found"));
  }
  return it->second;
}

std::vector<LeasePtr> LeaseStore::MatchingLocked(const LeaseFilter& filter) const {
  std::vector<LeasePtr> out;
  for (const auto& [key, lease] : leases_) {
    if (filter.Matches(*lease)) out.push_back(lease);
  }
  return out;
}

std::pair<std::vector<LeasePtr>, uint64_t> LeaseStore::List(const LeaseFilter& filter) const {
  return Snapshot(filter);
}

std::pair<std::vector<LeasePtr>, uint64_t> LeaseStore::Snapshot(const LeaseFilter& filter) const {
  // Under mu_ every Lease event up to the cluster's resourceVersion is recorded (a Lease takes
  // its resourceVersion and records its event under mu_), so the two agree.
  ReaderMutexLock lock(&mu_);
  return {MatchingLocked(filter), store_->resource_version()};
}

absl::StatusOr<uint64_t> LeaseStore::WatchStart(absl::string_view resource_version) const {
  const uint64_t now = store_->resource_version();
  if (resource_version.empty() || resource_version == "0") return now;
  uint64_t rv = 0;
  if (!absl::SimpleAtoi(resource_version, &rv)) {
    return absl::InvalidArgumentError(
        absl::StrCat("resourceVersion: Invalid value: \"", resource_version, "\""));
  }
  ReaderMutexLock lock(&mu_);
  if (rv < oldest_) {
    return absl::OutOfRangeError(absl::StrCat("too old resource version: ", rv, " (", now, ")"));
  }
  return rv;
}

LeaseStore::Batch LeaseStore::Poll(const LeaseFilter& filter, uint64_t cursor, absl::Time now,
                                   absl::Duration lag) const {
  Batch batch;
  batch.cursor = cursor;
  ReaderMutexLock lock(&mu_);
  if (cursor < oldest_) {
    batch.expired = true;
    return batch;
  }
  for (const Event& e : history_) {
    if (e.object->resource_version <= cursor) continue;
    if (e.time + lag > now) {
      batch.next_visible = e.time + lag;
      break;
    }
    batch.cursor = e.object->resource_version;
    const bool now_matches = e.type != LeaseEventType::kDeleted && filter.Matches(*e.object);
    const bool before = e.previous != nullptr && filter.Matches(*e.previous);
    if (now_matches && before) {
      batch.events.push_back({LeaseEventType::kModified, e.object});
    } else if (now_matches) {
      batch.events.push_back({LeaseEventType::kAdded, e.object});
    } else if (before) {
      // A deletion carries the last state at the deletion's resourceVersion.
      batch.events.push_back(
          {LeaseEventType::kDeleted, e.type == LeaseEventType::kDeleted ? e.object : e.previous});
    }
  }
  return batch;
}

void LeaseStore::ExpireHistory() {
  {
    MutexLock lock(&mu_);
    oldest_ = store_->resource_version();
  }
  signal_.Notify();
}

void LeaseStore::ForgetHistory() {
  {
    MutexLock lock(&mu_);
    history_.clear();
    oldest_ = store_->resource_version();
  }
  signal_.Notify();
}

std::string LeaseTableJson(const std::vector<LeasePtr>& items, uint64_t resource_version,
                           bool with_columns, absl::Time now) {
  json table = {{"kind", "Table"},
                {"apiVersion", "meta.k8s.io/v1"},
                {"metadata", {{"resourceVersion", absl::StrCat(resource_version)}}}};
  if (with_columns) {
    auto column = [](const char* name, const char* format, const char* description) {
      return json{{"name", name},
                  {"type", "string"},
                  {"format", format},
                  {"description", description},
                  {"priority", 0}};
    };
    table["columnDefinitions"] = json::array(
        {column("Name", "name", "Name must be unique within a namespace."),
         column("Holder", "",
                "holderIdentity contains the identity of the holder of a current lease."),
         column("Age", "",
                "CreationTimestamp is a timestamp representing the server time when this object "
                "was created.")});
  }
  json rows = json::array();
  for (const LeasePtr& lease : items) {
    json j = json::parse(lease->json, nullptr, false);
    const json& metadata = j["metadata"];
    std::string holder;
    if (j.contains("spec") && j["spec"].is_object()) holder = JsonStr(j["spec"], "holderIdentity");
    const absl::Time created = ParseTimestamp(JsonStr(metadata, "creationTimestamp"));
    rows.push_back(
        {{"cells", json::array({lease->fields.name, holder,
                                created == absl::InfinitePast() ? "<unknown>"
                                                                : HumanDuration(now - created)})},
         {"object",
          {{"kind", "PartialObjectMetadata"},
           {"apiVersion", "meta.k8s.io/v1"},
           {"metadata", metadata}}}});
  }
  table["rows"] = rows;
  return Dump(table);
}

// --- HTTP ---------------------------------------------------------------------------------------

// A watch of Leases, as SimServer::WatchState is for pods and nodes.
struct SimServer::LeaseWatchState : WatchStream<LeasePtr, LeaseFilter> {};

void SimServer::HandleLeases(const httplib::Request& req, httplib::Response& res,
                             const std::vector<std::string>& parts) {
  auto send = [&](int code, const std::string& body) {
    res.status = code;
    res.set_content(body, kJsonContentType);
  };
  auto send_error = [&](const absl::Status& status) {
    const HttpError error = HttpErrorOf(status);
    send(error.code, Dump(StatusObject(error.code, error.reason, status.message())));
  };
  auto not_found = [&] {
    send(404,
         Dump(StatusObject(404, "NotFound", "the server could not find the requested resource")));
  };
  auto method_not_allowed = [&] {
    send(405,
         Dump(StatusObject(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")));
  };
  const bool get = req.method == "GET";
  const size_t n = parts.size();  // parts[0] == "apis", parts[1] == "coordination.k8s.io"
  if (n == 2 || (n == 3 && parts[2] == "v1")) {
    // The group's APIGroup and v1 APIResourceList, with the other groups' (sim/object_api.h).
    if (!get) return method_not_allowed();
    std::optional<std::string> document =
        ObjectApi::Discovery(absl::StrCat("/apis/", kGroup, n == 3 ? "/v1" : ""));
    if (!document.has_value()) return not_found();
    return send(200, *document);
  }
  if (parts[2] != "v1") return not_found();
  std::string ns;
  std::string name;
  if (n == 4 && parts[3] == "leases") {
    // all namespaces
  } else if (n >= 6 && parts[3] == "namespaces" && parts[5] == "leases" && n <= 7) {
    ns = parts[4];
    if (n == 7) name = parts[6];
  } else {
    return not_found();
  }
  const bool table = WantsTable(req.get_header_value("Accept"));
  if (!name.empty()) {
    if (get) {
      absl::StatusOr<LeasePtr> lease = leases_->Get(ns, name);
      if (!lease.ok() && ns == "kube-node-lease") {
        // Node heartbeats, which `kubectl describe node` shows: not stored, made up for each
        // node the sim has.
        auto node = store_->Get(Kind::kNode, "", name);
        if (!node.ok()) return send_error(node.status());
        const std::string renew =
            absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
        return send(
            200,
            Dump(json{
                {"kind", "Lease"},
                {"apiVersion", kGroupVersion},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"spec",
                 {{"holderIdentity", name}, {"leaseDurationSeconds", 40}, {"renewTime", renew}}}}));
      }
      if (!lease.ok()) return send_error(lease.status());
      if (table) {
        return send(200, LeaseTableJson({*lease}, (*lease)->resource_version, true, absl::Now()));
      }
      return send(200, (*lease)->json);
    }
    if (req.method == "PUT") {
      absl::StatusOr<std::pair<LeasePtr, bool>> updated = leases_->Update(ns, name, req.body);
      if (!updated.ok()) return send_error(updated.status());
      return send(updated->second ? 201 : 200, updated->first->json);
    }
    if (req.method == "DELETE") {
      // The generic registry's Delete answers a Status for a kind that is not
      // ReturnDeletedObject, as Leases are (registry/generic/registry/store.go finalizeDelete;
      // pkg/registry/coordination/lease/storage/storage.go).
      std::string uid_precondition;
      std::string rv_precondition;
      if (!req.body.empty()) {
        const json options = json::parse(req.body, nullptr, false);
        if (options.is_discarded() || !options.is_object()) {
          return send(400, Dump(StatusObject(400, "BadRequest",
                                             "the DeleteOptions body is not a JSON object")));
        }
        if (options.contains("preconditions") && options["preconditions"].is_object()) {
          uid_precondition = JsonStr(options["preconditions"], "uid");
          rv_precondition = JsonStr(options["preconditions"], "resourceVersion");
        }
      }
      absl::StatusOr<LeasePtr> deleted =
          leases_->Delete(ns, name, uid_precondition, rv_precondition);
      if (!deleted.ok()) return send_error(deleted.status());
      const json object = json::parse((*deleted)->json);
      return send(200, Dump(json{{"kind", "Status"},
                                 {"apiVersion", "v1"},
                                 {"metadata", json::object()},
                                 {"status", "Success"},
                                 {"details",
                                  {{"name", name},
                                   {"group", kGroup},
                                   {"kind", "leases"},
                                   {"uid", JsonStr(object["metadata"], "uid")}}}}));
    }
    return method_not_allowed();
  }
  if (req.method == "POST") {
    if (ns.empty()) return method_not_allowed();
    absl::StatusOr<LeasePtr> created = leases_->Create(ns, req.body);
    if (!created.ok()) return send_error(created.status());
    return send(201, (*created)->json);
  }
  if (!get) return method_not_allowed();
  LeaseFilter filter;
  filter.namespace_name = ns;
  absl::StatusOr<FieldSelector> fields =
      FieldSelector::Parse(req.get_param_value("fieldSelector"), Kind::kLease);
  if (!fields.ok()) return send_error(fields.status());
  filter.fields = *std::move(fields);
  absl::StatusOr<LabelSelector> labels = LabelSelector::Parse(req.get_param_value("labelSelector"));
  if (!labels.ok()) return send_error(labels.status());
  filter.labels = *std::move(labels);
  const std::string watch_param = req.get_param_value("watch");
  const std::string rv = req.get_param_value("resourceVersion");
  if (watch_param != "true" && watch_param != "1") {
    // A LIST: every matching Lease at the latest state (Leases are few: limit is not applied,
    // and no continue token is ever given).
    auto [items, list_rv] = leases_->List(filter);
    if (table) return send(200, LeaseTableJson(items, list_rv, true, absl::Now()));
    std::string out =
        absl::StrCat("{\"kind\":\"LeaseList\",\"apiVersion\":\"", kGroupVersion,
                     "\",\"metadata\":{\"resourceVersion\":\"", list_rv, "\"},\"items\":[");
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out.push_back(',');
      out.append(items[i]->json);
    }
    out.append("]}");
    return send(200, out);
  }
  auto state = std::make_shared<LeaseWatchState>();
  state->filter = std::move(filter);
  state->table = table;
  state->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
  state->stats_key = RequestKey(req);
  const absl::Time now = absl::Now();
  absl::Duration timeout = config_.max_watch_duration;
  if (req.has_param("timeoutSeconds")) {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(req.get_param_value("timeoutSeconds"), &seconds) || seconds < 0) {
      return send(400, Dump(StatusObject(400, "BadRequest", "timeoutSeconds: Invalid value")));
    }
    if (seconds > 0) timeout = std::min(timeout, absl::Seconds(seconds));
  }
  state->deadline = now + timeout;
  state->epoch = watch_epoch_.load();
  state->next_bookmark = now + config_.bookmark_interval;
  const bool has_send_initial = req.has_param("sendInitialEvents");
  const bool send_initial = req.get_param_value("sendInitialEvents") == "true";
  if (send_initial || (!has_send_initial && (rv.empty() || rv == "0"))) {
    // The current Leases as ADDED first (a watch from "" or "0", or a WatchList); a WatchList
    // with bookmarks then gets the annotated BOOKMARK (cacher/cache_watcher.go).
    auto [items, cursor] = leases_->Snapshot(state->filter);
    state->initial = std::move(items);
    state->cursor = cursor;
    state->initial_events_end = send_initial && state->bookmarks;
  } else {
    absl::StatusOr<uint64_t> start = leases_->WatchStart(has_send_initial ? "" : rv);
    if (start.ok()) {
      state->cursor = *start;
    } else if (absl::IsOutOfRange(start.status())) {
      state->error_line =
          absl::StrCat("{\"type\":\"ERROR\",\"object\":",
                       Dump(StatusObject(410, "Expired", start.status().message())), "}\n");
    } else {
      return send_error(start.status());
    }
  }
  ++watches_open_;
  res.status = 200;
  res.set_chunked_content_provider(
      kJsonContentType,
      [this, state](size_t, httplib::DataSink& sink) {
        // LeaseStore, for WatchStep (sim/watch_stream.h).
        struct Feed {
          LeaseStore* leases;
          ClusterStore* store;
          absl::string_view kind = "Lease";
          absl::string_view api_version = kGroupVersion;
          size_t max_batch = 0;
          void AppendObject(LeaseWatchState& s, const LeasePtr& lease, std::string* out) const {
            if (!s.table) {
              out->append(lease->json);
              return;
            }
            out->append(
                LeaseTableJson({lease}, lease->resource_version, !s.sent_columns, absl::Now()));
            s.sent_columns = true;
          }
          ChangeSignal& signal() const { return leases->signal(); }
          LeaseStore::Batch Poll(const LeaseWatchState& s, absl::Time now,
                                 absl::Duration lag) const {
            return leases->Poll(s.filter, s.cursor, now, lag);
          }
          absl::string_view TypeName(const LeaseEvent& e) const {
            return e.type == LeaseEventType::kAdded      ? "ADDED"
                   : e.type == LeaseEventType::kModified ? "MODIFIED"
                                                         : "DELETED";
          }
          uint64_t resource_version() const { return store->resource_version(); }
        };
        const Feed feed{leases_.get(), store_};
        return sim::WatchStep(
            *state, sink, feed,
            [&](const std::string& text) {
              CountBytes(state->stats_key, text.size());
              return sink.write(text.data(), text.size());
            },
            [&] { return Gate(state->epoch); });
      },
      [this](bool) { --watches_open_; });
}

}  // namespace fitledger::sim
