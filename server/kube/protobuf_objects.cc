#include "server/kube/protobuf_objects.h"

#include <climits>
#include <cstdint>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "model/field_path.h"
#include "model/k8s_field_numbers.h"
#include "server/kube/watch_event.h"

namespace fitledger::kube {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
namespace fields = ::fitledger::k8s_fields;

// A protobuf map<K, V> is a repeated entry message {1 key, 2 value} (the protobuf language
// specification, "Maps"); not a Kubernetes fact, so not in k8s_field_numbers.h.
constexpr int kMapKey = 1;
constexpr int kMapValue = 2;

// One field of a message as it is on the wire.
struct Field {
  int number = 0;
  WireFormatLite::WireType wire_type = WireFormatLite::WIRETYPE_VARINT;
  uint64_t varint = 0;      // WIRETYPE_VARINT, FIXED32, FIXED64
  absl::string_view bytes;  // WIRETYPE_LENGTH_DELIMITED: a view into the message
};

absl::Status Malformed(const Path& at, absl::string_view why) {
  return FieldError(at, absl::StrCat("malformed protobuf: ", why));
}

// Calls `fn(const Field&)` for each field of `message` in order, stopping at its first error.
// Kubernetes' messages use no groups (wire types 3 and 4): they are malformed here.
template <typename Fn>
absl::Status ForEachField(absl::string_view message, const Path& at, Fn&& fn) {
  if (message.size() > static_cast<size_t>(INT_MAX)) return Malformed(at, "message too large");
  const int size = static_cast<int>(message.size());
  CodedInputStream in(reinterpret_cast<const uint8_t*>(message.data()), size);
  while (in.CurrentPosition() < size) {
    const uint32_t tag = in.ReadTagNoLastTag();
    Field f;
    f.number = WireFormatLite::GetTagFieldNumber(tag);
    f.wire_type = WireFormatLite::GetTagWireType(tag);
    if (tag == 0 || f.number == 0) return Malformed(at, "bad field tag");
    switch (f.wire_type) {
      case WireFormatLite::WIRETYPE_VARINT:
        if (!in.ReadVarint64(&f.varint)) return Malformed(at, "truncated varint");
        break;
      case WireFormatLite::WIRETYPE_FIXED64:
        if (!in.ReadLittleEndian64(&f.varint)) return Malformed(at, "truncated fixed64");
        break;
      case WireFormatLite::WIRETYPE_FIXED32: {
        uint32_t v = 0;
        if (!in.ReadLittleEndian32(&v)) return Malformed(at, "truncated fixed32");
        f.varint = v;
        break;
      }
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t length = 0;
        if (!in.ReadVarint32(&length)) return Malformed(at, "truncated length");
        const int start = in.CurrentPosition();
        if (length > static_cast<uint32_t>(size - start)) {
          return Malformed(at, absl::StrCat("field ", f.number, " runs past the message's end"));
        }
        f.bytes = message.substr(static_cast<size_t>(start), length);
        in.Skip(static_cast<int>(length));
        break;
      }
      default:
        return Malformed(
            at, absl::StrCat("field ", f.number, " has wire type ", static_cast<int>(f.wire_type)));
    }
    RETURN_IF_ERROR(fn(f));
  }
  return absl::OkStatus();
}

// A length-delimited field's bytes (a string, bytes or an embedded message).
absl::Status Bytes(const Field& f, const Path& at, absl::string_view* out) {
  if (f.wire_type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
    return Malformed(at, "expected a length-delimited field");
  }
  *out = f.bytes;
  return absl::OkStatus();
}

