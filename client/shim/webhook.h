// The extender verbs, transport aside: a request body in, a gRPC call to fitledger-server, an
// HTTP status and JSON body out. The HTTP listener (http_server.h) only routes to this.
//
// Reply rules (kube-scheduler treats any non-200 as an error):
//   bad body                    -> 400 {"Error":"<field>: <what is wrong>"} (every verb)
//   filter / bind, gRPC failure -> 200 {"Error":"fitledger server unavailable: UNAVAILABLE: ..."}
//   prioritize / preempt        -> 503 {"Error":"..."} (400 when the server says INVALID_ARGUMENT):
//                                  their results have no Error field
//   misfits                     -> 200 with FailedNodes / FailedAndUnresolvableNodes, no Error
#ifndef FITLEDGER_CLIENT_SHIM_WEBHOOK_H_
#define FITLEDGER_CLIENT_SHIM_WEBHOOK_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/shim/json_codec.h"
#include "client/shim/logger.h"
#include "client/shim/metrics.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"

namespace fitledger::shim {

enum class Verb { kFilter, kPrioritize, kBind, kPreempt };

// "filter", "prioritize", "bind", "preempt".
absl::string_view VerbName(Verb verb);

struct Reply {
  int status = 200;
  std::string body;  // JSON
};

// A channel to fitledger-server at `address` ("unix:///path" or "host:port", plaintext) that
// reconnects quickly (backoff 100 ms .. 1 s) when the server comes back.
std::shared_ptr<grpc::Channel> DialServer(const std::string& address);

// A base for Extender stubs that answer only the synchronous calls, which are all the webhook
// makes: the asynchronous forms return nullptr.
class SyncExtenderStub : public v1::Extender::StubInterface {
 private:
  using FilterReader = grpc::ClientAsyncResponseReaderInterface<v1::ExtenderFilterResult>;
  using PrioritizeReader = grpc::ClientAsyncResponseReaderInterface<v1::HostPriorityList>;
  using BindReader = grpc::ClientAsyncResponseReaderInterface<v1::ExtenderBindingResult>;
  using PreemptReader = grpc::ClientAsyncResponseReaderInterface<v1::ExtenderPreemptionResult>;
  FilterReader* AsyncFilterRaw(grpc::ClientContext*, const v1::ExtenderArgs&,
                               grpc::CompletionQueue*) override {
    return nullptr;
  }
  FilterReader* PrepareAsyncFilterRaw(grpc::ClientContext*, const v1::ExtenderArgs&,
                                      grpc::CompletionQueue*) override {
    return nullptr;
  }
  PrioritizeReader* AsyncPrioritizeRaw(grpc::ClientContext*, const v1::ExtenderArgs&,
                                       grpc::CompletionQueue*) override {
    return nullptr;
  }
  PrioritizeReader* PrepareAsyncPrioritizeRaw(grpc::ClientContext*, const v1::ExtenderArgs&,
                                              grpc::CompletionQueue*) override {
    return nullptr;
  }
  BindReader* AsyncBindRaw(grpc::ClientContext*, const v1::ExtenderBindingArgs&,
                           grpc::CompletionQueue*) override {
    return nullptr;
  }
  BindReader* PrepareAsyncBindRaw(grpc::ClientContext*, const v1::ExtenderBindingArgs&,
                                  grpc::CompletionQueue*) override {
    return nullptr;
  }
  PreemptReader* AsyncPreemptRaw(grpc::ClientContext*, const v1::ExtenderPreemptionArgs&,
                                 grpc::CompletionQueue*) override {
    return nullptr;
  }
  PreemptReader* PrepareAsyncPreemptRaw(grpc::ClientContext*, const v1::ExtenderPreemptionArgs&,
                                        grpc::CompletionQueue*) override {
    return nullptr;
  }
};

// A transport that carries the Extender's messages as their protobuf bytes (the shim's own
// HTTP/2 client). A stub that is one too lets the webhook write Filter's and Prioritize's requests
// and read their replies without building messages (extender_bytes.h).
class ExtenderBytesCaller {
 public:
  virtual ~ExtenderBytesCaller() = default;
  // Calls `method` ("/fitledger.v1.Extender/Filter") with the request's bytes; on OK, the
  // reply's bytes replace `*reply`. Errors as the stub's methods.
  virtual grpc::Status CallBytes(absl::string_view method, absl::string_view request,
                                 absl::Time deadline, std::string* reply) = 0;

  // The outcome of a call started by StartBytes; on OK `reply` views the reply's bytes for the
  // time of the call only.
  using BytesDone = absl::AnyInvocable<void(const grpc::Status& status, absl::string_view reply)>;
  // Starts the call without waiting for it and returns true: `done` then runs exactly once, on
  // another thread. False when the transport cannot start it now (or at all: the default);
  // `done` is then dropped unrun and the caller uses CallBytes.
  virtual bool StartBytes(absl::string_view method, absl::string_view request, absl::Time deadline,
                          BytesDone done) {
    return false;
  }
};

// Thread-safe: the stubs are thread-safe, the rest is constant after construction (plus an
// atomic log-rate limiter). Decoding buffers are per thread.
class Webhook {
 public:
  struct Options {
    // The deadline of each gRPC call.
    absl::Duration server_timeout = absl::Seconds(4);
  };

