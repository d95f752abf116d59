// Field validation of a request body, as the API server's strict decoding does it: the fields a
// JSON body names that its kind's Go type does not have (apimachinery pkg/runtime/error.go
// strictDecodingError; sigs.k8s.io/json UnmarshalStrict, which names each one by its path:
// `unknown field "spec.containers[0].imagePullPolcy"`), and what the request's `fieldValidation`
// says to do with them (apiserver pkg/endpoints/handlers/create.go, update.go): Strict refuses the
// request (400), Warn (the default) answers `Warning: 299 - "unknown field ..."` headers, Ignore
// says nothing. The known fields are those of k8s.io/api's types, generated from Kubernetes' own
// OpenAPI documents (sim/known_fields.inc, sim/tools/gen_known_fields.py). Plain functions.
#ifndef FITLEDGER_SIM_FIELD_VALIDATION_H_
#define FITLEDGER_SIM_FIELD_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/selectors.h"

namespace fitledger::sim {

enum class FieldValidation { kIgnore, kWarn, kStrict };

// The `fieldValidation` query parameter: "" is Warn (handlers/rest.go fieldValidation).
// FailedPrecondition (422) for another value, with the API server's message
// (`CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "X": supported
// values: "Ignore", "Strict", "Warn"`; `options_kind` is "CreateOptions", "UpdateOptions").
absl::StatusOr<FieldValidation> ParseFieldValidation(absl::string_view value,
                                                     absl::string_view options_kind);

// The strict decoding errors of `body` (JSON) as an object of `kind`, in the body's order, each
// once: `unknown field "PATH"` for a field the type does not have. (Not `duplicate field`: the
// sim's JSON reader keeps one of the two.) Empty for a body that is not a JSON object, and for
// kinds without a known type (Events: not checked).
std::vector<std::string> StrictDecodingErrors(Kind kind, absl::string_view body);

// What `validation` makes of `errors` for a body of `kind` (Pod, Deployment, ...) in `version`:
// OK with `warnings` to send (Warn) or none (Ignore, or no errors); InvalidArgument (400) under
// Strict: `Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field
// "a", unknown field "b"` (handlers/rest.go transformDecodeError).
absl::Status ApplyFieldValidation(FieldValidation validation, absl::string_view kind,
                                  absl::string_view version, const std::vector<std::string>& errors,
                                  std::vector<std::string>* warnings);

// A Warning header's value for `text` (apiserver pkg/endpoints/filters/warning.go, with
// k8s.io/apimachinery/pkg/util/net NewWarningHeader): `299 - "TEXT"`, `"` and `\` escaped.
std::string WarningHeader(absl::string_view text);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_FIELD_VALIDATION_H_
