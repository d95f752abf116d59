// Unary gRPC calls multiplexed on a few long-lived HTTP/2 connections, for fitledger-shim's
// Filter and Prioritize: the calling thread writes its request and returns; the connection's own
// thread reads the replies and runs each call's completion. No thread sleeps waiting for a reply,
// and when calls come together one read or write carries several of them, on both sides of the
// hop (fitledger-server's unary listener serves a connection's streams in turn on one thread).
//
// Why beside GrpcH2Client (grpc_h2.h), which gives each call a connection of its own: there the
// calling thread sleeps in poll(2) for every reply and the server wakes a thread per call, which
// was most of what the hop cost under load (docs/performance.md). Calls that run long on the
// server (Bind, with its API round trip) stay on GrpcH2Client: here they would hold up the calls
// queued behind them on the same connection.
//
// Each connection has one thread, which dials it (again after a loss, backing off as
// GrpcH2Client does) and reads it. Call() takes a call only on a connection that is up; when none
// is (before the first dial, during an outage), it returns false and the caller uses another way
// (the webhook falls back to GrpcH2Client, which dials and reports why the server cannot be
// reached). Same wire as GrpcH2Client (h2c with prior knowledge, no TLS, no compression).
// Outcomes: the server's status; DEADLINE_EXCEEDED when the deadline passes first (the stream is
// reset, the connection stays); UNAVAILABLE when the connection is lost with the call on it;
// CANCELLED when Stop() finds it in flight. A call the server refused unseen (REFUSED_STREAM, or
// past its GOAWAY) goes once more on another connection that is up.
#ifndef FITLEDGER_CLIENT_SHIM_GRPC_H2_MUX_H_
#define FITLEDGER_CLIENT_SHIM_GRPC_H2_MUX_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace fitledger::shim {

struct H2Target;      // grpc_h2_wire.h
class MuxConnection;  // grpc_h2_mux.cc
struct MuxCall;       // grpc_h2_mux.cc

// Thread-safe. Start() spawns a thread per connection, Stop() (or the destructor) joins them.
class GrpcH2MuxClient {
 public:
  struct Options {
    // Connections to the server; fitledger-server serves each on one thread, so about as many
    // as the server has CPUs to give.
    int connections = 2;
    // The largest reply accepted.
    size_t max_response_bytes = 64 << 20;
    // Redials after a failed dial wait this long, doubling up to max_backoff.
    absl::Duration initial_backoff = absl::Milliseconds(100);
    absl::Duration max_backoff = absl::Seconds(1);
    // How long one dial may take.
    absl::Duration dial_timeout = absl::Seconds(1);
  };

  // The outcome of a call. On OK `reply` views the reply message's bytes, valid during the call
  // of this only. Runs on a connection's thread; must not block for long (it holds up that
  // connection's other replies).
  using Done = absl::AnyInvocable<void(const grpc::Status& status, absl::string_view reply)>;

  // `target` as GrpcH2Client takes it ("unix:///path", "host:port", ...). Nothing is dialled
  // before Start().
  GrpcH2MuxClient(std::string target, Options options);
  ~GrpcH2MuxClient();
  GrpcH2MuxClient(const GrpcH2MuxClient&) = delete;
  GrpcH2MuxClient& operator=(const GrpcH2MuxClient&) = delete;

  // Starts the connections' threads, which dial at once. Idempotent.
  void Start();
  // Completes the calls in flight CANCELLED, closes the connections, joins the threads. Calls
  // after it are refused (false). Idempotent.
  void Stop();

  // Sends `request` (the request message's bytes) to `method` ("/pkg.Service/Method") on a
  // connection that is up and returns true: `done` then runs exactly once, on that connection's
  // thread. False when no connection is up (or the request could not be written and the server
  // cannot have seen it): `done` is dropped without running.
  bool Call(absl::string_view method, absl::string_view request, absl::Time deadline, Done done);

  // Connections up now, and calls taken (Call returned true) so far: for tests and metrics.
  int connections_up() const;
  int64_t calls_taken() const { return taken_.load(std::memory_order_relaxed); }

 private:
  friend class MuxConnection;

  // Offers `call` to the connections that are up, starting after `skip` (or at the next in
  // turn when null); false when none took it.
  bool Submit(MuxCall* call, const MuxConnection* skip);
  MuxCall* TakeCall();
  void GiveCall(MuxCall* call);

  // Constant after construction.
  const std::string target_;
  const std::unique_ptr<const H2Target> parsed_;  // null: a bad address (every Call is false)
  const Options options_;
  std::vector<std::unique_ptr<MuxConnection>> connections_;

  std::atomic<uint32_t> next_{0};  // round robin over connections_
  std::atomic<int64_t> taken_{0};
  std::mutex start_mu_;   // Start / Stop
  bool started_ = false;  // guarded by start_mu_
  bool stopped_ = false;  // guarded by start_mu_

  std::mutex pool_mu_;
  std::vector<MuxCall*> pool_;  // guarded by pool_mu_: finished calls, reused
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_GRPC_H2_MUX_H_
