#include "server/service/grpc_h2_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace fitledger {
namespace {

constexpr size_t kReadChunk = 64 << 10;
// A request's headers beyond this reset the stream.
constexpr size_t kMaxHeaderBytes = 16 << 10;
// Buffers that grew past this are given back after the call.
constexpr size_t kKeepBufferBytes = 1 << 20;

// grpc-timeout: 1-8 digits and a unit (gRPC's PROTOCOL-HTTP2.md). False when malformed.
bool ParseTimeout(absl::string_view value, absl::Duration* out) {
  if (value.size() < 2 || value.size() > 9) return false;
  const absl::string_view digits = value.substr(0, value.size() - 1);
  // Digits only: SimpleAtoi would also take a sign or blanks.
  if (!absl::c_all_of(digits, absl::ascii_isdigit)) return false;
  int64_t n = 0;
  if (!absl::SimpleAtoi(digits, &n)) return false;
  switch (value.back()) {
    case 'H':
      *out = absl::Hours(n);
      return true;
    case 'M':
      *out = absl::Minutes(n);
      return true;
    case 'S':
      *out = absl::Seconds(n);
      return true;
    case 'm':
      *out = absl::Milliseconds(n);
      return true;
    case 'u':
      *out = absl::Microseconds(n);
      return true;
    case 'n':
      *out = absl::Nanoseconds(n);
      return true;
    default:
      return false;
  }
}

// grpc-message is percent-encoded: everything outside printable ASCII, and '%'.
std::string PercentEncode(absl::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size());
  for (const char ch : in) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e || c == '%') {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

nghttp2_nv Header(absl::string_view name, absl::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

int MillisUntil(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// Waits for `events` on `fd` until `deadline`. False on timeout.
bool WaitUntil(int fd, short events, absl::Time deadline) {
  for (;;) {
    if (absl::Now() >= deadline) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MillisUntil(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // let the next send report it
  }
}

absl::StatusOr<int> BindUnix(const std::string& path) {
  sockaddr_un address{};
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("bad unix socket path \"", path, "\""));
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  struct stat existing {};
  if (lstat(path.c_str(), &existing) == 0 && !S_ISSOCK(existing.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix://", path, ": the path exists and is not a socket"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  unlink(path.c_str());  // a stale socket from a previous run
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 1024) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on unix://", path, ": ", strerror(error)));
  }
  return fd;
}

absl::StatusOr<int> BindTcp(absl::string_view address, int* port) {
  const size_t colon = address.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? "" : address.substr(0, colon);
  int wanted = -1;
  if (colon == absl::string_view::npos || host.empty() ||
      !absl::SimpleAtoi(address.substr(colon + 1), &wanted) || wanted < 0 || wanted > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", address, "\" is neither unix:///path nor host:port"));
  }
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("\"", address, "\": unclosed [ in the host"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string host_string(host);
  const std::string port_string = absl::StrCat(wanted);
  if (const int rc = getaddrinfo(host_string.c_str(), port_string.c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", host, ": ", gai_strerror(rc)));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      error = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  *port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

}  // namespace

struct GrpcH2Server::Impl {
  struct Listener {
    int fd = -1;
    std::string unix_path;
    std::thread thread;
  };
  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  Impl(GrpcH2ServerOptions o, std::vector<std::pair<std::string, GrpcUnaryMethod>> m)
      : options(o), methods(m.begin(), m.end()) {
    stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    reap_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }

  void AcceptLoop(Listener* listener);
  void Serve(int fd);
  // Joins finished connection threads (each signals reap_fd when it finishes). Needs mu.
  void Reap();

  const GrpcH2ServerOptions options;
  const absl::flat_hash_map<std::string, GrpcUnaryMethod> methods;
  int stop_fd = -1;  // readable once Stop began
  int reap_fd = -1;  // readable when a connection thread finished: a listener thread joins it
  std::atomic<int> open{0};
  std::atomic<int64_t> buffered{0};  // request bytes held by all connections

  std::mutex mu;
  bool stopped = false;                                // guarded by mu
  std::vector<std::unique_ptr<Listener>> listeners;    // guarded by mu
  std::list<std::unique_ptr<Connection>> connections;  // guarded by mu
};

namespace {

// One client connection, served by one thread.
class ServerConnection {
 public:
  ServerConnection(int fd, const GrpcH2ServerOptions& options,
                   const absl::flat_hash_map<std::string, GrpcUnaryMethod>& methods, int stop_fd,
                   std::atomic<int64_t>* buffered_total)
      : fd_(fd),
        options_(options),
        methods_(methods),
        stop_fd_(stop_fd),
        buffered_total_(buffered_total) {}
  ~ServerConnection() {
    buffered_total_->fetch_sub(static_cast<int64_t>(buffered_));
    if (session_ != nullptr) nghttp2_session_del(session_);
  }

  void Serve() {
    if (!Init()) return;
    std::string buffer(kReadChunk, '\0');
    bool received = false;  // any bytes yet
    bool stopping = false;  // Stop began: a shutdown notice went out, open streams may finish
    absl::Time stop_deadline;
    for (;;) {
      while (!ready_.empty()) {
        const int32_t id = ready_.front();
        ready_.pop_front();
        Dispatch(id);
        if (!Flush()) return;
        // A refused upload is cut short once its reply is out (sent together, nghttp2 would
        // drop the reply).
        for (const int32_t reset : reset_after_reply_) {
          nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, reset, NGHTTP2_NO_ERROR);
        }
        reset_after_reply_.clear();
      }
      if (!Flush()) return;
      if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
        return;
      }
      if (stopping && (streams_.empty() || absl::Now() >= stop_deadline)) {
        Close();
        return;
      }
      // How long to wait for the client: replies it will not take (its window stays shut), a
      // stop in progress, silence.
      const absl::Time now = absl::Now();
      absl::Time deadline = now + (received ? options_.idle_timeout : options_.first_bytes_timeout);
      if (replies_pending_ > 0) deadline = std::min(deadline, now + options_.write_timeout);
      if (stopping) deadline = std::min(deadline, stop_deadline);
      pollfd p[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      const int n_polled = poll(p, stopping ? 1 : 2, MillisUntil(deadline));
      if (n_polled < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (n_polled == 0) {
        if (stopping) continue;  // the stop deadline: closed at the top of the loop
        return;                  // a silent or stalled client
      }
      if (!stopping && p[1].revents != 0) {
        // Graceful: streams already open may finish (until write_timeout), then GOAWAY.
        stopping = true;
        stop_deadline = absl::Now() + options_.write_timeout;
        nghttp2_submit_shutdown_notice(session_);
        continue;
      }
      if (p[0].revents == 0) continue;
      const ssize_t n = recv(fd_, buffer.data(), buffer.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) return;
      received = true;
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buffer.data()), n) <
          0) {
        Flush();  // the GOAWAY nghttp2 queued for a protocol error, if any
        return;
      }
    }
  }

 private:
  struct Stream {
    absl::Time started;
    std::string method;
    std::string path;
    std::string content_type;
    std::string encoding;
    absl::Duration timeout = absl::InfiniteDuration();
    size_t header_bytes = 0;
    bool headers_too_large = false;
    std::string body;
    bool too_large = false;  // refused for its size (or the server's byte budget): `refusal`
    std::string refusal;
    bool replied = false;  // a reply was submitted (and the stream is not closed yet)
    bool queued = false;
    bool ended = false;  // the client's END_STREAM came
    // The reply: a 5-byte prefix, then the message.
    char prefix[5] = {};
    std::string reply;
    size_t sent = 0;
  };

  bool Init() {
    nghttp2_session_callbacks* callbacks = nullptr;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, &ServerConnection::OnBegin);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, &ServerConnection::OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &ServerConnection::OnData);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &ServerConnection::OnFrame);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks,
                                                           &ServerConnection::OnStreamClose);
    const int rc = nghttp2_session_server_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    if (rc != 0) return false;
    // Large windows, as gRPC's server advertises, so a large request needs no round trips.
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
         static_cast<uint32_t>(std::max(1, options_.max_concurrent_streams))},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4 << 20},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderBytes},
    };
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) {
      return false;
    }
    return nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 16 << 20) == 0;
  }

  Stream* Find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : &it->second;
  }

  void Queue(int32_t id, Stream* s) {
    if (s->queued) return;
    s->queued = true;
    ready_.push_back(id);
  }

  // application/grpc, or with a +format or parameters; not grpc-web.
  static bool IsGrpcContentType(absl::string_view type) {
    return absl::ConsumePrefix(&type, "application/grpc") &&
           (type.empty() || type[0] == '+' || type[0] == ';');
  }

  // Whether a request is refused on its headers alone (answered without waiting for its body).
  bool RefusedOnHeaders(const Stream& s) const {
    return s.headers_too_large || s.method != "POST" || !IsGrpcContentType(s.content_type) ||
           !methods_.contains(s.path);
  }

  // The last GOAWAY (naming the last stream served), then a lingering close: the client's unread
  // bytes are drained first, so the kernel does not answer them with a reset that could discard
  // the replies and the GOAWAY still in flight.
  void Close() {
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                          nullptr, 0);
    if (!Flush()) return;
    shutdown(fd_, SHUT_WR);
    const absl::Time deadline = absl::Now() + absl::Seconds(1);
    char sink[4096];
    while (WaitUntil(fd_, POLLIN, deadline)) {
      const ssize_t n = recv(fd_, sink, sizeof(sink), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    }
  }

  // Answers one fully received request, or one refused early (on its headers, or too large).
  // A refused request whose upload has not ended is then reset, so its client stops sending
  // (a streaming client would otherwise wait for a reply to its first message forever).
  // `s` points into streams_: nothing here may call nghttp2_session_mem_recv or mem_send (their
  // callbacks insert and erase streams); the submit_* calls only queue frames.
  void Dispatch(int32_t id) {
    Stream* s = Find(id);
    if (s == nullptr) return;  // reset by the client meanwhile
    if (!s->ended) reset_after_reply_.push_back(id);
    if (s->headers_too_large) {
      RespondStatus(id, absl::ResourceExhaustedError(absl::StrCat("request headers larger than ",
                                                                  kMaxHeaderBytes, " bytes")));
      return;
    }
    if (s->method != "POST") {
      RespondHttp(id, 405, absl::StrCat("method ", s->method, " is not allowed: gRPC uses POST\n"));
      return;
    }
    if (!IsGrpcContentType(s->content_type)) {
      RespondHttp(id, 415,
                  absl::StrCat("content-type \"", s->content_type,
                               "\" is not gRPC: expected application/grpc\n"));
      return;
    }
    auto method = methods_.find(s->path);
    if (method == methods_.end()) {
      RespondStatus(id, absl::UnimplementedError(absl::StrCat(
                            "unknown method ", s->path,
                            " (this listener serves unary methods only; use grpc.listen for "
                            "reflection and streaming)")));
      return;
    }
    if (s->too_large) {
      RespondStatus(id, absl::ResourceExhaustedError(s->refusal));
      return;
    }
    if (s->timeout != absl::InfiniteDuration() && absl::Now() - s->started >= s->timeout) {
      RespondStatus(id, absl::DeadlineExceededError("deadline exceeded before the call ran"));
      return;
    }
    if (s->body.size() < 5) {
      RespondStatus(id, absl::InvalidArgumentError("the request has no message"));
      return;
    }
    const auto* bytes = reinterpret_cast<const unsigned char*>(s->body.data());
    const uint64_t length = (uint64_t{bytes[1]} << 24) | (uint64_t{bytes[2]} << 16) |
                            (uint64_t{bytes[3]} << 8) | uint64_t{bytes[4]};
    if ((bytes[0] & 1) != 0) {
      RespondStatus(id,
                    absl::UnimplementedError(absl::StrCat("compressed messages (grpc-encoding \"",
                                                          s->encoding,
                                                          "\") are not supported: send identity")),
                    /*accept_identity_only=*/true);
      return;
    }
    if (length != s->body.size() - 5) {
      RespondStatus(id, absl::InvalidArgumentError(absl::StrCat(
                            "a unary call carries one message: the prefix says ", length,
                            " bytes, the stream carried ", s->body.size() - 5)));
      return;
    }
    std::string reply;
    const absl::Status status = method->second(absl::string_view(s->body).substr(5), &reply);
    FreeBody(s);
    if (!status.ok()) {
      RespondStatus(id, status);
      return;
    }
    if (reply.size() > 0xffffffffu) {
      RespondStatus(id, absl::InternalError("reply too large for one gRPC message"));
      return;
    }
    const uint32_t n = static_cast<uint32_t>(reply.size());
    s->prefix[0] = 0;
    s->prefix[1] = static_cast<char>(n >> 24);
    s->prefix[2] = static_cast<char>(n >> 16);
    s->prefix[3] = static_cast<char>(n >> 8);
    s->prefix[4] = static_cast<char>(n);
    s->reply = std::move(reply);
    s->sent = 0;
    const nghttp2_nv headers[] = {Header(":status", "200"),
                                  Header("content-type", "application/grpc")};
    nghttp2_data_provider provider{};
    provider.read_callback = &ServerConnection::ReadReply;
    Submitted(id, s, nghttp2_submit_response(session_, id, headers, std::size(headers), &provider));
  }

  // A trailers-only reply: the status in the one HEADERS frame, which ends the stream.
  void RespondStatus(int32_t id, const absl::Status& status, bool accept_identity_only = false) {
    Stream* s = Find(id);
    FreeBody(s);
    const std::string code = absl::StrCat(static_cast<int>(status.code()));
    const std::string message = PercentEncode(status.message());
    std::vector<nghttp2_nv> headers = {Header(":status", "200"),
                                       Header("content-type", "application/grpc"),
                                       Header("grpc-status", code)};
    if (!message.empty()) headers.push_back(Header("grpc-message", message));
    if (accept_identity_only) headers.push_back(Header("grpc-accept-encoding", "identity"));
    Submitted(id, s,
              nghttp2_submit_response(session_, id, headers.data(), headers.size(), nullptr));
  }

  // A request that is not gRPC at all: an HTTP status and a text body.
  void RespondHttp(int32_t id, int http_status, std::string text) {
    Stream* s = Find(id);
    FreeBody(s);
    s->reply = std::move(text);
    s->sent = 5;  // no gRPC prefix
    const std::string code = absl::StrCat(http_status);
    const nghttp2_nv headers[] = {Header(":status", code),
                                  Header("content-type", "text/plain; charset=utf-8")};
    nghttp2_data_provider provider{};
    provider.read_callback = &ServerConnection::ReadText;
    Submitted(id, s, nghttp2_submit_response(session_, id, headers, std::size(headers), &provider));
  }

  // Counts a submitted reply until its stream closes; a failed submit resets the stream.
  void Submitted(int32_t id, Stream* s, int rc) {
    if (rc != 0) {
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
      return;
    }
    s->replied = true;
    ++replies_pending_;
  }

  // Request bytes held: this connection's count and the server's.
  bool Hold(size_t n) {
    const int64_t total =
        buffered_total_->fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    if (total > options_.max_buffered_bytes) {
      buffered_total_->fetch_sub(static_cast<int64_t>(n));
      return false;
    }
    buffered_ += n;
    return true;
  }
  void Release(size_t n) {
    buffered_ -= n;
    buffered_total_->fetch_sub(static_cast<int64_t>(n));
  }

  void FreeBody(Stream* s) {
    Release(s->body.size());
    if (s->body.capacity() > kKeepBufferBytes) {
      std::string().swap(s->body);
    } else {
      s->body.clear();
    }
  }

  // Writes every frame nghttp2 has queued. False when the connection is lost.
  bool Flush() {
    const absl::Time deadline = absl::Now() + options_.write_timeout;  // for all of it
    out_.clear();
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) return false;
      if (n == 0) break;
      out_.append(reinterpret_cast<const char*>(data), n);
    }
    size_t done = 0;
    while (done < out_.size()) {
      const ssize_t n = send(fd_, out_.data() + done, out_.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && WaitUntil(fd_, POLLOUT, deadline)) {
        continue;
      }
      return false;
    }
    if (out_.capacity() > kKeepBufferBytes) std::string().swap(out_);
    return true;
  }

  // The reply's bytes (prefix, then message), then its trailers.
  static ssize_t ReadReply(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length,
                           uint32_t* flags, nghttp2_data_source*, void* user) {
    auto* c = static_cast<ServerConnection*>(user);
    Stream* s = c->Find(id);
    if (s == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    size_t n = 0;
    while (n < length && s->sent < 5) buf[n++] = static_cast<uint8_t>(s->prefix[s->sent++]);
    if (s->sent < 5) return static_cast<ssize_t>(n);  // a window under 5 bytes
    const size_t from_reply = std::min(length - n, s->reply.size() - (s->sent - 5));
    std::memcpy(buf + n, s->reply.data() + (s->sent - 5), from_reply);
    n += from_reply;
    s->sent += from_reply;
    if (s->sent == s->reply.size() + 5) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const nghttp2_nv trailers[] = {Header("grpc-status", "0")};
      if (nghttp2_submit_trailer(session, id, trailers, std::size(trailers)) != 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
    }
    return static_cast<ssize_t>(n);
  }

  static ssize_t ReadText(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source*, void* user) {
    auto* c = static_cast<ServerConnection*>(user);
    Stream* s = c->Find(id);
    if (s == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const size_t n = std::min(length, s->reply.size() - (s->sent - 5));
    std::memcpy(buf, s->reply.data() + (s->sent - 5), n);
    s->sent += n;
    if (s->sent == s->reply.size() + 5) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnBegin(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto* c = static_cast<ServerConnection*>(user);
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      c->streams_[frame->hd.stream_id].started = absl::Now();
    }
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_length, const uint8_t* value, size_t value_length, uint8_t,
                      void* user) {
    auto* c = static_cast<ServerConnection*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      return 0;  // trailers from the client carry nothing a unary call needs
    }
    Stream* s = c->Find(frame->hd.stream_id);
    if (s == nullptr) return 0;
    s->header_bytes += name_length + value_length + 32;
    if (s->header_bytes > kMaxHeaderBytes) s->headers_too_large = true;  // answered on its end
    if (s->headers_too_large) return 0;
    const absl::string_view n(reinterpret_cast<const char*>(name), name_length);
    const absl::string_view v(reinterpret_cast<const char*>(value), value_length);
    if (n == ":method") {
      s->method = std::string(v);
    } else if (n == ":path") {
      s->path = std::string(v);
    } else if (n == "content-type") {
      s->content_type = std::string(v);
    } else if (n == "grpc-encoding") {
      s->encoding = std::string(v);
    } else if (n == "grpc-timeout") {
      absl::Duration timeout;
      if (ParseTimeout(v, &timeout)) s->timeout = timeout;
    }
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t length,
                    void* user) {
    auto* c = static_cast<ServerConnection*>(user);
    Stream* s = c->Find(id);
    if (s == nullptr || s->too_large) return 0;
    const size_t limit = static_cast<size_t>(c->options_.max_message_bytes) + 5;
    // One connection holds at most two largest requests at once, however many streams it opens;
    // all connections together at most max_buffered_bytes.
    if (s->body.size() + length > limit || c->buffered_ + length > 2 * limit) {
      s->refusal = absl::StrCat("request larger than ", c->options_.max_message_bytes, " bytes");
    } else if (!c->Hold(length)) {
      s->refusal = "the server holds too many request bytes at once: try again";
    } else {
      s->body.append(reinterpret_cast<const char*>(data), length);
      return 0;
    }
    s->too_large = true;
    c->FreeBody(s);
    c->Queue(id, s);  // answered at once, not after the rest arrives
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto* c = static_cast<ServerConnection*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    Stream* s = c->Find(frame->hd.stream_id);
    if (s == nullptr) return 0;
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      s->ended = true;
      c->Queue(frame->hd.stream_id, s);
    } else if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
               c->RefusedOnHeaders(*s)) {
      c->Queue(frame->hd.stream_id, s);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t, void* user) {
    auto* c = static_cast<ServerConnection*>(user);
    if (Stream* s = c->Find(id)) {
      c->Release(s->body.size());
      if (s->replied) --c->replies_pending_;
      c->streams_.erase(id);
    }
    return 0;
  }

  const int fd_;
  const GrpcH2ServerOptions& options_;
  const absl::flat_hash_map<std::string, GrpcUnaryMethod>& methods_;
  const int stop_fd_;
  std::atomic<int64_t>* const buffered_total_;
  nghttp2_session* session_ = nullptr;
  absl::flat_hash_map<int32_t, Stream> streams_;
  std::deque<int32_t> ready_;
  std::vector<int32_t> reset_after_reply_;
  size_t buffered_ = 0;      // request bytes held across streams
  int replies_pending_ = 0;  // replies submitted whose streams are still open
  std::string out_;
};

}  // namespace

