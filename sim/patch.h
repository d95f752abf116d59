// PATCH bodies as the API server applies them (apiserver pkg/endpoints/handlers/patch.go): JSON
// patch (RFC 6902), JSON merge patch (RFC 7386) and Kubernetes' strategic merge patch
// (apimachinery pkg/util/strategicpatch/patch.go) with the patch metadata of the kinds the sim
// serves (the patchStrategy / patchMergeKey tags of k8s.io/api core/v1 and apps/v1 types.go).
// Server-side apply (application/apply-patch+yaml) is not supported. Plain functions.
#ifndef FITLEDGER_SIM_PATCH_H_
#define FITLEDGER_SIM_PATCH_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sim/selectors.h"

namespace fitledger::sim {

enum class PatchType { kJson, kMerge, kStrategicMerge };

// The patch type a PATCH request's Content-Type names (parameters such as "; charset=utf-8"
// ignored). Unimplemented for application/apply-patch+yaml (server-side apply) and InvalidArgument
// for anything else; the HTTP layer answers both 415 UnsupportedMediaType.
absl::StatusOr<PatchType> PatchTypeOf(absl::string_view content_type);

// How a list field merges in a strategic merge patch: by merge key (a list of objects), as a set
// (a list of scalars with patchStrategy merge), or replaced whole (no patch strategy).
struct ListPatchMeta {
  bool merge = false;
  std::string merge_key;  // empty for a set of scalars
};
// The patch metadata of the list at `path` in an object of `kind`: dotted field names, "[]" for
// a list's items (e.g. "spec.containers", "spec.containers[].env"). A Deployment's or a
// ReplicaSet's "spec.template.X" is a pod's "X".
ListPatchMeta ListMetaOf(Kind kind, absl::string_view path);

// `original` with `patch` (the request body) applied. InvalidArgument (400 BadRequest) for a
// patch that is not the expected JSON (a JSON patch not an array of operations, a merge or
// strategic patch not an object, an unknown $patch directive, a list without a merge key given
// $patch); FailedPrecondition (422) when a JSON patch's operation fails (a path that does not
// exist, a failed "test").
absl::StatusOr<nlohmann::json> ApplyPatch(PatchType type, Kind kind, const nlohmann::json& original,
                                          absl::string_view patch);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_PATCH_H_
