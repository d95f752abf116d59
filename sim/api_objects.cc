#include "sim/api_objects.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/json_access.h"
#include "model/resources.h"
#include "sim/kinds.h"
#include "sim/objects.h"
#include "sim/pod_requests.h"
#include "sim/status.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

// `Deployment.apps "web" is invalid: <errors>` (errors.NewInvalid), as FailedPrecondition.
absl::Status Invalid(Kind kind, absl::string_view name, const std::vector<std::string>& errors) {
  const KindInfo& info = InfoOf(kind);
  const std::string qualified =
      info.group.empty() ? std::string(info.name) : absl::StrCat(info.name, ".", info.group);
  return absl::FailedPreconditionError(absl::StrCat(
      qualified, " \"", name, "\" is invalid: ",
      errors.size() == 1 ? errors[0] : absl::StrCat("[", absl::StrJoin(errors, ", "), "]")));
}

absl::Status CheckTypeMeta(Kind kind, const json& object) {
  const KindInfo& info = InfoOf(kind);
  if (!object.is_object()) return absl::InvalidArgumentError("the object is not a JSON object");
  if (object.contains("kind") && object["kind"] != std::string(info.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the kind of the provided object is not ", info.name));
  }
  if (object.contains("apiVersion") && object["apiVersion"] != std::string(info.group_version)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the apiVersion of the provided object is not ", info.group_version));
  }
  if (object.contains("metadata") && !object["metadata"].is_object()) {
    return absl::InvalidArgumentError("metadata must be an object");
  }
  const json& metadata = JsonMember(object, "metadata");
  for (const char* key : {"labels", "annotations"}) {
    const json& map = JsonMember(metadata, key);
    if (map.is_null()) continue;
    if (!map.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("metadata.", key, " must be an object"));
    }
    for (const auto& [k, v] : map.items()) {
      if (!v.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("metadata.", key, ".", k, " must be a string"));
      }
    }
  }
  return absl::OkStatus();
}

// SetDefaults_PodSpec (pkg/apis/core/v1/defaults.go) for the fields the sim reads, on a template's
// spec.
void DefaultPodSpec(json& spec) {
  if (!spec.is_object()) return;
  if (JsonStr(spec, "restartPolicy").empty()) spec["restartPolicy"] = "Always";
  if (JsonStr(spec, "dnsPolicy").empty()) spec["dnsPolicy"] = "ClusterFirst";
  if (JsonStr(spec, "schedulerName").empty()) spec["schedulerName"] = "default-scheduler";
  if (!spec.contains("terminationGracePeriodSeconds") ||
      spec["terminationGracePeriodSeconds"].is_null()) {
    spec["terminationGracePeriodSeconds"] = 30;
  }
  if (!spec.contains("securityContext") || spec["securityContext"].is_null()) {
    spec["securityContext"] = json::object();
  }
}

// ValidateDeploymentSpec / ValidateReplicaSetSpec (pkg/apis/apps/validation/validation.go), for
// what the sim reads: the selector, the replicas, and a template that is a valid pod.
std::vector<std::string> ValidateWorkloadSpec(const json& spec) {
  std::vector<std::string> errors;
  if (!spec.is_object()) return {"spec: Required value"};
  const json& replicas = JsonMember(spec, "replicas");
  if (!replicas.is_null() && (!replicas.is_number_integer() || replicas.get<int64_t>() < 0)) {
    errors.push_back(absl::StrCat("spec.replicas: Invalid value: ", replicas.dump(),
                                  ": must be greater than or equal to 0"));
  }
  const json& selector = JsonMember(spec, "selector");
  const json& template_ = JsonMember(spec, "template");
  const json& labels = JsonMember(JsonMember(template_, "metadata"), "labels");
  if (selector.is_null()) {
    errors.push_back("spec.selector: Required value");
  } else if (!selector.is_object() || (JsonMember(selector, "matchLabels").empty() &&
                                       JsonMember(selector, "matchExpressions").empty())) {
    errors.push_back(
        "spec.selector: Invalid value: \"null\": empty selector is invalid for "
        "deployment");
  } else {
    absl::StatusOr<bool> matches = SelectorMatches(selector, labels);
    if (!matches.ok()) {
      errors.push_back(absl::StrCat("spec.selector: Invalid value: ", matches.status().message()));
    } else if (!*matches) {
      errors.push_back(absl::StrCat("spec.template.metadata.labels: Invalid value: ", labels.dump(),
                                    ": `selector` does not match template `labels`"));
    }
  }
  const json& pod_spec = JsonMember(template_, "spec");
  if (!pod_spec.is_object()) {
    errors.push_back("spec.template.spec: Required value");
    return errors;
  }
  if (const std::string policy = JsonStr(pod_spec, "restartPolicy");
      !policy.empty() && policy != "Always") {
    errors.push_back(absl::StrCat("spec.template.spec.restartPolicy: Unsupported value: \"", policy,
                                  "\": supported values: \"Always\""));
  }
  if (!JsonMember(pod_spec, "containers").is_array() ||
      JsonMember(pod_spec, "containers").empty()) {
    errors.push_back("spec.template.spec.containers: Required value");
    return errors;
  }
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "template"}}},
              {"spec", pod_spec}};
  if (absl::StatusOr<KubeletPod> parsed = ParseKubeletPod(pod); !parsed.ok()) {
    errors.push_back(absl::StrCat("spec.template: ", parsed.status().message()));
  }
  return errors;
}

