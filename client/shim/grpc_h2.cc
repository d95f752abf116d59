#include "client/shim/grpc_h2.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/client_context.h"

namespace fitledger::shim {

// A parsed server address.
struct H2Target {
  bool unix_socket = false;
  std::string path;  // unix
  std::string host;  // tcp
  std::string port;  // tcp
  std::string authority;
};

namespace {

constexpr size_t kReadChunk = 64 << 10;
// A reply buffer that grew past this is given back after the call.
constexpr size_t kKeepBufferBytes = 1 << 20;
// A connect cut short by the caller's deadline with less time than this is not held against the
// server (no backoff).
constexpr absl::Duration kMinConnectBudget = absl::Milliseconds(250);

// "unix:///path", "unix:path", "dns:///host:port", "host:port", "[v6]:port".
absl::StatusOr<H2Target> ParseTarget(absl::string_view target) {
  H2Target t;
  if (absl::ConsumePrefix(&target, "unix://")) {
    if (!absl::StartsWith(target, "/")) {
      return absl::InvalidArgumentError("unix:// needs an absolute path (unix:///path)");
    }
  }
  if (absl::StartsWith(target, "/") || absl::ConsumePrefix(&target, "unix:")) {
    if (target.empty() || target.size() >= sizeof(sockaddr_un::sun_path)) {
      return absl::InvalidArgumentError("bad unix socket path");
    }
    t.unix_socket = true;
    t.path = std::string(target);
    t.authority = "localhost";
    return t;
  }
  absl::ConsumePrefix(&target, "dns:///");
  t.authority = std::string(target);
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == target.size()) {
    return absl::InvalidArgumentError("expected unix:///path or host:port");
  }
  absl::string_view host = target.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return absl::InvalidArgumentError("unclosed [ in the host");
  }
  int port = 0;
  if (host.empty() || !absl::SimpleAtoi(target.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return absl::InvalidArgumentError("expected unix:///path or host:port");
  }
  t.host = std::string(host);
  t.port = std::string(target.substr(colon + 1));
  return t;
}

int MillisLeft(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
}

// The grpc-timeout header: at most 8 digits and a unit.
std::string TimeoutHeader(absl::Time deadline) {
  const int64_t ms = std::max<int64_t>(
      1, absl::ToInt64Milliseconds(absl::Ceil(deadline - absl::Now(), absl::Milliseconds(1))));
  if (ms <= 99'999'999) return absl::StrCat(ms, "m");
  return absl::StrCat(std::min<int64_t>(ms / 1000, 99'999'999), "S");
}

// Waits for `events` on `fd` until `deadline`. False on timeout.
bool Wait(int fd, short events, absl::Time deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // let the next recv/send report it
  }
}

// Connects a non-blocking socket to `address` by `deadline`; -1 with `error` set on failure.
int ConnectOne(int family, const sockaddr* address, socklen_t length, absl::Time deadline,
               std::string* error) {
  const int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = absl::StrCat("socket: ", strerror(errno));
    return -1;
  }
  if (connect(fd, address, length) != 0) {
    // EAGAIN (a Unix socket's full backlog) is a failure: only EINPROGRESS is pending.
    if (errno != EINPROGRESS) {
      *error = absl::StrCat("connect: ", strerror(errno));
      close(fd);
      return -1;
    }
    if (!Wait(fd, POLLOUT, deadline)) {
      *error = "connect: timed out";
      close(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      *error = absl::StrCat("connect: ", strerror(so_error));
      close(fd);
      return -1;
    }
  }
  if (family != AF_UNIX) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

int Dial(const H2Target& target, absl::Time deadline, std::string* error) {
  if (target.unix_socket) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, target.path.data(), target.path.size());
    return ConnectOne(AF_UNIX, reinterpret_cast<const sockaddr*>(&address), sizeof(address),
                      deadline, error);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(target.host.c_str(), target.port.c_str(), &hints, &found);
      rc != 0) {
    *error = absl::StrCat("resolve ", target.host, ": ", gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ConnectOne(a->ai_family, a->ai_addr, a->ai_addrlen, deadline, error);
  }
  freeaddrinfo(found);
  return fd;
}

