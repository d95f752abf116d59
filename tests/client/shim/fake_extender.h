// An in-process fitledger-server stand-in for the shim tests: the Extender service with
// replaceable answers that records what it was sent, plus gRPC's standard health service.
#ifndef FITLEDGER_TESTS_CLIENT_SHIM_FAKE_EXTENDER_H_
#define FITLEDGER_TESTS_CLIENT_SHIM_FAKE_EXTENDER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "grpcpp/server.h"

namespace fitledger::shim::testing {

// Thread-safe: the handlers and the recorded requests are guarded by mu_.
class FakeExtender final : public v1::Extender::Service {
 public:
  using FilterFn = std::function<grpc::Status(const v1::ExtenderArgs&, v1::ExtenderFilterResult*)>;
  using PrioritizeFn = std::function<grpc::Status(const v1::ExtenderArgs&, v1::HostPriorityList*)>;
  using BindFn =
      std::function<grpc::Status(const v1::ExtenderBindingArgs&, v1::ExtenderBindingResult*)>;
  using PreemptFn =
      std::function<grpc::Status(const v1::ExtenderPreemptionArgs&, v1::ExtenderPreemptionResult*)>;

  // Defaults: every candidate passes; scores 1; binds succeed; preempt keeps the meta victims.
  // Every reply carries fitledger-server's origin mark (proto/fitledger/v1/api_conventions.h).
  FakeExtender();

  void set_filter(FilterFn fn);
  void set_prioritize(PrioritizeFn fn);
  void set_bind(BindFn fn);
  void set_preempt(PreemptFn fn);

  v1::ExtenderArgs last_filter() const;
  v1::ExtenderBindingArgs last_bind() const;
  v1::ExtenderPreemptionArgs last_preempt() const;
  int calls() const;

  grpc::Status Filter(grpc::ServerContext*, const v1::ExtenderArgs* args,
                      v1::ExtenderFilterResult* result) override;
  grpc::Status Prioritize(grpc::ServerContext*, const v1::ExtenderArgs* args,
                          v1::HostPriorityList* result) override;
  grpc::Status Bind(grpc::ServerContext*, const v1::ExtenderBindingArgs* args,
                    v1::ExtenderBindingResult* result) override;
  grpc::Status Preempt(grpc::ServerContext*, const v1::ExtenderPreemptionArgs* args,
                       v1::ExtenderPreemptionResult* result) override;

 private:
  mutable Mutex mu_;
  FilterFn filter_ ABSL_GUARDED_BY(mu_);
  PrioritizeFn prioritize_ ABSL_GUARDED_BY(mu_);
  BindFn bind_ ABSL_GUARDED_BY(mu_);
  PreemptFn preempt_ ABSL_GUARDED_BY(mu_);
  v1::ExtenderArgs last_filter_ ABSL_GUARDED_BY(mu_);
  v1::ExtenderBindingArgs last_bind_ ABSL_GUARDED_BY(mu_);
  v1::ExtenderPreemptionArgs last_preempt_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

// A grpc::Server serving `service` and the default grpc.health.v1 service (SERVING).
class FakeServer {
 public:
  // `address` is "127.0.0.1:0" (a free port) or "unix:///path". Null on failure.
  static std::unique_ptr<FakeServer> Start(FakeExtender* service, const std::string& address);
  ~FakeServer();

  // The address to dial: "127.0.0.1:PORT" or the unix address.
  const std::string& target() const { return target_; }
  void SetServing(bool serving);
  void Shutdown();

 private:
  FakeServer(std::unique_ptr<grpc::Server> server, std::string target)
      : server_(std::move(server)), target_(std::move(target)) {}
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
};

}  // namespace fitledger::shim::testing

#endif  // FITLEDGER_TESTS_CLIENT_SHIM_FAKE_EXTENDER_H_
