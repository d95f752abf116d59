#include "sim/store.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "common/json_access.h"
#include "common/status_macros.h"
#include "model/pod.h"
#include "model/quantity.h"
#include "nlohmann/json.hpp"
#include "sim/json_edit.h"
#include "sim/kinds.h"
#include "sim/objects.h"
#include "sim/realistic.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

// States kept for paged lists (each a sorted copy of one kind's keys at one resourceVersion).
constexpr size_t kMaxStates = 8;

// rest.BeforeDelete's check of DeleteOptions.preconditions (apiserver pkg/registry/rest/delete.go),
// made before the storage's own: a Conflict on the kind, qualified by its group ("Pod",
// "Lease.coordination.k8s.io").
absl::Status DeletePreconditionFailed(Kind kind, absl::string_view name, bool uid,
                                      absl::string_view asked, absl::string_view actual) {
  const KindInfo& info = InfoOf(kind);
  return absl::AbortedError(absl::StrCat(
      "Operation cannot be fulfilled on ", info.name, info.group.empty() ? "" : ".", info.group,
      " \"", name, "\": the ", uid ? "UID" : "ResourceVersion", " in the precondition (", asked,
      ") does not match the ", uid ? "UID" : "ResourceVersion", " in record (", actual, "). ",
      uid ? "The object might have been deleted and then recreated"
          : "The object might have been modified"));
}

absl::Status PodNotFound(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("pods \"", name, "\" not found"));
}

// A continue token as the API server encodes it (apiserver pkg/storage/continue.go,
// EncodeContinue / DecodeContinue): base64url (no padding) of
// {"v":"meta.k8s.io/v1","rv":N,"start":KEY}, where KEY is the first key of the next page (the last
// key read + "\0") and N the list's resourceVersion, or -1 for "continue at the latest state".
struct ContinueToken {
  int64_t rv = 0;
  std::string start;
};

std::string EncodeContinue(int64_t rv, const std::string& start) {
  json token = {{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"start", start}};
  return absl::WebSafeBase64Escape(token.dump());
}

absl::StatusOr<ContinueToken> DecodeContinue(absl::string_view text) {
  auto invalid = [](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid continue token: continue key is not valid", why));
  };
  // base64.RawURLEncoding.DecodeString's error (encoding/base64 decodeQuantum): the offset of
  // the first byte outside the alphabet ("=" included: no padding), else of a last quantum of
  // one character.
  size_t quantum = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      quantum = (quantum + 1) % 4;
    } else if (c != '\n' && c != '\r') {
      return invalid(absl::StrCat(": illegal base64 data at input byte ", i));
    }
  }
  if (quantum == 1) {
    return invalid(absl::StrCat(": illegal base64 data at input byte ", text.size() - 1));
  }
  std::string decoded;
  if (!absl::WebSafeBase64Unescape(text, &decoded)) return invalid(": illegal base64 data");
  json token = json::parse(decoded, nullptr, /*allow_exceptions=*/false);
  if (token.is_discarded() || !token.is_object()) return invalid(": not a JSON object");
  if (token.value("v", "") != "meta.k8s.io/v1") {
    return invalid(": server does not recognize this encoded version");
  }
  ContinueToken out;
  if (!token.contains("rv") || !token["rv"].is_number_integer() ||
      (out.rv = token["rv"].get<int64_t>()) == 0) {
    return invalid(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  if (!token.contains("start") || !token["start"].is_string() ||
      (out.start = token["start"].get<std::string>()).empty()) {
    return invalid(": encoded start key empty (version meta.k8s.io/v1)");
  }
  return out;
}

// Process-unique, random-looking RFC 4122 version-4 UIDs.
std::string FormatUid(uint64_t salt, uint64_t counter) {
  uint64_t hi = salt ^ (counter * 0x9E3779B97F4A7C15ULL);
  uint64_t lo = counter;
  return absl::StrFormat("%08x-%04x-4%03x-8%03x-%012x", static_cast<uint32_t>(hi >> 32),
                         static_cast<uint32_t>((hi >> 16) & 0xffff),
                         static_cast<uint32_t>(hi & 0xfff), static_cast<uint32_t>(lo >> 48 & 0xfff),
                         lo & 0xffffffffffffULL);
}

uint64_t ProcessSalt() {
  static const uint64_t salt = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return salt;
}

std::string RandomSuffix(uint64_t n) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  uint64_t x = (n + 1) * 0x9E3779B97F4A7C15ULL ^ ProcessSalt();
  for (int i = 0; i < 5; ++i) {
    out.push_back(kAlphabet[x % (sizeof(kAlphabet) - 1)]);
    x /= (sizeof(kAlphabet) - 1);
  }
  return out;
}

// The string at `key` of object `j`; empty when missing, null or not a string.
// An edit that sets `members` inside an object member (which becomes `{}` if absent or not an
// object).
MemberEdit Nested(absl::string_view key,
                  const std::vector<std::pair<absl::string_view, std::string>>& members) {
  return {key, [&members](std::optional<absl::string_view> current) {
            return SetMembers(current.value_or("{}"), members);
          }};
}

// A pod's status text once bound (BindingREST setPodNodeAndMetadata): no nominatedNodeName, and
// the PodScheduled condition True, replacing one of that type where it stands (its
// lastTransitionTime kept if it was True already) or appended (pkg/api/pod/util.go
// UpdatePodCondition); the other members and conditions as they were.
std::string BoundStatus(absl::string_view status_text, absl::string_view now) {
  nlohmann::ordered_json status =
      nlohmann::ordered_json::parse(status_text.begin(), status_text.end(), nullptr, false);
  if (!status.is_object()) status = nlohmann::ordered_json::object();
  status.erase("nominatedNodeName");
  nlohmann::ordered_json scheduled = {{"type", "PodScheduled"},
                                      {"status", "True"},
                                      {"lastProbeTime", nullptr},
                                      {"lastTransitionTime", std::string(now)}};
  nlohmann::ordered_json& conditions = status["conditions"];
  if (!conditions.is_array()) conditions = nlohmann::ordered_json::array();
  bool replaced = false;
  // The stored status is what clients wrote: any member may be of any type.
  const auto is = [](const nlohmann::ordered_json& condition, const char* key, const char* value) {
    auto it = condition.find(key);
    return it != condition.end() && it->is_string() && it->get<std::string>() == value;
  };
  for (auto& condition : conditions) {
    if (!condition.is_object() || !is(condition, "type", "PodScheduled")) continue;
    if (is(condition, "status", "True") && condition.contains("lastTransitionTime")) {
      scheduled["lastTransitionTime"] = condition["lastTransitionTime"];
    }
    condition = scheduled;
    replaced = true;
    break;
  }
  if (!replaced) conditions.push_back(scheduled);
  return status.dump();
}

// `previous` with the resourceVersion of `current` (metadata.resourceVersion edited in place): what
// the watch cache sends when an object stops matching a watch's selector.
ObjectPtr PreviousAtVersion(const StoredObject& previous, const StoredObject& current) {
  auto object = std::make_shared<StoredObject>(previous);
  const std::vector<std::pair<absl::string_view, std::string>> metadata = {
      {"resourceVersion", absl::StrCat("\"", current.resource_version, "\"")}};
  object->json = EditMembers(previous.json, {Nested("metadata", metadata)});
  object->resource_version = current.resource_version;
  return object;
}

