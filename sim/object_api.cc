#include "sim/object_api.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/json_access.h"
#include "sim/api_objects.h"
#include "sim/kinds.h"
#include "sim/objects.h"
#include "sim/openapi.h"
#include "sim/patch.h"
#include "sim/status.h"
#include "sim/tables.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

// A PUT's uid precondition that failed: the storage's InvalidObj error through
// InterpretUpdateError, a 409 Conflict quoting the storage error (apiserver pkg/storage/errors.go
// StorageError.Error) with the object's etcd key under kube-apiserver's default prefix /registry
// (nodes are stored as "minions") and ResourceVersion 0 (NewInvalidObjError sets none).
absl::Status UidPreconditionFailed(Kind kind, const ApiPath& path, absl::string_view asked,
                                   absl::string_view stored) {
  const KindInfo& info = InfoOf(kind);
  const std::string key =
      absl::StrCat("/registry/", kind == Kind::kNode ? "minions" : info.resource, "/",
                   info.namespaced ? absl::StrCat(path.namespace_name, "/") : "", path.name);
  return absl::AbortedError(absl::StrCat(
      "Operation cannot be fulfilled on ", QualifiedResource(kind), " \"", path.name,
      "\": StorageError: invalid object, Code: 4, Key: ", key,
      ", ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: ", asked,
      ", UID in object meta: ", stored));
}

// How many times a PATCH or an unconditional PUT is retried after losing a race with another
// writer (the API server's GuaranteedUpdate retries until it wins).
constexpr int kUpdateAttempts = 16;

ApiResponse Error(int code, absl::string_view message) {
  return ApiResponse{code, Dump(StatusObject(code, ReasonForCode(code), message))};
}

ApiResponse Error(const absl::Status& status) {
  const HttpError e = HttpErrorOf(status);
  return ApiResponse{e.code, Dump(StatusObject(e.code, e.reason, status.message()))};
}

ApiResponse MethodNotAllowed() {
  return Error(405, "the server does not allow this method on the requested resource");
}

ApiResponse ObjectResponse(int code, const StoredObject& object, bool table) {
  if (table) {
    return ApiResponse{code, TableJson(object.kind, {std::make_shared<StoredObject>(object)},
                                       object.resource_version, "", 0, true, absl::Now())};
  }
  return ApiResponse{code, object.json};
}

json ApiResource(absl::string_view name, absl::string_view kind, bool namespaced,
                 std::vector<const char*> verbs, absl::string_view short_name = "",
                 absl::string_view group = "", absl::string_view version = "") {
  json r = {{"name", name},
            {"singularName", ""},
            {"namespaced", namespaced},
            {"kind", kind},
            {"verbs", verbs}};
  if (!short_name.empty()) r["shortNames"] = json::array({short_name});
  if (!group.empty()) {
    r["group"] = group;
    r["version"] = version;
  }
  return r;
}

// The "all" category, which `kubectl get all` expands to from discovery (cli-runtime
// restmapper category expander): the API server puts pods, deployments and replica sets in it
// (their REST storage's Categories(): pkg/registry/core/pod/storage/storage.go,
// pkg/registry/apps/deployment/storage/storage.go, apps/replicaset/storage/storage.go). Of the
// kinds the sim serves, only those; the others of "all" (services, jobs, ...) it does not serve,
// so it does not list them.
json WithAllCategory(json resource) {
  resource["categories"] = json::array({"all"});
  return resource;
}

}  // namespace

std::optional<ApiPath> ParseApiPath(absl::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(text, '/', absl::SkipEmpty());
  ApiPath path;
  size_t i = 0;
  if (parts.size() >= 3 && parts[0] == "api" && parts[1] == "v1") {
    path.version = "v1";
    i = 2;
  } else if (parts.size() >= 4 && parts[0] == "apis") {
    path.group = parts[1];
    path.version = parts[2];
    i = 3;
  } else {
    return std::nullopt;
  }
  if (parts.size() - i >= 3 && parts[i] == "namespaces") {
    path.namespace_name = parts[i + 1];
    i += 2;
  } else if (parts.size() - i == 2 && parts[i] == "namespaces") {
    path.resource = "namespaces";
    path.name = parts[i + 1];
    return path;
  }
  if (i >= parts.size()) return std::nullopt;
  path.resource = parts[i++];
  if (i < parts.size()) path.name = parts[i++];
  if (i < parts.size()) path.subresource = parts[i++];
  if (i < parts.size()) return std::nullopt;
  path.kind = KindOfResource(path.group, path.resource);
  if (path.kind.has_value() && InfoOf(*path.kind).version != path.version) path.kind.reset();
  return path;
}