  // `metrics` and `logger` must outlive this.
  Webhook(std::unique_ptr<v1::Extender::StubInterface> extender,
          std::unique_ptr<grpc::health::v1::Health::StubInterface> health, Options options,
          Metrics* metrics, const Logger* logger);
  ~Webhook();

  // Answers one POST of `verb` with `body` (any key case, see json_codec.h).
  void Handle(Verb verb, const std::string& body, Reply* reply) const;

  // Runs with the reply of a request answered later; the reply may be moved from.
  using ReplyDone = absl::AnyInvocable<void(Reply& reply)>;
  // Handle, but Filter and Prioritize with candidate names answer later when the transport
  // starts calls (ExtenderBytesCaller::StartBytes): then this returns false and `done` runs
  // exactly once, on another thread, with the reply; `body` must stay valid until it has.
  // Otherwise true with `*reply` filled, and `done` is dropped unrun.
  bool HandleLater(Verb verb, const std::string& body, Reply* reply, ReplyDone done) const;

  // OK when the server's grpc.health.v1 service answers SERVING for "", else Unavailable with
  // the reason.
  absl::Status CheckReady() const;

 private:
  struct Pending;  // a request answered later (webhook.cc)

  // With `done`, they may answer later (HandleLater's contract; false when they do).
  bool Filter(const std::string& body, Reply* reply, ReplyDone* done) const;
  bool Prioritize(const std::string& body, Reply* reply, ReplyDone* done) const;
  // Starts Filter's or Prioritize's call with the request in this thread's scratch (decoded from
  // `body`); true when it will complete later (FinishLater, on another thread). False: `*done`
  // is still the caller's.
  bool StartLater(Verb verb, absl::string_view method, const std::string& body,
                  absl::string_view pod, ReplyDone* done) const;
  void FinishLater(Pending* pending, const grpc::Status& status, absl::string_view bytes) const;
  // Filter's answer to nodeCacheCapable arguments: names of `candidates` that `result` passed.
  // `plain`: no candidate needs escaping (JsonDecoder::node_names_plain).
  void AnswerNames(const std::vector<absl::string_view>& candidates, bool plain,
                   FilterResultView* result, absl::string_view pod, Reply* reply) const;
  void Bind(const std::string& body, Reply* reply) const;
  void Preempt(const std::string& body, Reply* reply) const;

  // Filter's and Prioritize's calls, on bytes when the stub carries them (bytes_), else on
  // messages. `names`, when not null, are the candidates (not in args.node_names).
  grpc::Status CallFilter(const v1::ExtenderArgs& args, const std::vector<absl::string_view>* names,
                          FilterResultView* result) const;
  grpc::Status CallPrioritize(const v1::ExtenderArgs& args,
                              const std::vector<absl::string_view>* names,
                              HostPriorityView* result) const;
  // Their common part. With `names`: the request written from args' pod and `names` and sent as
  // bytes to `method`; the reply read into `view` by `read`, or, of another shape, parsed into
  // `message`. Without: `call_with_messages` (the stub's method, filling `message`).
  // `*in_message` says where the answer is.
  template <typename View, typename CallWithMessages>
  grpc::Status CallExtender(absl::string_view method, const v1::ExtenderArgs& args,
                            const std::vector<absl::string_view>* names,
                            bool (*read)(absl::string_view, View*),
                            CallWithMessages call_with_messages, View* view,
                            google::protobuf::MessageLite* message, bool* in_message) const;

  // Fills `reply` for a failed call and counts and logs it.
  void ServerFailure(Verb verb, const grpc::Status& status, absl::string_view pod,
                     Reply* reply) const;
  void BadRequest(Verb verb, const absl::Status& status, Reply* reply) const;
  // True at most once per second, so an outage does not flood the log.
  bool LogFailureNow() const;

  // Constant after construction.
  const std::unique_ptr<v1::Extender::StubInterface> extender_;
  ExtenderBytesCaller* const bytes_;  // extender_, if it carries bytes; else null
  const std::unique_ptr<grpc::health::v1::Health::StubInterface> health_;
  const Options options_;
  Metrics* const metrics_;
  const Logger* const logger_;

  // When the last failure was logged (absl::ToUnixNanos).
  mutable std::atomic<int64_t> last_failure_log_ns_{0};

  // Finished Pending records, reused.
  mutable std::mutex pending_mu_;
  mutable std::vector<std::unique_ptr<Pending>> pending_pool_;  // guarded by pending_mu_
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_WEBHOOK_H_
