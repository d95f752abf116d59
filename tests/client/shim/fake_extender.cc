#include "tests/client/shim/fake_extender.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "proto/fitledger/v1/api_conventions.h"

namespace fitledger::shim::testing {

FakeExtender::FakeExtender() {
  filter_ = [](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
    *result->mutable_node_names() = args.node_names();
    for (const v1::Node& node : args.nodes().items()) {
      result->add_node_names(node.metadata().name());
    }
    return grpc::Status::OK;
  };
  prioritize_ = [](const v1::ExtenderArgs& args, v1::HostPriorityList* result) {
    for (const std::string& name : args.node_names()) {
      v1::HostPriority* item = result->add_items();
      item->set_host(name);
      item->set_score(1);
    }
    return grpc::Status::OK;
  };
  bind_ = [](const v1::ExtenderBindingArgs&, v1::ExtenderBindingResult*) {
    return grpc::Status::OK;
  };
  preempt_ = [](const v1::ExtenderPreemptionArgs& args, v1::ExtenderPreemptionResult* result) {
    *result->mutable_node_name_to_meta_victims() = args.node_name_to_meta_victims();
    return grpc::Status::OK;
  };
}

void FakeExtender::set_filter(FilterFn fn) {
  MutexLock lock(&mu_);
  filter_ = std::move(fn);
}
void FakeExtender::set_prioritize(PrioritizeFn fn) {
  MutexLock lock(&mu_);
  prioritize_ = std::move(fn);
}
void FakeExtender::set_bind(BindFn fn) {
  MutexLock lock(&mu_);
  bind_ = std::move(fn);
}
void FakeExtender::set_preempt(PreemptFn fn) {
  MutexLock lock(&mu_);
  preempt_ = std::move(fn);
}

v1::ExtenderArgs FakeExtender::last_filter() const {
  MutexLock lock(&mu_);
  return last_filter_;
}
v1::ExtenderBindingArgs FakeExtender::last_bind() const {
  MutexLock lock(&mu_);
  return last_bind_;
}
v1::ExtenderPreemptionArgs FakeExtender::last_preempt() const {
  MutexLock lock(&mu_);
  return last_preempt_;
}
int FakeExtender::calls() const {
  MutexLock lock(&mu_);
  return calls_;
}

grpc::Status FakeExtender::Filter(grpc::ServerContext* context, const v1::ExtenderArgs* args,
                                  v1::ExtenderFilterResult* result) {
  // As fitledger-server marks its replies (api_conventions.h).
  context->AddTrailingMetadata(v1::kServerOriginMetadata, "fake");
  FilterFn fn;
  {
    MutexLock lock(&mu_);
    ++calls_;
    last_filter_ = *args;
    fn = filter_;
  }
  return fn(*args, result);
}

grpc::Status FakeExtender::Prioritize(grpc::ServerContext* context, const v1::ExtenderArgs* args,
                                      v1::HostPriorityList* result) {
  // As fitledger-server marks its replies (api_conventions.h).
  context->AddTrailingMetadata(v1::kServerOriginMetadata, "fake");
  PrioritizeFn fn;
  {
    MutexLock lock(&mu_);
    ++calls_;
    fn = prioritize_;
  }
  return fn(*args, result);
}

grpc::Status FakeExtender::Bind(grpc::ServerContext* context, const v1::ExtenderBindingArgs* args,
                                v1::ExtenderBindingResult* result) {
  // As fitledger-server marks its replies (api_conventions.h).
  context->AddTrailingMetadata(v1::kServerOriginMetadata, "fake");
  BindFn fn;
  {
    MutexLock lock(&mu_);
    ++calls_;
    last_bind_ = *args;
    fn = bind_;
  }
  return fn(*args, result);
}

grpc::Status FakeExtender::Preempt(grpc::ServerContext* context,
                                   const v1::ExtenderPreemptionArgs* args,
                                   v1::ExtenderPreemptionResult* result) {
  // As fitledger-server marks its replies (api_conventions.h).
  context->AddTrailingMetadata(v1::kServerOriginMetadata, "fake");
  PreemptFn fn;
  {
    MutexLock lock(&mu_);
    ++calls_;
    last_preempt_ = *args;
    fn = preempt_;
  }
  return fn(*args, result);
}

std::unique_ptr<FakeServer> FakeServer::Start(FakeExtender* service, const std::string& address) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return nullptr;
  std::string target =
      absl::StartsWith(address, "unix:") ? address : absl::StrCat("127.0.0.1:", port);
  return std::unique_ptr<FakeServer>(new FakeServer(std::move(server), std::move(target)));
}

FakeServer::~FakeServer() { Shutdown(); }

void FakeServer::SetServing(bool serving) {
  server_->GetHealthCheckService()->SetServingStatus(serving);
}

void FakeServer::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

}  // namespace fitledger::shim::testing
