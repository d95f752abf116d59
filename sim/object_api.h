// The part of fitledger-sim's API that kubectl needs beyond reading pods and nodes: discovery of
// every group the sim serves, the OpenAPI v3 documents, PATCH and PUT of pods (and their status),
// nodes, events, deployments and replica sets (and their status and scale), create / get /
// delete of nodes, events, deployments and replica sets, and a clear answer for pods' log, exec,
// attach and portforward (the sim runs no containers). sim/README.md lists what works.
//
// Independent of the HTTP library: SimServer turns each request into an ApiRequest and writes the
// ApiResponse. LIST and WATCH of every kind stay with SimServer (one watch machinery). Leases
// follow their strategy (pkg/registry/coordination/lease/strategy.go): a PUT creates a missing
// one, an update must name its resourceVersion, and the sim has no PATCH for them.
#ifndef FITLEDGER_SIM_OBJECT_API_H_
#define FITLEDGER_SIM_OBJECT_API_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sim/selectors.h"
#include "sim/store.h"

namespace fitledger::sim {

// A REST path of the Kubernetes API: /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]] or
// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]].
struct ApiPath {
  std::string group;  // "" for core
  std::string version;
  std::string namespace_name;  // empty for cluster-scoped requests and all-namespace lists
  std::string resource;        // "pods", "deployments", "namespaces", ...
  std::string name;            // empty for a collection
  std::string subresource;     // "status", "scale", "log", "exec", ...
  std::optional<Kind> kind;    // the stored kind, if `resource` is one
};
// nullopt for a path that is not a resource path (discovery, /openapi, /version).
std::optional<ApiPath> ParseApiPath(absl::string_view path);

struct ApiRequest {
  std::string method;
  std::string path;
  std::string content_type;
  std::string accept;
  std::string body;
  std::map<std::string, std::string> params;  // the query parameters (first value of each)
};

struct ApiResponse {
  int code = 200;
  std::string body;  // JSON
};

// Thread-safe: holds no state of its own besides the store (thread-safe) and constants.
class ObjectApi {
 public:
  // `store` must outlive this.
  explicit ObjectApi(ClusterStore* store) : store_(store) {}

  // The answer for the requests described above; nullopt for the others (pods' and nodes' GET,
  // LIST, WATCH, pod create, delete and binding: SimServer's).
  std::optional<ApiResponse> Handle(const ApiRequest& request);

  // The discovery documents of every group the sim serves: the root's paths ("/"), /apis (the
  // APIGroupList: apps and coordination.k8s.io), /apis/GROUP, and the APIResourceList of /api/v1,
  // /apis/apps/v1 and /apis/coordination.k8s.io/v1 with their verbs. nullopt for any other path
  // (/api and /version are SimServer's: /api names the server's address).
  static std::optional<std::string> Discovery(absl::string_view path);

 private:
  ApiResponse Patch(const ApiRequest& request, const ApiPath& path);
  ApiResponse Put(const ApiRequest& request, const ApiPath& path);
  ApiResponse Create(const ApiRequest& request, const ApiPath& path);
  ApiResponse Create(const ApiRequest& request, const ApiPath& path, nlohmann::json body);
  ApiResponse Delete(const ApiRequest& request, const ApiPath& path);
  ApiResponse Get(const ApiRequest& request, const ApiPath& path);
  // GET / PATCH / PUT of a deployment's or a replica set's scale.
  ApiResponse Scale(const ApiRequest& request, const ApiPath& path);
  // Read the object, compute the new one with `change` (given the stored JSON), apply the update
  // rules and store it; retried when a concurrent write got there first (GuaranteedUpdate).
  ApiResponse Update(
      const ApiPath& path,
      const std::function<absl::StatusOr<nlohmann::json>(const nlohmann::json&)>& change,
      bool wants_table);

  ClusterStore* const store_;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_OBJECT_API_H_