bool StringSetContains(const json& list, const std::string& value) {
  if (!list.is_array()) return false;
  return std::find(list.begin(), list.end(), json(value)) != list.end();
}

// ValidatePodUpdate's rule: the spec may change only where `old` and `updated` differ in the
// allowed fields. Returns the spec with the allowed changes undone, to compare with the old one.
json MaskAllowedPodChanges(const json& old_spec, json spec) {
  for (const char* list : {"containers", "initContainers"}) {
    const json& old_list = JsonMember(old_spec, list);
    json& new_list = spec[list];
    if (old_list.is_array() && new_list.is_array() && old_list.size() == new_list.size()) {
      for (size_t i = 0; i < old_list.size(); ++i) {
        if (!new_list[i].is_object()) continue;
        if (old_list[i].is_object() && old_list[i].contains("image")) {
          new_list[i]["image"] = old_list[i]["image"];
        }
      }
    }
    if (new_list.is_null() && !old_spec.contains(list)) spec.erase(list);
  }
  // activeDeadlineSeconds: may be set when unset, or lowered; never raised nor unset.
  const json& old_deadline = JsonMember(old_spec, "activeDeadlineSeconds");
  const json& new_deadline = JsonMember(spec, "activeDeadlineSeconds");
  if (new_deadline.is_number_integer() && new_deadline.get<int64_t>() > 0 &&
      (old_deadline.is_null() || (old_deadline.is_number_integer() &&
                                  new_deadline.get<int64_t>() <= old_deadline.get<int64_t>()))) {
    if (old_deadline.is_null()) {
      spec.erase("activeDeadlineSeconds");
    } else {
      spec["activeDeadlineSeconds"] = old_deadline;
    }
  }
  // tolerations: only additions.
  const json& old_tolerations = JsonMember(old_spec, "tolerations");
  const json& new_tolerations = JsonMember(spec, "tolerations");
  if (new_tolerations.is_array()) {
    bool superset = true;
    if (old_tolerations.is_array()) {
      for (const json& t : old_tolerations) {
        if (std::find(new_tolerations.begin(), new_tolerations.end(), t) == new_tolerations.end()) {
          superset = false;
        }
      }
    }
    if (superset) {
      if (old_tolerations.is_null()) {
        spec.erase("tolerations");
      } else {
        spec["tolerations"] = old_tolerations;
      }
    }
  }
  // terminationGracePeriodSeconds: to 1 from a negative value.
  const json& old_grace = JsonMember(old_spec, "terminationGracePeriodSeconds");
  if (old_grace.is_number_integer() && old_grace.get<int64_t>() < 0 &&
      JsonMember(spec, "terminationGracePeriodSeconds") == json(1)) {
    spec["terminationGracePeriodSeconds"] = old_grace;
  }
  // schedulingGates: removals (pod scheduling readiness).
  const json& old_gates = JsonMember(old_spec, "schedulingGates");
  const json& new_gates = JsonMember(spec, "schedulingGates");
  if (old_gates.is_array() && (new_gates.is_null() || new_gates.is_array())) {
    bool subset = true;
    if (new_gates.is_array()) {
      for (const json& g : new_gates) {
        if (std::find(old_gates.begin(), old_gates.end(), g) == old_gates.end()) subset = false;
      }
    }
    if (subset) spec["schedulingGates"] = old_gates;
  }
  return spec;
}