// ComputePodQOS (pkg/apis/core/helper/qos/qos.go), for cpu and memory over containers and init
// containers: BestEffort without any positive request or limit; Guaranteed when every container
// has positive cpu and memory limits and the summed requests equal the summed limits (a request
// left out defaults to its limit, pkg/apis/core/v1/defaults.go); else Burstable. Pod-level
// resources (1.32+) are not considered.
std::string QosClass(const KubeletPod& pod) {
  std::map<std::string, ResourceQuantity> requests, limits;
  bool guaranteed = true;
  auto is_compute = [](const std::string& name) { return name == "cpu" || name == "memory"; };
  const ResourceQuantity zero;
  auto visit = [&](const KubeletContainer& c) {
    std::map<std::string, ResourceQuantity> own_requests;
    for (const auto& [name, q] : c.requests) {
      if (is_compute(name)) own_requests[name] = q;
    }
    std::set<std::string> limits_found;
    for (const auto& [name, q] : c.limits) {
      if (!is_compute(name)) continue;
      if (!own_requests.count(name)) own_requests[name] = q;  // defaulted from the limit
      if (zero < q) {
        limits_found.insert(name);
        limits[name] += q;
      }
    }
    for (const auto& [name, q] : own_requests) {
      if (zero < q) requests[name] += q;
    }
    if (limits_found.size() != 2) guaranteed = false;
  };
  for (const KubeletContainer& c : pod.containers) visit(c);
  for (const KubeletContainer& c : pod.init_containers) visit(c);
  if (requests.empty() && limits.empty()) return "BestEffort";
  if (guaranteed) {
    for (const auto& [name, q] : requests) {
      auto it = limits.find(name);
      if (it == limits.end() || !(it->second == q)) {
        guaranteed = false;
        break;
      }
    }
  }
  return guaranteed && requests.size() == limits.size() ? "Guaranteed" : "Burstable";
}

bool IsPhase(absl::string_view phase) {
  return phase == "Pending" || phase == "Running" || phase == "Succeeded" || phase == "Failed" ||
         phase == "Unknown";
}

}  // namespace

absl::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "ERROR";
}

bool ObjectFilter::Matches(const StoredObject& object) const {
  if (object.kind != kind) return false;
  if (!namespace_name.empty() && object.fields.namespace_name != namespace_name) return false;
  return fields.Matches(object.fields) && labels.Matches(object.fields.labels);
}

absl::StatusOr<DeletePreconditions> ParseDeletePreconditions(const json& options) {
  DeletePreconditions out;
  auto it = options.find("preconditions");
  if (it == options.end() || it->is_null()) return out;
  if (!it->is_object()) {
    return absl::InvalidArgumentError("preconditions: must be an object (uid, resourceVersion)");
  }
  for (auto [key, field] :
       {std::pair{"uid", &out.uid}, std::pair{"resourceVersion", &out.resource_version}}) {
    auto value = it->find(key);
    if (value == it->end() || value->is_null()) continue;
    if (!value->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("preconditions.", key, ": must be a string"));
    }
    *field = value->get<std::string>();
  }
  return out;
}

absl::Status CheckDeletePreconditions(Kind kind, absl::string_view name, const StoredObject& object,
                                      const Precondition& uid,
                                      const Precondition& resource_version) {
  if (uid.has_value() && *uid != object.uid) {
    return DeletePreconditionFailed(kind, name, true, *uid, object.uid);
  }
  const std::string stored_version = absl::StrCat(object.resource_version);
  if (resource_version.has_value() && *resource_version != stored_version) {
    return DeletePreconditionFailed(kind, name, false, *resource_version, stored_version);
  }
  return absl::OkStatus();
}

ClusterStore::ClusterStore(Options options) : options_(std::move(options)) {}

std::string ClusterStore::GenerateName(absl::string_view prefix) {
  MutexLock lock(&mu_);
  // Its own sequence (the top bit set), apart from CreateObject's suffixes.
  return absl::StrCat(prefix, RandomSuffix((uint64_t{1} << 63) | ++generated_names_));
}

std::string ClusterStore::NextUidLocked() { return FormatUid(ProcessSalt(), ++uid_counter_); }

void ClusterStore::RecordLocked(EventType type, ObjectPtr object, ObjectPtr previous) {
  history_.push_back(Event{type, std::move(object), std::move(previous), options_.clock()});
  while (static_cast<int64_t>(history_.size()) > options_.event_window) {
    compacted_ = history_.front().object->resource_version;
    history_.pop_front();
  }
}

ObjectPtr ClusterStore::ReplacePodTextLocked(const ObjectPtr& old, std::string text,
                                             ObjectFields fields) {
  auto object = std::make_shared<StoredObject>(*old);
  object->json = std::move(text);
  object->resource_version = resource_version_;
  object->fields = std::move(fields);
  ObjectPtr published = object;
  pods_[StoreKey(old->fields.namespace_name, old->fields.name)] = published;
  RecordLocked(EventType::kModified, published, old);
  return published;
}

ObjectPtr ClusterStore::ReplacePodLocked(const ObjectPtr& old, const json& pod) {
  return ReplacePodTextLocked(old, Dump(pod), FieldsOf(pod));
}

absl::Status ClusterStore::AddNode(const NodeSpec& spec) {
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(AddNodeLocked(spec, /*record=*/true));
  }
  node_signal_.Notify();
  return absl::OkStatus();
}

absl::Status ClusterStore::AddNodeLocked(const NodeSpec& spec, bool record,
                                         const std::function<void(json*)>& decorate) {
  if (nodes_.count(StoreKey("", spec.name)) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("nodes \"", spec.name, "\" already exists"));
  }
  int index = static_cast<int>(node_index_.size());
  json node =
      BuildNode(spec, NextUidLocked(), resource_version_ + 1, options_.clock(), NodeIp(index));
  if (decorate) decorate(&node);
  auto object = std::make_shared<StoredObject>();
  object->kind = Kind::kNode;
  object->json = Dump(node);
  object->resource_version = ++resource_version_;
  object->uid = node["metadata"]["uid"].get<std::string>();
  object->fields = FieldsOf(node);
  // The kubelet admits by status.allocatable (NodeInfo.SetNode), the device plugins' resources
  // among them.
  absl::StatusOr<ResourceList> allocatable = ParseResourceList(
      JsonMember(JsonMember(node, "status"), "allocatable"), "status.allocatable");
  if (!allocatable.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", spec.name, ": ", allocatable.status().message()));
  }
  node_index_[spec.name] = index;
  kubelet_.SetNode(spec.name, *allocatable, DeviceCounts(spec.devices.begin(), spec.devices.end()));
  nodes_[StoreKey("", spec.name)] = object;
  if (record) RecordLocked(EventType::kAdded, object, nullptr);
  return absl::OkStatus();
}

namespace {

// A shape for `requests`: the basic template, or realistic workload `variant`; parsed once for
// its requests, containers and indexed fields.
absl::StatusOr<GeneratedPodShape> MakePodShape(const GenerateSpec& spec,
                                               const StringPairs& requests, int variant) {
  GeneratedPodShape shape;
  if (spec.objects == ObjectProfile::kRealistic) {
    PodTemplate t = RealisticPodTemplate(variant, requests, spec.seed);
    shape.generate_name = std::move(t.generate_name);
    shape.containers = t.containers;
    shape.json = std::move(t.json);
  } else {
    shape.json = GeneratedPodTemplate(requests);
  }
  const std::string sample = FillPodTemplate(
      shape.json, "sample", spec.pod_namespace, "00000000-0000-4000-8000-000000000000", 1, "node",
      "10.0.0.1", "10.64.0.1", "2024-01-01T00:00:00Z",
      std::vector<std::string>(static_cast<size_t>(shape.containers), std::string(64, '0')));
  const json parsed = json::parse(sample);
  ASSIGN_OR_RETURN(KubeletPod kubelet_pod, ParseKubeletPod(parsed));
  shape.kubelet_pod = std::make_shared<const KubeletPod>(std::move(kubelet_pod));
  shape.images = std::make_shared<const ContainerImages>(ContainersOf(parsed));
  shape.fields = FieldsOf(parsed);
  return shape;
}

// A quantity in the kubelet's units (cpu in millicores, the rest in units).
absl::StatusOr<int64_t> ResourceAmount(absl::string_view name, absl::string_view text) {
  ASSIGN_OR_RETURN(ResourceQuantity q, ResourceQuantity::Parse(text));
  return name == "cpu" ? q.MilliValue() : q.Value();
}

}  // namespace

