// A small HTTP client for the Kubernetes API (libcurl): requests and streaming watches.
#ifndef FITLEDGER_SERVER_KUBE_API_CLIENT_H_
#define FITLEDGER_SERVER_KUBE_API_CLIENT_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "server/kube/connection.h"

namespace fitledger::kube {

struct HttpResponse {
  long code = 0;
  std::string body;
};

// Thread-safe: concurrent calls use separate pooled curl handles (connections are reused).
class ApiClient {
 public:
  explicit ApiClient(Connection connection);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // One request to `path` (e.g. "/api/v1/nodes?limit=500"). Any HTTP status is a response;
  // errors are transport failures: Unavailable (could not connect or complete the TLS handshake:
  // nothing was sent), DeadlineExceeded (no complete answer within `timeout`), Unknown (the
  // connection broke after the request may have been sent). Messages never contain credentials.
  absl::StatusOr<HttpResponse> Request(absl::string_view method, const std::string& path,
                                       const std::string& body, absl::Duration timeout);

  // A streaming GET (a watch). Calls `on_line` with each complete newline-delimited line of a
  // 200 response; stops when it returns false, when `*cancel` becomes true, or when the stream
  // ends (a stream cut after a 200 is a normal end: the caller resumes). Returns the HTTP status
  // (the first MiB of a non-200 answer goes to `*error_body`), or a transport error;
  // ResourceExhausted if a line grows past `max_line_bytes` (the stream is aborted, so a runaway
  // line cannot exhaust memory). `max_duration` caps the whole stream.
  absl::StatusOr<long> Stream(const std::string& path,
                              const std::function<bool(absl::string_view line)>& on_line,
                              const std::atomic<bool>* cancel, absl::Duration max_duration,
                              size_t max_line_bytes, std::string* error_body);

  // A GET whose 200 body is handed to `on_bytes` in fragments as it arrives (for a LIST too big
  // to hold twice); stops when it returns false (Cancelled) or `*cancel` becomes true. Returns
  // the HTTP status (the first MiB of a non-200 answer goes to `*error_body`), or a transport
  // error as Request's; a body cut short is a transport error. `timeout` caps the whole request.
  absl::StatusOr<long> GetStreamed(const std::string& path,
                                   const std::function<bool(absl::string_view bytes)>& on_bytes,
                                   const std::atomic<bool>* cancel, absl::Duration timeout,
                                   std::string* error_body);

  const Connection& connection() const { return connection_; }

 private:
  void* Acquire();
  void Release(void* handle);
  // Sets the URL, TLS and auth options on a reset handle; returns the header list to free.
  void* Configure(void* handle, const std::string& path);

  // Constant after construction.
  const Connection connection_;

  Mutex mu_;
  std::vector<void*> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_API_CLIENT_H_