std::string LabelSelectorString(const json& selector) {
  std::vector<std::string> terms;
  for (const auto& [k, v] : JsonMember(selector, "matchLabels").items()) {
    terms.push_back(absl::StrCat(k, "=", v.is_string() ? v.get<std::string>() : v.dump()));
  }
  for (const json& e : JsonMember(selector, "matchExpressions")) {
    const std::string key = JsonStr(e, "key");
    const std::string op = JsonStr(e, "operator");
    std::vector<std::string> values;
    for (const json& v : JsonMember(e, "values")) {
      if (v.is_string()) values.push_back(v.get<std::string>());
    }
    if (op == "Exists") {
      terms.push_back(key);
    } else if (op == "DoesNotExist") {
      terms.push_back("!" + key);
    } else {
      terms.push_back(
          absl::StrCat(key, op == "In" ? " in (" : " notin (", absl::StrJoin(values, ","), ")"));
    }
  }
  return absl::StrJoin(terms, ",");
}

// The decoding the API server does before a Lease's validation: known fields must have their
// types ("Lease in version "v1" cannot be handled as a Lease: ...", a 400).
absl::Status CheckLeaseTypes(const json& lease) {
  auto bad = [](absl::string_view field, absl::string_view want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Lease in version \"v1\" cannot be handled as a Lease: ", field, ": not ", want));
  };
  const json& spec = JsonMember(lease, "spec");
  if (spec.is_null()) return absl::OkStatus();
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

// ValidateLease (pkg/apis/coordination/validation/validation.go): on create, generateName as a
// prefix and the name are DNS subdomains (ValidateObjectMeta with NameIsDNSSubdomain);
// spec.leaseDurationSeconds > 0 and spec.leaseTransitions >= 0 when set.
std::vector<std::string> LeaseErrors(const json& lease, bool create) {
  std::vector<std::string> errors;
  auto subdomain = [&errors](absl::string_view field, absl::string_view shown,
                             absl::string_view checked) {
    for (std::string& e :
         Dns1123SubdomainErrors(absl::StrCat("metadata.", field), shown, checked)) {
      errors.push_back(std::move(e));
    }
  };
  const json& metadata = JsonMember(lease, "metadata");
  // ValidateObjectMetaAccessor: generateName first, as a prefix (NameIsDNSSubdomain with
  // prefix=true masks a trailing dash as maskTrailingDash does: the last two characters become
  // "a"), then the name.
  // On update only the spec is validated (ValidateLeaseUpdate: ValidateObjectMetaUpdate), and
  // the name cannot change.
  const std::string generate = create ? JsonStr(metadata, "generateName") : "";
  if (!generate.empty()) {
    std::string masked = generate;
    if (masked.size() > 1 && masked.back() == '-') {
      masked = masked.substr(0, masked.size() - 2) + "a";
    }
    subdomain("generateName", generate, masked);
  }
  const std::string name = JsonStr(metadata, "name");
  subdomain("name", name, name);
  const json& spec = JsonMember(lease, "spec");
  const json& duration = JsonMember(spec, "leaseDurationSeconds");
  if (duration.is_number_integer() && duration.get<int64_t>() <= 0) {
    errors.push_back(absl::StrCat("spec.leaseDurationSeconds: Invalid value: ",
                                  duration.get<int64_t>(), ": must be greater than 0"));
  }
  const json& transitions = JsonMember(spec, "leaseTransitions");
  if (transitions.is_number_integer() && transitions.get<int64_t>() < 0) {
    errors.push_back(
        absl::StrCat("spec.leaseTransitions: Invalid value: ", transitions.get<int64_t>(),
                     ": must be greater than or equal to 0"));
  }
  return errors;
}

}  // namespace