void ClusterStore::AddGeneratedPodLocked(const GeneratedPodShape& shape,
                                         const std::string& namespace_name, const std::string& name,
                                         const std::string& node, const std::string& timestamp,
                                         const std::vector<std::string>& container_ids) {
  const int index = node_index_[node];
  const std::string uid = NextUidLocked();
  const uint64_t rv = ++resource_version_;
  const std::string pod_ip = PodIp(index, pods_started_[node]++);
  auto object = std::make_shared<StoredObject>();
  object->kind = Kind::kPod;
  object->resource_version = rv;
  object->uid = uid;
  object->json = FillPodTemplate(shape.json, name, namespace_name, uid, rv, node, NodeIp(index),
                                 pod_ip, timestamp, container_ids);
  object->kubelet_pod = shape.kubelet_pod;
  object->containers = shape.images;
  object->fields = shape.fields;
  object->fields.namespace_name = namespace_name;
  object->fields.name = name;
  object->fields.node_name = node;
  object->fields.pod_ip = pod_ip;
  kubelet_.AddAdmitted(node, uid, *shape.kubelet_pod);
  pods_.emplace(StoreKey(namespace_name, name), std::move(object));
}

absl::Status ClusterStore::Generate(const GenerateSpec& spec) {
  if (spec.nodes <= 0) return absl::OkStatus();
  const bool realistic = spec.objects == ObjectProfile::kRealistic;
  // Regular pods take the shapes in a seeded mix; a full node's filler pod has shape kFiller.
  constexpr int kFiller = 1;
  std::vector<GeneratedPodShape> shapes;
  for (int v = 0; v < (realistic ? kRealisticPodShapes : 1); ++v) {
    ASSIGN_OR_RETURN(GeneratedPodShape shape, MakePodShape(spec, spec.pod_requests, v));
    shapes.push_back(std::move(shape));
  }
  std::map<std::string, GeneratedPodShape> filler_shapes;  // by their requests

  // Which nodes are full: round(fraction * nodes) of them, a seeded choice; turn[i] is node i's
  // place among them (which resources it is filled in), -1 for the others.
  std::vector<int> full_turn(static_cast<size_t>(spec.nodes), -1);
  const int full_count = static_cast<int>(std::lround(spec.full_nodes.fraction * spec.nodes));
  if (full_count > 0) {
    SeededRandom pick(spec.seed ^ 0x6a09e667f3bcc909ULL);
    std::vector<int> order(static_cast<size_t>(spec.nodes));
    for (int i = 0; i < spec.nodes; ++i) order[static_cast<size_t>(i)] = i;
    for (int k = 0; k < full_count; ++k) {  // a partial Fisher-Yates shuffle
      const size_t j = static_cast<size_t>(k) + pick.Below(static_cast<uint64_t>(spec.nodes - k));
      std::swap(order[static_cast<size_t>(k)], order[j]);
    }
    std::sort(order.begin(), order.begin() + full_count);
    for (int k = 0; k < full_count; ++k) full_turn[static_cast<size_t>(order[k])] = k;
  }
  std::vector<std::pair<std::string, int64_t>> free;  // generate.fullNodes.free, kubelet units
  for (const auto& [name, text] : spec.full_nodes.free) {
    if (name == "pods") {
      return absl::InvalidArgumentError("fullNodes.free: pods cannot be filled by one pod");
    }
    ASSIGN_OR_RETURN(int64_t amount, ResourceAmount(name, text));
    free.emplace_back(name, amount);
  }

  std::optional<CloudNodeNamer> namer;
  if (spec.node_naming != NodeNaming::kPrefix) namer.emplace(spec.node_naming, spec.seed);
  SeededRandom random(spec.seed);
  auto container_ids = [&random](int n) {
    std::vector<std::string> ids;
    for (int k = 0; k < n; ++k) ids.push_back(random.Hex(64));
    return ids;
  };
  const std::string created = FormatTimestamp(options_.clock());
  {
    MutexLock lock(&mu_);
    for (int i = 0; i < spec.nodes; ++i) {
      const int index = static_cast<int>(node_index_.size());
      NodeSpec node;
      CloudNode cloud;
      if (namer) {
        cloud = namer->Next(NodeIp(index));
        node.name = cloud.name;
      } else {
        node.name = absl::StrCat(spec.node_prefix, i);
      }
      node.allocatable = spec.node_allocatable;
      node.capacity = spec.node_allocatable;
      std::function<void(json*)> decorate;
      if (realistic) {
        decorate = [&cloud, index, &random](json* j) {
          MakeNodeRealistic(cloud, index, &random, j);
        };
      }
      RETURN_IF_ERROR(AddNodeLocked(node, /*record=*/false, decorate));
      for (int p = 0; p < spec.pods_per_node; ++p) {
        if (!realistic) {
          AddGeneratedPodLocked(shapes[0], spec.pod_namespace, absl::StrCat("bench-", i, "-", p),
                                node.name, created, {});
          continue;
        }
        const GeneratedPodShape& shape = shapes[random.Below(shapes.size())];
        std::string name;
        do {
          name = absl::StrCat(shape.generate_name, random.Chars("bcdfghjklmnpqrstvwxz2456789", 5));
        } while (pods_.count(StoreKey(spec.pod_namespace, name)) > 0);
        AddGeneratedPodLocked(shape, spec.pod_namespace, name, node.name, created,
                              container_ids(shape.containers));
      }
      const int turn = full_turn[static_cast<size_t>(i)];
      if (turn < 0) continue;
      // Fill the node up to `free` in the resources of its turn: each listed resource alone in
      // order, then all of them together.
      const size_t slot = static_cast<size_t>(turn) % (free.size() + 1);
      StringPairs fill;
      for (size_t r = 0; r < free.size(); ++r) {
        if (slot < free.size() && r != slot) continue;
        const auto& [name, keep] = free[r];
        const int64_t unused =
            kubelet_.Allocatable(node.name, name) - kubelet_.Requested(node.name, name);
        const int64_t amount = unused - keep;
        if (amount <= 0) {
          return absl::InvalidArgumentError(absl::StrCat("fullNodes.free.", name, ": node ",
                                                         node.name, " has no more than that free (",
                                                         unused, ") before it is filled"));
        }
        fill.emplace_back(name, name == "cpu" ? absl::StrCat(amount, "m") : absl::StrCat(amount));
      }
      std::string key;
      for (const auto& [name, amount] : fill) absl::StrAppend(&key, name, "=", amount, ";");
      auto it = filler_shapes.find(key);
      if (it == filler_shapes.end()) {
        ASSIGN_OR_RETURN(GeneratedPodShape shape, MakePodShape(spec, fill, kFiller));
        it = filler_shapes.emplace(key, std::move(shape)).first;
      }
      const GeneratedPodShape& shape = it->second;
      std::string name = realistic ? absl::StrCat(shape.generate_name, "fill", i)
                                   : absl::StrCat("bench-", i, "-fill");
      AddGeneratedPodLocked(shape, spec.pod_namespace, name, node.name, created,
                            container_ids(shape.containers));
    }
    history_.clear();
    compacted_ = resource_version_;
    min_watch_start_ = resource_version_;
  }
  NotifyAll();
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> ClusterStore::NodeTopologyLabelsLocked(
    absl::string_view node_name) const {
  std::vector<std::pair<std::string, std::string>> out;
  auto node = nodes_.find(StoreKey("", node_name));
  if (node == nodes_.end()) return out;
  std::optional<absl::string_view> metadata = FindMember(node->second->json, "metadata");
  std::optional<absl::string_view> labels =
      metadata.has_value() ? FindMember(*metadata, "labels") : std::nullopt;
  if (!labels.has_value()) return out;
  json parsed = json::parse(labels->begin(), labels->end(), nullptr, false);
  if (!parsed.is_object()) return out;
  for (const char* key : {"topology.kubernetes.io/zone", "topology.kubernetes.io/region"}) {
    if (parsed.contains(key) && parsed[key].is_string()) {
      out.emplace_back(key, parsed[key].get<std::string>());
    }
  }
  return out;
}

absl::StatusOr<ObjectPtr> ClusterStore::CreatePod(absl::string_view body,
                                                  absl::string_view path_namespace) {
  json pod = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (pod.is_discarded() || !pod.is_object()) {
    return absl::InvalidArgumentError(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json");
  }
  if (pod.contains("kind") && pod["kind"] != "Pod") {
    return absl::InvalidArgumentError("the kind of the provided object is not Pod");
  }
  if (pod.contains("apiVersion") && pod["apiVersion"] != "v1") {
    return absl::InvalidArgumentError("the apiVersion of the provided object is not v1");
  }
  if (!pod.contains("metadata")) pod["metadata"] = json::object();
  json& metadata = pod["metadata"];
  if (!metadata.is_object()) return absl::InvalidArgumentError("metadata must be an object");
  for (const char* key : {"name", "generateName", "namespace"}) {
    if (metadata.contains(key) && !metadata[key].is_string() && !metadata[key].is_null()) {
      return absl::InvalidArgumentError(absl::StrCat("metadata.", key, " must be a string"));
    }
  }
  if (metadata.contains("labels") && !metadata["labels"].is_null()) {
    if (!metadata["labels"].is_object()) {
      return absl::InvalidArgumentError("metadata.labels must be an object");
    }
    for (const auto& [k, v] : metadata["labels"].items()) {
      if (!v.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat("metadata.labels.", k, " must be a string"));
      }
    }
  }
  std::string ns = JsonStr(metadata, "namespace");
  if (!ns.empty() && ns != path_namespace) {
    return absl::InvalidArgumentError(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  if (!pod.contains("spec") || pod["spec"].is_null()) pod["spec"] = json::object();
  if (!pod["spec"].is_object()) return absl::InvalidArgumentError("spec must be an object");
  json& spec = pod["spec"];
  if (spec.contains("nodeName") && !spec["nodeName"].is_string() && !spec["nodeName"].is_null()) {
    return absl::InvalidArgumentError("spec.nodeName must be a string");
  }
  if (spec.contains("schedulerName") && !spec["schedulerName"].is_string() &&
      !spec["schedulerName"].is_null()) {
    return absl::InvalidArgumentError("spec.schedulerName must be a string");
  }
  if (!spec.contains("schedulerName") || !spec["schedulerName"].is_string() ||
      spec["schedulerName"].get<std::string>().empty()) {
    spec["schedulerName"] = "default-scheduler";
  }
  // The defaults the API server applies on create that the sim's rules read:
  // pkg/apis/core/v1/defaults.go SetDefaults_PodSpec (restartPolicy Always,
  // terminationGracePeriodSeconds 30) and the ServiceAccount admission plugin
  // (plugin/pkg/admission/serviceaccount/admission.go: serviceAccountName "default").
  for (const char* key : {"restartPolicy", "serviceAccountName"}) {
    if (spec.contains(key) && !spec[key].is_string() && !spec[key].is_null()) {
      return absl::InvalidArgumentError(absl::StrCat("spec.", key, " must be a string"));
    }
  }
  if (JsonStr(spec, "restartPolicy").empty()) spec["restartPolicy"] = "Always";
  if (JsonStr(spec, "serviceAccountName").empty()) {
    spec["serviceAccountName"] = "default";
    spec["serviceAccount"] = "default";
  }
  if (!spec.contains("terminationGracePeriodSeconds") ||
      spec["terminationGracePeriodSeconds"].is_null()) {
    spec["terminationGracePeriodSeconds"] = 30;
  } else if (!spec["terminationGracePeriodSeconds"].is_number_integer()) {
    return absl::InvalidArgumentError("spec.terminationGracePeriodSeconds must be an integer");
  }
  // SetDefaults_Pod (pkg/apis/core/v1/defaults.go): a container's limit without a request
  // defaults the request, so the kubelet, which admits by requests, sees it. (Its pod-level
  // defaulting, defaultPodRequests, is not done.)
  for (const char* list : {"containers", "initContainers"}) {
    auto containers = spec.find(list);
    if (containers == spec.end() || !containers->is_array()) continue;
    for (json& c : *containers) {
      if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) continue;
      json& resources = c["resources"];
      const json& limits = JsonMember(resources, "limits");
      if (!limits.is_object() || limits.empty()) continue;
      if (!resources.contains("requests") || resources["requests"].is_null()) {
        resources["requests"] = json::object();
      }
      json& requests = resources["requests"];
      if (!requests.is_object()) continue;
      for (const auto& [name, q] : limits.items()) {
        if (!requests.contains(name)) requests[name] = q;
      }
    }
  }
  if (!spec.contains("containers") || !spec["containers"].is_array() ||
      spec["containers"].empty()) {
    std::string name = JsonStr(metadata, "name");
    return absl::FailedPreconditionError(
        absl::StrCat("Pod \"", name, "\" is invalid: spec.containers: Required value"));
  }
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["status"] = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
  metadata["namespace"] = std::string(path_namespace);
  metadata.erase("deletionTimestamp");
  metadata.erase("resourceVersion");

  ObjectPtr published;
  {
    MutexLock lock(&mu_);
    std::string name = JsonStr(metadata, "name");
    if (name.empty()) {
      std::string generate = JsonStr(metadata, "generateName");
      if (generate.empty()) {
        return absl::FailedPreconditionError(
            "Pod \"\" is invalid: metadata.name: Required value: name or generateName is "
            "required");
      }
      name = absl::StrCat(generate, RandomSuffix(uid_counter_));
      metadata["name"] = name;
    }
    if (pods_.count(StoreKey(path_namespace, name)) > 0) {
      return absl::AlreadyExistsError(absl::StrCat("pods \"", name, "\" already exists"));
    }
    std::string uid = NextUidLocked();
    metadata["uid"] = uid;
    metadata["resourceVersion"] = absl::StrCat(resource_version_ + 1);
    metadata["creationTimestamp"] = FormatTimestamp(options_.clock());
    // A pod created bound: the PodTopologyLabels admission plugin copies the node's topology
    // labels onto it, over its own (podtopologylabels admitPod).
    if (const std::string node = JsonStr(spec, "nodeName"); !node.empty()) {
      for (const auto& [key, value] : NodeTopologyLabelsLocked(node)) {
        if (!metadata.contains("labels") || !metadata["labels"].is_object()) {
          metadata["labels"] = json::object();
        }
        metadata["labels"][key] = value;
      }
    }
    auto object = std::make_shared<StoredObject>();
    object->kind = Kind::kPod;
    object->uid = uid;
    object->json = Dump(pod);
    absl::StatusOr<KubeletPod> kubelet_pod = ParseKubeletPod(pod);
    if (!kubelet_pod.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("Pod \"", name, "\" is invalid: ", kubelet_pod.status().message()));
    }
    object->kubelet_pod = std::make_shared<const KubeletPod>(*std::move(kubelet_pod));
    // status.qosClass as the API server computes it on create (pkg/apis/core/helper/qos).
    const std::string qos = QosClass(*object->kubelet_pod);
    if (qos != "BestEffort") {
      pod["status"]["qosClass"] = qos;
      object->json = Dump(pod);
    }
    object->fields = FieldsOf(pod);
    object->containers = std::make_shared<const ContainerImages>(ContainersOf(pod));
    object->resource_version = ++resource_version_;
    published = object;
    pods_[StoreKey(path_namespace, name)] = published;
    RecordLocked(EventType::kAdded, published, nullptr);
  }
  pod_signal_.Notify();
  return published;
}

absl::StatusOr<ObjectPtr> ClusterStore::Get(Kind kind, absl::string_view namespace_name,
                                            absl::string_view name) const {
  ReaderMutexLock lock(&mu_);
  const ObjectMap& map = MapLocked(kind);
  auto it = map.find(StoreKey(namespace_name, name));
  if (it == map.end()) {
    return absl::NotFoundError(absl::StrCat(QualifiedResource(kind), " \"", name, "\" not found"));
  }
  return it->second;
}

absl::StatusOr<ObjectPtr> ClusterStore::CreateObject(Kind kind, absl::string_view namespace_name,
                                                     json object) {
  if (kind == Kind::kPod || kind == Kind::kNode) {
    return absl::InternalError("CreateObject does not create pods or nodes");
  }
  if (!object.contains("metadata") || !object["metadata"].is_object()) {
    object["metadata"] = json::object();
  }
  json& metadata = object["metadata"];
  ObjectPtr published;
  {
    MutexLock lock(&mu_);
    std::string name = JsonStr(metadata, "name");
    if (name.empty()) {
      const std::string generate = JsonStr(metadata, "generateName");
      if (generate.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat(InfoOf(kind).name,
                         " \"\" is invalid: metadata.name: Required value: name or "
                         "generateName is required"));
      }
      name = absl::StrCat(generate, RandomSuffix(uid_counter_));
      metadata["name"] = name;
    }
    ObjectMap& map = MapLocked(kind);
    if (map.count(StoreKey(namespace_name, name)) > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat(QualifiedResource(kind), " \"", name, "\" already exists"));
    }
    if (InfoOf(kind).namespaced) metadata["namespace"] = std::string(namespace_name);
    const std::string uid = NextUidLocked();
    metadata["uid"] = uid;
    metadata["resourceVersion"] = absl::StrCat(resource_version_ + 1);
    const absl::Time created = options_.clock();
    metadata["creationTimestamp"] = FormatTimestamp(created);
    if (kind == Kind::kEvent) {
      event_expiry_.push_back({created, std::string(namespace_name), name, uid});
    }
    auto stored = std::make_shared<StoredObject>();
    stored->kind = kind;
    stored->uid = uid;
    stored->json = Dump(object);
    stored->fields = FieldsOf(object);
    stored->resource_version = ++resource_version_;
    published = stored;
    map[StoreKey(namespace_name, name)] = published;
    RecordLocked(EventType::kAdded, published, nullptr);
  }
  signal(kind).Notify();
  return published;
}

