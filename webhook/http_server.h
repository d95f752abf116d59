// An HTTP/1.1 (and HTTPS) server on Boost.Beast + Asio, for kube-scheduler's extender webhook and
// for probes. Beast parses and writes the protocol; this file only adds the connection model:
//
// - A fixed number of I/O threads run every connection: an io_context per thread, each connection
//   on one of them (in turn, at accept) for its life, with a strand of its own. No thread is ever
//   held by a connection: waiting for a request, reading a slow one, a TLS handshake and writing
//   a reply are asynchronous operations with deadlines. A slow handler delays the other
//   connections of its thread: handlers must not block (below).
// - Bytes already received are fed to Beast's parser at once, and on a plain (not TLS)
//   connection a read or a write is first tried without waiting (the socket is non-blocking):
//   a request that arrived whole is read, handled and answered in one turn of its thread's loop.
//   Only what would wait goes through the loop; a request already buffered behind the one just
//   answered (pipelined) starts a fresh turn.
// - Deadlines: the first byte of a request must come within idle_timeout of the connection's
//   start or of the previous reply; then the headers within read_timeout, then the body within
//   read_timeout; each reply must be written within write_timeout; a TLS handshake must finish
//   within handshake_timeout. A connection that misses one is closed. One timer checks them all
//   every quarter of the shortest timeout (at least 5 ms, at most 250 ms), so a connection is
//   closed up to that late.
// - At most max_connections are open; a connection accepted beyond that is closed at once.
// - A request is answered through HttpCall, now (on the I/O thread) or later (from any thread):
//   the connection reads no further request until then. Handlers must not block: work that waits
//   (a binding POST) goes elsewhere and finishes the call when done.
// - Replies the server writes itself: 400 (malformed, or not HTTP/1.0 or 1.1), 413 (body over
//   max_body_bytes), 417 (an Expect other than 100-continue), 431 (headers over max_header_bytes),
//   501 (a Transfer-Encoding other than chunked); each closes the connection. A handler that
//   throws gets 500, and the connection goes on. Expect: 100-continue is answered before the body
//   is read.
#ifndef FITLEDGER_WEBHOOK_HTTP_SERVER_H_
#define FITLEDGER_WEBHOOK_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fitledger::webhook {

struct HttpServerOptions {
  // The I/O threads; 0 means one per CPU.
  int io_threads = 0;
  // The most connections open at once; more are closed as soon as they are accepted.
  int max_connections = 1024;
  int64_t max_body_bytes = 16 << 20;
  int64_t max_header_bytes = 64 << 10;
  absl::Duration idle_timeout = absl::Seconds(10);      // for a request's first byte
  absl::Duration read_timeout = absl::Seconds(5);       // for its headers, then for its body
  absl::Duration write_timeout = absl::Seconds(5);      // for each reply
  absl::Duration handshake_timeout = absl::Seconds(5);  // for a TLS handshake
  // A keep-alive connection is closed after this many requests.
  int keep_alive_max_requests = 10000;
  // HTTPS when cert_file is set (PEM certificate chain and key); client_ca_file makes a client
  // certificate signed by that CA mandatory (mTLS).
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  // Stop() waits this long for requests in flight before it closes their connections.
  absl::Duration drain_timeout = absl::Seconds(30);
};

struct HttpRequest {
  std::string method;  // as sent ("POST")
  std::string path;    // the target up to '?', not percent-decoded
  std::string body;    // with room for 64 more bytes after size() (simdjson's padding)
  // From the request's first byte to its last: what the client's sending took (and the wait
  // for the I/O thread meanwhile). The observer's `elapsed` less this is the handling.
  absl::Duration reading;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // more headers to send
};

// What a handler keeps on a connection from one request to the next (scratch buffers). A
// connection serves one request at a time, so it is the current request's alone.
class HttpConnectionState {
 public:
  virtual ~HttpConnectionState() = default;
};

namespace internal {
// One request and its reply on a connection (http_server.cc).
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void Finish() = 0;
  HttpRequest request;
  HttpReply reply;
  std::unique_ptr<HttpConnectionState> state;
};
}  // namespace internal

// A request being answered. Copyable; every copy refers to the same request. The request and the
// reply stay valid, and are touched by no one else, until Finish() is called.
class HttpCall {
 public:
  explicit HttpCall(std::shared_ptr<internal::Exchange> exchange)
      : exchange_(std::move(exchange)) {}

  const HttpRequest& request() const { return exchange_->request; }
  // Starts as status 200, application/json, an empty body (its buffer reused across requests).
  HttpReply& reply() const { return exchange_->reply; }
  // The connection's state for the handler (null until set).
  std::unique_ptr<HttpConnectionState>& state() const { return exchange_->state; }
  // Writes the reply. Exactly once per call, from any thread (also before the handler returns).
  void Finish() const { exchange_->Finish(); }

 private:
  std::shared_ptr<internal::Exchange> exchange_;
};

// Answers requests; runs on an I/O thread, concurrently with itself for other connections.
using HttpHandler = std::function<void(HttpCall call)>;
// Fills the reply to a request the server refuses itself; `message` says why.
using HttpErrorFormatter = std::function<void(HttpReply& reply, absl::string_view message)>;
// Called once per reply, just before it is written, with the time since the request's first
// byte. Optional.
using HttpObserver =
    std::function<void(const HttpRequest& request, const HttpReply& reply, absl::Duration elapsed)>;

// Thread-safe: Start and Stop from one owner thread; the counters from any.
class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler, HttpErrorFormatter on_error,
             HttpObserver observer = nullptr);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0 picks one), starts the I/O threads and returns the bound port.
  // InvalidArgument for unusable TLS files or a bad host, Unavailable when it cannot bind.
  absl::StatusOr<int> Start(const std::string& host, int port);
  // Serves an already connected stream socket (taking ownership of `fd`) as if accepted: for
  // tests and the fuzzer. FailedPrecondition unless started.
  absl::Status Adopt(int fd);
  // Stops accepting and closes idle connections; lets requests in flight be answered (for up to
  // drain_timeout, then their connections are closed); then waits until handlers have released
  // every HttpCall (each must be finished and dropped); joins the I/O threads. Idempotent.
  void Stop();

  int port() const;
  bool tls() const;
  // Connections open now, and those closed at accept because max_connections were open.
  int64_t open_connections() const;
  int64_t refused_connections() const;

  struct Impl;  // http_server.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fitledger::webhook

#endif  // FITLEDGER_WEBHOOK_HTTP_SERVER_H_