// grpc-message is percent-encoded (gRPC's HTTP/2 protocol document).
std::string PercentDecode(absl::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size() && absl::ascii_isxdigit(in[i + 1]) &&
        absl::ascii_isxdigit(in[i + 2])) {
      auto hex = [](char c) { return absl::ascii_isdigit(c) ? c - '0' : (c | 0x20) - 'a' + 10; };
      out.push_back(static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2])));
      i += 2;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

// gRPC's mapping of an HTTP status without grpc-status (doc/http-grpc-status-mapping.md).
grpc::StatusCode FromHttpStatus(int status) {
  switch (status) {
    case 400:
      return grpc::StatusCode::INTERNAL;
    case 401:
      return grpc::StatusCode::UNAUTHENTICATED;
    case 403:
      return grpc::StatusCode::PERMISSION_DENIED;
    case 404:
      return grpc::StatusCode::UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return grpc::StatusCode::UNAVAILABLE;
    default:
      return grpc::StatusCode::UNKNOWN;
  }
}

// gRPC's mapping of RST_STREAM codes (doc/PROTOCOL-HTTP2.md, "Errors").
grpc::StatusCode FromResetCode(uint32_t code) {
  switch (code) {
    case NGHTTP2_REFUSED_STREAM:
      return grpc::StatusCode::UNAVAILABLE;
    case NGHTTP2_CANCEL:
      return grpc::StatusCode::CANCELLED;
    case NGHTTP2_ENHANCE_YOUR_CALM:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case NGHTTP2_INADEQUATE_SECURITY:
      return grpc::StatusCode::PERMISSION_DENIED;
    default:
      return grpc::StatusCode::INTERNAL;
  }
}

std::string& ThreadFrame() {
  thread_local std::string frame;
  return frame;
}

std::string& ThreadBody() {
  thread_local std::string body;
  return body;
}

}  // namespace

// One HTTP/2 connection, used by one call at a time.
class H2Connection {
 public:
  ~H2Connection() {
    if (session_ != nullptr) nghttp2_session_del(session_);
    if (fd_ >= 0) close(fd_);
  }

  static std::unique_ptr<H2Connection> Open(const H2Target& target, absl::Time deadline,
                                            std::string* error) {
    const int fd = Dial(target, deadline, error);
    if (fd < 0) return nullptr;
    std::unique_ptr<H2Connection> c(new H2Connection(fd, target.authority));
    if (!c->Init()) {
      *error = "cannot start an HTTP/2 session";
      return nullptr;
    }
    return c;
  }

  bool healthy() const { return !broken_ && !goaway_; }