absl::StatusOr<ObjectPtr> ClusterStore::UpdateObject(Kind kind, absl::string_view namespace_name,
                                                     absl::string_view name, uint64_t expected_rv,
                                                     json object) {
  if (!object.is_object()) return absl::InvalidArgumentError("the object is not a JSON object");
  ObjectPtr published;
  {
    MutexLock lock(&mu_);
    ObjectMap& map = MapLocked(kind);
    auto it = map.find(StoreKey(namespace_name, name));
    if (it == map.end()) {
      return absl::NotFoundError(
          absl::StrCat(QualifiedResource(kind), " \"", name, "\" not found"));
    }
    const ObjectPtr old = it->second;
    if (old->resource_version != expected_rv) {
      // apiserver storage: the conflict GuaranteedUpdate's callers see (errors.NewConflict).
      return absl::AbortedError(absl::StrCat(
          "Operation cannot be fulfilled on ", QualifiedResource(kind), " \"", name,
          "\": the object has been modified; please apply your changes to the latest version "
          "and try again"));
    }
    // What an update never changes (apiserver pkg/registry/rest/update.go BeforeUpdate).
    const json previous = json::parse(old->json);
    if (!object.contains("metadata") || !object["metadata"].is_object()) {
      object["metadata"] = json::object();
    }
    json& metadata = object["metadata"];
    const json& old_metadata = previous["metadata"];
    for (const char* key : {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                            "deletionGracePeriodSeconds"}) {
      if (old_metadata.contains(key)) {
        metadata[key] = old_metadata[key];
      } else {
        metadata.erase(key);
      }
    }
    // An update that changes nothing is not written (etcd3/store.go GuaranteedUpdate compares
    // the new bytes with the old): the same version, no event.
    metadata["resourceVersion"] = absl::StrCat(old->resource_version);
    if (Dump(object) == old->json) return old;
    metadata["resourceVersion"] = absl::StrCat(resource_version_ + 1);
    auto stored = std::make_shared<StoredObject>(*old);
    stored->json = Dump(object);
    stored->fields = FieldsOf(object);
    if (kind == Kind::kPod) {
      stored->containers = std::make_shared<const ContainerImages>(ContainersOf(object));
      const bool was_terminal = old->fields.phase == "Succeeded" || old->fields.phase == "Failed";
      const bool terminal = stored->fields.phase == "Succeeded" || stored->fields.phase == "Failed";
      if (terminal && !was_terminal) kubelet_.Release(old->uid);
    }
    stored->resource_version = ++resource_version_;
    published = stored;
    it->second = published;
    RecordLocked(EventType::kModified, published, old);
  }
  signal(kind).Notify();
  return published;
}