void GrpcH2Server::Impl::Reap() {
  for (auto it = connections.begin(); it != connections.end();) {
    if ((*it)->done) {
      (*it)->thread.join();
      it = connections.erase(it);
    } else {
      ++it;
    }
  }
}

void GrpcH2Server::Impl::AcceptLoop(Listener* listener) {
  for (;;) {
    pollfd p[3] = {{listener->fd, POLLIN, 0}, {stop_fd, POLLIN, 0}, {reap_fd, POLLIN, 0}};
    if (poll(p, 3, -1) < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    if (p[2].revents != 0) {
      uint64_t count = 0;
      (void)!read(reap_fd, &count, sizeof(count));  // another listener may have read it first
      std::lock_guard<std::mutex> lock(mu);
      Reap();
    }
    if (p[0].revents == 0) continue;
    const int fd = accept4(listener->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: wait for connections to close instead of spinning.
        pollfd stop{stop_fd, POLLIN, 0};
        poll(&stop, 1, 100);
      }
      continue;
    }
    if (listener->unix_path.empty()) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    std::lock_guard<std::mutex> lock(mu);
    if (stopped || open.load() >= options.max_connections) {
      close(fd);
      continue;
    }
    ++open;
    auto connection = std::make_unique<Connection>();
    Connection* raw = connection.get();
    connections.push_back(std::move(connection));
    try {
      raw->thread = std::thread([this, fd, raw] {
        Serve(fd);
        --open;
        raw->done = true;  // `raw` may be joined and freed from here on
        const uint64_t one = 1;
        (void)!write(reap_fd, &one, sizeof(one));
      });
    } catch (const std::system_error&) {  // no thread to be had: refuse this connection
      connections.pop_back();
      --open;
      close(fd);
    }
  }
}

