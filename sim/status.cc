#include "sim/status.h"

namespace fitledger::sim {

using nlohmann::json;

std::string ReasonForCode(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

json StatusObject(int code, absl::string_view reason, absl::string_view message) {
  return json{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
              {"status", "Failure"}, {"message", message}, {"reason", reason},
              {"code", code}};
}

HttpError HttpErrorOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return {400, "BadRequest"};
    case absl::StatusCode::kFailedPrecondition:
      return {422, "Invalid"};
    case absl::StatusCode::kNotFound:
      return {404, "NotFound"};
    case absl::StatusCode::kAlreadyExists:
      return {409, "AlreadyExists"};
    case absl::StatusCode::kAborted:
      return {409, "Conflict"};
    case absl::StatusCode::kOutOfRange:
      return {410, "Expired"};
    case absl::StatusCode::kUnavailable:
      return {503, "ServiceUnavailable"};
    case absl::StatusCode::kUnimplemented:
      return {415, "UnsupportedMediaType"};
    case absl::StatusCode::kPermissionDenied:
      return {405, "MethodNotAllowed"};
    default:
      return {500, "InternalError"};
  }
}

}  // namespace fitledger::sim