int ClusterStore::ExpireEvents() {
  std::vector<EventExpiry> due;
  {
    MutexLock lock(&mu_);
    const absl::Time cutoff = options_.clock() - options_.event_ttl;
    while (!event_expiry_.empty() && event_expiry_.front().created <= cutoff) {
      due.push_back(std::move(event_expiry_.front()));
      event_expiry_.pop_front();
    }
  }
  int expired = 0;
  for (const EventExpiry& e : due) {
    // Already deleted by a client, or replaced by another of that name (another uid): skipped.
    if (DeleteObject(Kind::kEvent, e.namespace_name, e.name, DeletePreconditions::SameUid(e.uid))
            .ok()) {
      ++expired;
    }
  }
  return expired;
}

absl::StatusOr<ObjectPtr> ClusterStore::DeleteObject(Kind kind, absl::string_view namespace_name,
                                                     absl::string_view name,
                                                     const DeletePreconditions& preconditions) {
  if (kind == Kind::kPod || kind == Kind::kNode) {
    return absl::InternalError("DeleteObject does not delete pods or nodes");
  }
  ObjectPtr deleted;
  {
    MutexLock lock(&mu_);
    ObjectMap& map = MapLocked(kind);
    auto it = map.find(StoreKey(namespace_name, name));
    if (it == map.end()) {
      return absl::NotFoundError(
          absl::StrCat(QualifiedResource(kind), " \"", name, "\" not found"));
    }
    const ObjectPtr old = it->second;
    RETURN_IF_ERROR(CheckDeletePreconditions(kind, name, *old, preconditions.uid,
                                             preconditions.resource_version));
    map.erase(it);
    ++resource_version_;
    const std::vector<std::pair<absl::string_view, std::string>> members = {
        {"resourceVersion", absl::StrCat("\"", resource_version_, "\"")}};
    auto object = std::make_shared<StoredObject>(*old);
    object->json = EditMembers(old->json, {Nested("metadata", members)});
    object->resource_version = resource_version_;
    deleted = object;
    RecordLocked(EventType::kDeleted, deleted, old);
  }
  signal(kind).Notify();
  return deleted;
}

