// The API server's per-kind rules that fitledger-sim applies when an object is created or
// updated through the API (the registry strategies: PrepareForCreate / PrepareForUpdate,
// defaults, Validate / ValidateUpdate), for the kinds and fields the sim models. Pods are created
// by ClusterStore::CreatePod; everything else goes through here first. Plain functions.
#ifndef FITLEDGER_SIM_API_OBJECTS_H_
#define FITLEDGER_SIM_API_OBJECTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sim/config.h"
#include "sim/selectors.h"

namespace fitledger::sim {

// A new Deployment, ReplicaSet or Event from a POST body, ready for ClusterStore::CreateObject:
// apiVersion / kind checked, defaults applied (apps/v1 defaults.go SetDefaults_Deployment,
// SetDefaults_ReplicaSet, core/v1 SetDefaults_PodSpec for the template), metadata.generation 1
// and the status cleared (deployment / replicaset strategy.go PrepareForCreate), and validated
// (apps validation.go ValidateDeploymentSpec / ValidateReplicaSetSpec: a selector that matches
// the template's labels, replicas >= 0, a template with containers and valid resources).
// InvalidArgument (400) for a wrong apiVersion / kind, a namespace that differs from the URL's,
// or wrong JSON types; FailedPrecondition (422 Invalid) for a validation error, worded as the API
// server words it (`Deployment.apps "web" is invalid: spec.selector: Required value`).
absl::StatusOr<nlohmann::json> PrepareCreate(Kind kind, absl::string_view path_namespace,
                                             nlohmann::json object);

// A Node from a POST body, for ClusterStore::AddNode: its name, labels, and status.allocatable
// (or status.capacity), which the simulated kubelet needs. FailedPrecondition (422) without them.
absl::StatusOr<NodeSpec> NodeSpecFromObject(const nlohmann::json& node);

enum class Subresource { kMain, kStatus };

// What decoding a create's or an update's body into the kind refuses, before anything else is
// checked (the handler decodes first: apiserver endpoints/handlers/create.go, update.go):
// InvalidArgument (400) for a wrong apiVersion / kind or wrong JSON types (for Leases, the spec's
// too). PrepareCreate and PrepareUpdate check the same again.
absl::Status CheckDecodable(Kind kind, const nlohmann::json& object);

// The handlers' namespace rule for a create's or an update's body
// (rest.EnsureObjectNamespaceMatchesRequestNamespace): InvalidArgument (400) when a namespaced
// object names another namespace than the URL's.
absl::Status CheckRequestNamespace(Kind kind, const nlohmann::json& object,
                                   absl::string_view path_namespace);

// The object an update stores, from the stored `old` and the requested `updated` (a PUT body, or
// `old` with a patch applied), as the API server's update does (apiserver rest/update.go
// BeforeUpdate and the kind's strategy):
// - the name must be the URL's (`url_name`; 400 BadRequest otherwise), apiVersion / kind the
//   kind's (400), metadata.uid unchanged (422), metadata.resourceVersion, when given, the stored
//   one (409 Conflict: Aborted);
// - the main resource never changes status (PrepareForUpdate copies the old status); the status
//   subresource changes only status (metadata and spec are the old ones);
// - pods: ValidatePodUpdate (pkg/apis/core/validation/validation.go): besides metadata, only
//   spec.containers[*].image, spec.initContainers[*].image, spec.activeDeadlineSeconds (set or
//   lowered), spec.tolerations (additions), spec.terminationGracePeriodSeconds (to 1 from a
//   negative value) and removals from spec.schedulingGates may change (422 Forbidden otherwise);
//   a PUT body's missing defaulted fields are the stored ones;
// - deployments and replica sets: spec.selector is immutable (422); metadata.generation grows by
//   one when spec changes (strategy.go PrepareForUpdate); the spec is validated as on create.
absl::StatusOr<nlohmann::json> PrepareUpdate(Kind kind, Subresource subresource,
                                             const nlohmann::json& old, nlohmann::json updated,
                                             absl::string_view url_name);

// Whether `labels` (an object of strings, or null) match a metav1.LabelSelector `selector`
// (matchLabels and matchExpressions: In, NotIn, Exists, DoesNotExist; apimachinery
// pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector). An empty selector matches everything.
// InvalidArgument for a malformed selector.
absl::StatusOr<bool> SelectorMatches(const nlohmann::json& selector, const nlohmann::json& labels);

// The Scale subresource (autoscaling/v1 Scale) of a Deployment or ReplicaSet: metadata (name,
// namespace, uid, resourceVersion, creationTimestamp), spec.replicas, status.replicas and
// status.selector (the label selector as a string), as pkg/registry/apps/deployment/storage
// scaleFromDeployment builds it.
nlohmann::json ScaleOf(const nlohmann::json& workload);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_API_OBJECTS_H_
