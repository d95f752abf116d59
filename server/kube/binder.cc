#include "server/kube/binder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/kube/api_client.h"
#include "server/kube/objects.h"

namespace fitledger::kube {
namespace {

std::string PodPath(const std::string& namespace_name, const std::string& name) {
  return absl::StrCat("/api/v1/namespaces/", namespace_name, "/pods/", name);
}

// The message of a Kubernetes Status body, or the body itself (truncated).
std::string StatusMessage(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  return body.substr(0, 300);
}

}  // namespace

ApiBinder::ApiBinder(ApiTransport* client, absl::Duration timeout)
    : client_(client), timeout_(timeout) {}

absl::Duration ApiBinder::TimeoutFor(absl::Time deadline) const {
  return std::min(timeout_, deadline - absl::Now());
}

BindResult ApiBinder::Bind(const std::string& namespace_name, const std::string& name,
                           const std::string& uid, const std::string& node, absl::Time deadline) {
  BindResult result;
  const absl::Duration timeout = TimeoutFor(deadline);
  if (timeout < absl::Milliseconds(1)) {
    result.outcome = BindOutcome::kUnreachable;
    result.message = "no time was left for the binding POST: it was not sent";
    return result;
  }
  nlohmann::json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata", {{"name", name}, {"namespace", namespace_name}, {"uid", uid}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}},
  };
  absl::StatusOr<HttpResponse> response =
      client_->Request("POST", PodPath(namespace_name, name) + "/binding", binding.dump(), timeout);
  if (!response.ok()) {
    // Unavailable: nothing was sent. A timeout or a broken connection: it may have been applied.
    result.outcome =
        absl::IsUnavailable(response.status()) ? BindOutcome::kUnreachable : BindOutcome::kUnknown;
    result.message = std::string(response.status().message());
    return result;
  }
  if (response->code == 200 || response->code == 201) {
    result.outcome = BindOutcome::kBound;
    return result;
  }
  result.message =
      absl::StrCat("binding POST answered ", response->code, ": ", StatusMessage(response->body));
  if (response->code == 404) {
    result.outcome = BindOutcome::kPodGone;
    return result;
  }
  const bool server_error = response->code >= 500;
  if (response->code == 409 || response->code == 429 || server_error) {
    // 409: already assigned, or the UID precondition failed. 429: refused before it was
    // handled. 5xx (500, 503, 504, ...): the API server answered without saying whether the
    // binding was written; it may be applied later still. Ask the API what it shows now.
    absl::StatusOr<Pod> pod = GetPod(namespace_name, name, deadline);
    if (!pod.ok()) {
      if (absl::IsNotFound(pod.status())) {
        result.outcome = BindOutcome::kPodGone;
      } else if (response->code == 429) {
        result.outcome = BindOutcome::kUnreachable;  // refused unhandled: nothing was applied
      } else {
        result.outcome = BindOutcome::kUnknown;
        absl::StrAppend(&result.message, "; the pod could not be read: ", pod.status().message());
      }
      return result;
    }
    if (!uid.empty() && pod->uid != uid) {
      result.outcome = BindOutcome::kPodGone;
    } else if (pod->node_name == node) {
      result.outcome = BindOutcome::kAlreadyBound;
    } else if (!pod->node_name.empty()) {
      result.outcome = BindOutcome::kBoundElsewhere;
      result.node = pod->node_name;
    } else if (server_error) {
      result.outcome = BindOutcome::kUnknown;  // unbound for now; the write may still land
      absl::StrAppend(&result.message, "; the pod is unbound for now");
    } else {
      result.outcome = BindOutcome::kRejected;  // answered, not applied, and still unbound
    }
    return result;
  }
  result.outcome = BindOutcome::kRejected;
  return result;
}

absl::StatusOr<Pod> ApiBinder::GetPod(const std::string& namespace_name, const std::string& name,
                                      absl::Time deadline) {
  const absl::Duration timeout = TimeoutFor(deadline);
  if (timeout < absl::Milliseconds(1)) {
    return absl::DeadlineExceededError(
        absl::StrCat("no time was left to GET pod ", namespace_name, "/", name));
  }
  absl::StatusOr<HttpResponse> response =
      client_->Request("GET", PodPath(namespace_name, name), "", timeout);
  if (!response.ok()) return response.status();
  if (response->code == 404) {
    return absl::NotFoundError(absl::StrCat("pod ", namespace_name, "/", name, " not found"));
  }
  if (response->code != 200) {
    return absl::UnavailableError(absl::StrCat("GET pod ", namespace_name, "/", name, ": HTTP ",
                                               response->code, ": ",
                                               StatusMessage(response->body)));
  }
  return ParsePod(response->body);
}

}  // namespace fitledger::kube