absl::StatusOr<ClusterStore::DeleteResult> ClusterStore::DeletePod(absl::string_view namespace_name,
                                                                   absl::string_view name,
                                                                   const DeleteRequest& request) {
  DeleteResult result;
  {
    MutexLock lock(&mu_);
    auto it = pods_.find(StoreKey(namespace_name, name));
    if (it == pods_.end()) return PodNotFound(name);
    const ObjectPtr old = it->second;
    RETURN_IF_ERROR(
        CheckDeletePreconditions(Kind::kPod, name, *old, request.uid, request.resource_version));
    json pod = json::parse(old->json);
    json& metadata = pod["metadata"];
    const json& spec = pod["spec"];
    auto int_at = [](const json& parent, const char* key) -> std::optional<int64_t> {
      if (!parent.is_object()) return std::nullopt;
      auto found = parent.find(key);
      if (found == parent.end() || !found->is_number_integer()) return std::nullopt;
      return found->get<int64_t>();
    };
    bool delete_now = false;
    if (old->fields.deleting) {
      // rest/delete.go BeforeDelete: a pending deletion may only be shortened.
      const std::optional<int64_t> pending = int_at(metadata, "deletionGracePeriodSeconds");
      if (!pending.has_value() || *pending == 0) {
        delete_now = true;
      } else if (request.grace_period_seconds.has_value() &&
                 *request.grace_period_seconds < *pending) {
        if (*request.grace_period_seconds <= 0) {
          delete_now = true;
        } else {
          const absl::Time at = ParseTimestamp(JsonStr(metadata, "deletionTimestamp")) -
                                absl::Seconds(*pending) +
                                absl::Seconds(*request.grace_period_seconds);
          metadata["deletionTimestamp"] = FormatTimestamp(at);
          metadata["deletionGracePeriodSeconds"] = *request.grace_period_seconds;
          ++resource_version_;
          metadata["resourceVersion"] = absl::StrCat(resource_version_);
          result.object = ReplacePodLocked(old, pod);
        }
      } else {
        result.object = old;  // pending; nothing changes
      }
    } else {
      // pkg/registry/core/pod/strategy.go CheckGracefulDelete.
      int64_t period = request.grace_period_seconds.has_value()
                           ? *request.grace_period_seconds
                           : int_at(spec, "terminationGracePeriodSeconds").value_or(0);
      if (old->fields.node_name.empty()) period = 0;
      if (old->fields.phase == "Failed" || old->fields.phase == "Succeeded") period = 0;
      if (period < 0) period = 1;
      if (period == 0) {
        delete_now = true;
      } else {
        metadata["deletionTimestamp"] = FormatTimestamp(options_.clock() + absl::Seconds(period));
        metadata["deletionGracePeriodSeconds"] = period;
        ++resource_version_;
        metadata["resourceVersion"] = absl::StrCat(resource_version_);
        result.object = ReplacePodLocked(old, pod);
      }
    }
    if (delete_now) {
      pods_.erase(it);
      kubelet_.Release(old->uid);
      ++resource_version_;
      const std::vector<std::pair<absl::string_view, std::string>> members = {
          {"resourceVersion", absl::StrCat("\"", resource_version_, "\"")}};
      auto object = std::make_shared<StoredObject>(*old);
      object->json = EditMembers(old->json, {Nested("metadata", members)});
      object->resource_version = resource_version_;
      result.object = object;
      result.deleted = true;
      RecordLocked(EventType::kDeleted, result.object, old);
    }
  }
  pod_signal_.Notify();
  return result;
}

absl::StatusOr<ObjectPtr> ClusterStore::DeletePod(absl::string_view namespace_name,
                                                  absl::string_view name,
                                                  absl::string_view uid_precondition) {
  DeleteRequest request;
  if (!uid_precondition.empty()) request.uid = std::string(uid_precondition);
  request.grace_period_seconds = 0;
  auto result = DeletePod(namespace_name, name, request);
  if (!result.ok()) return result.status();
  return result->object;
}

void ClusterStore::TerminatePod(absl::string_view namespace_name, absl::string_view name,
                                bool kubelet_enabled) {
  std::string uid;
  bool has_kubelet = false;
  {
    ReaderMutexLock lock(&mu_);
    auto it = pods_.find(StoreKey(namespace_name, name));
    if (it == pods_.end() || !it->second->fields.deleting) return;
    uid = it->second->uid;
    const bool node_known = kubelet_.HasNode(it->second->fields.node_name);
    if (node_known && !kubelet_enabled) return;  // nobody finishes it
    has_kubelet = node_known;
  }
  if (has_kubelet) {
    auto pod = Get(Kind::kPod, namespace_name, name);
    if (pod.ok() && (*pod)->uid == uid && (*pod)->fields.phase != "Succeeded" &&
        (*pod)->fields.phase != "Failed") {
      (void)SetPodPhase(namespace_name, name, "Succeeded");
    }
  }
  DeleteRequest request;
  request.uid = uid;
  request.grace_period_seconds = 0;
  (void)DeletePod(namespace_name, name, request);
}

absl::StatusOr<ObjectPtr> ClusterStore::Bind(absl::string_view namespace_name,
                                             absl::string_view name,
                                             absl::string_view uid_precondition,
                                             absl::string_view node) {
  BindRequest request;
  request.uid = std::string(uid_precondition);
  request.node = std::string(node);
  return Bind(namespace_name, name, request);
}

