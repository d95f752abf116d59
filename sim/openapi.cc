#include "sim/openapi.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "sim/kinds.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

// The definition names the API server uses (io.k8s.api.core.v1.Pod, io.k8s.api.apps.v1.Deployment).
std::string DefinitionName(const KindInfo& info) {
  return absl::StrCat("io.k8s.api.", info.group.empty() ? "core" : info.group, ".", info.version,
                      ".", info.name);
}

json Gvk(const KindInfo& info) {
  return json{{"group", info.group}, {"version", info.version}, {"kind", info.name}};
}

json QueryParameter(const char* name, const char* description, const char* type = "string") {
  return json{{"name", name},
              {"in", "query"},
              {"description", description},
              {"schema", {{"type", type}, {"uniqueItems", true}}}};
}

json PathParameter(const char* name, const char* description) {
  return json{{"name", name},
              {"in", "path"},
              {"description", description},
              {"required", true},
              {"schema", {{"type", "string"}, {"uniqueItems", true}}}};
}

json Response(const std::string& ref) {
  return json{
      {"200",
       {{"description", "OK"}, {"content", {{"application/json", {{"schema", {{"$ref", ref}}}}}}}}},
      {"401", {{"description", "Unauthorized"}}}};
}

// One operation: what kubectl's verifier and patcher read (x-kubernetes-* and parameters).
json Operation(const KindInfo& info, const std::string& verb, const char* action,
               const std::string& ref, std::vector<json> parameters) {
  json op = {{"description", absl::StrCat(verb, " ", info.name)},
             {"operationId", absl::StrCat(verb, info.name)},
             {"responses", Response(ref)},
             {"x-kubernetes-action", action},
             {"x-kubernetes-group-version-kind", Gvk(info)}};
  if (!parameters.empty()) op["parameters"] = parameters;
  return op;
}

json KindSchema(const KindInfo& info) {
  json object = {{"type", "object"}};
  return json{
      {"description", absl::StrCat(info.name,
                                   " (fitledger-sim serves the top-level fields; "
                                   "see the Kubernetes API reference)")},
      {"type", "object"},
      {"properties",
       {{"apiVersion", {{"type", "string"}, {"description", "APIVersion of this object."}}},
        {"kind", {{"type", "string"}, {"description", "Kind of this object."}}},
        {"metadata", {{"type", "object"}, {"description", "Standard object's metadata."}}},
        {"spec", {{"type", "object"}, {"description", "Specification of the object."}}},
        {"status", {{"type", "object"}, {"description", "Most recently observed status."}}}}},
      {"x-kubernetes-group-version-kind", json::array({Gvk(info)})}};
}

json ListSchema(const KindInfo& info) {
  return json{
      {"description", absl::StrCat(info.list_kind, " is a list of ", info.name)},
      {"type", "object"},
      {"required", json::array({"items"})},
      {"properties",
       {{"apiVersion", {{"type", "string"}}},
        {"kind", {{"type", "string"}}},
        {"metadata", {{"type", "object"}}},
        {"items",
         {{"type", "array"},
          {"items", {{"$ref", "#/components/schemas/" + DefinitionName(info)}}}}}}},
      {"x-kubernetes-group-version-kind",
       json::array(
           {{{"group", info.group}, {"version", info.version}, {"kind", info.list_kind}}})}};
}

