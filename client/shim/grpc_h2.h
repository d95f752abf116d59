// A small gRPC client for unary calls, written on nghttp2, that fitledger-shim uses for its four
// Extender calls instead of gRPC's C++ client.
//
// Why: gRPC's C++ client (1.51) hands every call between threads (the thread that reads the
// socket is rarely the one waiting), which cost the shim ~100 us of CPU and most of its latency
// per Filter (docs/performance.md). Here a call owns one HTTP/2 connection from start to end: the
// calling thread writes the request and reads the reply itself, with no other thread involved.
// Connections are pooled (most recently used first); there are as many as calls at once.
//
// What it speaks: HTTP/2 over cleartext with prior knowledge (what gRPC's insecure channel
// speaks), one stream per call, "application/grpc" with the 5-byte message prefix, no
// compression, `grpc-timeout` from the deadline, status from `grpc-status` / `grpc-message`
// (trailers, or trailers-only), HTTP status and RST_STREAM mapped to gRPC codes as gRPC does.
// A connection is closed after any transport error or a missed deadline; an idle connection the
// server closed or sent GOAWAY on before the call is dropped unused, so a server restart between
// calls costs none (a close that races the call fails that call: it may have been seen).
// A call whose deadline has passed is not sent. Host names are resolved with getaddrinfo, which
// does not honour the deadline (the chart uses a Unix socket).
// After a failed dial, new dials wait a backoff (100 ms doubling to 1 s), calls failing at once
// meanwhile. Not spoken: TLS, streaming, compression, retries of a request that was sent.
#ifndef FITLEDGER_CLIENT_SHIM_GRPC_H2_H_
#define FITLEDGER_CLIENT_SHIM_GRPC_H2_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/shim/grpc_h2_mux.h"
#include "client/shim/webhook.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "google/protobuf/message_lite.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/support/status.h"

namespace fitledger::shim {

class H2Connection;  // grpc_h2.cc
struct H2Target;     // grpc_h2.cc

// Thread-safe: any number of threads call at once, each on its own connection.
class GrpcH2Client {
 public:
  struct Options {
    // The largest reply accepted (gRPC's server side here accepts 64 MiB requests).
    size_t max_response_bytes = 64 << 20;
    // Idle connections kept for reuse; more are closed when they come back.
    int max_idle_connections = 64;
    // After a failed dial, calls that need a new connection fail at once (UNAVAILABLE) for this
    // long, doubling per failure up to max_backoff, so an unreachable server costs each call
    // nothing rather than its deadline (gRPC's channel backs off the same way).
    absl::Duration initial_backoff = absl::Milliseconds(100);
    absl::Duration max_backoff = absl::Seconds(1);
  };

  // `target`: "unix:///path", "unix:path", "host:port" or "[v6]:port" (plaintext). Nothing is
  // dialled until the first call.
  explicit GrpcH2Client(std::string target) : GrpcH2Client(std::move(target), Options{}) {}
  GrpcH2Client(std::string target, Options options);
  ~GrpcH2Client();
  GrpcH2Client(const GrpcH2Client&) = delete;
  GrpcH2Client& operator=(const GrpcH2Client&) = delete;

  // Calls `method` ("/package.Service/Method") with `request` and parses the reply into
  // `response`. Errors: UNAVAILABLE (cannot connect, connection lost), DEADLINE_EXCEEDED,
  // INTERNAL (a malformed reply), or the server's own status.
  grpc::Status Call(absl::string_view method, const google::protobuf::MessageLite& request,
                    google::protobuf::MessageLite* response, absl::Time deadline);

  // The same call on bytes: `request` is the request message's protobuf encoding; on OK, the
  // reply's replaces `*reply`.
  grpc::Status CallBytes(absl::string_view method, absl::string_view request, absl::Time deadline,
                         std::string* reply);

  // OK when `target` has one of the forms above.
  static absl::Status CheckTarget(absl::string_view target);

  // Connections dialled so far (for tests: reuse means this stays small).
  int connections_dialled() const;

  // For tests: reads what the server sent on the idle connections, drops those it closed or is
  // closing (GOAWAY), and returns how many are left. Calls meanwhile find the pool empty.
  int RefreshIdle();

 private:
  // An idle connection that is still good (most recent first), else a new one; null with
  // `*status` when none can be had.
  std::unique_ptr<H2Connection> Take(grpc::Status* status, absl::Time deadline);
  void Give(std::unique_ptr<H2Connection> connection);
  // This thread's request frame, sized for a message of `size` bytes after its 5-byte prefix.
  static std::string& StartFrame(size_t size);
  // Frees this thread's frame and reply buffers if a call grew them over 1 MiB.
  static void ReleaseLargeBuffers();
  // Sends `frame` (once more on a new connection if the server cannot have seen it) and checks
  // the reply is one uncompressed message; `*reply` views it in this thread's reply buffer.
  grpc::Status CallFrame(absl::string_view method, const std::string& frame, absl::Time deadline,
                         absl::string_view* reply);