std::optional<std::string> ObjectApi::Discovery(absl::string_view path) {
  // The named groups (apps, coordination.k8s.io), each served at its one version, v1, in Kind
  // order: what /apis lists and what the root's paths name.
  std::vector<const KindInfo*> groups;
  for (const KindInfo& info : AllKinds()) {
    if (info.group.empty()) continue;
    if (std::none_of(groups.begin(), groups.end(),
                     [&](const KindInfo* g) { return g->group == info.group; })) {
      groups.push_back(&info);
    }
  }
  auto group_json = [](const KindInfo& info) {
    json version = {{"groupVersion", info.group_version}, {"version", info.version}};
    return json{
        {"name", info.group}, {"versions", json::array({version})}, {"preferredVersion", version}};
  };
  if (path == "/" || path.empty()) {
    json paths = json::array({"/api", "/api/v1", "/apis"});
    for (const KindInfo* info : groups) {
      paths.push_back(absl::StrCat("/apis/", info->group));
      paths.push_back(absl::StrCat("/apis/", info->group_version));
    }
    paths.push_back("/openapi/v3");
    paths.push_back("/version");
    return Dump(json{{"paths", paths}});
  }
  if (path == "/apis") {
    json list = json::array();
    for (const KindInfo* info : groups) list.push_back(group_json(*info));
    return Dump(json{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", list}});
  }
  for (const KindInfo* info : groups) {
    if (path == absl::StrCat("/apis/", info->group)) {
      json group = group_json(*info);
      group["kind"] = "APIGroup";
      group["apiVersion"] = "v1";
      return Dump(group);
    }
  }
  const std::vector<const char*> all = {"create", "delete", "get",  "list",
                                        "patch",  "update", "watch"};
  if (path == "/api/v1") {
    return Dump(json{
        {"kind", "APIResourceList"},
        {"groupVersion", "v1"},
        {"resources",
         json::array(
             {ApiResource("events", "Event", true, all, "ev"),
              ApiResource("namespaces", "Namespace", false, {"get", "list"}, "ns"),
              ApiResource("nodes", "Node", false,
                          {"create", "get", "list", "patch", "update", "watch"}, "no"),
              WithAllCategory(ApiResource("pods", "Pod", true, all, "po")),
              ApiResource("pods/attach", "PodAttachOptions", true, {"create", "get"}),
              ApiResource("pods/binding", "Binding", true, {"create"}),
              ApiResource("pods/exec", "PodExecOptions", true, {"create", "get"}),
              ApiResource("pods/log", "Pod", true, {"get"}),
              ApiResource("pods/portforward", "PodPortForwardOptions", true, {"create", "get"}),
              ApiResource("pods/status", "Pod", true, {"get", "patch", "update"})})}});
  }
  if (path == "/apis/apps/v1") {
    json resources = json::array();
    for (Kind kind : {Kind::kDeployment, Kind::kReplicaSet}) {
      const KindInfo& info = InfoOf(kind);
      resources.push_back(
          WithAllCategory(ApiResource(info.resource, info.name, true, all, info.short_name)));
      resources.push_back(ApiResource(absl::StrCat(info.resource, "/scale"), "Scale", true,
                                      {"get", "patch", "update"}, "", "autoscaling", "v1"));
      resources.push_back(ApiResource(absl::StrCat(info.resource, "/status"), info.name, true,
                                      {"get", "patch", "update"}));
    }
    return Dump(
        json{{"kind", "APIResourceList"}, {"groupVersion", "apps/v1"}, {"resources", resources}});
  }
  if (path == "/apis/coordination.k8s.io/v1") {
    // Leases (no PATCH in the sim).
    const KindInfo& info = InfoOf(Kind::kLease);
    json lease = ApiResource(info.resource, info.name, info.namespaced,
                             {"create", "delete", "get", "list", "update", "watch"});
    lease["singularName"] = info.singular;
    return Dump(json{{"kind", "APIResourceList"},
                     {"apiVersion", "v1"},
                     {"groupVersion", info.group_version},
                     {"resources", json::array({lease})}});
  }
  return std::nullopt;
}

std::optional<ApiResponse> ObjectApi::Handle(const ApiRequest& request) {
  const std::string& method = request.method;
  if (method == "GET") {
    if (auto doc = Discovery(request.path)) return ApiResponse{200, *doc};
    if (request.path == "/openapi/v3") return ApiResponse{200, OpenApiV3Root()};
    if (absl::StartsWith(request.path, "/openapi/v3/")) {
      auto doc = OpenApiV3Document(request.path.substr(std::string("/openapi/v3/").size()));
      if (doc.has_value()) return ApiResponse{200, *doc};
      return Error(404, "the server could not find the requested resource");
    }
    if (request.path == "/openapi/v2") {
      return Error(404, "fitledger-sim serves OpenAPI v3 only (/openapi/v3)");
    }
  }
  std::optional<ApiPath> path = ParseApiPath(request.path);
  if (!path.has_value()) return std::nullopt;
  if (path->resource == "pods" && !path->name.empty() &&
      (path->subresource == "log" || path->subresource == "exec" || path->subresource == "attach" ||
       path->subresource == "portforward")) {
    // What the API server would proxy to the kubelet; the sim's kubelet runs no containers.
    auto pod = store_->Get(Kind::kPod, path->namespace_name, path->name);
    if (!pod.ok()) return Error(pod.status());
    return Error(400, absl::StrCat("fitledger-sim runs no containers: pods/", path->subresource,
                                   " is not available (pod ", path->namespace_name, "/", path->name,
                                   " is simulated; its phase and status are all "
                                   "there is)"));
  }
  if (!path->kind.has_value()) return std::nullopt;
  const Kind kind = *path->kind;
  const bool simulated_core = kind == Kind::kPod || kind == Kind::kNode;
  if (!path->subresource.empty()) {
    const bool status = path->subresource == "status" && kind != Kind::kNode &&
                        kind != Kind::kEvent && kind != Kind::kLease;
    const bool scale =
        path->subresource == "scale" && (kind == Kind::kDeployment || kind == Kind::kReplicaSet);
    if (scale) return Scale(request, *path);
    if (!status) return std::nullopt;  // binding, and unknown subresources: SimServer's
    if (method == "PATCH") return Patch(request, *path);
    if (method == "PUT") return Put(request, *path);
    if (method == "GET" && !simulated_core) return Get(request, *path);
    return std::nullopt;
  }
  if (path->name.empty()) {
    if (method == "POST" && kind != Kind::kPod) return Create(request, *path);
    return std::nullopt;  // LIST / WATCH, pod create: SimServer's
  }
  if (method == "PATCH" && kind == Kind::kLease) return MethodNotAllowed();  // not in the sim
  if (method == "PATCH") return Patch(request, *path);
  if (method == "PUT") return Put(request, *path);
  if (simulated_core) {
    if (method == "DELETE" && kind == Kind::kNode) {
      return Error(405,
                   "fitledger-sim does not delete nodes (its nodes come from its config or "
                   "from POST /api/v1/nodes); cordon one instead (kubectl cordon NODE)");
    }
    return std::nullopt;  // GET, DELETE of pods: SimServer's
  }
  if (method == "GET") return Get(request, *path);
  if (method == "DELETE") return Delete(request, *path);
  return MethodNotAllowed();
}

ApiResponse ObjectApi::Update(const ApiPath& path,
                              const std::function<absl::StatusOr<json>(const json&)>& change,
                              bool wants_table) {
  const Kind kind = *path.kind;
  const Subresource subresource =
      path.subresource == "status" ? Subresource::kStatus : Subresource::kMain;
  for (int attempt = 0;; ++attempt) {
    auto current = store_->Get(kind, path.namespace_name, path.name);
    if (!current.ok()) return Error(current.status());
    json old = json::parse((*current)->json);
    absl::StatusOr<json> changed = change(old);
    if (!changed.ok()) return Error(changed.status());
    absl::StatusOr<json> prepared =
        PrepareUpdate(kind, subresource, old, *std::move(changed), path.name);
    if (!prepared.ok()) return Error(prepared.status());
    auto stored = store_->UpdateObject(kind, path.namespace_name, path.name,
                                       (*current)->resource_version, *std::move(prepared));
    if (stored.ok()) return ObjectResponse(200, **stored, wants_table);
    if (stored.status().code() != absl::StatusCode::kAborted || attempt + 1 >= kUpdateAttempts) {
      return Error(stored.status());
    }
  }
}

ApiResponse ObjectApi::Patch(const ApiRequest& request, const ApiPath& path) {
  absl::StatusOr<PatchType> type = PatchTypeOf(request.content_type);
  if (!type.ok()) return Error(415, type.status().message());
  const Kind kind = *path.kind;
  return Update(
      path,
      [&](const json& old) -> absl::StatusOr<json> {
        absl::StatusOr<json> patched = ApplyPatch(*type, kind, old, request.body);
        if (!patched.ok()) return patched.status();
        // A patch must leave an object (jsonPatcher / smpPatcher decode it into the kind).
        if (!patched->is_object()) {
          return absl::InvalidArgumentError("the patched object is not a JSON object");
        }
        return patched;
      },
      WantsTable(request.accept));
}

ApiResponse ObjectApi::Put(const ApiRequest& request, const ApiPath& path) {
  json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Error(400,
                 "the body of the request was in an unknown format - accepted media types "
                 "include: application/json");
  }
  // The body decoded into the kind (a 400), then the update handler's first check.
  if (absl::Status s = CheckDecodable(*path.kind, body); !s.ok()) return Error(s);
  if (absl::Status s = CheckRequestNamespace(*path.kind, body, path.namespace_name); !s.ok()) {
    return Error(s);
  }
  // The body's metadata.uid, if any, is a precondition of the update (rest.DefaultUpdatedObjectInfo
  // Preconditions), checked by the storage against the stored object before anything else
  // (etcd3 store.go GuaranteedUpdate: storage.Preconditions.Check), so a 409, not a 422.
  const std::string uid = JsonStr(JsonMember(body, "metadata"), "uid");
  if (*path.kind == Kind::kLease && path.subresource.empty()) {
    // The Lease strategy's AllowCreateOnUpdate: a PUT of a Lease that does not exist creates it
    // (registry/generic/registry/store.go Update), 201.
    auto current = store_->Get(Kind::kLease, path.namespace_name, path.name);
    if (absl::IsNotFound(current.status())) {
      // The precondition is checked against the empty object: a client's cached copy of a Lease
      // deleted meanwhile does not create it again.
      if (!uid.empty()) return Error(UidPreconditionFailed(*path.kind, path, uid, ""));
      const std::string name = JsonStr(JsonMember(body, "metadata"), "name");
      if (!name.empty() && name != path.name) {
        return Error(400, absl::StrCat("the name of the object (", name,
                                       ") does not match the name on the URL (", path.name, ")"));
      }
      body["metadata"]["name"] = path.name;  // metadata is an object or absent: CheckDecodable
      ApiResponse created = Create(request, path, std::move(body));
      // Created meanwhile by another request: update it, as the API server's retry would.
      if (created.code != 409 || !absl::StrContains(created.body, "AlreadyExists")) {
        return created;
      }
      body = json::parse(request.body, nullptr, false);
    }
  }
  return Update(
      path,
      [&](const json& old) -> absl::StatusOr<json> {
        const std::string stored = JsonStr(JsonMember(old, "metadata"), "uid");
        if (!uid.empty() && uid != stored) {
          return UidPreconditionFailed(*path.kind, path, uid, stored);
        }
        return body;
      },
      WantsTable(request.accept));
}

ApiResponse ObjectApi::Create(const ApiRequest& request, const ApiPath& path) {
  json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Error(400,
                 "the body of the request was in an unknown format - accepted media types "
                 "include: application/json");
  }
  return Create(request, path, std::move(body));
}