absl::StatusOr<bool> SelectorMatches(const json& selector, const json& labels) {
  if (selector.is_null()) return true;
  if (!selector.is_object()) return absl::InvalidArgumentError("the selector is not an object");
  auto label = [&](const std::string& key) -> const json* {
    if (!labels.is_object()) return nullptr;
    auto it = labels.find(key);
    return it == labels.end() ? nullptr : &*it;
  };
  const json& match_labels = JsonMember(selector, "matchLabels");
  if (!match_labels.is_null() && !match_labels.is_object()) {
    return absl::InvalidArgumentError("matchLabels is not an object");
  }
  if (match_labels.is_object()) {
    for (const auto& [k, v] : match_labels.items()) {
      const json* have = label(k);
      if (have == nullptr || *have != v) return false;
    }
  }
  const json& expressions = JsonMember(selector, "matchExpressions");
  if (!expressions.is_null() && !expressions.is_array()) {
    return absl::InvalidArgumentError("matchExpressions is not a list");
  }
  if (expressions.is_array()) {
    for (const json& e : expressions) {
      const std::string key = JsonStr(e, "key");
      const std::string op = JsonStr(e, "operator");
      const json& values = JsonMember(e, "values");
      const json* have = label(key);
      if (op == "In" || op == "NotIn") {
        if (!values.is_array() || values.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("for '", op, "' operator, values set can't be empty"));
        }
        const bool in = have != nullptr && have->is_string() &&
                        StringSetContains(values, have->get<std::string>());
        if ((op == "In") != in) return false;
      } else if (op == "Exists") {
        if (have == nullptr) return false;
      } else if (op == "DoesNotExist") {
        if (have != nullptr) return false;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("\"", op, "\" is not a valid label selector operator"));
      }
    }
  }
  return true;
}