  // Reads whatever the server sent while the connection was idle (SETTINGS, PING, GOAWAY) and
  // answers it. False when the connection cannot take a call.
  bool Refresh(absl::Time deadline) {
    if (!healthy()) return false;
    std::string& buffer = ReadBuffer();
    for (;;) {
      const ssize_t n = recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n > 0) {
        if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buffer.data()), n) <
            0) {
          broken_ = true;
        }
        if (broken_ || static_cast<size_t>(n) < buffer.size()) break;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) broken_ = true;
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    if (healthy() && !Flush(deadline)) broken_ = true;
    return healthy() && nghttp2_session_want_read(session_) != 0;
  }

  // One unary call. `frame` is the request with its 5-byte prefix; the reply's message bytes
  // (prefix included) land in `body`. `*retryable` is true when the server cannot have seen the
  // request (nothing was written, or the stream was refused).
  grpc::Status Call(absl::string_view method, absl::string_view frame, std::string* body,
                    size_t max_body, absl::Time deadline, bool* retryable) {
    *retryable = false;
    body->clear();
    body_ = body;
    max_body_ = max_body;
    send_ = frame;
    sent_ = 0;
    closed_ = false;
    reset_code_ = 0;
    http_status_ = 0;
    grpc_status_ = -1;
    grpc_message_.clear();
    too_large_ = false;

    wrote_ = false;
    const std::string timeout = TimeoutHeader(deadline);
    const nghttp2_nv headers[] = {
        Header(":method", "POST"),
        Header(":scheme", "http"),
        Header(":path", method),
        Header(":authority", authority_),
        Header("content-type", "application/grpc"),
        Header("te", "trailers"),
        Header("grpc-timeout", timeout),
        Header("user-agent", "fitledger-shim"),
    };
    nghttp2_data_provider provider{};
    provider.read_callback = &H2Connection::ReadRequest;
    stream_id_ =
        nghttp2_submit_request(session_, nullptr, headers, std::size(headers), &provider, nullptr);
    if (stream_id_ < 0) {
      broken_ = true;  // e.g. stream ids used up: a new connection
      *retryable = true;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("cannot start a stream: ", nghttp2_strerror(stream_id_)));
    }
    std::string& buffer = ReadBuffer();
    for (;;) {
      // A reply that keeps arriving (or one over the limit, read only to be dropped) does not
      // keep the call past its deadline.
      if (absl::Now() >= deadline) return Lost(deadline, "deadline exceeded");
      if (!Flush(deadline)) {
        *retryable = !wrote_;
        return Lost(deadline, "cannot write to the server");
      }
      if (closed_) break;
      if (nghttp2_session_want_read(session_) == 0) {
        broken_ = true;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server ended the connection");
      }
      if (!Wait(fd_, POLLIN, deadline)) return Lost(deadline, "deadline exceeded");
      const ssize_t n = recv(fd_, buffer.data(), buffer.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) return Lost(deadline, "connection closed by the server");
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buffer.data()), n) <
          0) {
        broken_ = true;
        return grpc::Status(grpc::StatusCode::INTERNAL, "malformed HTTP/2 from the server");
      }
    }
    if (!Flush(deadline)) broken_ = true;  // WINDOW_UPDATEs queued by the reply; the call is done
    if (too_large_) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("reply larger than ", max_body_, " bytes"));
    }
    if (grpc_status_ >= 0) {
      const auto code = grpc_status_ <= grpc::StatusCode::UNAUTHENTICATED
                            ? static_cast<grpc::StatusCode>(grpc_status_)
                            : grpc::StatusCode::UNKNOWN;
      return grpc::Status(code, grpc_message_);
    }
    if (http_status_ != 0 && http_status_ != 200) {
      return grpc::Status(FromHttpStatus(http_status_),
                          absl::StrCat("HTTP status ", http_status_, " from the server"));
    }
    if (reset_code_ != 0) {
      *retryable = reset_code_ == NGHTTP2_REFUSED_STREAM;
      return grpc::Status(
          FromResetCode(reset_code_),
          absl::StrCat("stream reset by the server: ", nghttp2_http2_strerror(reset_code_)));
    }
    return grpc::Status(grpc::StatusCode::INTERNAL, "the reply has no grpc-status");
  }

 private:
  H2Connection(int fd, std::string authority) : fd_(fd), authority_(std::move(authority)) {}

  static nghttp2_nv Header(absl::string_view name, absl::string_view value) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                      value.size(), NGHTTP2_NV_FLAG_NONE};
  }

  static std::string& ReadBuffer() {
    thread_local std::string buffer(kReadChunk, '\0');
    return buffer;
  }

  bool Init() {
    nghttp2_session_callbacks* callbacks = nullptr;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
    nghttp2_session_callbacks_set_on_header_callback(callbacks, &H2Connection::OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &H2Connection::OnData);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &H2Connection::OnStreamClose);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &H2Connection::OnFrame);
    const int rc = nghttp2_session_client_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    if (rc != 0) return false;
    // Large windows, as gRPC's own client advertises, so a large reply needs no round trips.
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 8 << 20},
    };
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) {
      return false;
    }
    return nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 16 << 20) == 0;
  }

  // Writes every frame nghttp2 has queued. False on a write error or the deadline.
  bool Flush(absl::Time deadline) {
    out_.clear();
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        broken_ = true;
        return false;
      }
      if (n == 0) break;
      out_.append(reinterpret_cast<const char*>(data), n);
    }
    size_t done = 0;
    while (done < out_.size()) {
      const ssize_t n = send(fd_, out_.data() + done, out_.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += n;
        wrote_ = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && Wait(fd_, POLLOUT, deadline)) {
        continue;
      }
      broken_ = true;
      return false;
    }
    if (out_.capacity() > kKeepBufferBytes) std::string().swap(out_);
    return true;
  }

  // The call failed on the transport: the connection is not reused.
  grpc::Status Lost(absl::Time deadline, absl::string_view what) {
    broken_ = true;
    if (absl::Now() >= deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded");
    }
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(what));
  }

  static ssize_t ReadRequest(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source*, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    const size_t n = std::min(length, c->send_.size() - c->sent_);
    std::memcpy(buf, c->send_.data() + c->sent_, n);
    c->sent_ += n;
    if (c->sent_ == c->send_.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_length, const uint8_t* value, size_t value_length, uint8_t,
                      void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (frame->hd.stream_id != c->stream_id_) return 0;
    const absl::string_view n(reinterpret_cast<const char*>(name), name_length);
    const absl::string_view v(reinterpret_cast<const char*>(value), value_length);
    if (n == ":status") {
      if (!absl::SimpleAtoi(v, &c->http_status_)) c->http_status_ = 0;
    } else if (n == "grpc-status") {
      if (!absl::SimpleAtoi(v, &c->grpc_status_) || c->grpc_status_ < 0) c->grpc_status_ = 2;
    } else if (n == "grpc-message") {
      c->grpc_message_ = PercentDecode(v);
    }
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                    size_t length, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (stream_id != c->stream_id_ || c->too_large_) return 0;
    if (c->body_->size() + length > c->max_body_ + 5) {
      c->too_large_ = true;
      nghttp2_submit_rst_stream(c->session_, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
      c->body_->clear();
      return 0;
    }
    c->body_->append(reinterpret_cast<const char*>(data), length);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (stream_id != c->stream_id_) return 0;
    c->closed_ = true;
    c->reset_code_ = error_code;
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_GOAWAY) static_cast<H2Connection*>(user)->goaway_ = true;
    return 0;
  }

  const int fd_;
  const std::string authority_;
  nghttp2_session* session_ = nullptr;
  std::string out_;
  bool broken_ = false;
  bool goaway_ = false;
  bool wrote_ = false;  // bytes of the current call reached the socket

  // The current call.
  int32_t stream_id_ = -1;
  absl::string_view send_;
  size_t sent_ = 0;
  std::string* body_ = nullptr;
  size_t max_body_ = 0;
  bool too_large_ = false;
  bool closed_ = false;
  uint32_t reset_code_ = 0;
  int http_status_ = 0;
  int grpc_status_ = -1;
  std::string grpc_message_;
};