  const std::string target_;
  const std::unique_ptr<const H2Target> parsed_;  // null: a bad address (CheckTarget says why)
  const Options options_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<H2Connection>> idle_;  // guarded by mu_; back = most recent
  int dialled_ = 0;                                  // guarded by mu_
  int64_t dial_generation_ = 0;                      // guarded by mu_; counts successful dials
  // After a failed dial (guarded by mu_): no new dial before retry_after_.
  absl::Duration backoff_ = absl::ZeroDuration();
  absl::Time retry_after_ = absl::InfinitePast();
  std::string last_dial_error_;
};

// The Extender stub fitledger-shim's Webhook calls, on a GrpcH2Client. The deadline is the
// ClientContext's; nothing else of the context is used. Only the synchronous methods are
// provided: the asynchronous ones return nullptr (the webhook never calls them). It carries bytes
// too (ExtenderBytesCaller), which the webhook uses for Filter and Prioritize; with a
// GrpcH2MuxClient it also starts those calls without waiting (StartBytes).
class H2ExtenderStub final : public SyncExtenderStub, public ExtenderBytesCaller {
 public:
  explicit H2ExtenderStub(std::shared_ptr<GrpcH2Client> client,
                          std::shared_ptr<GrpcH2MuxClient> mux = nullptr)
      : client_(std::move(client)), mux_(std::move(mux)) {}

  grpc::Status Filter(grpc::ClientContext* context, const v1::ExtenderArgs& request,
                      v1::ExtenderFilterResult* response) override;
  grpc::Status Prioritize(grpc::ClientContext* context, const v1::ExtenderArgs& request,
                          v1::HostPriorityList* response) override;
  grpc::Status Bind(grpc::ClientContext* context, const v1::ExtenderBindingArgs& request,
                    v1::ExtenderBindingResult* response) override;
  grpc::Status Preempt(grpc::ClientContext* context, const v1::ExtenderPreemptionArgs& request,
                       v1::ExtenderPreemptionResult* response) override;

  grpc::Status CallBytes(absl::string_view method, absl::string_view request, absl::Time deadline,
                         std::string* reply) override;
  bool StartBytes(absl::string_view method, absl::string_view request, absl::Time deadline,
                  BytesDone done) override;

  GrpcH2Client& client() { return *client_; }

 private:
  const std::shared_ptr<GrpcH2Client> client_;
  const std::shared_ptr<GrpcH2MuxClient> mux_;  // may be null
};

// grpc.health.v1's Check on a GrpcH2Client, for the shim's readiness: on the GrpcH2MuxClient
// while one of its connections is up (the way Filter goes), else on the GrpcH2Client. Watch (a
// stream) is not provided and returns nullptr, as do the asynchronous forms.
class H2HealthStub final : public grpc::health::v1::Health::StubInterface {
 public:
  explicit H2HealthStub(std::shared_ptr<GrpcH2Client> client,
                        std::shared_ptr<GrpcH2MuxClient> mux = nullptr)
      : client_(std::move(client)), mux_(std::move(mux)) {}

  grpc::Status Check(grpc::ClientContext* context,
                     const grpc::health::v1::HealthCheckRequest& request,
                     grpc::health::v1::HealthCheckResponse* response) override;

 private:
  using Response = grpc::health::v1::HealthCheckResponse;
  using Request = grpc::health::v1::HealthCheckRequest;
  grpc::ClientAsyncResponseReaderInterface<Response>* AsyncCheckRaw(
      grpc::ClientContext*, const Request&, grpc::CompletionQueue*) override {
    return nullptr;
  }
  grpc::ClientAsyncResponseReaderInterface<Response>* PrepareAsyncCheckRaw(
      grpc::ClientContext*, const Request&, grpc::CompletionQueue*) override {
    return nullptr;
  }
  grpc::ClientReaderInterface<Response>* WatchRaw(grpc::ClientContext*, const Request&) override {
    return nullptr;
  }
  grpc::ClientAsyncReaderInterface<Response>* AsyncWatchRaw(grpc::ClientContext*, const Request&,
                                                            grpc::CompletionQueue*,
                                                            void*) override {
    return nullptr;
  }
  grpc::ClientAsyncReaderInterface<Response>* PrepareAsyncWatchRaw(
      grpc::ClientContext*, const Request&, grpc::CompletionQueue*) override {
    return nullptr;
  }

  const std::shared_ptr<GrpcH2Client> client_;
  const std::shared_ptr<GrpcH2MuxClient> mux_;  // may be null
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_GRPC_H2_H_