ApiResponse ObjectApi::Create(const ApiRequest& request, const ApiPath& path, json body) {
  const Kind kind = *path.kind;
  if (kind == Kind::kNode) {
    absl::StatusOr<NodeSpec> spec = NodeSpecFromObject(body);
    if (!spec.ok()) return Error(spec.status());
    if (absl::Status s = store_->AddNode(*spec); !s.ok()) return Error(s);
    // The posted metadata and spec beyond what the node is built from (annotations, taints,
    // unschedulable), as an update of the new node.
    const json& metadata = body.contains("metadata") ? body["metadata"] : json::object();
    ApiPath node_path = path;
    node_path.name = spec->name;
    ApiResponse stored = Update(
        node_path,
        [&](const json& old) -> absl::StatusOr<json> {
          json node = old;
          if (metadata.contains("annotations") && metadata["annotations"].is_object()) {
            node["metadata"]["annotations"].update(metadata["annotations"]);
          }
          if (body.contains("spec") && body["spec"].is_object()) node["spec"].update(body["spec"]);
          return node;
        },
        false);
    if (stored.code == 200) stored.code = 201;
    return stored;
  }
  if (JsonMember(body, "metadata").is_object() && JsonStr(body["metadata"], "name").empty()) {
    // rest.BeforeCreate generates the name before the strategy validates the object, so an
    // object named by generateName is validated with its generated name (a Lease's name too,
    // ValidateLease) and an error names it.
    const std::string generate = JsonStr(body["metadata"], "generateName");
    if (!generate.empty()) body["metadata"]["name"] = store_->GenerateName(generate);
  }
  absl::StatusOr<json> prepared = PrepareCreate(kind, path.namespace_name, std::move(body));
  if (!prepared.ok()) return Error(prepared.status());
  auto created = store_->CreateObject(kind, path.namespace_name, *std::move(prepared));
  if (!created.ok()) return Error(created.status());
  return ObjectResponse(201, **created, WantsTable(request.accept));
}

