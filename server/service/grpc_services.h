// The gRPC services: proto in, the plain Extender / Ledger, proto out.
#ifndef FITLEDGER_SERVER_SERVICE_GRPC_SERVICES_H_
#define FITLEDGER_SERVER_SERVICE_GRPC_SERVICES_H_

#include <deque>
#include <functional>

#include "absl/status/status.h"
#include "common/metrics.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "fitledger/v1/introspection.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/kube/watcher.h"
#include "server/service/extender.h"
#include "server/service/message_pool.h"

namespace fitledger {

// The one place an absl::Status becomes a grpc::Status (same canonical code and message).
grpc::Status ToGrpcStatus(const absl::Status& status);
// And back (the unary listener answers with an absl::Status).
absl::Status FromGrpcStatus(const grpc::Status& status);

// Per-rpc request counts and latency, shared by the services.
struct RpcMetrics {
  explicit RpcMetrics(MetricsRegistry* registry);
  void Record(const char* method, const absl::Status& status, absl::Duration elapsed);
  CounterFamily* requests;
  HistogramFamily* latency;
};

// Thread-safe (stateless over Extender).
// Filter and Prioritize never block (one reader lock, microseconds): they run inline on gRPC's
// callback threads, without the sync server's hand-off to a worker thread, and reuse pooled
// request/response messages (MessagePool). Bind (an API call) and Preempt stay on the sync
// thread pool.
class ExtenderService final
    : public v1::Extender::WithCallbackMethod_Filter<
          v1::Extender::WithCallbackMethod_Prioritize<v1::Extender::Service>> {
 public:
  // `extender` and `metrics` must outlive this.
  ExtenderService(Extender* extender, RpcMetrics* metrics);

  grpc::ServerUnaryReactor* Filter(grpc::CallbackServerContext* context,
                                   const v1::ExtenderArgs* args,
                                   v1::ExtenderFilterResult* result) override;
  grpc::ServerUnaryReactor* Prioritize(grpc::CallbackServerContext* context,
                                       const v1::ExtenderArgs* args,
                                       v1::HostPriorityList* result) override;
  grpc::Status Bind(grpc::ServerContext* context, const v1::ExtenderBindingArgs* args,
                    v1::ExtenderBindingResult* result) override;
  grpc::Status Preempt(grpc::ServerContext* context, const v1::ExtenderPreemptionArgs* args,
                       v1::ExtenderPreemptionResult* result) override;

  // The handlers' bodies, callable in process (the server's own webhook listener).
  grpc::Status DoFilter(const v1::ExtenderArgs* args, v1::ExtenderFilterResult* result);
  grpc::Status DoPrioritize(const v1::ExtenderArgs* args, v1::HostPriorityList* result);
  // The same on the unary listener's bytes: the request read in place (extender_wire.h), the
  // result appended to `out` as an ExtenderFilterResult / HostPriorityList. Same checks, answers
  // and metrics. `by_index`: the request's reply_node_indexes.
  grpc::Status FilterToWire(const v1::Pod& pod, absl::Span<const absl::string_view> names,
                            bool by_index, std::string* out);
  grpc::Status PrioritizeToWire(const v1::Pod& pod, absl::Span<const absl::string_view> names,
                                std::string* out);

  // Whether a finished call's messages go back to the pool: not when the request carried full
  // Node objects or a huge candidate list, so one large call does not pin its memory. O(1): it
  // runs on every Filter and Prioritize.
  static constexpr int kPooledCandidateNames = 20000;
  static bool KeepPooled(const v1::ExtenderArgs& args);

 private:
  Extender* const extender_;
  RpcMetrics* const metrics_;
  MessagePool<v1::ExtenderArgs, v1::ExtenderFilterResult> filter_messages_{64, KeepPooled};
  MessagePool<v1::ExtenderArgs, v1::HostPriorityList> prioritize_messages_{64, KeepPooled};
};

// Read-only. Thread-safe.
class IntrospectionService final : public v1::Introspection::Service {
 public:
  using RejectionSource = std::function<std::pair<std::deque<kube::KubeletRejection>, uint64_t>()>;
  // `ledger` must outlive this. `synced` and `rejections` are called per request.
  // `pods_resource_version` returns the view's last applied pods resourceVersion.
  IntrospectionService(const Ledger* ledger, bool ledger_enabled, std::function<bool()> synced,
                       std::function<std::string()> pods_resource_version,
                       RejectionSource rejections, RpcMetrics* metrics);

  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;
  grpc::Status ListAssumed(grpc::ServerContext* context, const v1::ListAssumedRequest* request,
                           v1::ListAssumedResponse* response) override;
  grpc::Status Explain(grpc::ServerContext* context, const v1::ExplainRequest* request,
                       v1::ExplainResponse* response) override;
  grpc::Status ListRejections(grpc::ServerContext* context,
                              const v1::ListRejectionsRequest* request,
                              v1::ListRejectionsResponse* response) override;

 private:
  const Ledger* const ledger_;
  const bool ledger_enabled_;
  const std::function<bool()> synced_;
  const std::function<std::string()> pods_resource_version_;
  const RejectionSource rejections_;
  RpcMetrics* const metrics_;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_GRPC_SERVICES_H_
