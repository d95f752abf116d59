#include "sim/patch.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

// The strategic merge patch directives (apimachinery pkg/util/strategicpatch/patch.go).
constexpr absl::string_view kPatchDirective = "$patch";
constexpr absl::string_view kRetainKeysDirective = "$retainKeys";
constexpr absl::string_view kSetElementOrderPrefix = "$setElementOrder/";
constexpr absl::string_view kDeleteFromPrimitiveListPrefix = "$deleteFromPrimitiveList/";

// The list fields with a patch strategy, as the struct tags of k8s.io/api say
// (`patchStrategy:"merge" patchMergeKey:"..."`), by path in a pod, a node, a deployment or a
// replica set. Lists not named here are replaced whole (no patchStrategy, or listType atomic).
struct ListEntry {
  absl::string_view path;
  absl::string_view merge_key;  // empty: a set of scalars (patchStrategy merge)
};

// metav1.ObjectMeta (apimachinery pkg/apis/meta/v1/types.go).
const std::vector<ListEntry>& MetadataLists() {
  static const auto* lists = new std::vector<ListEntry>{
      {"metadata.finalizers", ""},
      {"metadata.ownerReferences", "uid"},
  };
  return *lists;
}

// v1.PodSpec, v1.Container, v1.PodStatus (core/v1/types.go).
const std::vector<ListEntry>& PodLists() {
  static const auto* lists = new std::vector<ListEntry>{
      {"spec.volumes", "name"},
      {"spec.initContainers", "name"},
      {"spec.containers", "name"},
      {"spec.ephemeralContainers", "name"},
      {"spec.imagePullSecrets", "name"},
      {"spec.hostAliases", "ip"},
      {"spec.topologySpreadConstraints", "topologyKey"},
      {"spec.schedulingGates", "name"},
      {"spec.resourceClaims", "name"},
      {"spec.initContainers[].ports", "containerPort"},
      {"spec.initContainers[].env", "name"},
      {"spec.initContainers[].volumeMounts", "mountPath"},
      {"spec.initContainers[].volumeDevices", "devicePath"},
      {"spec.containers[].ports", "containerPort"},
      {"spec.containers[].env", "name"},
      {"spec.containers[].volumeMounts", "mountPath"},
      {"spec.containers[].volumeDevices", "devicePath"},
      {"spec.ephemeralContainers[].env", "name"},
      {"spec.ephemeralContainers[].volumeMounts", "mountPath"},
      {"spec.ephemeralContainers[].volumeDevices", "devicePath"},
      {"status.conditions", "type"},
      {"status.podIPs", "ip"},
      {"status.hostIPs", "ip"},
      {"status.resourceClaimStatuses", "name"},
  };
  return *lists;
}

// v1.NodeSpec, v1.NodeStatus.
const std::vector<ListEntry>& NodeLists() {
  static const auto* lists = new std::vector<ListEntry>{
      {"spec.podCIDRs", ""},
      {"status.conditions", "type"},
      {"status.addresses", "type"},
  };
  return *lists;
}

// apps/v1 DeploymentStatus, ReplicaSetStatus.
const std::vector<ListEntry>& WorkloadLists() {
  static const auto* lists = new std::vector<ListEntry>{
      {"status.conditions", "type"},
  };
  return *lists;
}

std::optional<ListPatchMeta> Find(const std::vector<ListEntry>& table, absl::string_view path) {
  for (const ListEntry& e : table) {
    if (e.path == path) return ListPatchMeta{true, std::string(e.merge_key)};
  }
  return std::nullopt;
}

absl::Status BadRequest(absl::string_view message) { return absl::InvalidArgumentError(message); }

std::string ChildPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// The value of `item`'s merge key, or null when it has none.
const json* MergeKeyValue(const json& item, const std::string& key) {
  if (!item.is_object()) return nullptr;
  auto it = item.find(key);
  return it == item.end() ? nullptr : &*it;
}

// Drops null members from a value taken whole from the patch (the server applies patches with
// MergeOptions.IgnoreUnmatchedNulls: a null for a key the original lacks is not kept).
void DiscardNulls(json& value) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end();) {
      if (it->is_null()) {
        it = value.erase(it);
      } else {
        DiscardNulls(*it);
        ++it;
      }
    }
  } else if (value.is_array()) {
    for (json& item : value) DiscardNulls(item);
  }
}

class StrategicMerger {
 public:
  explicit StrategicMerger(Kind kind) : kind_(kind) {}

