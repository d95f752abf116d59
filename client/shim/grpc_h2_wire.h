// What fitledger-shim's two gRPC clients (grpc_h2.h: one call per connection at a time;
// grpc_h2_mux.h: many calls on a few connections) share of gRPC over HTTP/2: the server address,
// dialling, the request's headers, and reading a call's outcome from the reply's headers, data and
// stream close. Internal to the shim.
#ifndef FITLEDGER_CLIENT_SHIM_GRPC_H2_WIRE_H_
#define FITLEDGER_CLIENT_SHIM_GRPC_H2_WIRE_H_

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace fitledger::shim {

// A parsed server address.
struct H2Target {
  bool unix_socket = false;
  std::string path;  // unix
  std::string host;  // tcp
  std::string port;  // tcp
  std::string authority;
};

// "unix:///path", "unix:path", "dns:///host:port", "host:port", "[v6]:port".
absl::StatusOr<H2Target> ParseH2Target(absl::string_view target);
// The same, null for a bad address (ParseH2Target says why).
std::unique_ptr<const H2Target> ParsedH2TargetOrNull(absl::string_view target);

// Milliseconds left until `deadline` for poll(2), rounded up; 0 once it has passed.
int MillisLeft(absl::Time deadline);

// Waits for `events` on `fd` until `deadline`. False on timeout.
bool WaitFd(int fd, short events, absl::Time deadline);

// A connected, non-blocking socket to `target` by `deadline`; -1 with `error` set on failure.
// Host names are resolved with getaddrinfo, which does not honour the deadline.
int DialH2(const H2Target& target, absl::Time deadline, std::string* error);

// Starts a client session on `callbacks` with the settings both clients send (no push, large
// windows so a large reply needs no round trips). False when nghttp2 refuses.
bool NewH2ClientSession(nghttp2_session** session, const nghttp2_session_callbacks* callbacks,
                        void* user);

// The request headers of a unary call to `method` ("/pkg.Service/Method"); `timeout` is the
// grpc-timeout value (GrpcTimeout). The views must outlive the submit.
std::array<nghttp2_nv, 8> GrpcRequestHeaders(absl::string_view method, absl::string_view authority,
                                             absl::string_view timeout);

// The grpc-timeout header for `deadline`: at most 8 digits and a unit, at least 1 ms.
std::string GrpcTimeout(absl::Time deadline);

// One read of a connection asks for this much; reply and frame buffers that grew past
// kKeepBufferBytes are given back when their call is done.
inline constexpr size_t kH2ReadChunk = 64 << 10;
inline constexpr size_t kKeepBufferBytes = 1 << 20;

// Sizes `frame` to a gRPC message of `size` bytes after its 5-byte prefix, and writes the prefix
// (uncompressed); the message's bytes are the caller's to write.
void StartGrpcFrame(size_t size, std::string* frame);
// `frame` as a 5-byte-prefixed gRPC message of `message` (prefix written, message copied).
void FrameGrpcMessage(absl::string_view message, std::string* frame);

// What came back on one call's stream.
struct H2Reply {
  std::string body;  // the DATA, prefix included
  int http_status = 0;
  int grpc_status = -1;
  std::string grpc_message;
  uint32_t reset_code = 0;  // the stream's close code
  bool too_large = false;   // DATA over the limit: dropped, the stream cancelled

  // Back to "nothing came yet"; keeps the body's buffer.
  void Clear();
  // Records one response header or trailer.
  void OnHeader(absl::string_view name, absl::string_view value);
  // Appends DATA unless it passes `max_body` (then marks too_large and drops the body); false
  // when it passed (the caller resets the stream).
  bool OnData(const uint8_t* data, size_t length, size_t max_body);
  // The call's status once the stream closed; `*unseen` is true when the server refused the
  // stream (it cannot have run the call). On OK, `*message` views the reply message in body.
  grpc::Status Outcome(size_t max_body, absl::string_view* message, bool* unseen) const;
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_GRPC_H2_WIRE_H_
