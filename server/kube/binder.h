// Posting bindings to, and reading pods from, the Kubernetes API: the side effects of Bind and
// of reconciliation, behind an interface so the service can be tested with a fake.
#ifndef FITLEDGER_SERVER_KUBE_BINDER_H_
#define FITLEDGER_SERVER_KUBE_BINDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/model/pod.h"

namespace fitledger::kube {

class ApiClient;

enum class BindOutcome {
  kBound,           // 201: bound now
  kAlreadyBound,    // 409 / 5xx, and a GET shows the pod on the requested node: success
  kBoundElsewhere,  // 409 / 5xx, and the pod is on another node (`node` says which)
  kPodGone,         // 404, or the pod by that name has another UID
  kRejected,        // any other 4xx, or a 5xx after which a GET shows the pod still unbound
  kUnreachable,     // the API could not be reached, or refused the request before handling
                    // it (503 / 429) and cannot be asked either: nothing was applied
  kUnknown,         // timeout, connection lost, or a 5xx and the GET failed too: the binding
                    // may or may not have happened
};

struct BindResult {
  BindOutcome outcome = BindOutcome::kUnknown;
  std::string node;     // kBoundElsewhere: where the pod is
  std::string message;  // for errors
};

// Thread-safe.
class Binder {
 public:
  virtual ~Binder() = default;
  // POSTs the Binding of pod namespace/name (with its UID as a precondition) to `node`.
  virtual BindResult Bind(const std::string& namespace_name, const std::string& name,
                          const std::string& uid, const std::string& node) = 0;
  // GETs a pod. NotFound when it does not exist; Unavailable / DeadlineExceeded when the API
  // cannot answer.
  virtual absl::StatusOr<Pod> GetPod(const std::string& namespace_name,
                                     const std::string& name) = 0;
};

// The real one, over the API client.
class ApiBinder : public Binder {
 public:
  // `client` must outlive this.
  ApiBinder(ApiClient* client, absl::Duration timeout);
  BindResult Bind(const std::string& namespace_name, const std::string& name,
                  const std::string& uid, const std::string& node) override;
  absl::StatusOr<Pod> GetPod(const std::string& namespace_name, const std::string& name) override;

 private:
  ApiClient* const client_;
  const absl::Duration timeout_;
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_BINDER_H_