  // mergeMap: `patch` applied to `original` (both objects) at `path`.
  absl::StatusOr<json> MergeMap(json original, const json& patch, const std::string& path) {
    if (auto directive = patch.find(kPatchDirective); directive != patch.end()) {
      if (!directive->is_string()) return BadRequest("$patch must be a string");
      const std::string d = directive->get<std::string>();
      if (d == "replace") {
        json replaced = patch;
        replaced.erase(std::string(kPatchDirective));
        DiscardNulls(replaced);
        return replaced;
      }
      if (d == "delete") return json::object();
      if (d != "merge") return BadRequest(absl::StrCat("Unknown patch type: ", d, " in map"));
    }
    if (!original.is_object()) original = json::object();
    // $retainKeys: keys of the original not listed are dropped (applyRetainKeysDirective).
    if (auto retain = patch.find(kRetainKeysDirective); retain != patch.end()) {
      if (!retain->is_array()) return BadRequest("$retainKeys must be a list");
      for (auto it = original.begin(); it != original.end();) {
        if (std::find(retain->begin(), retain->end(), json(it.key())) == retain->end()) {
          it = original.erase(it);
        } else {
          ++it;
        }
      }
    }
    std::vector<std::pair<std::string, const json*>> orders;
    for (const auto& [raw_key, value] : patch.items()) {
      std::string key = raw_key;
      if (key == kPatchDirective || key == kRetainKeysDirective) continue;
      if (absl::StartsWith(key, kSetElementOrderPrefix)) {
        orders.emplace_back(key.substr(kSetElementOrderPrefix.size()), &value);
        continue;
      }
      if (absl::StartsWith(key, kDeleteFromPrimitiveListPrefix)) {
        key = key.substr(kDeleteFromPrimitiveListPrefix.size());
        if (!value.is_array()) return BadRequest(absl::StrCat(raw_key, " must be a list"));
        auto it = original.find(key);
        if (it != original.end() && it->is_array()) {
          json kept = json::array();
          for (const json& v : *it) {
            if (std::find(value.begin(), value.end(), v) == value.end()) kept.push_back(v);
          }
          *it = std::move(kept);
        }
        continue;
      }
      if (value.is_null()) {
        original.erase(key);
        continue;
      }
      auto it = original.find(key);
      const std::string child = ChildPath(path, key);
      if (it == original.end() || it->type() != value.type() ||
          !(value.is_object() || value.is_array())) {
        if (value.is_object()) {
          // New subtree: still strip directives and nulls.
          auto merged = MergeMap(json::object(), value, child);
          if (!merged.ok()) return merged.status();
          original[key] = *std::move(merged);
        } else if (value.is_array()) {
          auto merged = MergeList(json::array(), value, child);
          if (!merged.ok()) return merged.status();
          original[key] = *std::move(merged);
        } else {
          original[key] = value;
        }
        continue;
      }
      if (value.is_object()) {
        auto merged = MergeMap(std::move(*it), value, child);
        if (!merged.ok()) return merged.status();
        *it = *std::move(merged);
      } else {
        auto merged = MergeList(std::move(*it), value, child);
        if (!merged.ok()) return merged.status();
        *it = *std::move(merged);
      }
    }
    for (const auto& [key, order] : orders) {
      auto it = original.find(key);
      if (it == original.end() || !it->is_array() || !order->is_array()) continue;
      *it = Reorder(std::move(*it), *order, ListMetaOf(kind_, ChildPath(path, key)).merge_key);
    }
    return original;
  }

  // mergeSliceHandler / mergeSlice: a list with a merge key merges item by item; a set of
  // scalars is the union; any other list is replaced by the patch's.
  absl::StatusOr<json> MergeList(json original, const json& patch, const std::string& path) {
    const ListPatchMeta meta = ListMetaOf(kind_, path);
    if (!meta.merge) {
      json replaced = patch;
      DiscardNulls(replaced);
      return replaced;
    }
    if (!original.is_array()) original = json::array();
    if (meta.merge_key.empty()) {
      for (const json& v : patch) {
        if (std::find(original.begin(), original.end(), v) == original.end()) original.push_back(v);
      }
      return original;
    }
    // mergeSliceWithSpecialElements: {"$patch": "replace"} replaces the list with the rest of the
    // patch; {"$patch": "delete", <key>: v} deletes the item whose key is v.
    std::vector<const json*> items;
    for (const json& item : patch) {
      if (item.is_object() && item.contains(kPatchDirective)) {
        const json& d = item[std::string(kPatchDirective)];
        if (d == "replace") {
          json replaced = json::array();
          for (const json& other : patch) {
            if (&other == &item) continue;
            auto merged = MergeMap(json::object(), other, path + "[]");
            if (!merged.ok()) return merged.status();
            replaced.push_back(*std::move(merged));
          }
          return replaced;
        }
        if (d == "delete") {
          const json* key = MergeKeyValue(item, meta.merge_key);
          if (key == nullptr) {
            return BadRequest(absl::StrCat("delete patch type with no merge key defined"));
          }
          json kept = json::array();
          for (json& o : original) {
            const json* ok = MergeKeyValue(o, meta.merge_key);
            if (ok == nullptr || *ok != *key) kept.push_back(std::move(o));
          }
          original = std::move(kept);
          continue;
        }
        if (d != "merge") {
          return BadRequest(absl::StrCat("Unknown patch type: ", d.dump(), " in list"));
        }
      }
      items.push_back(&item);
    }
    // mergeSliceWithoutSpecialElements: an item whose key matches an original item merges into
    // it; the others are appended.
    for (const json* item : items) {
      const json* key = MergeKeyValue(*item, meta.merge_key);
      if (key == nullptr) {
        return BadRequest(absl::StrCat("map: ", item->dump(),
                                       " does not contain declared merge key: ", meta.merge_key));
      }
      auto match = std::find_if(original.begin(), original.end(), [&](const json& o) {
        const json* ok = MergeKeyValue(o, meta.merge_key);
        return ok != nullptr && *ok == *key;
      });
      if (match != original.end()) {
        auto merged = MergeMap(std::move(*match), *item, path + "[]");
        if (!merged.ok()) return merged.status();
        *match = *std::move(merged);
      } else {
        auto merged = MergeMap(json::object(), *item, path + "[]");
        if (!merged.ok()) return merged.status();
        original.push_back(*std::move(merged));
      }
    }
    return original;
  }