absl::Status String(const Field& f, const Path& at, std::string* out) {
  absl::string_view bytes;
  RETURN_IF_ERROR(Bytes(f, at, &bytes));
  out->assign(bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status Varint(const Field& f, const Path& at, uint64_t* out) {
  if (f.wire_type != WireFormatLite::WIRETYPE_VARINT) return Malformed(at, "expected a varint");
  *out = f.varint;
  return absl::OkStatus();
}

// A map<string, resource.Quantity> entry (key, Quantity {string}) appended to `out`. A
// missing value is the zero Quantity, "0", as Go's decoder leaves it.
absl::Status QuantityEntry(const Field& f, const Path& at, QuantityList* out) {
  absl::string_view entry, key, value, text = "0";
  RETURN_IF_ERROR(Bytes(f, at, &entry));
  RETURN_IF_ERROR(ForEachField(entry, at, [&](const Field& e) -> absl::Status {
    if (e.number == kMapKey) return Bytes(e, at, &key);
    if (e.number == kMapValue) return Bytes(e, at, &value);
    return absl::OkStatus();
  }));
  const Path field(at, key);
  RETURN_IF_ERROR(ForEachField(value, field, [&](const Field& q) -> absl::Status {
    return q.number == fields::Quantity::kString ? Bytes(q, field, &text) : absl::OkStatus();
  }));
  absl::StatusOr<Quantity> q = Quantity::Parse(absl::StripAsciiWhitespace(text));
  if (!q.ok()) return FieldError(field, q.status().message());
  out->emplace_back(std::string(key), *q);
  return absl::OkStatus();
}

// core/v1 ResourceRequirements: limits, requests (maps of Quantity).
absl::Status Resources(absl::string_view message, const Path& at, QuantityList* requests,
                       QuantityList* limits) {
  const Path req(at, "requests"), lim(at, "limits");
  return ForEachField(message, at, [&](const Field& f) -> absl::Status {
    if (f.number == fields::ResourceRequirements::kRequests) {
      return QuantityEntry(f, req, requests);
    }
    if (f.number == fields::ResourceRequirements::kLimits && limits != nullptr) {
      return QuantityEntry(f, lim, limits);
    }
    return absl::OkStatus();
  });
}

// core/v1 Container: name, resources, restartPolicy.
absl::Status DecodeContainer(const Field& f, const Path& at, Container* c) {
  absl::string_view message;
  RETURN_IF_ERROR(Bytes(f, at, &message));
  return ForEachField(message, at, [&](const Field& m) -> absl::Status {
    if (m.number == fields::Container::kName) return String(m, Path(at, "name"), &c->name);
    if (m.number == fields::Container::kRestartPolicy) {
      absl::string_view policy;
      RETURN_IF_ERROR(Bytes(m, Path(at, "restartPolicy"), &policy));
      c->restartable = policy == "Always";
      return absl::OkStatus();
    }
    if (m.number == fields::Container::kResources) {
      const Path p(at, "resources");
      absl::string_view resources;
      RETURN_IF_ERROR(Bytes(m, p, &resources));
      return Resources(resources, p, &c->requests, &c->limits);
    }
    return absl::OkStatus();
  });
}

// core/v1 ContainerStatus: name, allocatedResources, resources (present: counted).
absl::Status DecodeStatus(const Field& f, const Path& at, ContainerStatus* s) {
  absl::string_view message;
  RETURN_IF_ERROR(Bytes(f, at, &message));
  const Path allocated(at, "allocatedResources");
  return ForEachField(message, at, [&](const Field& m) -> absl::Status {
    if (m.number == fields::ContainerStatus::kName) return String(m, Path(at, "name"), &s->name);
    if (m.number == fields::ContainerStatus::kAllocatedResources) {
      return QuantityEntry(m, allocated, &s->allocated_resources);
    }
    if (m.number == fields::ContainerStatus::kResources) {
      const Path p(at, "resources");
      absl::string_view resources;
      RETURN_IF_ERROR(Bytes(m, p, &resources));
      s->has_resources = true;
      return Resources(resources, p, &s->status_requests, nullptr);
    }
    return absl::OkStatus();
  });
}

// The object inside an envelope; `kind` is what the caller expects ("Pod", "Node"; an envelope
// without a kind is accepted).
absl::Status Unwrap(absl::string_view envelope, absl::string_view kind, absl::string_view* object,
                    absl::string_view* found_kind = nullptr) {
  const Path at("envelope");
  if (!absl::StartsWith(envelope, kProtobufMagic)) {
    return FieldError(at, "not a Kubernetes protobuf object (no \"k8s\\0\" prefix)");
  }
  absl::string_view type_meta, got_kind, encoding;
  bool has_raw = false;
  RETURN_IF_ERROR(
      ForEachField(envelope.substr(kProtobufMagic.size()), at, [&](const Field& f) -> absl::Status {
        if (f.number == fields::Unknown::kTypeMeta) {
          return Bytes(f, Path(at, "typeMeta"), &type_meta);
        }
        if (f.number == fields::Unknown::kRaw) {
          has_raw = true;
          return Bytes(f, Path(at, "raw"), object);
        }
        if (f.number == fields::Unknown::kContentEncoding) {
          return Bytes(f, Path(at, "contentEncoding"), &encoding);
        }
        return absl::OkStatus();
      }));
  const Path meta(at, "typeMeta");
  RETURN_IF_ERROR(ForEachField(type_meta, meta, [&](const Field& f) -> absl::Status {
    return f.number == fields::TypeMeta::kKind ? Bytes(f, Path(meta, "kind"), &got_kind)
                                               : absl::OkStatus();
  }));
  if (!encoding.empty()) {
    return FieldError(Path(at, "contentEncoding"),
                      absl::StrCat("unsupported content encoding \"", encoding, "\""));
  }
  if (!has_raw) return FieldError(Path(at, "raw"), "missing");
  if (found_kind != nullptr) {
    *found_kind = got_kind;
  } else if (!got_kind.empty() && got_kind != kind) {
    return FieldError(Path(meta, "kind"), absl::StrCat("expected ", kind, ", got ", got_kind));
  }
  return absl::OkStatus();
}

// An enveloped meta/v1 Status: message, code. False (and `*code` 0) for bytes that are not
// one.
bool DecodeStatusObject(absl::string_view envelope, int64_t* code, std::string* message) {
  absl::string_view object, kind;
  *code = 0;
  if (!Unwrap(envelope, "", &object, &kind).ok() || kind != "Status") return false;
  const Path s("status");
  int64_t read_code = 0;
  absl::Status status = ForEachField(object, s, [&](const Field& f) -> absl::Status {
    if (f.number == fields::Status::kMessage) return String(f, s, message);
    if (f.number == fields::Status::kCode && f.wire_type == WireFormatLite::WIRETYPE_VARINT) {
      read_code = static_cast<int32_t>(f.varint);
    }
    return absl::OkStatus();
  });
  if (!status.ok()) {
    message->clear();
    return false;
  }
  *code = read_code;
  return true;
}

// meta/v1 ObjectMeta's fields the watch needs when the rest of the object cannot be decoded, and
// a bookmark's: name, uid, resourceVersion, annotations (k8s.io/initial-events-end).
struct ObjectKeys {
  std::string name, uid, resource_version;
  bool initial_events_end = false;
};

static_assert(fields::Pod::kMetadata == fields::Node::kMetadata,
              "ReadObjectKeys reads a pod's and a node's metadata alike");
absl::Status ReadObjectKeys(absl::string_view object, ObjectKeys* keys) {
  const Path at("object");
  absl::string_view metadata;
  RETURN_IF_ERROR(ForEachField(object, at, [&](const Field& f) -> absl::Status {
    return f.number == fields::Pod::kMetadata ? Bytes(f, Path(at, "metadata"), &metadata)
                                              : absl::OkStatus();
  }));
  const Path m("metadata");
  return ForEachField(metadata, m, [&](const Field& f) -> absl::Status {
    if (f.number == fields::ObjectMeta::kName) return String(f, Path(m, "name"), &keys->name);
    if (f.number == fields::ObjectMeta::kUid) return String(f, Path(m, "uid"), &keys->uid);
    if (f.number == fields::ObjectMeta::kResourceVersion) {
      return String(f, Path(m, "resourceVersion"), &keys->resource_version);
    }
    if (f.number == fields::ObjectMeta::kAnnotations) {
      const Path a(m, "annotations");
      absl::string_view entry, key, value;
      RETURN_IF_ERROR(Bytes(f, a, &entry));
      RETURN_IF_ERROR(ForEachField(entry, a, [&](const Field& e) -> absl::Status {
        if (e.number == kMapKey) return Bytes(e, a, &key);
        if (e.number == kMapValue) return Bytes(e, a, &value);
        return absl::OkStatus();
      }));
      // apimachinery metav1.InitialEventsAnnotationKey.
      if (key == "k8s.io/initial-events-end") keys->initial_events_end = value == "true";
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<Pod> DecodePodObject(absl::string_view object, std::string* resource_version) {
  Pod pod;
  const Path root("pod");
  RETURN_IF_ERROR(ForEachField(object, root, [&](const Field& f) -> absl::Status {
    absl::string_view message;
    if (f.number == fields::Pod::kMetadata) {  // meta/v1 ObjectMeta
      const Path p("metadata");
      RETURN_IF_ERROR(Bytes(f, p, &message));
      return ForEachField(message, p, [&](const Field& m) -> absl::Status {
        switch (m.number) {
          case fields::ObjectMeta::kName:
            return String(m, Path(p, "name"), &pod.name);
          case fields::ObjectMeta::kNamespace:
            return String(m, Path(p, "namespace"), &pod.namespace_name);
          case fields::ObjectMeta::kUid:
            return String(m, Path(p, "uid"), &pod.uid);
          case fields::ObjectMeta::kResourceVersion:
            return resource_version == nullptr
                       ? absl::OkStatus()
                       : String(m, Path(p, "resourceVersion"), resource_version);
          case fields::ObjectMeta::kDeletionTimestamp: {  // meta/v1 Time; JSON's null is zero
            const Path t(p, "deletionTimestamp");
            absl::string_view time;
            RETURN_IF_ERROR(Bytes(m, t, &time));
            return ForEachField(time, t, [&](const Field& s) -> absl::Status {
              if ((s.number == fields::Time::kSeconds || s.number == fields::Time::kNanos) &&
                  s.varint != 0) {
                pod.deleting = true;
              }
              return absl::OkStatus();
            });
          }
          default:
            return absl::OkStatus();
        }
      });
    }
    if (f.number == fields::Pod::kSpec) {  // core/v1 PodSpec
      const Path p("spec");
      RETURN_IF_ERROR(Bytes(f, p, &message));
      size_t container = 0, init = 0;
      const Path overhead(p, "overhead"), containers(p, "containers"), inits(p, "initContainers");
      return ForEachField(message, p, [&](const Field& s) -> absl::Status {
        switch (s.number) {
          case fields::PodSpec::kContainers: {
            const Path c(containers, container++);
            pod.containers.emplace_back();
            return DecodeContainer(s, c, &pod.containers.back());
          }
          case fields::PodSpec::kInitContainers: {
            const Path c(inits, init++);
            pod.init_containers.emplace_back();
            return DecodeContainer(s, c, &pod.init_containers.back());
          }
          case fields::PodSpec::kNodeName:
            return String(s, Path(p, "nodeName"), &pod.node_name);
          case fields::PodSpec::kSchedulerName:
            return String(s, Path(p, "schedulerName"), &pod.scheduler_name);
          case fields::PodSpec::kOverhead:
            return QuantityEntry(s, overhead, &pod.overhead);
          case fields::PodSpec::kResources: {  // pod-level resources
            const Path r(p, "resources");
            absl::string_view resources;
            RETURN_IF_ERROR(Bytes(s, r, &resources));
            QuantityList requests, limits;
            RETURN_IF_ERROR(Resources(resources, r, &requests, &limits));
            if (!requests.empty()) pod.pod_requests = std::move(requests);
            if (!limits.empty()) pod.pod_limits = std::move(limits);
            return absl::OkStatus();
          }
          case fields::PodSpec::kPriority: {  // int32: a negative one is a sign-extended varint
            uint64_t priority = 0;
            RETURN_IF_ERROR(Varint(s, Path(p, "priority"), &priority));
            pod.priority = static_cast<int32_t>(priority);
            return absl::OkStatus();
          }
          default:
            return absl::OkStatus();
        }
      });
    }
    if (f.number == fields::Pod::kStatus) {  // core/v1 PodStatus
      const Path p("status");
      RETURN_IF_ERROR(Bytes(f, p, &message));
      size_t status = 0, init = 0, condition = 0;
      // Paths outlive the links that point at them (field_path.h).
      const Path statuses(p, "containerStatuses"), inits(p, "initContainerStatuses"),
          conditions(p, "conditions"), allocated(p, "allocatedResources");
      bool resize_condition = false;
      return ForEachField(message, p, [&](const Field& s) -> absl::Status {
        switch (s.number) {
          case fields::PodStatus::kPhase:
            return String(s, Path(p, "phase"), &pod.phase);
          case fields::PodStatus::kReason:
            return String(s, Path(p, "reason"), &pod.status_reason);
          case fields::PodStatus::kMessage:
            return String(s, Path(p, "message"), &pod.status_message);
          case fields::PodStatus::kContainerStatuses: {
            const Path c(statuses, status++);
            pod.container_statuses.emplace_back();
            return DecodeStatus(s, c, &pod.container_statuses.back());
          }
          case fields::PodStatus::kInitContainerStatuses: {
            const Path c(inits, init++);
            pod.init_container_statuses.emplace_back();
            return DecodeStatus(s, c, &pod.init_container_statuses.back());
          }
          case fields::PodStatus::kResize:
            return String(s, Path(p, "resize"), &pod.resize);
          case fields::PodStatus::kResources: {  // pod-level: its requests
            const Path r(p, "resources");
            absl::string_view resources;
            RETURN_IF_ERROR(Bytes(s, r, &resources));
            pod.has_status_resources = true;
            return Resources(resources, r, &pod.status_pod_requests, nullptr);
          }
          case fields::PodStatus::kAllocatedResources:
            return QuantityEntry(s, allocated, &pod.status_allocated_resources);
          case fields::PodStatus::kConditions: {  // the first PodResizePending's reason
            const Path c(conditions, condition++);
            absl::string_view cond, type, reason;
            RETURN_IF_ERROR(Bytes(s, c, &cond));
            RETURN_IF_ERROR(ForEachField(cond, c, [&](const Field& k) -> absl::Status {
              if (k.number == fields::PodCondition::kType) return Bytes(k, Path(c, "type"), &type);
              if (k.number == fields::PodCondition::kReason) {
                return Bytes(k, Path(c, "reason"), &reason);
              }
              return absl::OkStatus();
            }));
            if (!resize_condition && type == "PodResizePending") {
              resize_condition = true;
              pod.resize_pending_reason.assign(reason.data(), reason.size());
            }
            return absl::OkStatus();
          }
          default:
            return absl::OkStatus();
        }
      });
    }
    return absl::OkStatus();
  }));
  return pod;
}

absl::StatusOr<DecodedNode> DecodeNodeObject(absl::string_view object) {
  DecodedNode out;
  QuantityList allocatable, capacity;
  const Path root("node");
  RETURN_IF_ERROR(ForEachField(object, root, [&](const Field& f) -> absl::Status {
    absl::string_view message;
    if (f.number == fields::Node::kMetadata) {
      const Path p("metadata");
      RETURN_IF_ERROR(Bytes(f, p, &message));
      return ForEachField(message, p, [&](const Field& m) -> absl::Status {
        if (m.number == fields::ObjectMeta::kName) {
          return String(m, Path(p, "name"), &out.node.name);
        }
        if (m.number == fields::ObjectMeta::kResourceVersion) {
          return String(m, Path(p, "resourceVersion"), &out.resource_version);
        }
        return absl::OkStatus();
      });
    }
    if (f.number == fields::Node::kStatus) {  // core/v1 NodeStatus
      const Path p("status");
      RETURN_IF_ERROR(Bytes(f, p, &message));
      const Path cap(p, "capacity"), alloc(p, "allocatable");
      return ForEachField(message, p, [&](const Field& s) -> absl::Status {
        if (s.number == fields::NodeStatus::kCapacity) return QuantityEntry(s, cap, &capacity);
        if (s.number == fields::NodeStatus::kAllocatable) {
          return QuantityEntry(s, alloc, &allocatable);
        }
        return absl::OkStatus();
      });
    }
    return absl::OkStatus();
  }));
  // An empty map is not on the wire: no allocatable entries reads as JSON's absent allocatable,
  // and capacity counts (model/objects_json.cc DecodeNode).
  RETURN_IF_ERROR(SetNodeAllocatable(allocatable.empty() ? capacity : allocatable, &out.node));
  return out;
}

}  // namespace

absl::StatusOr<Pod> DecodePodProtobuf(absl::string_view envelope, std::string* resource_version) {
  absl::string_view object;
  RETURN_IF_ERROR(Unwrap(envelope, "Pod", &object));
  return DecodePodObject(object, resource_version);
}

absl::StatusOr<DecodedNode> DecodeNodeProtobuf(absl::string_view envelope) {
  absl::string_view object;
  RETURN_IF_ERROR(Unwrap(envelope, "Node", &object));
  return DecodeNodeObject(object);
}

absl::StatusOr<WatchEvent> DecodeProtobufWatchEvent(ObjectKind kind, absl::string_view frame,
                                                    std::string* resource_version) {
  const bool nodes = kind == ObjectKind::kNode;
  auto damaged = [](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("undecodable watch frame: ", why));
  };
  // meta/v1 WatchEvent (type, object: runtime.RawExtension {raw}), written by the raw
  // serializer: no envelope of its own (apimachinery serializer/codec_factory.go, the protobuf
  // StreamSerializer; apiserver endpoints/handlers/watch.go).
  absl::string_view type, extension, raw;
  const Path at("event");
  absl::Status read = ForEachField(frame, at, [&](const Field& f) -> absl::Status {
    if (f.number == fields::WatchEvent::kType) return Bytes(f, Path(at, "type"), &type);
    if (f.number == fields::WatchEvent::kObject) return Bytes(f, Path(at, "object"), &extension);
    return absl::OkStatus();
  });
  if (read.ok()) {
    read = ForEachField(extension, Path(at, "object"), [&](const Field& f) -> absl::Status {
      return f.number == fields::RawExtension::kRaw ? Bytes(f, Path(at, "object.raw"), &raw)
                                                    : absl::OkStatus();
    });
  }
  if (!read.ok()) return damaged(read.message());
  WatchEvent event;
  if (!WatchEventTypeFromName(type, &event.type)) {
    return damaged(absl::StrCat("unknown event type \"", type, "\""));
  }
  if (raw.empty()) return damaged("the event has no object");
  absl::string_view object;
  if (event.type == WatchEvent::Type::kError) {
    // What is not a Status leaves both empty, as in JSON.
    DecodeStatusObject(raw, &event.error_code, &event.error_message);
    return event;
  }
  const absl::string_view expected = nodes ? "Node" : "Pod";
  absl::Status unwrapped = kind == ObjectKind::kLease
                               ? absl::InvalidArgumentError("Leases are read as JSON only")
                               : Unwrap(raw, expected, &object);
  if (event.type == WatchEvent::Type::kBookmark) {
    ObjectKeys keys;
    if (unwrapped.ok() && ReadObjectKeys(object, &keys).ok()) {
      event.resource_version = std::move(keys.resource_version);
      event.initial_events_end = keys.initial_events_end;
    }
    return event;
  }
  absl::Status decoded = unwrapped;
  if (decoded.ok() && nodes) {
    absl::StatusOr<DecodedNode> node = DecodeNodeObject(object);
    if (node.ok()) {
      event.node = std::move(node->node);
      event.resource_version = std::move(node->resource_version);
    }
    decoded = node.status();
  } else if (decoded.ok()) {
    std::string rv;
    absl::StatusOr<Pod> pod = DecodePodObject(object, &rv);
    if (pod.ok()) {
      event.pod = *std::move(pod);
      event.resource_version = std::move(rv);
    }
    decoded = pod.status();
  }
  if (decoded.ok()) return event;
  ObjectKeys keys;
  if (unwrapped.ok()) ReadObjectKeys(object, &keys).IgnoreError();
  if (resource_version != nullptr) *resource_version = keys.resource_version;
  std::string key = kind == ObjectKind::kPod ? keys.uid : keys.name;
  if (event.type == WatchEvent::Type::kDeleted && !key.empty()) {
    event.deleted_key = std::move(key);
    event.resource_version = std::move(keys.resource_version);
    return event;
  }
  return absl::InvalidArgumentError(absl::StrCat("watch ",
                                                 nodes                        ? "nodes"
                                                 : kind == ObjectKind::kLease ? "leases"
                                                                              : "pods",
                                                 ": undecodable object in a ", type,
                                                 " event: ", decoded.message()));
}

std::string ErrorBodyText(absl::string_view body) {
  int64_t code = 0;
  std::string message;
  if (!absl::StartsWith(body, kProtobufMagic)) return std::string(body);
  if (!DecodeStatusObject(body, &code, &message)) return "(a protobuf body that is not a Status)";
  return absl::StrCat("Status ", code, ": ", message);
}

}  // namespace fitledger::kube
