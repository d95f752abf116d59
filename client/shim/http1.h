#ifndef FITLEDGER_CLIENT_SHIM_HTTP1_H_
#define FITLEDGER_CLIENT_SHIM_HTTP1_H_

// A small HTTP/1.1 server for the extender webhook: keep-alive connections wait in one epoll
// set, so an idle connection holds no thread; a worker takes a connection only while a request
// is on it, reads it with one recv when it fits in 64 KiB, and answers with one sendmsg. TLS
// (OpenSSL) is optional. It serves what kube-scheduler and probes send: Content-Length and
// chunked bodies, Expect: 100-continue, HTTP/1.0 and 1.1, pipelining; not upgrades or HTTP/2.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fitledger::shim {

struct HttpRequest {
  std::string method;
  std::string path;  // the target up to '?', as sent (not percent-decoded)
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case
  std::string body;

  // The value of the first header named `lower_name`, or nullptr.
  const std::string* Header(absl::string_view lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // more headers to send
};

struct HttpOptions {
  // threads: the most requests handled at once (a worker each). pollers: the most workers
  // waiting for the next request at once; 0 means twice the CPUs (at least 2, at most threads).
  int threads = 8;
  int pollers = 0;
  int64_t max_body_bytes = 16 << 20;
  int64_t max_header_bytes = 64 << 10;
  absl::Duration read_timeout = absl::Seconds(5);   // each wait while reading a request
  absl::Duration write_timeout = absl::Seconds(5);  // each wait while writing a reply
  absl::Duration idle_timeout = absl::Seconds(10);  // an idle keep-alive connection is closed
  int keep_alive_max_requests = 10000;
  // TLS when cert_file is set; client_ca_file makes a client certificate it signed mandatory.
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

// Answers a parsed request. Runs on a worker thread; may run concurrently with itself.
using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

struct HttpConnection;  // http1.cc

// The reply to a request whose handler answers later (HttpDeferringHandler). Copyable; Finish()
// must be called exactly once, from any thread, once the response is filled.
class HttpLater {
 public:
  // Writes the response and goes on serving the connection. It writes without waiting: when the
  // client is not reading, a worker finishes the write (bounded by writeTimeout).
  void Finish() const;

 private:
  friend class HttpServer;
  explicit HttpLater(HttpConnection* connection) : connection_(connection) {}
  HttpConnection* connection_;
};

// Like HttpHandler, but it may answer later. True: `res` holds the reply now, and `later` is not
// used. False: the reply is written when `later.Finish()` is called (possibly before this
// returns); until then `req` and `res` stay valid and the server does not touch them, and the
// connection reads no further request. A handler that returns false must not throw.
using HttpDeferringHandler =
    std::function<bool(const HttpRequest& req, HttpResponse& res, HttpLater later)>;
// Fills the reply to a request the server refuses itself (status 400, 408, 413, 431, 501, 505);
// `message` says why.
using HttpErrorHandler = std::function<void(HttpResponse&, int status, absl::string_view message)>;
// Called once per reply written (or failed to write), with the time since its first byte came.
using HttpObserver =
    std::function<void(const HttpRequest&, const HttpResponse&, absl::Duration elapsed)>;

class HttpServer {
 public:
  HttpServer(HttpOptions options, HttpHandler handler, HttpErrorHandler on_error,
             HttpObserver observer);
  HttpServer(HttpOptions options, HttpDeferringHandler handler, HttpErrorHandler on_error,
             HttpObserver observer);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0 picks one) and starts serving; returns the bound port.
  // InvalidArgument for unusable TLS files, Unavailable when the address cannot be bound.
  absl::StatusOr<int> Start(const std::string& host, int port);
  // Serves an already connected stream socket `fd` (taking ownership) as if accepted; for
  // tests and fuzzing over a socketpair. FailedPrecondition unless running.
  absl::Status Adopt(int fd);
  // Stops accepting, closes idle connections, lets requests in flight finish (each bounded by
  // the read and write timeouts; a deferred reply is waited for until it is finished), joins the
  // threads. Idempotent.
  void Stop();

 private:
  friend struct HttpConnection;
  friend class HttpLater;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_HTTP1_H_
