// A small server for gRPC's unary calls on HTTP/2 (h2c, no TLS), built on nghttp2: the
// counterpart of fitledger-shim's client (client/shim/grpc_h2). Each connection has one thread,
// which reads a request, runs its method inline and writes the reply: no hand-off between
// threads, so a call costs a fraction of what gRPC's C++ server spends on it. Calls on one
// connection run one after another; fitledger-shim opens one connection per call in flight.
// Not served: streaming methods (reflection, Health/Watch), compression, TLS. Those stay on
// the gRPC server (grpc.listen).

#ifndef FITLEDGER_SERVER_SERVICE_GRPC_H2_SERVER_H_
#define FITLEDGER_SERVER_SERVICE_GRPC_H2_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fitledger {

// One unary method: the request message's bytes in, the reply message's bytes out. A non-OK
// status is sent as grpc-status and grpc-message. Runs on a connection's thread; may run
// concurrently with itself.
using GrpcUnaryMethod = std::function<absl::Status(absl::string_view request, std::string* reply)>;

struct GrpcH2ServerOptions {
  // Connections beyond this are closed at once (the client sees UNAVAILABLE).
  int max_connections = 1024;
  // The largest request message; a larger one is answered RESOURCE_EXHAUSTED.
  int64_t max_message_bytes = 64 << 20;
  // Streams a client may open at once on one connection (they are served in turn).
  int max_concurrent_streams = 32;
  // Request bytes held at once across all connections; a request that would pass it is
  // answered RESOURCE_EXHAUSTED. At least max_message_bytes.
  int64_t max_buffered_bytes = int64_t{512} << 20;
  // Writing a reply (a client that reads too slowly, or whose flow-control window stays shut),
  // and Stop's wait for streams still open: the connection is dropped after this long.
  absl::Duration write_timeout = absl::Seconds(10);
  // A connection that sends nothing at all for this long after connecting is closed.
  absl::Duration first_bytes_timeout = absl::Seconds(10);
  // A connection with nothing received for this long is closed (the shim redials).
  absl::Duration idle_timeout = absl::Minutes(5);
};

class GrpcH2Server {
 public:
  // `methods`: full paths ("/fitledger.v1.Extender/Filter") and their handlers.
  GrpcH2Server(GrpcH2ServerOptions options,
               std::vector<std::pair<std::string, GrpcUnaryMethod>> methods);
  ~GrpcH2Server();  // Stop()
  GrpcH2Server(const GrpcH2Server&) = delete;
  GrpcH2Server& operator=(const GrpcH2Server&) = delete;

  // Binds "unix:///path" (a stale socket file is replaced) or "host:port" (port 0 picks one)
  // and starts accepting on it. Returns the TCP port (0 for a Unix socket). InvalidArgument for
  // a malformed address, Unavailable when it cannot be bound, FailedPrecondition after Stop.
  absl::StatusOr<int> Listen(const std::string& address);

  // Stops accepting; each connection finishes the call it is running, is sent GOAWAY and is
  // closed; joins every thread and removes the Unix socket files. Idempotent.
  void Stop();

  // Open connections (for tests and metrics).
  int connections() const;
  // Connection threads not yet joined: the open connections, and closed ones until a listener
  // thread joins them, which it does as soon as they finish (for tests).
  int threads() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_GRPC_H2_SERVER_H_
