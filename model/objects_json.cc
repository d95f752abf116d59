#include "model/objects_json.h"

#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/field_path.h"

namespace fitledger {
namespace {

using simdjson::ondemand::json_type;
using simdjson::ondemand::object;
using simdjson::ondemand::value;

// Debian's Abseil has its own string_view type.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status JsonError(const Path& field, simdjson::error_code code) {
  return FieldError(field, simdjson::error_message(code));
}

// True if the value is JSON null (then it has been consumed). Checks the type first:
// simdjson allows is_null() only below the document root.
bool IsNull(value& v) {
  json_type type;
  if (v.type().get(type) || type != json_type::null) return false;
  bool null = false;
  return !v.is_null().get(null) && null;
}

// A string's text, valid until the parser's next document; null is empty.
absl::Status GetStringView(value& v, const Path& field, std::string_view* out) {
  *out = std::string_view();
  if (IsNull(v)) return absl::OkStatus();
  if (auto err = v.get_string().get(*out)) return JsonError(field, err);
  return absl::OkStatus();
}

absl::Status GetString(value& v, const Path& field, std::string* out) {
  std::string_view s;
  RETURN_IF_ERROR(GetStringView(v, field, &s));
  out->assign(s.data(), s.size());
  return absl::OkStatus();
}

absl::Status GetObject(value& v, const Path& field, object* out, bool* present) {
  *present = false;
  if (IsNull(v)) return absl::OkStatus();
  if (auto err = v.get_object().get(*out)) return JsonError(field, err);
  *present = true;
  return absl::OkStatus();
}

// Iterates an object's fields, calling fn(key, value) for each. Null objects are empty.
template <typename Fn>
absl::Status ForEachField(value& v, const Path& field, Fn&& fn) {
  object obj;
  bool present = false;
  RETURN_IF_ERROR(GetObject(v, field, &obj, &present));
  if (!present) return absl::OkStatus();
  for (auto f : obj) {
    std::string_view key;
    if (auto err = f.unescaped_key().get(key)) return JsonError(field, err);
    value child;
    if (auto err = f.value().get(child)) return JsonError(field, err);
    RETURN_IF_ERROR(fn(key, child));
  }
  return absl::OkStatus();
}

// Calls fn(index, element) for each element of an array. Null arrays are empty.
template <typename Fn>
absl::Status ForEachElement(value& v, const Path& field, Fn&& fn) {
  if (IsNull(v)) return absl::OkStatus();
  simdjson::ondemand::array arr;
  if (auto err = v.get_array().get(arr)) return JsonError(field, err);
  size_t index = 0;
  for (auto element : arr) {
    value child;
    if (auto err = element.get(child)) return JsonError(Path(field, index), err);
    RETURN_IF_ERROR(fn(index++, child));
  }
  return absl::OkStatus();
}

absl::StatusOr<QuantityList> DecodeQuantities(value& v, const Path& field) {
  QuantityList out;
  RETURN_IF_ERROR(ForEachField(v, field, [&](std::string_view key, value& child) -> absl::Status {
    const Path at(field, Sv(key));
    json_type type;
    if (auto err = child.type().get(type)) return JsonError(at, err);
    std::string_view text;
    if (type == json_type::string) {
      if (auto err = child.get_string().get(text)) return JsonError(at, err);
    } else if (type == json_type::number) {
      text = child.raw_json_token();
    } else {
      return FieldError(at, "a quantity must be a string or a number");
    }
    absl::StatusOr<Quantity> q = Quantity::Parse(absl::StripAsciiWhitespace(Sv(text)));
    if (!q.ok()) return FieldError(at, q.status().message());
    // A key given twice: the last one counts, as Go's decoding into a ResourceList (a map) has it.
    for (auto& [name, quantity] : out) {
      if (name == Sv(key)) {
        quantity = *q;
        return absl::OkStatus();
      }
    }
    out.emplace_back(std::string(key), *q);
    return absl::OkStatus();
  }));
  return out;
}

absl::Status DecodeResources(value& v, const Path& field, QuantityList* requests,
                             QuantityList* limits) {
  return ForEachField(v, field, [&](std::string_view key, value& child) -> absl::Status {
    if (key == "requests") {
      ASSIGN_OR_RETURN(*requests, DecodeQuantities(child, Path(field, "requests")));
    } else if (key == "limits" && limits != nullptr) {
      ASSIGN_OR_RETURN(*limits, DecodeQuantities(child, Path(field, "limits")));
    }
    return absl::OkStatus();
  });
}

absl::Status DecodeContainer(value& v, const Path& field, Container* c) {
  return ForEachField(v, field, [&](std::string_view key, value& child) -> absl::Status {
    if (key == "name") return GetString(child, Path(field, "name"), &c->name);
    if (key == "restartPolicy") {
      std::string_view policy;
      RETURN_IF_ERROR(GetStringView(child, Path(field, "restartPolicy"), &policy));
      c->restartable = policy == "Always";
      return absl::OkStatus();
    }
    if (key == "resources") {
      return DecodeResources(child, Path(field, "resources"), &c->requests, &c->limits);
    }
    return absl::OkStatus();
  });
}

absl::Status DecodeContainers(value& v, const Path& field, std::vector<Container>* out) {
  return ForEachElement(v, field, [&](size_t index, value& child) -> absl::Status {
    Container c;
    RETURN_IF_ERROR(DecodeContainer(child, Path(field, index), &c));
    out->push_back(std::move(c));
    return absl::OkStatus();
  });
}

absl::Status DecodeStatuses(value& v, const Path& field, std::vector<ContainerStatus>* out) {
  return ForEachElement(v, field, [&](size_t index, value& child) -> absl::Status {
    ContainerStatus s;
    const Path f(field, index);
    RETURN_IF_ERROR(ForEachField(child, f, [&](std::string_view key, value& c) -> absl::Status {
      if (key == "name") return GetString(c, Path(f, "name"), &s.name);
      if (key == "allocatedResources") {
        ASSIGN_OR_RETURN(s.allocated_resources, DecodeQuantities(c, Path(f, "allocatedResources")));
      } else if (key == "resources") {
        if (IsNull(c)) return absl::OkStatus();
        s.has_resources = true;
        return DecodeResources(c, Path(f, "resources"), &s.status_requests, nullptr);
      }
      return absl::OkStatus();
    }));
    out->push_back(std::move(s));
    return absl::OkStatus();
  });
}

// status.conditions: the reason of the first PodResizePending condition (component-helpers
// IsPodResizeInfeasible looks at the first one only).
absl::Status DecodeConditions(value& v, const Path& field, Pod* pod) {
  bool found = false;
  return ForEachElement(v, field, [&](size_t index, value& child) -> absl::Status {
    const Path f(field, index);
    std::string_view type, reason;
    RETURN_IF_ERROR(ForEachField(child, f, [&](std::string_view key, value& c) -> absl::Status {
      if (key == "type") return GetStringView(c, Path(f, "type"), &type);
      if (key == "reason") return GetStringView(c, Path(f, "reason"), &reason);
      return absl::OkStatus();
    }));
    if (!found && type == "PodResizePending") {
      found = true;
      pod->resize_pending_reason.assign(reason.data(), reason.size());
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<QuantityList> DecodeResourceList(value v, absl::string_view field) {
  return DecodeQuantities(v, Path(field));
}

absl::StatusOr<Pod> DecodePod(value v, std::string* resource_version) {
  Pod pod;
  const Path root("pod");
  RETURN_IF_ERROR(ForEachField(v, root, [&](std::string_view key, value& child) -> absl::Status {
    if (key == "metadata") {
      const Path p("metadata");
      return ForEachField(child, p, [&](std::string_view k, value& m) -> absl::Status {
        if (k == "name") return GetString(m, Path(p, "name"), &pod.name);
        if (k == "namespace") return GetString(m, Path(p, "namespace"), &pod.namespace_name);
        if (k == "uid") return GetString(m, Path(p, "uid"), &pod.uid);
        if (k == "resourceVersion" && resource_version != nullptr) {
          return GetString(m, Path(p, "resourceVersion"), resource_version);
        }
        if (k == "deletionTimestamp") {
          std::string_view ts;
          RETURN_IF_ERROR(GetStringView(m, Path(p, "deletionTimestamp"), &ts));
          pod.deleting = !ts.empty();
        }
        return absl::OkStatus();
      });
    }
    if (key == "spec") {
      const Path p("spec");
      return ForEachField(child, p, [&](std::string_view k, value& s) -> absl::Status {
        if (k == "containers") return DecodeContainers(s, Path(p, "containers"), &pod.containers);
        if (k == "initContainers") {
          return DecodeContainers(s, Path(p, "initContainers"), &pod.init_containers);
        }
        if (k == "nodeName") return GetString(s, Path(p, "nodeName"), &pod.node_name);
        if (k == "schedulerName") {
          return GetString(s, Path(p, "schedulerName"), &pod.scheduler_name);
        }
        if (k == "overhead") {
          ASSIGN_OR_RETURN(pod.overhead, DecodeQuantities(s, Path(p, "overhead")));
        } else if (k == "resources") {
          if (IsNull(s)) return absl::OkStatus();
          QuantityList requests, limits;
          RETURN_IF_ERROR(DecodeResources(s, Path(p, "resources"), &requests, &limits));
          if (!requests.empty()) pod.pod_requests = std::move(requests);
          if (!limits.empty()) pod.pod_limits = std::move(limits);
        } else if (k == "priority") {
          if (IsNull(s)) return absl::OkStatus();
          int64_t priority = 0;
          if (auto err = s.get_int64().get(priority)) return JsonError(Path(p, "priority"), err);
          // spec.priority is an int32: Go's decoder refuses a larger number.
          if (priority < std::numeric_limits<int32_t>::min() ||
              priority > std::numeric_limits<int32_t>::max()) {
            return FieldError(Path(p, "priority"),
                              absl::StrCat(priority, " is out of the int32 range"));
          }
          pod.priority = static_cast<int32_t>(priority);
        }
        return absl::OkStatus();
      });
    }
    if (key == "status") {
      const Path p("status");
      return ForEachField(child, p, [&](std::string_view k, value& s) -> absl::Status {
        if (k == "phase") return GetString(s, Path(p, "phase"), &pod.phase);
        if (k == "reason") return GetString(s, Path(p, "reason"), &pod.status_reason);
        if (k == "message") return GetString(s, Path(p, "message"), &pod.status_message);
        if (k == "containerStatuses") {
          return DecodeStatuses(s, Path(p, "containerStatuses"), &pod.container_statuses);
        }
        if (k == "initContainerStatuses") {
          return DecodeStatuses(s, Path(p, "initContainerStatuses"), &pod.init_container_statuses);
        }
        if (k == "resize") return GetString(s, Path(p, "resize"), &pod.resize);
        if (k == "resources") {
          if (IsNull(s)) return absl::OkStatus();
          pod.has_status_resources = true;
          return DecodeResources(s, Path(p, "resources"), &pod.status_pod_requests, nullptr);
        }
        if (k == "allocatedResources") {
          ASSIGN_OR_RETURN(pod.status_allocated_resources,
                           DecodeQuantities(s, Path(p, "allocatedResources")));
        }
        if (k == "conditions") return DecodeConditions(s, Path(p, "conditions"), &pod);
        return absl::OkStatus();
      });
    }
    return absl::OkStatus();
  }));
  return pod;
}

absl::StatusOr<Node> DecodeNode(value v, std::string* resource_version) {
  Node out;
  QuantityList allocatable, capacity;
  bool has_allocatable = false;
  const Path root("node");
  RETURN_IF_ERROR(ForEachField(v, root, [&](std::string_view key, value& child) -> absl::Status {
    if (key == "metadata") {
      const Path p("metadata");
      return ForEachField(child, p, [&](std::string_view k, value& m) -> absl::Status {
        if (k == "name") return GetString(m, Path(p, "name"), &out.name);
        if (k == "resourceVersion" && resource_version != nullptr) {
          return GetString(m, Path(p, "resourceVersion"), resource_version);
        }
        return absl::OkStatus();
      });
    }
    if (key == "status") {
      const Path p("status");
      return ForEachField(child, p, [&](std::string_view k, value& s) -> absl::Status {
        if (k == "allocatable") {
          has_allocatable = !IsNull(s);
          if (!has_allocatable) return absl::OkStatus();
          ASSIGN_OR_RETURN(allocatable, DecodeQuantities(s, Path(p, "allocatable")));
        } else if (k == "capacity") {
          ASSIGN_OR_RETURN(capacity, DecodeQuantities(s, Path(p, "capacity")));
        }
        return absl::OkStatus();
      });
    }
    return absl::OkStatus();
  }));
  out.allocatable = has_allocatable ? std::move(allocatable) : std::move(capacity);
  return out;
}

namespace {
template <typename T, typename Fn>
absl::StatusOr<T> ParseWhole(absl::string_view json, Fn&& decode) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(json.data(), json.size());
  simdjson::ondemand::document doc;
  if (auto err = parser.iterate(padded).get(doc)) return JsonError(Path("document"), err);
  value v;
  if (auto err = doc.get_value().get(v)) return JsonError(Path("document"), err);
  return decode(v);
}
}  // namespace

absl::StatusOr<Pod> ParsePod(absl::string_view json, std::string* resource_version) {
  return ParseWhole<Pod>(json, [&](value v) { return DecodePod(v, resource_version); });
}

absl::StatusOr<Node> ParseNode(absl::string_view json, std::string* resource_version) {
  return ParseWhole<Node>(json, [&](value v) { return DecodeNode(v, resource_version); });
}

}  // namespace fitledger
