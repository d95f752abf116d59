#include "server/kube/objects.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

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

absl::StatusOr<DecodedNode> ToDecodedNode(Node node, std::string resource_version) {
  DecodedNode out;
  out.node.name = std::move(node.name);
  out.resource_version = std::move(resource_version);
  RETURN_IF_ERROR(SetNodeAllocatable(node.allocatable, &out.node));
  return out;
}

absl::StatusOr<DecodedNode> DecodeNode(simdjson::ondemand::value value) {
  std::string resource_version;
  ASSIGN_OR_RETURN(Node node, fitledger::DecodeNode(value, &resource_version));
  return ToDecodedNode(std::move(node), std::move(resource_version));
}

absl::StatusOr<DecodedNode> ParseNode(absl::string_view json) {
  std::string resource_version;
  ASSIGN_OR_RETURN(Node node, fitledger::ParseNode(json, &resource_version));
  return ToDecodedNode(std::move(node), std::move(resource_version));
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
