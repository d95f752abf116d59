// The extender behind the webhook: kube-scheduler's four verbs on the model's types
// (model/extender_args.h), answered through completions.
// fitledger-server implements it in process (server/service/extender_backend.h), fitledger-shim
// over gRPC (client/shim/grpc_backend.h). The webhook decodes the JSON, calls a Backend, and
// encodes its answer; a Backend never sees JSON or HTTP.
#ifndef FITLEDGER_WEBHOOK_BACKEND_H_
#define FITLEDGER_WEBHOOK_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/extender_args.h"
#include "model/filter_result.h"
#include "model/pod.h"

namespace fitledger::webhook {

// Prioritize's answer: scores 0..10 by candidate position (candidates not listed get none).
struct PrioritizeAnswer {
  absl::Status status;
  std::vector<std::pair<size_t, int64_t>> scores;
};

// Error codes, for every verb: InvalidArgument (a bad pod or request), FailedPrecondition (it no
// longer fits), NotFound (unknown pod or node), Unavailable (not synced, the Kubernetes API or
// fitledger-server unreachable; for Bind also: the outcome is unknown), DeadlineExceeded. The
// message names the component that failed.
//
// Thread-safe. Each method calls `done` exactly once, on any thread, possibly before it returns.
// The arguments are read only until the method returns; the answers name candidates by position.
class Backend {
 public:
  // Filter's answer: the result, or why the call failed (the error codes below).
  using FilterDone = absl::AnyInvocable<void(absl::StatusOr<FilterResult> answer)>;
  using PrioritizeDone = absl::AnyInvocable<void(PrioritizeAnswer answer)>;
  using StatusDone = absl::AnyInvocable<void(absl::Status status)>;
  // Preempt's answer: the victims the extender agrees to, by node (NodeNameToMetaVictims).
  using PreemptDone = absl::AnyInvocable<void(absl::StatusOr<NodeVictims> answer)>;

  virtual ~Backend() = default;

  // Which of `candidates` (kube-scheduler's NodeNames, or the names of its Nodes) fit `pod`.
  virtual void Filter(const Pod& pod, absl::Span<const absl::string_view> candidates,
                      FilterDone done) = 0;
  virtual void Prioritize(const Pod& pod, absl::Span<const absl::string_view> candidates,
                          PrioritizeDone done) = 0;
  // Binds the pod; OK when it is bound to args.node. May take seconds (the binding POST): a
  // Backend must not hold the calling thread for it.
  virtual void Bind(const BindArgs& args, StatusDone done) = 0;
  virtual void Preempt(const PreemptArgs& args, PreemptDone done) = 0;
  // OK when the extender can answer the verbs; Unavailable with the reason otherwise.
  virtual void CheckReady(StatusDone done) = 0;
};

}  // namespace fitledger::webhook

#endif  // FITLEDGER_WEBHOOK_BACKEND_H_