absl::StatusOr<json> PrepareCreate(Kind kind, absl::string_view path_namespace, json object) {
  if (absl::Status s = CheckTypeMeta(kind, object); !s.ok()) return s;
  const KindInfo& info = InfoOf(kind);
  object["apiVersion"] = std::string(info.group_version);
  object["kind"] = std::string(info.name);
  if (!object.contains("metadata")) object["metadata"] = json::object();
  json& metadata = object["metadata"];
  if (absl::Status s = CheckRequestNamespace(kind, object, path_namespace); !s.ok()) return s;
  for (const char* key : {"uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                          "deletionGracePeriodSeconds"}) {
    metadata.erase(key);
  }
  const std::string name = JsonStr(metadata, "name");
  if (kind == Kind::kDeployment || kind == Kind::kReplicaSet) {
    // strategy.go PrepareForCreate: status cleared, generation 1; defaults.go.
    object["status"] = json::object();
    metadata["generation"] = 1;
    if (!object.contains("spec") || !object["spec"].is_object()) {
      return Invalid(kind, name, {"spec: Required value"});
    }
    json& spec = object["spec"];
    if (!spec.contains("replicas") || spec["replicas"].is_null()) spec["replicas"] = 1;
    if (kind == Kind::kDeployment) {
      if (!spec.contains("strategy") || !spec["strategy"].is_object()) {
        spec["strategy"] = json::object();
      }
      if (JsonStr(spec["strategy"], "type").empty()) spec["strategy"]["type"] = "RollingUpdate";
      if (spec["strategy"]["type"] == "RollingUpdate" &&
          !spec["strategy"].contains("rollingUpdate")) {
        spec["strategy"]["rollingUpdate"] = {{"maxSurge", "25%"}, {"maxUnavailable", "25%"}};
      }
      if (!spec.contains("revisionHistoryLimit")) spec["revisionHistoryLimit"] = 10;
      if (!spec.contains("progressDeadlineSeconds")) spec["progressDeadlineSeconds"] = 600;
    }
    if (spec.contains("template") && spec["template"].is_object()) {
      DefaultPodSpec(spec["template"]["spec"]);
    }
    std::vector<std::string> errors = ValidateWorkloadSpec(spec);
    if (!errors.empty()) return Invalid(kind, name, errors);
  } else if (kind == Kind::kEvent) {
    if (!JsonMember(object, "involvedObject").is_object()) {
      return Invalid(kind, name, {"involvedObject: Required value"});
    }
  } else if (kind == Kind::kLease) {
    if (absl::Status s = CheckLeaseTypes(object); !s.ok()) return s;
    // ObjectApi::Create names a Lease from its generateName first; a missing name is the store's
    // 422.
    if (!name.empty()) {
      std::vector<std::string> errors = LeaseErrors(object, /*create=*/true);
      if (!errors.empty()) return Invalid(kind, name, errors);
    }
  }
  return object;
}

absl::Status CheckRequestNamespace(Kind kind, const json& object,
                                   absl::string_view path_namespace) {
  const std::string ns = JsonStr(JsonMember(object, "metadata"), "namespace");
  if (InfoOf(kind).namespaced && !ns.empty() && ns != path_namespace) {
    return absl::InvalidArgumentError(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  return absl::OkStatus();
}

absl::Status CheckDecodable(Kind kind, const json& object) {
  if (absl::Status s = CheckTypeMeta(kind, object); !s.ok()) return s;
  return kind == Kind::kLease ? CheckLeaseTypes(object) : absl::OkStatus();
}

absl::StatusOr<NodeSpec> NodeSpecFromObject(const json& node) {
  if (absl::Status s = CheckTypeMeta(Kind::kNode, node); !s.ok()) return s;
  NodeSpec spec;
  const json& metadata = JsonMember(node, "metadata");
  spec.name = JsonStr(metadata, "name");
  if (spec.name.empty()) {
    return absl::FailedPreconditionError(
        "Node \"\" is invalid: metadata.name: Required value: name or generateName is required");
  }
  for (const auto& [k, v] : JsonMember(metadata, "labels").items()) {
    spec.labels.emplace_back(k, v.get<std::string>());
  }
  const json& status = JsonMember(node, "status");
  auto resources = [](const json& list, StringPairs* out) {
    if (!list.is_object()) return;
    for (const auto& [k, v] : list.items()) {
      out->emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
    }
  };
  resources(JsonMember(status, "allocatable"), &spec.allocatable);
  resources(JsonMember(status, "capacity"), &spec.capacity);
  if (spec.allocatable.empty()) spec.allocatable = spec.capacity;
  if (spec.capacity.empty()) spec.capacity = spec.allocatable;
  if (spec.allocatable.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Node \"", spec.name,
        "\" is invalid: status.allocatable: Required value: fitledger-sim's kubelet admits pods "
        "against it (give status.allocatable or status.capacity, e.g. {cpu: \"4\", memory: 8Gi, "
        "pods: \"110\"})"));
  }
  return spec;
}

absl::StatusOr<json> PrepareUpdate(Kind kind, Subresource subresource, const json& old,
                                   json updated, absl::string_view url_name) {
  if (absl::Status s = CheckTypeMeta(kind, updated); !s.ok()) return s;
  const KindInfo& info = InfoOf(kind);
  updated["apiVersion"] = std::string(info.group_version);
  updated["kind"] = std::string(info.name);
  if (!updated.contains("metadata")) updated["metadata"] = json::object();
  json& metadata = updated["metadata"];
  const json& old_metadata = JsonMember(old, "metadata");
  const std::string name = JsonStr(metadata, "name");
  if (!name.empty() && name != url_name) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the name of the object (", name, ") does not match the name on the URL (", url_name, ")"));
  }
  const std::string uid = JsonStr(metadata, "uid");
  if (!uid.empty() && uid != JsonStr(old_metadata, "uid")) {
    return Invalid(
        kind, url_name,
        {absl::StrCat("metadata.uid: Invalid value: \"", uid, "\": field is immutable")});
  }
  const std::string rv = JsonStr(metadata, "resourceVersion");
  if (rv.empty() && kind == Kind::kLease) {
    // The Lease strategy's AllowUnconditionalUpdate is false (registry/generic/registry/store.go
    // Update).
    // Worded on the resource, not the kind: "leases.coordination.k8s.io" (store.go builds the
    // GroupKind from the qualified resource), and the value is the parsed version, 0.
    return absl::FailedPreconditionError(
        absl::StrCat(QualifiedResource(kind), " \"", url_name,
                     "\" is invalid: metadata.resourceVersion: Invalid value: 0: must be "
                     "specified for an update"));
  }
  if (!rv.empty() && rv != JsonStr(old_metadata, "resourceVersion")) {
    return absl::AbortedError(absl::StrCat(
        "Operation cannot be fulfilled on ", QualifiedResource(kind), " \"", url_name,
        "\": the object has been modified; please apply your changes to the latest version and "
        "try again"));
  }
  if (subresource == Subresource::kStatus) {
    // The status strategies' PrepareForUpdate: only status changes (ResetObjectMetaForStatus).
    json status = updated.contains("status") ? updated["status"] : json::object();
    updated = old;
    updated["status"] = std::move(status);
    return updated;
  }
  // The main resource never changes status.
  if (old.contains("status")) {
    updated["status"] = old["status"];
  } else {
    updated.erase("status");
  }
  if (kind == Kind::kPod) {
    const json& old_spec = JsonMember(old, "spec");
    if (!updated.contains("spec") || !updated["spec"].is_object()) {
      updated["spec"] = json::object();
    }
    json& spec = updated["spec"];
    // A PUT body without the defaulted fields keeps the stored ones (the API server defaults it
    // to the same values).
    for (const char* key :
         {"restartPolicy", "terminationGracePeriodSeconds", "schedulerName", "serviceAccountName",
          "serviceAccount", "dnsPolicy", "enableServiceLinks", "preemptionPolicy", "priority",
          "securityContext", "tolerations", "nodeName"}) {
      if ((!spec.contains(key) || spec[key].is_null()) && old_spec.contains(key)) {
        spec[key] = old_spec[key];
      }
    }
    if (MaskAllowedPodChanges(old_spec, spec) != old_spec) {
      return Invalid(
          kind, url_name,
          {"spec: Forbidden: pod updates may not change fields other than "
           "`spec.containers[*].image`,`spec.initContainers[*].image`,"
           "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
           "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
           "previously negative)"});
    }
    return updated;
  }
  if (kind == Kind::kDeployment || kind == Kind::kReplicaSet) {
    const json& old_spec = JsonMember(old, "spec");
    if (!updated.contains("spec") || !updated["spec"].is_object()) {
      return Invalid(kind, url_name, {"spec: Required value"});
    }
    json& spec = updated["spec"];
    if (!spec.contains("replicas") || spec["replicas"].is_null()) spec["replicas"] = 1;
    if (spec.contains("template") && spec["template"].is_object()) {
      DefaultPodSpec(spec["template"]["spec"]);
    }
    std::vector<std::string> errors = ValidateWorkloadSpec(spec);
    if (JsonMember(spec, "selector") != JsonMember(old_spec, "selector")) {
      errors.push_back(absl::StrCat("spec.selector: Invalid value: ",
                                    JsonMember(spec, "selector").dump(), ": field is immutable"));
    }
    if (!errors.empty()) return Invalid(kind, url_name, errors);
    int64_t generation = JsonMember(old_metadata, "generation").is_number_integer()
                             ? JsonMember(old_metadata, "generation").get<int64_t>()
                             : 1;
    if (spec != old_spec) ++generation;
    metadata["generation"] = generation;
  }
  if (kind == Kind::kLease) {
    if (absl::Status s = CheckLeaseTypes(updated); !s.ok()) return s;
    metadata["name"] = std::string(url_name);
    std::vector<std::string> errors = LeaseErrors(updated, /*create=*/false);
    if (!errors.empty()) return Invalid(kind, url_name, errors);
  }
  return updated;
}

json ScaleOf(const json& workload) {
  const json& metadata = JsonMember(workload, "metadata");
  json scale_metadata = json::object();
  for (const char* key : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (metadata.contains(key)) scale_metadata[key] = metadata[key];
  }
  const json& spec = JsonMember(workload, "spec");
  const json& status = JsonMember(workload, "status");
  return json{
      {"kind", "Scale"},
      {"apiVersion", "autoscaling/v1"},
      {"metadata", scale_metadata},
      {"spec",
       {{"replicas", JsonMember(spec, "replicas").is_number_integer() ? JsonMember(spec, "replicas")
                                                                      : json(0)}}},
      {"status",
       {{"replicas", JsonMember(status, "replicas").is_number_integer()
                         ? JsonMember(status, "replicas")
                         : json(0)},
        {"selector", LabelSelectorString(JsonMember(spec, "selector"))}}}};
}

}  // namespace fitledger::sim
