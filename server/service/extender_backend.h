// The extender's verbs as a webhook::Backend, in process: fitledger-server's own webhook calls it
// directly, and its gRPC Extender service (grpc_services.h) adapts gRPC calls to it, so both doors
// run one path. Filter, Prioritize and Preempt answer on the calling thread (the ledger's lock
// shared, plus the extender's filter cache, which Filter writes under its own lock: microseconds,
// no I/O); Bind runs on the bind pool (it waits for the Kubernetes API) and answers from there.
#ifndef FITLEDGER_SERVER_SERVICE_EXTENDER_BACKEND_H_
#define FITLEDGER_SERVER_SERVICE_EXTENDER_BACKEND_H_

#include <functional>

#include "absl/status/status.h"
#include "common/worker_pool.h"
#include "server/service/extender.h"
#include "server/service/rpc_metrics.h"
#include "webhook/backend.h"

namespace fitledger {

// Thread-safe (stateless over Extender).
class ExtenderBackend final : public webhook::Backend {
 public:
  // `extender`, `bind_pool` and `metrics` must outlive this; `ready` is OK when the verbs can be
  // answered (the view is synced and the server is not shutting down), else Unavailable.
  ExtenderBackend(Extender* extender, WorkerPool* bind_pool, RpcMetrics* metrics,
                  std::function<absl::Status()> ready);

  void Filter(const Pod& pod, absl::Span<const absl::string_view> candidates,
              FilterDone done) override;
  void Prioritize(const Pod& pod, absl::Span<const absl::string_view> candidates,
                  PrioritizeDone done) override;
  void Bind(const BindArgs& args, StatusDone done) override;
  void Preempt(const PreemptArgs& args, PreemptDone done) override;
  void CheckReady(StatusDone done) override;

 private:
  // Constant after construction.
  Extender* const extender_;
  WorkerPool* const bind_pool_;
  RpcMetrics* const metrics_;
  const std::function<absl::Status()> ready_;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_EXTENDER_BACKEND_H_