// The verbs the sim serves for `info` (sim/README.md), as OpenAPI paths.
void AddPaths(const KindInfo& info, json& paths, json& schemas) {
  const std::string prefix =
      info.group.empty() ? "/api/v1" : absl::StrCat("/apis/", info.group_version);
  const std::string collection =
      info.namespaced ? absl::StrCat(prefix, "/namespaces/{namespace}/", info.resource)
                      : absl::StrCat(prefix, "/", info.resource);
  const std::string item = collection + "/{name}";
  const std::string ref = "#/components/schemas/" + DefinitionName(info);
  const std::string list_ref =
      absl::StrCat("#/components/schemas/io.k8s.api.", info.group.empty() ? "core" : info.group,
                   ".", info.version, ".", info.list_kind);
  std::vector<json> scope;
  if (info.namespaced) scope.push_back(PathParameter("namespace", "object name and auth scope"));
  std::vector<json> named = scope;
  named.push_back(PathParameter("name", absl::StrCat("name of the ", info.name).c_str()));
  const json dry_run = QueryParameter("dryRun", "When present, the request is not persisted.");
  const json field_manager = QueryParameter("fieldManager", "Name of the actor making the change.");
  const json field_validation = QueryParameter(
      "fieldValidation",
      "How the server treats unknown fields: Ignore, Warn (the default) or Strict "
      "(sim/field_validation.h; fitledger-sim does not check PATCH bodies nor report duplicate "
      "fields).");
  const json grace = QueryParameter("gracePeriodSeconds", "Grace period of a deletion.", "integer");
  const json propagation =
      QueryParameter("propagationPolicy", "Orphan, Background or Foreground (as Background).");
  const json watch = QueryParameter("watch", "Watch for changes.", "boolean");
  const json selector = QueryParameter("labelSelector", "A selector on labels.");
  const json field_selector = QueryParameter("fieldSelector", "A selector on fields.");

  json& c = paths[collection];
  std::vector<json> list_params = {selector, field_selector, watch};
  c["get"] = Operation(info, "list", "list", list_ref, list_params);
  json& i = paths[item];
  i["get"] = Operation(info, "read", "get", ref, {});
  i["patch"] = Operation(info, "patch", "patch", ref, {dry_run, field_manager, field_validation});
  i["put"] = Operation(info, "replace", "put", ref, {dry_run, field_manager, field_validation});
  if (info.kind != Kind::kNode) {
    i["delete"] = Operation(info, "delete", "delete", ref, {grace, propagation});
  }
  c["post"] = Operation(info, "create", "post", ref, {dry_run, field_manager, field_validation});
  c["parameters"] = scope;
  i["parameters"] = named;
  if (info.kind == Kind::kPod || info.kind == Kind::kDeployment || info.kind == Kind::kReplicaSet) {
    json& status = paths[item + "/status"];
    status["get"] = Operation(info, "readStatus", "get", ref, {});
    status["patch"] =
        Operation(info, "patchStatus", "patch", ref, {dry_run, field_manager, field_validation});
    status["put"] =
        Operation(info, "replaceStatus", "put", ref, {dry_run, field_manager, field_validation});
    status["parameters"] = named;
  }
  schemas[DefinitionName(info)] = KindSchema(info);
  schemas[list_ref.substr(std::string("#/components/schemas/").size())] = ListSchema(info);
}

json Document(absl::string_view group_version_path) {
  json paths = json::object();
  json schemas = json::object();
  for (const KindInfo& info : AllKinds()) {
    // Leases have no document (the sim has none for coordination.k8s.io): the root does not
    // list their group.
    if (info.kind == Kind::kLease) continue;
    const std::string gv =
        info.group.empty() ? "api/v1" : absl::StrCat("apis/", info.group_version);
    if (gv == group_version_path) AddPaths(info, paths, schemas);
  }
  if (group_version_path == "api/v1") {
    // Namespaces: a fixed list, read-only.
    KindInfo ns{Kind::kPod, "Namespace", "NamespaceList", "namespaces", "namespace", "",
                "v1",       "v1",        false,           "ns"};
    const std::string ref = "#/components/schemas/io.k8s.api.core.v1.Namespace";
    paths["/api/v1/namespaces"]["get"] =
        Operation(ns, "list", "list", "#/components/schemas/io.k8s.api.core.v1.NamespaceList", {});
    paths["/api/v1/namespaces/{name}"]["get"] = Operation(ns, "read", "get", ref, {});
    paths["/api/v1/namespaces/{name}"]["parameters"] =
        json::array({PathParameter("name", "name of the Namespace")});
    schemas["io.k8s.api.core.v1.Namespace"] = KindSchema(ns);
    schemas["io.k8s.api.core.v1.NamespaceList"] = ListSchema(ns);
  }
  if (paths.empty()) return nullptr;
  return json{{"openapi", "3.0.0"},
              {"info", {{"title", "Kubernetes (fitledger-sim)"}, {"version", "v1.30.0"}}},
              {"paths", paths},
              {"components", {{"schemas", schemas}}}};
}

// FNV-1a, as a stable content hash for the serverRelativeURL (clients cache by it).
std::string Hash(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return absl::StrFormat("%016X", h);
}

}  // namespace

std::string OpenApiV3Root() {
  json paths = json::object();
  for (const char* gv : {"api/v1", "apis/apps/v1"}) {
    paths[gv] = {{"serverRelativeURL",
                  absl::StrCat("/openapi/v3/", gv, "?hash=", Hash(Document(gv).dump()))}};
  }
  return json{{"paths", paths}}.dump();
}

std::optional<std::string> OpenApiV3Document(absl::string_view group_version_path) {
  json doc = Document(group_version_path);
  if (doc.is_null()) return std::nullopt;
  return doc.dump();
}

}  // namespace fitledger::sim