ApiResponse ObjectApi::Get(const ApiRequest& request, const ApiPath& path) {
  auto object = store_->Get(*path.kind, path.namespace_name, path.name);
  if (absl::IsNotFound(object.status()) && *path.kind == Kind::kLease &&
      path.namespace_name == "kube-node-lease") {
    // A node's heartbeat Lease, which `kubectl describe node` shows: not stored, made up for
    // each node the sim has.
    auto node = store_->Get(Kind::kNode, "", path.name);
    if (!node.ok()) return Error(object.status());
    const std::string renew =
        absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone());
    return ApiResponse{
        200, Dump(json{{"kind", "Lease"},
                       {"apiVersion", std::string(InfoOf(Kind::kLease).group_version)},
                       {"metadata", {{"name", path.name}, {"namespace", path.namespace_name}}},
                       {"spec",
                        {{"holderIdentity", path.name},
                         {"leaseDurationSeconds", 40},
                         {"renewTime", renew}}}})};
  }
  if (!object.ok()) return Error(object.status());
  return ObjectResponse(200, **object, WantsTable(request.accept));
}

ApiResponse ObjectApi::Delete(const ApiRequest& request, const ApiPath& path) {
  const Kind kind = *path.kind;
  DeletePreconditions preconditions;
  std::string propagation = "Background";
  if (!request.body.empty()) {
    json options = json::parse(request.body, nullptr, false);
    if (options.is_discarded() || !options.is_object()) {
      return Error(400, "the DeleteOptions body is not a JSON object");
    }
    absl::StatusOr<DeletePreconditions> parsed = ParseDeletePreconditions(options);
    if (!parsed.ok()) return Error(parsed.status());
    preconditions = *std::move(parsed);
    if (options.contains("propagationPolicy") && options["propagationPolicy"].is_string()) {
      propagation = options["propagationPolicy"].get<std::string>();
    } else if (options.contains("orphanDependents") && options["orphanDependents"] == true) {
      propagation = "Orphan";
    }
  }
  if (auto it = request.params.find("propagationPolicy"); it != request.params.end()) {
    propagation = it->second;
  }
  if (propagation != "Background" && propagation != "Foreground" && propagation != "Orphan") {
    return Error(400, absl::StrCat("propagationPolicy: Unsupported value: \"", propagation,
                                   "\": supported values: \"Foreground\", \"Background\", "
                                   "\"Orphan\""));
  }
  if (propagation == "Orphan" && (kind == Kind::kDeployment || kind == Kind::kReplicaSet)) {
    // The garbage collector's orphaning: the dependents lose their owner reference first
    // (pkg/controller/garbagecollector orphanDependents).
    auto owner = store_->Get(kind, path.namespace_name, path.name);
    if (!owner.ok()) return Error(owner.status());
    // A failed precondition leaves the dependents as they were (rest.BeforeDelete fails the
    // delete before the orphan finalizer is set).
    if (absl::Status s = CheckDeletePreconditions(kind, path.name, **owner, preconditions.uid,
                                                  preconditions.resource_version);
        !s.ok()) {
      return Error(s);
    }
    const std::string owner_uid = (*owner)->uid;
    ObjectFilter filter;
    filter.kind = kind == Kind::kDeployment ? Kind::kReplicaSet : Kind::kPod;
    filter.namespace_name = path.namespace_name;
    auto dependents = store_->List(filter, 0, "");
    if (!dependents.ok()) return Error(dependents.status());
    for (const ObjectPtr& dependent : dependents->items) {
      if (!absl::StrContains(dependent->json, owner_uid)) continue;
      ApiPath dependent_path;
      dependent_path.kind = filter.kind;
      dependent_path.namespace_name = path.namespace_name;
      dependent_path.name = dependent->fields.name;
      Update(
          dependent_path,
          [&](const json& old) -> absl::StatusOr<json> {
            json updated = old;
            json& refs = updated["metadata"]["ownerReferences"];
            if (!refs.is_array()) return updated;
            json kept = json::array();
            for (const json& ref : refs) {
              if (ref.value("uid", "") != owner_uid) kept.push_back(ref);
            }
            if (kept.empty()) {
              updated["metadata"].erase("ownerReferences");
            } else {
              refs = kept;
            }
            return updated;
          },
          false);
    }
  }
  auto deleted = store_->DeleteObject(kind, path.namespace_name, path.name, preconditions);
  if (!deleted.ok()) return Error(deleted.status());
  // Deployments and replica sets answer a Status (they are not ReturnDeletedObject); events and
  // leases too (pkg/registry/coordination/lease/storage/storage.go).
  json status = {{"kind", "Status"},
                 {"apiVersion", "v1"},
                 {"metadata", json::object()},
                 {"status", "Success"},
                 {"details",
                  {{"name", path.name},
                   {"group", InfoOf(kind).group},
                   {"kind", InfoOf(kind).resource},
                   {"uid", (*deleted)->uid}}}};
  return ApiResponse{200, Dump(status)};
}

