// The OpenAPI v3 documents fitledger-sim serves for kubectl (apiserver's /openapi/v3 handler,
// k8s.io/kube-openapi pkg/handler3): the root lists one document per group-version, each a
// minimal but valid OpenAPI 3.0 document with the paths and operations the sim serves, tagged
// with x-kubernetes-group-version-kind and x-kubernetes-action, and a schema per kind.
//
// What kubectl reads in them (k8s.io/cli-runtime pkg/resource query_param_verifier_v3.go
// supportsQueryParamV3): a PATCH operation for the kind with the `fieldValidation` query
// parameter means the server validates, so `kubectl create -f` / `apply -f` need no client-side
// schema (no --validate=false). The PATCH operations declare no requestBody, so `kubectl apply`
// computes its strategic merge patch from the types compiled into kubectl (patcher.go
// gvkSupportsPatchOpenAPIV3 falls back), which is what it would send a real API server. The
// schemas describe only each kind's top-level fields (kubectl explain shows those). /openapi/v2
// (protobuf) is not served: 404, which kubectl tolerates where it asks for it.
#ifndef FITLEDGER_SIM_OPENAPI_H_
#define FITLEDGER_SIM_OPENAPI_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace fitledger::sim {

// The body of GET /openapi/v3: {"paths": {"api/v1": {"serverRelativeURL":
// "/openapi/v3/api/v1?hash=..."}, "apis/apps/v1": {...}}}.
std::string OpenApiV3Root();

// The document for `group_version_path` ("api/v1", "apis/apps/v1"); nullopt for any other.
std::optional<std::string> OpenApiV3Document(absl::string_view group_version_path);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_OPENAPI_H_