GrpcH2Client::GrpcH2Client(std::string target, Options options)
    : target_(std::move(target)),
      parsed_([this]() -> std::unique_ptr<const H2Target> {
        absl::StatusOr<H2Target> parsed = ParseTarget(target_);
        if (!parsed.ok()) return nullptr;
        return std::make_unique<const H2Target>(*std::move(parsed));
      }()),
      options_([&] {
        options.initial_backoff = std::max(options.initial_backoff, absl::ZeroDuration());
        options.max_backoff = std::max(options.max_backoff, options.initial_backoff);
        return options;
      }()) {}

GrpcH2Client::~GrpcH2Client() = default;

absl::Status GrpcH2Client::CheckTarget(absl::string_view target) {
  return ParseTarget(target).status();
}

int GrpcH2Client::connections_dialled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dialled_;
}

int GrpcH2Client::RefreshIdle() {
  std::vector<std::unique_ptr<H2Connection>> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle.swap(idle_);
  }
  int left = 0;
  for (auto& c : idle) {
    if (!c->Refresh(absl::Now() + absl::Seconds(1))) continue;
    ++left;
    Give(std::move(c));
  }
  return left;
}

std::unique_ptr<H2Connection> GrpcH2Client::Take(grpc::Status* status, absl::Time deadline) {
  for (;;) {
    std::unique_ptr<H2Connection> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_.empty()) break;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    if (c->Refresh(deadline)) return c;
  }
  if (parsed_ == nullptr) {
    *status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           absl::StrCat("bad server address ", target_, ": ",
                                        ParseTarget(target_).status().message()));
    return nullptr;
  }
  int64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation = dial_generation_;
    if (const absl::Time now = absl::Now(); now < retry_after_) {
      *status = grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("cannot connect to ", target_, ": ", last_dial_error_, " (next attempt in ",
                       absl::ToInt64Milliseconds(retry_after_ - now), " ms)"));
      return nullptr;
    }
  }
  std::string error;
  const absl::Time start = absl::Now();
  std::unique_ptr<H2Connection> c = H2Connection::Open(*parsed_, deadline, &error);
  std::lock_guard<std::mutex> lock(mu_);
  if (c == nullptr) {
    const absl::Time now = absl::Now();
    // A dial counts against the server unless the caller's deadline cut it short before it had
    // a fair chance, or another dial has succeeded since it began; failures at once double the
    // backoff once.
    const bool fair = now < deadline || deadline - start >= kMinConnectBudget;
    if (fair && generation == dial_generation_ && now >= retry_after_) {
      backoff_ = std::clamp(backoff_ * 2, options_.initial_backoff, options_.max_backoff);
      retry_after_ = now + backoff_;
      last_dial_error_ = error;
    }
    *status = grpc::Status(absl::Now() >= deadline ? grpc::StatusCode::DEADLINE_EXCEEDED
                                                   : grpc::StatusCode::UNAVAILABLE,
                           absl::StrCat("cannot connect to ", target_, ": ", error));
    return nullptr;
  }
  backoff_ = absl::ZeroDuration();
  retry_after_ = absl::InfinitePast();
  ++dial_generation_;
  ++dialled_;
  return c;
}

