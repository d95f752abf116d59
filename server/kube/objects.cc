#include "server/kube/objects.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/kube/field_path.h"

namespace fitledger::kube {
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
        if (k == "conditions") return DecodeConditions(s, Path(p, "conditions"), &pod);
        return absl::OkStatus();
      });
    }
    return absl::OkStatus();
  }));
  return pod;
}

absl::StatusOr<DecodedNode> DecodeNode(value v) {
  DecodedNode out;
  QuantityList allocatable, capacity;
  bool has_allocatable = false;
  const Path root("node");
  RETURN_IF_ERROR(ForEachField(v, root, [&](std::string_view key, value& child) -> absl::Status {
    if (key == "metadata") {
      const Path p("metadata");
      return ForEachField(child, p, [&](std::string_view k, value& m) -> absl::Status {
        if (k == "name") return GetString(m, Path(p, "name"), &out.node.name);
        if (k == "resourceVersion") {
          return GetString(m, Path(p, "resourceVersion"), &out.resource_version);
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
  RETURN_IF_ERROR(SetNodeAllocatable(has_allocatable ? allocatable : capacity, &out.node));
  return out;
}

absl::Status SetNodeAllocatable(const QuantityList& list, NodeRecord* node) {
  for (const auto& [name, q] : list) {
    int64_t amount = 0;
    if (name == kResourceCpu) {
      ASSIGN_OR_RETURN(amount, q.MilliValue());
    } else {
      ASSIGN_OR_RETURN(amount, q.Value());
    }
    node->allocatable.Set(name, amount);
  }
  return absl::OkStatus();
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

absl::StatusOr<Pod> ParsePod(absl::string_view json) {
  return ParseWhole<Pod>(json, [](value v) { return DecodePod(v, nullptr); });
}

absl::StatusOr<DecodedNode> ParseNode(absl::string_view json) {
  return ParseWhole<DecodedNode>(json, [](value v) { return DecodeNode(v); });
}

namespace {

// ToPodRecord's body for both: the strings copied from a const pod, moved from an rvalue one.
template <typename P>
absl::StatusOr<PodRecord> MakePodRecord(P&& pod) {
  PodRecord r;
  ASSIGN_OR_RETURN(r.requests, PodRequests(pod, RequestBasis::kSpecAndStatus));
  r.terminal = pod.IsTerminal();
  r.deleting = pod.deleting;
  r.uid = std::forward<P>(pod).uid;
  r.node_name = std::forward<P>(pod).node_name;
  return r;
}

}  // namespace

absl::StatusOr<PodRecord> ToPodRecord(const Pod& pod) { return MakePodRecord(pod); }

absl::StatusOr<PodRecord> ToPodRecord(Pod&& pod) { return MakePodRecord(std::move(pod)); }

}  // namespace fitledger::kube

namespace fitledger::kube {

ListSplitter::ListSplitter(std::function<bool(absl::string_view item)> on_item)
    : on_item_(std::move(on_item)) {}

void ListSplitter::Fail(std::string why) {
  if (error_.empty()) error_ = std::move(why);
}

bool ListSplitter::Feed(absl::string_view fragment) {
  if (!error_.empty() || stopped_) return false;
  // Where the capture (an item, or the metadata) started in this fragment; npos: not capturing,
  // or the capture began in an earlier fragment and continues from the start of this one.
  const size_t kNone = absl::string_view::npos;
  size_t mark = in_item_ || value_ == Value::kMetadata ? 0 : kNone;
  auto capture_buffer = [&]() -> std::string& { return in_item_ ? item_ : metadata_; };
  for (size_t i = 0; i < fragment.size(); ++i) {
    const char c = fragment[i];
    if (done_) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
      Fail("data after the list's closing brace");
      return false;
    }
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (in_key_) {
          in_key_ = false;
          continue;
        }
        if (depth_ == 1 && value_ != Value::kNone) {  // a top-level string value ended
          if (value_ == Value::kMetadata) {
            absl::StrAppend(&capture_buffer(), fragment.substr(mark, i + 1 - mark));
            mark = kNone;
          }
          value_ = Value::kNone;
        }
      } else if (in_key_) {
        key_.push_back(c);
      }
      continue;
    }
    const bool space = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    if (depth_ == 0) {
      if (space) continue;
      if (c != '{') {
        Fail("the body is not a JSON object");
        return false;
      }
      depth_ = 1;
      expect_key_ = true;
      continue;
    }
    if (depth_ == 1 && value_ == Value::kNone) {
      // Between the top-level members: a key, ':', a value, ',' or '}'.
      if (space) continue;
      if (expect_key_) {
        if (c == '"') {
          in_string_ = true;
          in_key_ = true;
          key_.clear();
          expect_key_ = false;
        } else if (c == '}' || c == ',') {
          if (c == '}') done_ = true;
        } else {
          Fail("malformed list object");
          return false;
        }
        continue;
      }
      if (c == ':') continue;
      if (c == ',' || c == '}') {  // after a value
        expect_key_ = true;
        if (c == '}') done_ = true;
        continue;
      }
      // A value begins.
      value_ = key_ == "metadata" ? Value::kMetadata
               : key_ == "items"  ? Value::kItems
                                  : Value::kSkip;
      if (value_ == Value::kItems && c != '[') value_ = Value::kSkip;  // e.g. "items": null
      if (value_ == Value::kMetadata) {
        metadata_.clear();
        mark = i;
      }
      if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '"') {
        in_string_ = true;
      } else {
        // A literal (number, true, false, null) runs to the next ',' or '}'.
        size_t end = fragment.find_first_of(",} \n\r\t", i);
        if (end == kNone) end = fragment.size();
        if (value_ == Value::kMetadata) {
          absl::StrAppend(&metadata_, fragment.substr(i, end - i));
          mark = kNone;
        }
        value_ = Value::kNone;
        i = end - 1;
      }
      continue;
    }
    // Inside a container value (depth >= 2). (A literal at depth 1 is consumed where it
    // begins; one cut by the fragment's end is taken up again as a new literal: still skipped.)
    if (value_ == Value::kItems && depth_ == 2 && !in_item_) {
      if (space || c == ',') continue;
      if (c == ']') {
        depth_ = 1;
        value_ = Value::kNone;
        continue;
      }
      if (c != '{') {
        Fail("a list item is not a JSON object");
        return false;
      }
      in_item_ = true;
      item_.clear();
      mark = i;
      depth_ = 3;
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
      if (in_item_ && depth_ == 2) {
        absl::StrAppend(&item_, fragment.substr(mark, i + 1 - mark));
        mark = kNone;
        in_item_ = false;
        if (!on_item_(item_)) {
          stopped_ = true;
          return false;
        }
      } else if (depth_ == 1) {
        if (value_ == Value::kMetadata) {
          absl::StrAppend(&metadata_, fragment.substr(mark, i + 1 - mark));
          mark = kNone;
        }
        value_ = Value::kNone;
      }
    }
  }
  if (mark != kNone) absl::StrAppend(&capture_buffer(), fragment.substr(mark));
  return true;
}

absl::Status ListSplitter::Finish() const {
  if (!error_.empty()) return absl::InvalidArgumentError(error_);
  if (stopped_) return absl::CancelledError("the list was abandoned");
  if (!done_) return absl::InvalidArgumentError("the list body ends before its closing brace");
  return absl::OkStatus();
}

}  // namespace fitledger::kube
