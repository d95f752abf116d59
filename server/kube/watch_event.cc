#include "server/kube/watch_event.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/kube/json_walk.h"
#include "server/kube/objects.h"
#include "simdjson.h"

namespace fitledger::kube {
namespace {

using simdjson::ondemand::value;

const char* KindName(ObjectKind kind) {
  return kind == ObjectKind::kNode ? "nodes" : kind == ObjectKind::kLease ? "leases" : "pods";
}

// metadata.resourceVersion, uid and name of the event's object, from a fresh iteration of the
// line (a failed decode may have abandoned the first one: rewinding it is not allowed).
void ObjectKeys(simdjson::ondemand::parser& parser, simdjson::padded_string_view line,
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

}  // namespace

static_assert(kWatchLinePadding >= simdjson::SIMDJSON_PADDING);

bool WatchEventTypeFromName(absl::string_view name, WatchEvent::Type* type) {
  static constexpr std::pair<absl::string_view, WatchEvent::Type> kTypes[] = {
      {"ADDED", WatchEvent::Type::kAdded},
      {"MODIFIED", WatchEvent::Type::kModified},
      {"DELETED", WatchEvent::Type::kDeleted},
      {"BOOKMARK", WatchEvent::Type::kBookmark},
      {"ERROR", WatchEvent::Type::kError}};
  for (const auto& [n, t] : kTypes) {
    if (n == name) {
      *type = t;
      return true;
    }
  }
  return false;
}

namespace {

absl::StatusOr<WatchEvent> DecodeWatchEventIn(ObjectKind kind, simdjson::padded_string_view padded,
                                              std::string* resource_version) {
  thread_local simdjson::ondemand::parser parser;
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
  if (!WatchEventTypeFromName(type_name, &event.type)) {
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
    case WatchEvent::Type::kBookmark: {
      // metadata.resourceVersion, and the WatchList end marker: the annotation
      // k8s.io/initial-events-end: "true" (apimachinery metav1.InitialEventsAnnotationKey).
      simdjson::ondemand::object bookmark, metadata;
      if (object.get_object().get(bookmark)) return event;
      if (bookmark.find_field_unordered("metadata").get_object().get(metadata)) return event;
      ForEachField(metadata, [&](const std::string& key, value v) {
        if (key == "resourceVersion") {
          std::string_view rv;
          if (v.get_string().get(rv)) return false;
          event.resource_version = std::string(rv);
        } else if (key == "annotations") {
          simdjson::ondemand::object annotations;
          if (v.get_object().get(annotations)) return false;
          ForEachField(annotations, [&](const std::string& name, value a) {
            std::string_view text;
            if (name == "k8s.io/initial-events-end" && !a.get_string().get(text)) {
              event.initial_events_end = text == "true";
            }
            return true;
          });
        }
        return true;
      });
      return event;
    }
    default:
      break;
  }
  absl::Status decoded;
  if (kind == ObjectKind::kNode) {
    absl::StatusOr<DecodedNode> node = DecodeNode(object);
    if (node.ok()) {
      event.node = std::move(node->node);
      event.resource_version = std::move(node->resource_version);
    }
    decoded = node.status();
  } else if (kind == ObjectKind::kLease) {
    simdjson::ondemand::object fields;
    std::string_view text;
    absl::StatusOr<LeaseRecord> lease =
        object.get_object().get(fields) || fields.raw_json().get(text)
            ? absl::InvalidArgumentError("Lease: not a JSON object")
            : ParseLease(absl::string_view(text.data(), text.size()));
    if (lease.ok()) {
      event.resource_version = lease->resource_version;
      event.lease = *std::move(lease);
    }
    decoded = lease.status();
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
  std::string key = kind == ObjectKind::kPod ? uid : name;
  if (event.type == WatchEvent::Type::kDeleted && !key.empty()) {
    event.deleted_key = std::move(key);
    event.resource_version = std::move(rv);
    return event;
  }
  return absl::InvalidArgumentError(absl::StrCat("watch ", KindName(kind),
                                                 ": undecodable object in a ", type_name,
                                                 " event: ", decoded.message()));
}

}  // namespace

absl::StatusOr<WatchEvent> DecodeWatchEvent(ObjectKind kind, absl::string_view line,
                                            std::string* resource_version) {
  return DecodeWatchEventIn(kind, PaddedCopy(line), resource_version);
}

absl::StatusOr<WatchEvent> DecodePaddedWatchEvent(ObjectKind kind, absl::string_view line,
                                                  std::string* resource_version) {
  return DecodeWatchEventIn(
      kind, simdjson::padded_string_view(line.data(), line.size(), line.size() + kWatchLinePadding),
      resource_version);
}

}  // namespace fitledger::kube
