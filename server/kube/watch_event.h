// One event of a watch stream (JSON line or protobuf frame), decoded into the model: the
// decoders the reflector (watcher.h) reads its streams with. Pure: no I/O, no state.
#ifndef FITLEDGER_SERVER_KUBE_WATCH_EVENT_H_
#define FITLEDGER_SERVER_KUBE_WATCH_EVENT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/pod.h"
#include "server/kube/objects.h"
#include "server/ledger/ledger.h"

namespace fitledger::kube {

// What a watch stream's objects are (the collection a Reflector follows).
enum class ObjectKind { kPod, kNode, kLease };

// One line of a watch stream, decoded.
struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  // The object's metadata.resourceVersion (a bookmark's too); may be empty.
  std::string resource_version;
  // kBookmark: annotated k8s.io/initial-events-end: "true", the end of a WatchList's initial
  // state.
  bool initial_events_end = false;
  // Exactly one of these for ADDED / MODIFIED / DELETED, by the watch's kind.
  std::optional<Pod> pod;
  std::optional<NodeRecord> node;
  std::optional<LeaseRecord> lease;
  // kDeleted only: the UID (pods) or name (nodes, leases) when the rest of the object is
  // undecodable.
  std::string deleted_key;
  // kError: the Status' code and message.
  int64_t error_code = 0;
  std::string error_message;
};

// The event type named by a watch event's "type" (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR; the
// same in JSON and protobuf). False for any other name.
bool WatchEventTypeFromName(absl::string_view name, WatchEvent::Type* type);

// Decodes one watch line of objects of `kind`. DataLoss for a line that is not a JSON
// event at all (the stream is damaged: resume from the last good resourceVersion);
// InvalidArgument for a well-formed event whose object cannot be decoded, with
// `*resource_version` set to the object's resourceVersion when it can be read (the event can be
// skipped). Pure: no I/O, no state.
absl::StatusOr<WatchEvent> DecodeWatchEvent(ObjectKind kind, absl::string_view line,
                                            std::string* resource_version = nullptr);
// The same, for a line followed by at least kWatchLinePadding readable bytes (of any content),
// as every line ApiClient::Stream hands on is: decoded in place, without DecodeWatchEvent's copy
// of the line into a padded buffer (the JSON parser reads ahead in 64-byte blocks).
inline constexpr size_t kWatchLinePadding = 64;
absl::StatusOr<WatchEvent> DecodePaddedWatchEvent(ObjectKind kind, absl::string_view line,
                                                  std::string* resource_version = nullptr);

// The same for one frame of a protobuf watch stream (`application/vnd.kubernetes.protobuf;
// stream=watch`: a meta/v1 WatchEvent whose object is an enveloped Pod, Node or Status; see
// protobuf_objects.h), with the same errors: DataLoss for a frame that is not a WatchEvent,
// InvalidArgument for an object that cannot be decoded (a Lease always: leases are watched as
// JSON). Defined in protobuf_objects.cc.
absl::StatusOr<WatchEvent> DecodeProtobufWatchEvent(ObjectKind kind, absl::string_view frame,
                                                    std::string* resource_version = nullptr);

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_WATCH_EVENT_H_
