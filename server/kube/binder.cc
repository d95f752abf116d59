#include "server/kube/binder.h"

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

ApiBinder::ApiBinder(ApiClient* client, absl::Duration timeout)
    : client_(client), timeout_(timeout) {}

BindResult ApiBinder::Bind(const std::string& namespace_name, const std::string& name,
                           const std::string& uid, const std::string& node) {
  nlohmann::json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata", {{"name", name}, {"namespace", namespace_name}, {"uid", uid}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}},
  };
  absl::StatusOr<HttpResponse> response = client_->Request(
      "POST", PodPath(namespace_name, name) + "/binding", binding.dump(), timeout_);
  BindResult result;
  if (!response.ok()) {
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
  if (response->code == 409 || response->code >= 500 || response->code == 429) {
    // 409: already assigned, or the UID precondition failed. 5xx / 429: the API answered but
    // did not say what happened. Ask the API which; if it cannot say, the outcome is unknown.
    absl::StatusOr<Pod> pod = GetPod(namespace_name, name);
    if (!pod.ok()) {
      if (absl::IsNotFound(pod.status())) {
        result.outcome = BindOutcome::kPodGone;
      } else if (response->code == 503 || response->code == 429) {
        // Refused before it was handled (client-go retries these even for a POST): nothing
        // was applied.
        result.outcome = BindOutcome::kUnreachable;
      } else {
        result.outcome = BindOutcome::kUnknown;  // a 500 / 504 may come after the write
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
    } else {
      result.outcome = BindOutcome::kRejected;  // answered, and the pod is still unbound
    }
    return result;
  }
  result.outcome = BindOutcome::kRejected;
  return result;
}

absl::StatusOr<Pod> ApiBinder::GetPod(const std::string& namespace_name, const std::string& name) {
  absl::StatusOr<HttpResponse> response =
      client_->Request("GET", PodPath(namespace_name, name), "", timeout_);
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