void GrpcH2Server::Impl::Serve(int fd) {
  {
    ServerConnection connection(fd, options, methods, stop_fd, &buffered);
    connection.Serve();
  }
  close(fd);
}

GrpcH2Server::GrpcH2Server(GrpcH2ServerOptions options,
                           std::vector<std::pair<std::string, GrpcUnaryMethod>> methods)
    : impl_(std::make_unique<Impl>(options, std::move(methods))) {}

GrpcH2Server::~GrpcH2Server() {
  Stop();
  if (impl_->stop_fd >= 0) close(impl_->stop_fd);
  if (impl_->reap_fd >= 0) close(impl_->reap_fd);
}

absl::StatusOr<int> GrpcH2Server::Listen(const std::string& address) {
  if (impl_->stop_fd < 0 || impl_->reap_fd < 0) return absl::InternalError("eventfd failed");
  auto listener = std::make_unique<Impl::Listener>();
  int port = 0;
  absl::string_view rest = address;
  if (absl::ConsumePrefix(&rest, "unix://")) {
    if (!absl::StartsWith(rest, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", address, "\": a Unix socket needs an absolute path, unix:///path"));
    }
    absl::StatusOr<int> fd = BindUnix(std::string(rest));
    if (!fd.ok()) return fd.status();
    listener->fd = *fd;
    listener->unix_path = std::string(rest);
  } else {
    absl::StatusOr<int> fd = BindTcp(address, &port);
    if (!fd.ok()) return fd.status();
    listener->fd = *fd;
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->stopped) {
    close(listener->fd);
    if (!listener->unix_path.empty()) unlink(listener->unix_path.c_str());
    return absl::FailedPreconditionError("the server is stopped");
  }
  Impl::Listener* raw = listener.get();
  impl_->listeners.push_back(std::move(listener));
  raw->thread = std::thread([this, raw] { impl_->AcceptLoop(raw); });
  return port;
}

void GrpcH2Server::Stop() {
  std::vector<std::unique_ptr<Impl::Listener>> listeners;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    listeners.swap(impl_->listeners);
  }
  if (impl_->stop_fd >= 0) {
    const uint64_t one = 1;
    (void)!write(impl_->stop_fd, &one, sizeof(one));
  }
  for (auto& listener : listeners) {
    listener->thread.join();
    close(listener->fd);
    if (!listener->unix_path.empty()) unlink(listener->unix_path.c_str());
  }
  // No thread adds connections now; join them outside the lock (each finishes its call).
  std::list<std::unique_ptr<Impl::Connection>> connections;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    connections.swap(impl_->connections);
  }
  for (auto& connection : connections) connection->thread.join();
}

int GrpcH2Server::connections() const { return impl_->open.load(); }

int GrpcH2Server::threads() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int>(impl_->connections.size());
}

}  // namespace fitledger