void GrpcH2Client::Give(std::unique_ptr<H2Connection> connection) {
  if (!connection->healthy()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(idle_.size()) < options_.max_idle_connections) {
    idle_.push_back(std::move(connection));
  }
}

grpc::Status GrpcH2Client::Call(absl::string_view method,
                                const google::protobuf::MessageLite& request,
                                google::protobuf::MessageLite* response, absl::Time deadline) {
  const size_t size = request.ByteSizeLong();
  if (size > 0xffffffffu) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request too large");
  }
  std::string& frame = StartFrame(size);
  request.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(frame.data() + 5));
  absl::string_view reply;
  grpc::Status status = CallFrame(method, frame, deadline, &reply);
  if (status.ok() && !response->ParseFromArray(reply.data(), static_cast<int>(reply.size()))) {
    status = grpc::Status(grpc::StatusCode::INTERNAL, "cannot parse the reply");
  }
  ReleaseLargeBuffers();
  return status;
}

grpc::Status GrpcH2Client::CallBytes(absl::string_view method, absl::string_view request,
                                     absl::Time deadline, std::string* reply) {
  if (request.size() > 0xffffffffu) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request too large");
  }
  std::string& frame = StartFrame(request.size());
  std::memcpy(frame.data() + 5, request.data(), request.size());
  absl::string_view bytes;
  grpc::Status status = CallFrame(method, frame, deadline, &bytes);
  if (status.ok()) reply->assign(bytes.data(), bytes.size());
  ReleaseLargeBuffers();
  return status;
}

