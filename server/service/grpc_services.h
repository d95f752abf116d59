// fitledger-server's gRPC services, on gRPC's own server with the callback API: proto in, the
// plain Extender (through ExtenderBackend) / Ledger, proto out. Only these files and server_app.cc
// include gRPC headers on the server side.
#ifndef FITLEDGER_SERVER_SERVICE_GRPC_SERVICES_H_
#define FITLEDGER_SERVER_SERVICE_GRPC_SERVICES_H_

#include <deque>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "fitledger/v1/introspection.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/kube/watcher.h"
#include "server/ledger/ledger.h"
#include "server/service/message_pool.h"
#include "server/service/rpc_metrics.h"
#include "webhook/backend.h"

namespace fitledger {

// The one place an absl::Status becomes a grpc::Status (same canonical code and message).
grpc::Status ToGrpcStatus(const absl::Status& status);

// fitledger.v1.Extender over a webhook::Backend (ExtenderBackend: the same path as the webhook's).
// Every method returns at once: Filter, Prioritize and Preempt are answered on gRPC's callback
// thread, Bind from the bind pool when the binding is done. Thread-safe.
class ExtenderService final : public v1::Extender::CallbackService {
 public:
  // `backend` must outlive this.
  explicit ExtenderService(webhook::Backend* backend);

  grpc::ServerUnaryReactor* Filter(grpc::CallbackServerContext* context,
                                   const v1::ExtenderArgs* args,
                                   v1::ExtenderFilterResult* result) override;
  grpc::ServerUnaryReactor* Prioritize(grpc::CallbackServerContext* context,
                                       const v1::ExtenderArgs* args,
                                       v1::HostPriorityList* result) override;
  grpc::ServerUnaryReactor* Bind(grpc::CallbackServerContext* context,
                                 const v1::ExtenderBindingArgs* args,
                                 v1::ExtenderBindingResult* result) override;
  grpc::ServerUnaryReactor* Preempt(grpc::CallbackServerContext* context,
                                    const v1::ExtenderPreemptionArgs* args,
                                    v1::ExtenderPreemptionResult* result) override;

  // Whether a finished call's messages go back to the pool: not when the request carried full
  // Node objects or a huge candidate list, so one large call does not pin its memory. O(1).
  static constexpr int kPooledCandidateNames = 20000;
  static bool KeepPooled(const v1::ExtenderArgs& args);

 private:
  webhook::Backend* const backend_;
  MessagePool<v1::ExtenderArgs, v1::ExtenderFilterResult> filter_messages_{64, KeepPooled};
  MessagePool<v1::ExtenderArgs, v1::HostPriorityList> prioritize_messages_{64, KeepPooled};
};

// fitledger.v1.Introspection: read-only, answered on gRPC's callback threads. Thread-safe.
class IntrospectionService final : public v1::Introspection::CallbackService {
 public:
  using RejectionSource = std::function<std::pair<std::deque<kube::KubeletRejection>, uint64_t>()>;
  // `ledger` and `metrics` must outlive this. `synced` and `rejections` are called per request;
  // `pods_resource_version` returns the view's last applied pods resourceVersion.
  IntrospectionService(const Ledger* ledger, bool ledger_enabled, std::function<bool()> synced,
                       std::function<std::string()> pods_resource_version,
                       RejectionSource rejections, RpcMetrics* metrics);

  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const v1::ListNodesRequest* request,
                                      v1::ListNodesResponse* response) override;
  grpc::ServerUnaryReactor* ListAssumed(grpc::CallbackServerContext* context,
                                        const v1::ListAssumedRequest* request,
                                        v1::ListAssumedResponse* response) override;
  grpc::ServerUnaryReactor* Explain(grpc::CallbackServerContext* context,
                                    const v1::ExplainRequest* request,
                                    v1::ExplainResponse* response) override;
  grpc::ServerUnaryReactor* ListRejections(grpc::CallbackServerContext* context,
                                           const v1::ListRejectionsRequest* request,
                                           v1::ListRejectionsResponse* response) override;

 private:
  absl::Status DoListNodes(const v1::ListNodesRequest& request, v1::ListNodesResponse* response);
  absl::Status DoListAssumed(v1::ListAssumedResponse* response);
  absl::Status DoExplain(const v1::ExplainRequest& request, v1::ExplainResponse* response);
  absl::Status DoListRejections(v1::ListRejectionsResponse* response);

  const Ledger* const ledger_;
  const bool ledger_enabled_;
  const std::function<bool()> synced_;
  const std::function<std::string()> pods_resource_version_;
  const RejectionSource rejections_;
  RpcMetrics* const metrics_;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_GRPC_SERVICES_H_
