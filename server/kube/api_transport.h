// What the reflector, the lease watcher and the binder need of the Kubernetes API: requests,
// streamed GETs and watches. ApiClient (api_client.h) is the real one, over libcurl; tests give a
// scripted one (tests/server/kube/reflector_test.cc).
#ifndef FITLEDGER_SERVER_KUBE_API_TRANSPORT_H_
#define FITLEDGER_SERVER_KUBE_API_TRANSPORT_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fitledger::kube {

struct HttpResponse {
  long code = 0;
  std::string body;
};

// What follows each line ApiTransport::Stream hands on (see Stream).
inline constexpr size_t kStreamLinePadding = 64;

// How a Stream's 200 body is split, by its Content-Type: newline-delimited JSON events, or,
// for `application/vnd.kubernetes.protobuf;stream=watch`, frames of a 4-byte big-endian length
// and that many bytes (apimachinery util/framer NewLengthDelimitedFrameWriter).
enum class StreamFormat { kJsonLines, kProtobufFrames };
// Kubernetes' protobuf media type (apimachinery runtime.ContentTypeProtobuf).
inline constexpr char kProtobufMediaType[] = "application/vnd.kubernetes.protobuf";

// Thread-safe: every method may be called from several threads at once.
class ApiTransport {
 public:
  virtual ~ApiTransport() = default;

  // One request to `path` (e.g. "/api/v1/nodes?limit=500"). Any HTTP status is a response;
  // errors are transport failures: Unavailable (nothing was sent: could not connect, no
  // credential), DeadlineExceeded (no complete answer within `timeout`), Unknown (the connection
  // broke after the request may have been sent). Messages never contain credentials.
  virtual absl::StatusOr<HttpResponse> Request(absl::string_view method, const std::string& path,
                                               const std::string& body, absl::Duration timeout) = 0;

  // A streaming GET (a watch). Calls `on_line` with each complete newline-delimited line of a
  // 200 response; stops when it returns false, when `*cancel` becomes true, or when the stream
  // ends (a stream cut after a 200 is a normal end: the caller resumes). Returns the HTTP status
  // (the first MiB of a non-200 answer goes to `*error_body`), or a transport error;
  // ResourceExhausted if a line grows past `max_line_bytes` (the stream is aborted, so a runaway
  // line cannot exhaust memory). `max_duration` caps the whole stream. Each line handed to
  // `on_line` is followed by at least kStreamLinePadding readable bytes (of any content), so
  // that a parser reading ahead in blocks can decode it in place (DecodePaddedWatchEvent).
  //
  // `accept` is the request's Accept header. When the answer's Content-Type is Kubernetes'
  // protobuf, `on_line` gets each frame's bytes instead of lines (no padding is promised then;
  // `max_line_bytes` caps a frame) and `*format` (if not null) is set to kProtobufFrames before
  // the first call; otherwise to kJsonLines.
  virtual absl::StatusOr<long> Stream(const std::string& path,
                                      const std::function<bool(absl::string_view line)>& on_line,
                                      const std::atomic<bool>* cancel, absl::Duration max_duration,
                                      size_t max_line_bytes, std::string* error_body,
                                      absl::string_view accept = "application/json",
                                      StreamFormat* format = nullptr) = 0;

  // Ends every Stream running with `cancel` (whose *cancel the caller has set) at once. Without
  // this a stream may take about a second to notice *cancel. Never touches another request.
  virtual void InterruptStreams(const std::atomic<bool>* cancel) = 0;

  // A GET whose 200 body is handed to `on_bytes` in fragments as it arrives (for a LIST too big
  // to hold twice); stops when it returns false (Cancelled) or `*cancel` becomes true. Returns
  // the HTTP status (the first MiB of a non-200 answer goes to `*error_body`), or a transport
  // error as Request's; a body cut short is a transport error. `timeout` caps the whole request.
  virtual absl::StatusOr<long> GetStreamed(
      const std::string& path, const std::function<bool(absl::string_view bytes)>& on_bytes,
      const std::atomic<bool>* cancel, absl::Duration timeout, std::string* error_body) = 0;
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_API_TRANSPORT_H_