void GrpcH2Client::ReleaseLargeBuffers() {
  if (std::string& frame = ThreadFrame(); frame.capacity() > kKeepBufferBytes) {
    std::string().swap(frame);
  }
  if (std::string& body = ThreadBody(); body.capacity() > kKeepBufferBytes) {
    std::string().swap(body);
  }
}

std::string& GrpcH2Client::StartFrame(size_t size) {
  std::string& frame = ThreadFrame();
  frame.resize(5 + size);
  frame[0] = 0;
  frame[1] = static_cast<char>(size >> 24);
  frame[2] = static_cast<char>(size >> 16);
  frame[3] = static_cast<char>(size >> 8);
  frame[4] = static_cast<char>(size);
  return frame;
}

grpc::Status GrpcH2Client::CallFrame(absl::string_view method, const std::string& frame,
                                     absl::Time deadline, absl::string_view* reply) {
  std::string& body = ThreadBody();
  grpc::Status status;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (absl::Now() >= deadline) {
      // Not sent: a request the caller has given up on never reaches the server.
      if (attempt == 0)
        status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded");
      break;
    }
    std::unique_ptr<H2Connection> c = Take(&status, deadline);
    if (c == nullptr) break;
    bool retryable = false;
    status = c->Call(method, frame, &body, options_.max_response_bytes, deadline, &retryable);
    Give(std::move(c));
    // A request the server cannot have seen goes once more, on a new connection.
    if (status.ok() || !retryable || absl::Now() >= deadline) break;
  }
  if (!status.ok()) return status;
  const auto* bytes = reinterpret_cast<const uint8_t*>(body.data());
  const size_t length = body.size() < 5 ? 0
                                        : (size_t{bytes[1]} << 24 | size_t{bytes[2]} << 16 |
                                           size_t{bytes[3]} << 8 | size_t{bytes[4]});
  if (body.size() < 5 || body.size() != 5 + length) {
    return grpc::Status(
        grpc::StatusCode::INTERNAL,
        absl::StrCat("the reply is not one gRPC message (", body.size(), " bytes)"));
  }
  if (bytes[0] != 0) return grpc::Status(grpc::StatusCode::INTERNAL, "the reply is compressed");
  *reply = absl::string_view(body.data() + 5, length);
  return status;
}

namespace {
absl::Time DeadlineOf(const grpc::ClientContext* context) {
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}
}  // namespace

grpc::Status H2ExtenderStub::CallBytes(absl::string_view method, absl::string_view request,
                                       absl::Time deadline, std::string* reply) {
  return client_->CallBytes(method, request, deadline, reply);
}

grpc::Status H2ExtenderStub::Filter(grpc::ClientContext* context, const v1::ExtenderArgs& request,
                                    v1::ExtenderFilterResult* response) {
  return client_->Call("/fitledger.v1.Extender/Filter", request, response, DeadlineOf(context));
}

grpc::Status H2ExtenderStub::Prioritize(grpc::ClientContext* context,
                                        const v1::ExtenderArgs& request,
                                        v1::HostPriorityList* response) {
  return client_->Call("/fitledger.v1.Extender/Prioritize", request, response, DeadlineOf(context));
}

grpc::Status H2ExtenderStub::Bind(grpc::ClientContext* context,
                                  const v1::ExtenderBindingArgs& request,
                                  v1::ExtenderBindingResult* response) {
  return client_->Call("/fitledger.v1.Extender/Bind", request, response, DeadlineOf(context));
}

grpc::Status H2ExtenderStub::Preempt(grpc::ClientContext* context,
                                     const v1::ExtenderPreemptionArgs& request,
                                     v1::ExtenderPreemptionResult* response) {
  return client_->Call("/fitledger.v1.Extender/Preempt", request, response, DeadlineOf(context));
}

grpc::Status H2HealthStub::Check(grpc::ClientContext* context,
                                 const grpc::health::v1::HealthCheckRequest& request,
                                 grpc::health::v1::HealthCheckResponse* response) {
  return client_->Call("/grpc.health.v1.Health/Check", request, response, DeadlineOf(context));
}

}  // namespace fitledger::shim