absl::StatusOr<ObjectPtr> ClusterStore::Bind(absl::string_view namespace_name,
                                             absl::string_view name, const BindRequest& request) {
  ObjectPtr published;
  {
    MutexLock lock(&mu_);
    auto it = pods_.find(StoreKey(namespace_name, name));
    if (it == pods_.end()) return PodNotFound(name);
    const ObjectPtr old = it->second;
    // The storage preconditions first (storage.Preconditions.Check: a StorageError, which
    // InterpretUpdateError turns into a Conflict on pods).
    auto precondition_failed = [&](absl::string_view what, absl::string_view asked,
                                   absl::string_view actual) {
      return absl::AbortedError(absl::StrCat(
          "Operation cannot be fulfilled on pods \"", name,
          "\": StorageError: invalid object, Code: 4, Key: /registry/pods/", namespace_name, "/",
          name, ", ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: ", what,
          " in precondition: ", asked, ", ", what, " in object meta: ", actual));
    };
    if (!request.uid.empty() && request.uid != old->uid) {
      return precondition_failed("UID", request.uid, old->uid);
    }
    const std::string rv = absl::StrCat(old->resource_version);
    if (!request.resource_version.empty() && request.resource_version != rv) {
      return precondition_failed("ResourceVersion", request.resource_version, rv);
    }
    // Then setPodNodeAndMetadata's checks, each a Conflict on pods/binding.
    auto conflict = [&](absl::string_view why) {
      return absl::AbortedError(
          absl::StrCat("Operation cannot be fulfilled on pods/binding \"", name, "\": ", why));
    };
    if (old->fields.deleting) {
      return conflict(
          absl::StrCat("pod ", name, " is being deleted, cannot be assigned to a host"));
    }
    if (!old->fields.node_name.empty()) {
      return conflict(absl::StrCat("pod ", name, " is already assigned to node \"",
                                   old->fields.node_name, "\""));
    }
    std::optional<absl::string_view> spec_text = FindMember(old->json, "spec");
    std::optional<absl::string_view> gates =
        spec_text.has_value() ? FindMember(*spec_text, "schedulingGates") : std::nullopt;
    if (gates.has_value()) {
      json parsed = json::parse(gates->begin(), gates->end(), nullptr, false);
      if (parsed.is_array() && !parsed.empty()) {
        return conflict(absl::StrCat("pod ", name, " has non-empty .spec.schedulingGates"));
      }
    }
    ++resource_version_;
    std::vector<std::pair<absl::string_view, std::string>> annotations;
    for (const auto& [key, value] : request.annotations) {
      annotations.emplace_back(key, JsonString(value));
    }
    // The Binding's labels, the node's topology labels added first by the admission plugin
    // (only for target.kind "Node": an empty kind skips it).
    std::vector<std::pair<std::string, std::string>> label_values = request.labels;
    if (request.target_kind == "Node") {
      for (auto& label : NodeTopologyLabelsLocked(request.node)) {
        label_values.push_back(std::move(label));
      }
    }
    // Each key once, with its last value; applied to the pod's labels below (its JSON and its
    // selectable fields).
    std::vector<std::pair<std::string, std::string>> bound_labels;
    for (auto& label_value : label_values) {
      const std::string& key = label_value.first;  // named: a lambda captures it (clang 14)
      auto same = std::find_if(bound_labels.begin(), bound_labels.end(),
                               [&key](const auto& label) { return label.first == key; });
      if (same != bound_labels.end()) {
        same->second = std::move(label_value.second);
      } else {
        bound_labels.push_back(std::move(label_value));
      }
    }
    std::vector<std::pair<absl::string_view, std::string>> labels;
    for (const auto& [key, value] : bound_labels) labels.emplace_back(key, JsonString(value));
    const std::string resource_version = absl::StrCat("\"", resource_version_, "\"");
    std::vector<MemberEdit> metadata_edits = {
        {"resourceVersion", [&](std::optional<absl::string_view>) { return resource_version; }}};
    if (!annotations.empty()) {
      metadata_edits.push_back(Nested("annotations", annotations));
    }
    if (!labels.empty()) metadata_edits.push_back(Nested("labels", labels));
    const std::vector<std::pair<absl::string_view, std::string>> spec = {
        {"nodeName", JsonString(request.node)}};
    const std::string now = FormatTimestamp(options_.clock());
    MemberEdit status = {"status", [&](std::optional<absl::string_view> current) {
                           return BoundStatus(current.value_or("{}"), now);
                         }};
    ObjectFields fields = old->fields;
    fields.node_name = request.node;
    fields.nominated_node_name.clear();
    for (const auto& bound : bound_labels) {
      const std::string& key = bound.first;
      auto same = std::find_if(fields.labels.begin(), fields.labels.end(),
                               [&key](const auto& label) { return label.first == key; });
      if (same != fields.labels.end()) {
        same->second = bound.second;
      } else {
        fields.labels.push_back(bound);
      }
    }
    std::sort(fields.labels.begin(), fields.labels.end());  // as FieldsOf keeps them
    MemberEdit metadata = {"metadata", [&](std::optional<absl::string_view> current) {
                             return EditMembers(current.value_or("{}"), metadata_edits);
                           }};
    published = ReplacePodTextLocked(
        old, EditMembers(old->json, {metadata, Nested("spec", spec), status}), std::move(fields));
    ++bindings_;
  }
  pod_signal_.Notify();
  return published;
}

std::optional<Admission> ClusterStore::AdmitPod(absl::string_view namespace_name,
                                                absl::string_view name) {
  std::optional<Admission> result;
  {
    MutexLock lock(&mu_);
    auto it = pods_.find(StoreKey(namespace_name, name));
    if (it == pods_.end()) return std::nullopt;
    const ObjectPtr old = it->second;
    const std::string& node = old->fields.node_name;
    const std::string& phase = old->fields.phase;
    if (node.empty() || phase != "Pending" || old->fields.deleting || !kubelet_.HasNode(node) ||
        old->kubelet_pod == nullptr) {
      return std::nullopt;
    }
    Admission admission = kubelet_.Admit(node, old->uid, *old->kubelet_pod);
    ++resource_version_;
    const absl::Time now = options_.clock();
    const std::vector<std::pair<absl::string_view, std::string>> metadata = {
        {"resourceVersion", absl::StrCat("\"", resource_version_, "\"")}};
    std::vector<std::pair<absl::string_view, std::string>> status;
    ObjectFields fields = old->fields;
    if (admission.admitted) {
      const int index = node_index_[node];
      const std::string pod_ip = PodIp(index, pods_started_[node]++);
      status = RunningStatusMembers(NodeIp(index), pod_ip, FormatTimestamp(now), *old->containers);
      fields.phase = "Running";
      fields.pod_ip = pod_ip;
    } else {
      status = {{"phase", "\"Failed\""},
                {"reason", JsonString(admission.reason)},
                {"message", JsonString(absl::StrCat("Pod was rejected: ", admission.message))},
                {"startTime", JsonString(FormatTimestamp(now))}};
      fields.phase = "Failed";
      ++rejections_[admission.reason];
    }
    ReplacePodTextLocked(
        old, EditMembers(old->json, {Nested("metadata", metadata), Nested("status", status)}),
        std::move(fields));
    result = std::move(admission);
  }
  pod_signal_.Notify();
  return result;
}

absl::StatusOr<ObjectPtr> ClusterStore::SetPodPhase(absl::string_view namespace_name,
                                                    absl::string_view name,
                                                    absl::string_view phase) {
  if (!IsPhase(phase)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown pod phase \"", phase, "\""));
  }
  ObjectPtr published;
  {
    MutexLock lock(&mu_);
    auto it = pods_.find(StoreKey(namespace_name, name));
    if (it == pods_.end()) return PodNotFound(name);
    const ObjectPtr old = it->second;
    json pod = json::parse(old->json);
    ++resource_version_;
    pod["metadata"]["resourceVersion"] = absl::StrCat(resource_version_);
    json& status = pod["status"];
    if (!status.is_object()) status = json::object();
    status["phase"] = std::string(phase);
    if (phase == "Succeeded" || phase == "Failed") {
      kubelet_.Release(old->uid);
      if (status.contains("conditions") && status["conditions"].is_array()) {
        for (json& c : status["conditions"]) {
          if (JsonStr(c, "type") == "Ready" || JsonStr(c, "type") == "ContainersReady") {
            c["status"] = "False";
            c["reason"] = phase == "Succeeded" ? "PodCompleted" : "PodFailed";
          }
        }
      }
    }
    published = ReplacePodLocked(old, pod);
  }
  pod_signal_.Notify();
  return published;
}

absl::StatusOr<ListResult> ClusterStore::List(const ObjectFilter& filter, int64_t limit,
                                              absl::string_view continue_token) {
  ListRequest request;
  request.filter = filter;
  request.limit = limit;
  request.continue_token = std::string(continue_token);
  return List(request);
}

