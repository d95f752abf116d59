#include "sim/status.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "model/resources.h"

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

std::string GoQuote(absl::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\v':
        out += "\\v";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::vector<std::string> Dns1123SubdomainErrors(absl::string_view field, absl::string_view value) {
  return Dns1123SubdomainErrors(field, value, value);
}

std::vector<std::string> Dns1123SubdomainErrors(absl::string_view field, absl::string_view shown,
                                                absl::string_view value) {
  std::vector<std::string> errors;
  const std::string prefix = absl::StrCat(field, ": Invalid value: ", GoQuote(shown), ": ");
  if (value.size() > 253) {
    errors.push_back(absl::StrCat(prefix, "must be no more than 253 characters"));
  }
  if (!MatchesDns1123SubdomainPattern(value)) {
    errors.push_back(absl::StrCat(
        prefix,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
        "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
        "used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
  }
  return errors;
}

}  // namespace fitledger::sim
