// Kubernetes Status objects, the body of every error the sim answers (apimachinery
// pkg/api/errors: kind Status, status Failure, message, reason, code).
#ifndef FITLEDGER_SIM_STATUS_H_
#define FITLEDGER_SIM_STATUS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace fitledger::sim {

// The Content-Type of the sim's JSON answers.
inline constexpr char kJsonContentType[] = "application/json; charset=utf-8";

// The StatusReason the API server uses with `code` ("NotFound" for 404, ...); "Unknown" if none.
std::string ReasonForCode(int code);

// A Status object of `code`, `reason` and `message`.
nlohmann::json StatusObject(int code, absl::string_view reason, absl::string_view message);

// The HTTP code and reason for a store or handler error, as sim/store.h maps them:
// InvalidArgument 400 BadRequest, FailedPrecondition 422 Invalid, NotFound 404, AlreadyExists
// 409 AlreadyExists, Aborted 409 Conflict, OutOfRange 410 Expired, Unavailable 503,
// Unimplemented 415 UnsupportedMediaType, PermissionDenied 405 MethodNotAllowed; anything else
// 500 InternalError.
struct HttpError {
  int code;
  std::string reason;
};
HttpError HttpErrorOf(const absl::Status& status);

// `value` quoted as Go's %q (strconv.Quote) quotes it, as Kubernetes' messages show values: \" and
// \\, \a \b \f \n \r \t \v, other ASCII control bytes as \xNN; other bytes as they are.
std::string GoQuote(absl::string_view value);

// The field errors of a name that must be a DNS subdomain (apimachinery
// pkg/util/validation/validation.go IsDNS1123Subdomain: more than 253 characters, then the
// pattern), each "<field>: Invalid value: \"<value>\": <message>" as field.ErrorList renders it;
// none for a valid name. Node names (ValidateNodeName), Lease names (NameIsDNSSubdomain).
std::vector<std::string> Dns1123SubdomainErrors(absl::string_view field, absl::string_view value);
// The same for `checked`, reported as `shown` (a generateName: checked with its trailing dash
// masked, NameIsDNSSubdomain with prefix, and shown as given).
std::vector<std::string> Dns1123SubdomainErrors(absl::string_view field, absl::string_view shown,
                                                absl::string_view checked);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_STATUS_H_