std::shared_ptr<const ClusterStore::State> ClusterStore::StateAtLocked(Kind kind, uint64_t rv) {
  auto cached = states_.find({kind, rv});
  if (cached != states_.end()) return cached->second;
  if (rv < resource_version_ && rv < OldestLocked()) return nullptr;
  const ObjectMap& map = MapLocked(kind);
  std::map<std::string, ObjectPtr, std::less<>> at(map.begin(), map.end());
  // Undo the events after `rv`, newest first (etcd reads an older revision the same way it keeps
  // them: every version within the compaction window).
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (it->object->resource_version <= rv) break;
    if (it->object->kind != kind) continue;
    const std::string key = StoreKey(it->object->fields.namespace_name, it->object->fields.name);
    if (it->type == EventType::kAdded) {
      at.erase(key);
    } else {
      at[key] = it->previous;
    }
  }
  auto state = std::make_shared<State>(at.begin(), at.end());
  states_[{kind, rv}] = state;
  state_order_.push_back({kind, rv});
  while (state_order_.size() > kMaxStates) {
    states_.erase(state_order_.front());
    state_order_.pop_front();
  }
  return state;
}

absl::StatusOr<ListResult> ClusterStore::List(const ListRequest& request) {
  const ObjectFilter& filter = request.filter;
  std::string start;
  std::optional<uint64_t> rv = request.exact;
  if (!request.continue_token.empty()) {
    auto token = DecodeContinue(request.continue_token);
    if (!token.ok()) return token.status();
    start = token->start;
    // rv -1 (an inconsistent continuation): the latest state.
    if (token->rv > 0) rv = static_cast<uint64_t>(token->rv);
  }
  const std::string prefix =
      filter.namespace_name.empty() ? "" : absl::StrCat(filter.namespace_name, "/");
  if (start < prefix) start = prefix;
  ListResult result;
  MutexLock lock(&mu_);
  const uint64_t at = std::min(rv.value_or(resource_version_), resource_version_);
  result.resource_version = at;
  if (at == resource_version_ && request.limit <= 0) {
    // One page of the latest state: read in place.
    const ObjectMap& map = MapLocked(filter.kind);
    for (auto it = map.lower_bound(start); it != map.end(); ++it) {
      if (!prefix.empty() && !absl::StartsWith(it->first, prefix)) break;
      if (filter.Matches(*it->second)) result.items.push_back(it->second);
    }
    return result;
  }
  // Pages (and exact reads) come from a sorted state of one version, kept for the next page.
  std::shared_ptr<const State> state = StateAtLocked(filter.kind, at);
  if (state == nullptr) {
    if (request.continue_token.empty()) {
      return absl::OutOfRangeError("The resourceVersion for the provided list is too old.");
    }
    result.continue_expired = true;
    result.resource_version = resource_version_;
    result.continue_token = EncodeContinue(-1, start);
    return result;
  }
  auto before = [](const std::pair<std::string, ObjectPtr>& entry, const std::string& key) {
    return entry.first < key;
  };
  auto it = std::lower_bound(state->begin(), state->end(), start, before);
  auto end =
      prefix.empty() ? state->end() : std::lower_bound(it, state->end(), prefix + '\xff', before);
  std::string last_key;
  for (; it != end; ++it) {
    if (request.limit > 0 && static_cast<int64_t>(result.items.size()) >= request.limit) break;
    last_key = it->first;
    if (filter.Matches(*it->second)) result.items.push_back(it->second);
  }
  if (it != end) {
    result.continue_token = EncodeContinue(static_cast<int64_t>(at), last_key + '\0');
    if (filter.fields.empty() && filter.labels.empty()) result.remaining_items = end - it;
  }
  return result;
}

bool ClusterStore::WaitForResourceVersion(uint64_t rv, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const uint64_t generation = pod_signal_.generation();
    {
      ReaderMutexLock lock(&mu_);
      if (resource_version_ >= rv) return true;
    }
    if (absl::Now() >= deadline) return false;
    pod_signal_.WaitForChange(generation,
                              std::min(deadline, absl::Now() + absl::Milliseconds(100)));
  }
}

absl::StatusOr<uint64_t> ClusterStore::WatchStart(absl::string_view resource_version) const {
  ReaderMutexLock lock(&mu_);
  if (resource_version.empty() || resource_version == "0") return resource_version_;
  uint64_t rv = 0;
  if (!absl::SimpleAtoi(resource_version, &rv)) {
    return absl::InvalidArgumentError(
        absl::StrCat("resourceVersion: Invalid value: \"", resource_version, "\""));
  }
  const uint64_t oldest = OldestLocked();
  if (rv < oldest) {
    return absl::OutOfRangeError(absl::StrCat("too old resource version: ", rv, " (", oldest, ")"));
  }
  return rv;
}

WatchBatch ClusterStore::Poll(const ObjectFilter& filter, uint64_t cursor, absl::Time now,
                              absl::Duration lag, size_t max_events) const {
  WatchBatch batch;
  batch.cursor = cursor;
  ReaderMutexLock lock(&mu_);
  if (cursor < compacted_) {
    batch.expired = true;
    return batch;
  }
  auto it =
      std::upper_bound(history_.begin(), history_.end(), cursor,
                       [](uint64_t rv, const Event& e) { return rv < e.object->resource_version; });
  for (; it != history_.end(); ++it) {
    if (it->time + lag > now) {
      batch.next_visible = it->time + lag;
      break;
    }
    if (batch.events.size() >= max_events) break;
    batch.cursor = it->object->resource_version;
    // The watch cache's rule (apiserver pkg/storage/cacher/cache_watcher.go, convertToWatchEvent):
    // the object passes now (never for a deletion) and/or passed before the event.
    const bool cur_passes = it->type != EventType::kDeleted && filter.Matches(*it->object);
    const bool old_passes = it->previous != nullptr && filter.Matches(*it->previous);
    if (cur_passes && !old_passes) {
      batch.events.push_back({EventType::kAdded, it->object});
    } else if (cur_passes && old_passes) {
      batch.events.push_back({EventType::kModified, it->object});
    } else if (old_passes) {
      // DELETED with the previous content (the last state the watch matched) and the event's
      // resourceVersion. A deletion's `object` is already exactly that.
      batch.events.push_back(
          {EventType::kDeleted, it->type == EventType::kDeleted
                                    ? it->object
                                    : PreviousAtVersion(*it->previous, *it->object)});
    }
  }
  return batch;
}

void ClusterStore::ExpireHistory() {
  {
    MutexLock lock(&mu_);
    min_watch_start_ = resource_version_;
    states_.clear();
    state_order_.clear();
  }
  NotifyAll();
}

void ClusterStore::ForgetHistory() {
  {
    MutexLock lock(&mu_);
    history_.clear();
    compacted_ = resource_version_;
    min_watch_start_ = resource_version_;
    states_.clear();
    state_order_.clear();
  }
  NotifyAll();
}

uint64_t ClusterStore::resource_version() const {
  ReaderMutexLock lock(&mu_);
  return resource_version_;
}

StoreStats ClusterStore::Stats() const {
  StoreStats stats;
  ReaderMutexLock lock(&mu_);
  for (const auto& [key, pod] : pods_) ++stats.pods_by_phase[pod->fields.phase];
  stats.rejections_by_reason = rejections_;
  stats.bindings = bindings_;
  stats.nodes = static_cast<int64_t>(nodes_.size());
  stats.resource_version = resource_version_;
  return stats;
}

}  // namespace fitledger::sim
