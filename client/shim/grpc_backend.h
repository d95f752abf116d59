// fitledger-shim's backend: the webhook's verbs forwarded to fitledger-server over gRPC, with the
// generated stubs' callback API (stub->async()), so no thread waits for a reply: the webhook's
// I/O thread starts a call and returns, and gRPC's thread finishes the HTTP request.
#ifndef FITLEDGER_CLIENT_SHIM_GRPC_BACKEND_H_
#define FITLEDGER_CLIENT_SHIM_GRPC_BACKEND_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "webhook/backend.h"

namespace grpc {
class ChannelInterface;
}

namespace fitledger::shim {

// A channel to fitledger-server at `target` ("unix:///path" or "host:port", plaintext) that
// reconnects quickly (backoff 100 ms .. 1 s) when the server comes back, and takes replies of
// any size the server sends (64 MiB).
std::shared_ptr<grpc::ChannelInterface> DialServer(const std::string& target);

// Thread-safe: the stubs are.
class GrpcBackend final : public webhook::Backend {
 public:
  struct Options {
    // The deadline of each call (kube-scheduler gives the whole verb 5 s).
    absl::Duration timeout = absl::Seconds(4);
  };
  // `target` names the server in error messages.
  GrpcBackend(std::string target, std::shared_ptr<grpc::ChannelInterface> channel, Options options);
  ~GrpcBackend() override;

  void Filter(const Pod& pod, absl::Span<const absl::string_view> candidates,
              FilterDone done) override;
  void Prioritize(const Pod& pod, absl::Span<const absl::string_view> candidates,
                  PrioritizeDone done) override;
  void Bind(const BindArgs& args, StatusDone done) override;
  void Preempt(const PreemptArgs& args, PreemptDone done) override;
  // Asks the server's grpc.health.v1 service: OK when it answers SERVING for "".
  void CheckReady(StatusDone done) override;

 private:
  struct Stubs;

  // Constant after construction.
  const std::string target_;
  const Options options_;
  const std::unique_ptr<Stubs> stubs_;
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_GRPC_BACKEND_H_