  // $setElementOrder/<list>: the items the order names come first, in its order; the others
  // (present only on the server) follow in their own order. (Upstream interleaves server-only
  // items by their original positions, normalizeElementOrder; the sim keeps them after.)
  static json Reorder(json list, const json& order, const std::string& merge_key) {
    auto key_of = [&](const json& item) -> const json* {
      return merge_key.empty() ? &item : MergeKeyValue(item, merge_key);
    };
    json ordered = json::array();
    std::vector<bool> used(list.size(), false);
    for (const json& entry : order) {
      const json* want = merge_key.empty() ? &entry : MergeKeyValue(entry, merge_key);
      if (want == nullptr) continue;
      for (size_t i = 0; i < list.size(); ++i) {
        const json* k = key_of(list[i]);
        if (!used[i] && k != nullptr && *k == *want) {
          used[i] = true;
          ordered.push_back(list[i]);
          break;
        }
      }
    }
    for (size_t i = 0; i < list.size(); ++i) {
      if (!used[i]) ordered.push_back(std::move(list[i]));
    }
    return ordered;
  }

 private:
  const Kind kind_;
};

}  // namespace

absl::StatusOr<PatchType> PatchTypeOf(absl::string_view content_type) {
  absl::string_view type = content_type.substr(0, content_type.find(';'));
  type = absl::StripAsciiWhitespace(type);
  if (type == "application/json-patch+json") return PatchType::kJson;
  if (type == "application/merge-patch+json") return PatchType::kMerge;
  if (type == "application/strategic-merge-patch+json") return PatchType::kStrategicMerge;
  if (type == "application/apply-patch+yaml" || type == "application/apply-patch+cbor") {
    return absl::UnimplementedError(
        "fitledger-sim does not support server-side apply (application/apply-patch+yaml); use "
        "client-side `kubectl apply` (without --server-side)");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the body of the request was in an unknown format - accepted media types include: "
      "application/json-patch+json, application/merge-patch+json, "
      "application/strategic-merge-patch+json (got \"",
      type, "\")"));
}

ListPatchMeta ListMetaOf(Kind kind, absl::string_view path) {
  if (kind == Kind::kDeployment || kind == Kind::kReplicaSet) {
    if (absl::ConsumePrefix(&path, "spec.template.")) return ListMetaOf(Kind::kPod, path);
    if (auto m = Find(WorkloadLists(), path)) return *m;
  }
  if (auto m = Find(MetadataLists(), path)) return *m;
  if (kind == Kind::kPod) {
    if (auto m = Find(PodLists(), path)) return *m;
  } else if (kind == Kind::kNode) {
    if (auto m = Find(NodeLists(), path)) return *m;
  }
  return ListPatchMeta{};
}

absl::StatusOr<json> ApplyPatch(PatchType type, Kind kind, const json& original,
                                absl::string_view patch_text) {
  json patch = json::parse(patch_text.begin(), patch_text.end(), nullptr, false);
  if (patch.is_discarded()) {
    return BadRequest("error decoding patch: the patch is not valid JSON");
  }
  switch (type) {
    case PatchType::kJson: {
      if (!patch.is_array()) {
        return BadRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
      }
      for (const json& op : patch) {
        if (!op.is_object() || !op.contains("op") || !op["op"].is_string() ||
            !op.contains("path") || !op["path"].is_string()) {
          return BadRequest(absl::StrCat("invalid JSON patch operation: ", op.dump()));
        }
      }
      try {
        return original.patch(patch);
      } catch (const json::exception& e) {
        // jsonPatcher.applyJSPatch: an operation that cannot apply is 422. nlohmann's message
        // without its "[json.exception.<type>.<id>] " prefix.
        absl::string_view what = e.what();
        if (size_t end = what.find("] ");
            absl::StartsWith(what, "[json.exception.") && end != absl::string_view::npos) {
          what.remove_prefix(end + 2);
        }
        return absl::FailedPreconditionError(absl::StrCat("json patch: ", what));
      }
    }
    case PatchType::kMerge: {
      if (!patch.is_object()) return BadRequest("the merge patch is not a JSON object");
      json merged = original;
      merged.merge_patch(patch);
      return merged;
    }
    case PatchType::kStrategicMerge: {
      if (!patch.is_object()) {
        return BadRequest("the strategic merge patch is not a JSON object");
      }
      StrategicMerger merger(kind);
      return merger.MergeMap(original, patch, "");
    }
  }
  return absl::InternalError("unknown patch type");
}

}  // namespace fitledger::sim
