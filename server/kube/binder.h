// Posting bindings to, and reading pods from, the Kubernetes API: the side effects of Bind and
// of reconciliation, behind an interface so the service can be tested with a fake.
#ifndef FITLEDGER_SERVER_KUBE_BINDER_H_
#define FITLEDGER_SERVER_KUBE_BINDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model/pod.h"

namespace fitledger::kube {

class ApiTransport;

enum class BindOutcome {
  kBound,           // 201: bound now
  kAlreadyBound,    // 409 / 429 / 5xx, and a GET shows the pod on the requested node: success
  kBoundElsewhere,  // 409 / 429 / 5xx, and the pod is on another node (`node` says which)
  kPodGone,         // 404, or the pod by that name has another UID
  kRejected,        // any other 4xx, or a 409 / 429 after which a GET shows the pod unbound
  kUnreachable,     // nothing was applied: the API could not be reached (nothing was sent), the
                    // deadline had passed before the POST, or a 429 (refused before handling)
                    // and the GET failed too
  kUnknown,         // timeout, connection lost, a 5xx (500, 503, 504: the API server may still
                    // apply the binding) with the pod unbound or unreadable, or a 409 and the
                    // GET failed: the binding may or may not have happened
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
  // POSTs the Binding of pod namespace/name (with its UID as a precondition) to `node`, and (after
  // a 409, 429 or 5xx) GETs the pod to learn what happened. Everything ends by `deadline`: no
  // request is sent once it has passed, and a request still running then is abandoned (its
  // outcome unknown).
  virtual BindResult Bind(const std::string& namespace_name, const std::string& name,
                          const std::string& uid, const std::string& node, absl::Time deadline) = 0;
  // GETs a pod, within `deadline`. NotFound when it does not exist; Unavailable /
  // DeadlineExceeded when the API cannot answer in time.
  virtual absl::StatusOr<Pod> GetPod(const std::string& namespace_name, const std::string& name,
                                     absl::Time deadline) = 0;
};

// The real one, over the API client.
class ApiBinder : public Binder {
 public:
  // `client` must outlive this. `timeout` caps each request (the binding POST, a GET); the
  // caller's deadline can only shorten it.
  ApiBinder(ApiTransport* client, absl::Duration timeout);
  BindResult Bind(const std::string& namespace_name, const std::string& name,
                  const std::string& uid, const std::string& node, absl::Time deadline) override;
  absl::StatusOr<Pod> GetPod(const std::string& namespace_name, const std::string& name,
                             absl::Time deadline) override;

 private:
  // min(timeout_, deadline - now); zero or less when the deadline has passed.
  absl::Duration TimeoutFor(absl::Time deadline) const;

  ApiTransport* const client_;
  const absl::Duration timeout_;
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_BINDER_H_