ApiResponse ObjectApi::Scale(const ApiRequest& request, const ApiPath& path) {
  ApiPath workload = path;
  workload.subresource.clear();
  if (request.method == "GET") {
    auto object = store_->Get(*path.kind, path.namespace_name, path.name);
    if (!object.ok()) return Error(object.status());
    return ApiResponse{200, Dump(ScaleOf(json::parse((*object)->json)))};
  }
  if (request.method != "PATCH" && request.method != "PUT") return MethodNotAllowed();
  std::optional<PatchType> type;
  if (request.method == "PATCH") {
    absl::StatusOr<PatchType> t = PatchTypeOf(request.content_type);
    if (!t.ok()) return Error(415, t.status().message());
    type = *t;
  }
  ApiResponse updated = Update(
      workload,
      [&](const json& old) -> absl::StatusOr<json> {
        json scale = ScaleOf(old);
        if (type.has_value()) {
          absl::StatusOr<json> patched = ApplyPatch(*type, *path.kind, scale, request.body);
          if (!patched.ok()) return patched.status();
          scale = *std::move(patched);
        } else {
          scale = json::parse(request.body, nullptr, false);
          if (scale.is_discarded() || !scale.is_object()) {
            return absl::InvalidArgumentError("the Scale body is not a JSON object");
          }
        }
        const json replicas = scale.contains("spec") && scale["spec"].is_object()
                                  ? scale["spec"].value("replicas", json())
                                  : json();
        if (!replicas.is_number_integer() || replicas.get<int64_t>() < 0) {
          return absl::FailedPreconditionError(absl::StrCat(
              "Scale.autoscaling \"", path.name, "\" is invalid: spec.replicas: Invalid value: ",
              replicas.dump(), ": must be greater than or equal to 0"));
        }
        json workload_object = old;
        workload_object["spec"]["replicas"] = replicas;
        return workload_object;
      },
      false);
  if (updated.code != 200) return updated;
  return ApiResponse{200, Dump(ScaleOf(json::parse(updated.body)))};
}

}  // namespace fitledger::sim
