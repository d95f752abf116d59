// A small HTTP client for the Kubernetes API (libcurl): requests and streaming watches.
#ifndef FITLEDGER_SERVER_KUBE_API_CLIENT_H_
#define FITLEDGER_SERVER_KUBE_API_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "server/kube/api_transport.h"
#include "server/kube/connection.h"
#include "server/kube/exec_credential.h"

namespace fitledger::kube {

// Percent-encodes `s` for a URL query value (RFC 3986 unreserved characters stay as they are).
std::string UrlEncode(absl::string_view s);

struct ApiClientOptions {
  ExecOptions exec;  // for a connection whose credentials come from an exec plugin
  // Idle connections kept for reuse (each an HTTP/1.1 connection to the API server). Set it to
  // the most requests the caller runs at once: a request finding none idle opens a connection
  // (over TLS, a handshake), and one finishing when this many are idle closes its own.
  size_t max_idle_connections = 16;
};

// Speaks to the API server as `connection` says: TLS (CA, tls-server-name, insecure), a proxy,
// and credentials: a token, a token file re-read on every request, a client certificate, or an
// exec plugin's (ExecCredentialSource: cached until it expires; on a 401 the plugin runs again and
// the request is sent once more with the new credential, which is safe because the API server
// authenticates before doing anything). When a plugin rotates the client certificate, pooled
// connections are dropped and open watch streams end (the caller resumes them), as client-go
// closes its connections on a certificate rotation.
//
// Thread-safe: concurrent calls use separate pooled curl handles (connections are reused).
class ApiClient final : public ApiTransport {
 public:
  explicit ApiClient(Connection connection, ApiClientOptions options = {});
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // One request to `path` (e.g. "/api/v1/nodes?limit=500"). Any HTTP status is a response;
  // errors are transport failures: Unavailable (could not connect or complete the TLS handshake,
  // or no credential (an exec plugin failed): nothing was sent), DeadlineExceeded (no complete
  // answer within `timeout`), Unknown (the connection broke after the request may have been
  // sent). Messages never contain credentials.
  absl::StatusOr<HttpResponse> Request(absl::string_view method, const std::string& path,
                                       const std::string& body, absl::Duration timeout) override;

  // A streaming GET (a watch). Calls `on_line` with each complete newline-delimited line of a
  // 200 response; stops when it returns false, when `*cancel` becomes true, when the exec
  // plugin's client certificate rotates, or when the stream ends (a stream cut after a 200 is a
  // normal end: the caller resumes). Returns the HTTP status (the first MiB of a non-200 answer
  // goes to `*error_body`), or a transport error; ResourceExhausted if a line grows past
  // `max_line_bytes` (the stream is aborted, so a runaway line cannot exhaust memory).
  // `max_duration` caps the whole stream. Each line handed to `on_line` is followed by at least
  // kStreamLinePadding readable bytes (of any content: usually the next lines), so that a parser
  // reading ahead in blocks can decode it in place (DecodePaddedWatchEvent).
  //
  // `accept` is the request's Accept header. When the answer's Content-Type is Kubernetes'
  // protobuf, `on_line` gets each frame's bytes instead of lines (no padding is promised then;
  // `max_line_bytes` caps a frame) and `*format` (if not null) is set to kProtobufFrames before
  // the first call; otherwise to kJsonLines.
  absl::StatusOr<long> Stream(const std::string& path,
                              const std::function<bool(absl::string_view line)>& on_line,
                              const std::atomic<bool>* cancel, absl::Duration max_duration,
                              size_t max_line_bytes, std::string* error_body,
                              absl::string_view accept = "application/json",
                              StreamFormat* format = nullptr) override;

  // Ends every Stream running with `cancel` (whose *cancel the caller has set) at once, by shutting
  // its connection down. Without this a stream notices *cancel within about a second (libcurl's
  // progress callback). Never touches another request's connection: a GetStreamed with `cancel`
  // notices it by the progress callback only (its connection is pooled). Thread-safe.
  void InterruptStreams(const std::atomic<bool>* cancel) override;

  // A GET whose 200 body is handed to `on_bytes` in fragments as it arrives (for a LIST too big
  // to hold twice); stops when it returns false (Cancelled) or `*cancel` becomes true. Returns
  // the HTTP status (the first MiB of a non-200 answer goes to `*error_body`), or a transport
  // error as Request's; a body cut short is a transport error. `timeout` caps the whole request.
  absl::StatusOr<long> GetStreamed(const std::string& path,
                                   const std::function<bool(absl::string_view bytes)>& on_bytes,
                                   const std::atomic<bool>* cancel, absl::Duration timeout,
                                   std::string* error_body) override;

  const Connection& connection() const { return connection_; }
  // The exec plugin's credential source; null unless the connection uses one.
  ExecCredentialSource* exec_credentials() const { return exec_.get(); }

 private:
  // The credential one request is sent with.
  struct Auth {
    std::string token;
    std::string client_cert_pem;
    std::string client_key_pem;
    uint64_t exec_generation = 0;  // 0: not from the exec plugin
  };
  // The credential to use now. Unavailable when the exec plugin fails.
  absl::StatusOr<Auth> CurrentAuth();
  // After a 401 to `used`: true if a different credential is now available (retry once).
  bool RefreshAfterUnauthorized(const Auth& used);

  void* Acquire();
  void Release(void* handle);
  // Sets the URL, TLS, proxy and auth options on a reset handle; returns the header lists to free.
  std::pair<void*, void*> Configure(void* handle, const std::string& path, const Auth& auth,
                                    absl::string_view accept = "application/json");

  // Constant after construction.
  const Connection connection_;
  const std::unique_ptr<ExecCredentialSource> exec_;
  // The URL prefix requests go to, and libcurl's CONNECT_TO entry and Host header when
  // tls-server-name replaces the server's host for TLS.
  std::string base_url_;
  std::string connect_to_;
  std::string host_header_;
  std::string proxy_;
  const size_t max_idle_connections_;

  Mutex mu_;
  // Idle handles with the exec certificate generation they last connected with.
  std::vector<std::pair<void*, uint64_t>> idle_ ABSL_GUARDED_BY(mu_);
  // The sockets of the running Streams, by cancel flag (InterruptStreams); defined in the .cc.
  class StreamSockets;
  const std::unique_ptr<StreamSockets> stream_sockets_;
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_API_CLIENT_H_
