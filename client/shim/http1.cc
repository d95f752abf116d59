#include "client/shim/http1.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace fitledger::shim {
namespace {

// One read asks for this much: a Filter request with 500 names and a 4 KB pod is ~12 KB.
constexpr size_t kReadChunk = 64 << 10;
// simdjson reads up to this many bytes past the end of the body it parses.
constexpr size_t kBodyPadding = 64;
constexpr size_t kMaxChunkLine = 4096;

enum class Io { kOk, kAgain, kEof, kTimeout, kError };

const char* Reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

// RFC 9110 tchar.
bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (unsigned char ch : s) {
    if (absl::ascii_isalnum(ch)) continue;
    if (std::strchr("!#$%&'*+-.^_`|~", ch) == nullptr || ch == 0) return false;
  }
  return true;
}

// CR only in CRLF, LF only after CR, no NUL (RFC 9110 5.5). For a single line (no CRLF in
// it): no CR, LF or NUL at all.
bool CleanHead(absl::string_view head) {
  static constexpr absl::string_view kSpecial("\r\n\0", 3);
  for (size_t i = head.find_first_of(kSpecial); i != absl::string_view::npos;
       i = head.find_first_of(kSpecial, i + 1)) {
    if (head[i] != '\r' || i + 1 == head.size() || head[i + 1] != '\n') return false;
    ++i;  // the LF of this CRLF
  }
  return true;
}

// Whether a comma-separated header value lists `token` (case-insensitive).
bool ListsToken(const std::string* value, absl::string_view token) {
  if (value == nullptr) return false;
  for (absl::string_view part : absl::StrSplit(*value, ',')) {
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(part), token)) return true;
  }
  return false;
}

// Milliseconds for poll(2), rounded up so that a wait never ends before its deadline.
int Millis(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1))), 0, 1 << 30));
}

// Waits for `events` on `fd` until `deadline`: kOk, kTimeout or kError.
Io Wait(int fd, short events, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return Io::kTimeout;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, Millis(left));
    if (n > 0) return Io::kOk;
    if (n < 0 && errno != EINTR) return Io::kError;
  }
}

// The phases of a request's handling, for a handler that answers later (HttpLater).
enum Phase : int { kHandling, kDeferred, kAnswered };

}  // namespace

struct HttpConnection {
  HttpServer::Impl* server = nullptr;
  int fd = -1;
  SSL* ssl = nullptr;
  bool handshaken = false;
  // Bytes read and not yet consumed: [begin, end) of in[0, cap).
  std::unique_ptr<char[]> in;
  size_t cap = 0, begin = 0, end = 0;
  int served = 0;
  // Reads of the request in progress fail after this (its first byte + readTimeout).
  absl::Time deadline;
  // Guarded by the server's mutex.
  bool idle = false;  // waiting in the epoll set for a next request
  bool shut = false;
  absl::Time last_active;
  // Reused from request to request.
  HttpRequest req;
  HttpResponse res;
  std::string out;
  // The reply to the request being answered: set before its handler runs.
  absl::Time start;
  bool head_only = false;
  bool http10 = false;
  bool close_asked = false;  // by the client, or keepAliveMaxRequests reached
  // kHandling while the handler runs; kDeferred once the worker has let go of a request whose
  // handler answers later; kAnswered when the answer came before the worker let go.
  std::atomic<int> phase{kHandling};
  // A deferred reply whose write could not finish without waiting: a worker writes the rest
  // (from write_off of out + body), then closes when write_close.
  bool write_pending = false;
  size_t write_off = 0;
  bool write_close = false;
};

namespace {
using Conn = HttpConnection;
}  // namespace

const std::string* HttpRequest::Header(absl::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return &value;
  }
  return nullptr;
}

struct HttpServer::Impl {
  Impl(HttpOptions o, HttpDeferringHandler h, HttpErrorHandler e, HttpObserver ob)
      : options(std::move(o)),
        handler(std::move(h)),
        on_error(std::move(e)),
        observer(std::move(ob)) {}

  ~Impl() {
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }

  // ---- I/O on one connection ----

  // Reads at most `n` bytes into `p`. Without `wait`, returns kAgain instead of waiting.
  Io ReadSome(Conn& c, char* p, size_t n, size_t* got, bool wait) const {
    for (;;) {
      short want = POLLIN;
      if (c.ssl == nullptr) {
        const ssize_t r = recv(c.fd, p, n, 0);
        if (r > 0) {
          *got = static_cast<size_t>(r);
          return Io::kOk;
        }
        if (r == 0) return Io::kEof;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return Io::kError;
      } else {
        ERR_clear_error();
        const int r = SSL_read(c.ssl, p, static_cast<int>(std::min<size_t>(n, 1 << 30)));
        if (r > 0) {
          *got = static_cast<size_t>(r);
          return Io::kOk;
        }
        const int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_ZERO_RETURN) return Io::kEof;
        if (err == SSL_ERROR_WANT_WRITE) {
          want = POLLOUT;
        } else if (err != SSL_ERROR_WANT_READ) {
          return Io::kError;
        }
      }
      if (!wait) return Io::kAgain;
      if (Io w = Wait(c.fd, want, c.deadline); w != Io::kOk) return w;
    }
  }

  // Reads more into c.in, making room first.
  Io ReadMore(Conn& c, bool wait) const {
    if (c.begin == c.end) c.begin = c.end = 0;
    if (c.cap - c.end < kReadChunk / 4 && c.begin > 0) {
      std::memmove(c.in.get(), c.in.get() + c.begin, c.end - c.begin);
      c.end -= c.begin;
      c.begin = 0;
    }
    if (c.cap - c.end < kReadChunk / 4) {
      const size_t cap = std::max(kReadChunk, c.cap * 2);
      auto in = std::make_unique_for_overwrite<char[]>(cap);
      if (c.end > c.begin) std::memcpy(in.get(), c.in.get() + c.begin, c.end - c.begin);
      c.end -= c.begin;
      c.begin = 0;
      c.in = std::move(in);
      c.cap = cap;
    }
    size_t got = 0;
    const Io r = ReadSome(c, c.in.get() + c.end, c.cap - c.end, &got, wait);
    if (r == Io::kOk) c.end += got;
    return r;
  }

  // Writes `a` then `b` from byte *off of the two (on TLS `b` must be empty), advancing *off.
  // With `wait`, waits for the socket until `deadline`; without, returns kAgain when it would.
  Io WriteFrom(Conn& c, absl::string_view a, absl::string_view b, size_t* off, bool wait,
               absl::Time deadline) const {
    if (c.ssl != nullptr) {
      while (*off < a.size()) {
        ERR_clear_error();
        const int r = SSL_write(c.ssl, a.data() + *off,
                                static_cast<int>(std::min<size_t>(a.size() - *off, 1 << 30)));
        if (r > 0) {
          *off += static_cast<size_t>(r);
          continue;
        }
        const int err = SSL_get_error(c.ssl, r);
        short want;
        if (err == SSL_ERROR_WANT_WRITE) {
          want = POLLOUT;
        } else if (err == SSL_ERROR_WANT_READ) {
          want = POLLIN;
        } else {
          return Io::kError;
        }
        if (!wait) return Io::kAgain;
        if (Io w = Wait(c.fd, want, deadline); w != Io::kOk) return w;
      }
      return Io::kOk;
    }
    while (*off < a.size() + b.size()) {
      iovec iov[2];
      msghdr msg{};
      msg.msg_iov = iov;
      if (*off < a.size()) {
        iov[0] = {const_cast<char*>(a.data() + *off), a.size() - *off};
        iov[1] = {const_cast<char*>(b.data()), b.size()};
        msg.msg_iovlen = b.empty() ? 1 : 2;
      } else {
        iov[0] = {const_cast<char*>(b.data() + (*off - a.size())), a.size() + b.size() - *off};
        msg.msg_iovlen = 1;
      }
      const ssize_t r = sendmsg(c.fd, &msg, MSG_NOSIGNAL);
      if (r >= 0) {
        *off += static_cast<size_t>(r);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Io::kError;
      if (!wait) return Io::kAgain;
      if (Io w = Wait(c.fd, POLLOUT, deadline); w != Io::kOk) return w;
    }
    return Io::kOk;
  }

  bool WriteAll(Conn& c, absl::string_view a, absl::string_view b) const {
    size_t off = 0;
    return WriteFrom(c, a, b, &off, true, absl::Now() + options.write_timeout) == Io::kOk;
  }

  bool Handshake(Conn& c) const {
    const absl::Time deadline = absl::Now() + options.read_timeout;
    for (;;) {
      ERR_clear_error();
      const int r = SSL_do_handshake(c.ssl);
      if (r == 1) return true;
      const int err = SSL_get_error(c.ssl, r);
      short want;
      if (err == SSL_ERROR_WANT_READ) {
        want = POLLIN;
      } else if (err == SSL_ERROR_WANT_WRITE) {
        want = POLLOUT;
      } else {
        return false;
      }
      if (Wait(c.fd, want, deadline) != Io::kOk) {
        return false;
      }
    }
  }

  // ---- HTTP ----

  // c.out: the head of c.res, and on TLS its body too (then ReplyBody is empty).
  void BuildReply(Conn& c, bool head_only, bool close, bool http10) const {
    const HttpResponse& res = c.res;
    c.out.clear();
    absl::StrAppend(&c.out, "HTTP/1.1 ", res.status, " ", Reason(res.status), "\r\n");
    if (!res.content_type.empty())
      absl::StrAppend(&c.out, "Content-Type: ", res.content_type, "\r\n");
    absl::StrAppend(&c.out, "Content-Length: ", res.body.size(), "\r\n");
    for (const auto& [name, value] : res.headers)
      absl::StrAppend(&c.out, name, ": ", value, "\r\n");
    if (close) {
      c.out.append("Connection: close\r\n");
    } else if (http10) {
      c.out.append("Connection: keep-alive\r\n");
    }
    c.out.append("\r\n");
    if (c.ssl != nullptr && !head_only) c.out.append(res.body);
  }
  static absl::string_view ReplyBody(const Conn& c, bool head_only) {
    return c.ssl != nullptr || head_only ? absl::string_view() : absl::string_view(c.res.body);
  }

  // Writes c.res (after c.req) and reports it; false when the connection must close.
  bool Reply(Conn& c, bool head_only, bool close, bool http10, absl::Time start) const {
    BuildReply(c, head_only, close, http10);
    const bool ok = WriteAll(c, c.out, ReplyBody(c, head_only));
    if (observer) observer(c.req, c.res, absl::Now() - start);
    return ok && !close;
  }

  // Writes the reply of a deferred request (HttpLater::Finish, on the finishing thread, which
  // now owns `c`) without waiting, then lets the connection go as a worker would. A write that
  // would wait is left to a worker (EPOLLOUT).
  void FinishLater(Conn* c) {
    const bool close = c->close_asked || stopping.load(std::memory_order_relaxed);
    BuildReply(*c, c->head_only, close, c->http10);
    c->write_off = 0;
    const Io r = WriteFrom(*c, c->out, ReplyBody(*c, c->head_only), &c->write_off, false,
                           absl::InfiniteFuture());
    if (r == Io::kAgain) {
      c->write_pending = true;
      c->write_close = close;
      std::unique_lock<std::mutex> lock(mu);
      epoll_event mod{};
      mod.events = EPOLLOUT | EPOLLRDHUP | EPOLLONESHOT;
      mod.data.ptr = c;
      if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &mod) == 0) return;
      lock.unlock();
      Release(c, false);
      return;
    }
    if (observer) observer(c->req, c->res, absl::Now() - c->start);
    Release(c, r == Io::kOk && !close);
  }

  // A worker's part of a deferred reply that FinishLater could not write at once.
  bool FinishPendingWrite(Conn& c) const {
    c.write_pending = false;
    const Io r = WriteFrom(c, c.out, ReplyBody(c, c.head_only), &c.write_off, true,
                           absl::Now() + options.write_timeout);
    if (observer) observer(c.req, c.res, absl::Now() - c.start);
    return r == Io::kOk && !c.write_close;
  }

  // Refuses the request on `c` with `status` and closes the connection. Unread request bytes
  // are drained for a moment first: closing with them unread would send a reset, which can
  // reach the client before the reply does.
  bool Refuse(Conn& c, int status, absl::string_view message, absl::Time start) const {
    c.res = HttpResponse();
    c.res.status = status;
    on_error(c.res, status, message);
    Reply(c, false, /*close=*/true, false, start);
    if (c.ssl == nullptr) {
      shutdown(c.fd, SHUT_WR);
      c.deadline = std::min(c.deadline, absl::Now() + absl::Seconds(1));
      char sink[16384];
      size_t got = 0;
      for (size_t drained = 0; drained < (1 << 20); drained += got) {
        if (ReadSome(c, sink, sizeof(sink), &got, true) != Io::kOk) break;
      }
    }
    return false;
  }

  // Makes sure c.in holds at least `n` unread bytes.
  Io Need(Conn& c, size_t n) const {
    while (c.end - c.begin < n) {
      if (Io r = ReadMore(c, true); r != Io::kOk) return r;
    }
    return Io::kOk;
  }

  // Reads `n` more body bytes: what c.in holds, then straight into the body.
  Io ReadBody(Conn& c, size_t n) const {
    std::string& body = c.req.body;
    const size_t take = std::min(n, c.end - c.begin);
    body.append(c.in.get() + c.begin, take);
    c.begin += take;
    size_t have = body.size();
    const size_t want = have + (n - take);
    while (have < want) {
      // Grow with the bytes that came, not the length announced.
      if (body.size() == have) body.resize(have + std::min(want - have, kReadChunk * 4));
      size_t got = 0;
      const Io r = ReadSome(c, body.data() + have, body.size() - have, &got, true);
      if (r != Io::kOk) {
        body.resize(have);
        return r;
      }
      have += got;
    }
    return Io::kOk;
  }

  // A chunked body (RFC 9112 7.1); trailer fields are read and dropped.
  // Returns 0 when read, else the status to refuse with (-1: just close).
  int ReadChunked(Conn& c, std::string* why) const {
    const auto line = [&](absl::string_view* out) -> int {
      for (;;) {
        const char* p =
            static_cast<const char*>(memmem(c.in.get() + c.begin, c.end - c.begin, "\r\n", 2));
        if (p != nullptr) {
          *out = absl::string_view(c.in.get() + c.begin, p - (c.in.get() + c.begin));
          c.begin += out->size() + 2;
          return 0;
        }
        if (c.end - c.begin > kMaxChunkLine) {
          *why = "chunked body: a chunk-size or trailer line is too long";
          return 400;
        }
        if (Io r = ReadMore(c, true); r != Io::kOk) return r == Io::kTimeout ? 408 : -1;
      }
    };
    for (;;) {
      absl::string_view size_line;
      if (int s = line(&size_line); s != 0) return s;
      if (!CleanHead(size_line)) {
        *why = "chunked body: a bare CR, LF or NUL in a chunk-size line";
        return 400;
      }
      size_t size = 0;
      size_t i = 0;
      for (; i < size_line.size() && absl::ascii_isxdigit(size_line[i]); ++i) {
        if (i >= 15) break;
        const char ch = absl::ascii_tolower(size_line[i]);
        size = size * 16 + static_cast<size_t>(ch <= '9' ? ch - '0' : ch - 'a' + 10);
      }
      const absl::string_view rest = absl::StripLeadingAsciiWhitespace(size_line.substr(i));
      if (i == 0 || i >= 16 || !(rest.empty() || rest[0] == ';')) {
        *why = "chunked body: bad chunk-size line";
        return 400;
      }
      if (size == 0) {
        int64_t trailer_bytes = 0;
        for (;;) {
          absl::string_view trailer;
          if (int s = line(&trailer); s != 0) return s;
          if (trailer.empty()) return 0;
          if (!CleanHead(trailer)) {
            *why = "chunked body: a bare CR, LF or NUL in a trailer field";
            return 400;
          }
          trailer_bytes += static_cast<int64_t>(trailer.size());
          if (trailer_bytes > options.max_header_bytes) {
            *why = "chunked body: trailer fields too large";
            return 431;
          }
        }
      }
      if (static_cast<int64_t>(c.req.body.size() + size) > options.max_body_bytes) return 413;
      if (Io r = ReadBody(c, size); r != Io::kOk) return r == Io::kTimeout ? 408 : -1;
      if (Io r = Need(c, 2); r != Io::kOk) return r == Io::kTimeout ? 408 : -1;
      if (c.in[c.begin] != '\r' || c.in[c.begin + 1] != '\n') {
        *why = "chunked body: a chunk is longer than its size";
        return 400;
      }
      c.begin += 2;
    }
  }

  std::string TooLarge() const {
    return absl::StrCat("request body too large: the limit (maxBodyBytes) is ",
                        options.max_body_bytes, " bytes");
  }

  // Serves one request from c.in (which holds at least one byte). False: close the connection.
  // `*deferred`: the handler answers later and the connection is no longer this thread's.
  bool ServeOne(Conn& c, bool* deferred) const {
    while (c.begin < c.end && (c.in[c.begin] == '\r' || c.in[c.begin] == '\n')) ++c.begin;
    if (c.begin == c.end) return true;  // empty lines before a request are ignored
    const absl::Time start = absl::Now();
    c.deadline = start + options.read_timeout;  // for the whole request, head and body
    HttpRequest& req = c.req;
    req.method.clear();
    req.path.clear();
    req.headers.clear();
    req.body.clear();
    // The head, up to the empty line.
    size_t head_len = 0;
    for (size_t scanned = 0;;) {
      const size_t from = scanned > 3 ? scanned - 3 : 0;
      const char* base = c.in.get() + c.begin;
      if (const void* p = memmem(base + from, c.end - c.begin - from, "\r\n\r\n", 4)) {
        head_len = static_cast<const char*>(p) - base + 4;
        break;
      }
      scanned = c.end - c.begin;
      if (static_cast<int64_t>(scanned) > options.max_header_bytes) {
        return Refuse(c, 431,
                      absl::StrCat("request header over ", options.max_header_bytes, " bytes"),
                      start);
      }
      if (Io r = ReadMore(c, true); r != Io::kOk) {
        return r == Io::kTimeout ? Refuse(c, 408, "timed out reading the request", start) : false;
      }
    }
    if (static_cast<int64_t>(head_len) > options.max_header_bytes) {
      return Refuse(
          c, 431, absl::StrCat("request header over ", options.max_header_bytes, " bytes"), start);
    }
    const absl::string_view head(c.in.get() + c.begin, head_len - 4);
    c.begin += head_len;

    // Request line.
    const size_t eol = std::min(head.find("\r\n"), head.size());
    const absl::string_view request_line = head.substr(0, eol);
    // RFC 9110 5.5: a bare CR or LF, or a NUL, is refused, not read one way or another.
    if (!CleanHead(head)) return Refuse(c, 400, "a bare CR, LF or NUL in the request head", start);
    const std::vector<absl::string_view> parts = absl::StrSplit(request_line, ' ');
    if (parts.size() != 3 || !IsToken(parts[0]) || parts[1].empty()) {
      return Refuse(c, 400, "malformed HTTP request line", start);
    }
    req.method.assign(parts[0].data(), parts[0].size());
    const absl::string_view target = parts[1];
    const absl::string_view path = target.substr(0, target.find_first_of("?#"));
    req.path.assign(path.data(), path.size());
    bool http10 = false;
    if (parts[2] == "HTTP/1.0") {
      http10 = true;
    } else if (parts[2] != "HTTP/1.1") {
      if (absl::StartsWith(parts[2], "HTTP/")) {
        return Refuse(c, 505, absl::StrCat(parts[2], " is not supported: use HTTP/1.1"), start);
      }
      return Refuse(c, 400, "malformed HTTP request line", start);
    }
    // Header fields.
    for (absl::string_view rest = head.substr(std::min(eol + 2, head.size())); !rest.empty();) {
      const size_t n = std::min(rest.find("\r\n"), rest.size());
      const absl::string_view field = rest.substr(0, n);
      rest.remove_prefix(std::min(n + 2, rest.size()));
      const size_t colon = field.find(':');
      if (colon == absl::string_view::npos || !IsToken(field.substr(0, colon))) {
        return Refuse(c, 400, "malformed HTTP header field", start);
      }
      std::string name(field.substr(0, colon));
      absl::AsciiStrToLower(&name);
      req.headers.emplace_back(std::move(name),
                               std::string(absl::StripAsciiWhitespace(field.substr(colon + 1))));
    }

    // Body framing.
    const std::string* te = nullptr;
    const std::string* length = nullptr;
    for (const auto& [name, value] : req.headers) {
      if (name == "transfer-encoding") {
        if (te != nullptr) return Refuse(c, 501, "more than one Transfer-Encoding", start);
        te = &value;
      } else if (name == "content-length") {
        if (length != nullptr && *length != value) {
          return Refuse(c, 400, "conflicting Content-Length fields", start);
        }
        length = &value;
      }
    }
    bool chunked = false;
    int64_t content_length = 0;
    if (te != nullptr) {
      if (length != nullptr) {
        return Refuse(c, 400, "both Transfer-Encoding and Content-Length", start);
      }
      if (!absl::EqualsIgnoreCase(*te, "chunked")) {
        return Refuse(c, 501,
                      absl::StrCat("Transfer-Encoding \"", *te,
                                   "\" is not supported: send Content-Length or chunked"),
                      start);
      }
      chunked = true;
    } else if (length != nullptr) {
      if (length->empty() || length->size() > 18 ||
          !std::all_of(length->begin(), length->end(), absl::ascii_isdigit)) {
        return Refuse(c, 400, absl::StrCat("bad Content-Length \"", *length, "\""), start);
      }
      content_length = std::stoll(*length);
      if (content_length > options.max_body_bytes) return Refuse(c, 413, TooLarge(), start);
    }
    if (const std::string* expect = req.Header("expect")) {
      if (!absl::EqualsIgnoreCase(*expect, "100-continue")) {
        return Refuse(c, 417, absl::StrCat("Expect \"", *expect, "\" is not supported"), start);
      }
      const bool body_pending =
          chunked ? c.begin == c.end : static_cast<int64_t>(c.end - c.begin) < content_length;
      if (body_pending && !http10) {
        static constexpr absl::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        if (!WriteAll(c, kContinue, {})) return false;
      }
    }
    if (chunked) {
      std::string why;
      if (int s = ReadChunked(c, &why); s != 0) {
        if (s == 413) return Refuse(c, 413, TooLarge(), start);
        if (s == 408) return Refuse(c, 408, "timed out reading the request body", start);
        return s > 0 ? Refuse(c, s, why, start) : false;
      }
    } else if (content_length > 0) {
      req.body.reserve(static_cast<size_t>(content_length) + kBodyPadding);
      if (Io r = ReadBody(c, static_cast<size_t>(content_length)); r != Io::kOk) {
        return r == Io::kTimeout ? Refuse(c, 408, "timed out reading the request body", start)
                                 : false;
      }
    }
    if (req.body.capacity() < req.body.size() + kBodyPadding) {
      req.body.reserve(req.body.size() + kBodyPadding);
    }

    // Answer.
    c.res.status = 200;
    c.res.content_type.clear();
    c.res.body.clear();
    c.res.headers.clear();
    ++c.served;
    const std::string* connection = req.Header("connection");
    c.start = start;
    c.head_only = req.method == "HEAD";
    c.http10 = http10;
    c.close_asked =
        (http10 ? !ListsToken(connection, "keep-alive") : ListsToken(connection, "close")) ||
        c.served >= options.keep_alive_max_requests;
    c.phase.store(kHandling);
    bool now = true;
    try {
      now = handler(req, c.res, HttpLater(&c));
    } catch (...) {
      c.res = HttpResponse();
      c.res.status = 500;
      on_error(c.res, 500, "internal error");
    }
    if (!now) {
      int expected = kHandling;
      if (c.phase.compare_exchange_strong(expected, kDeferred)) {
        *deferred = true;  // c is the finishing thread's from here on
        return true;
      }
      // Answered already (by another thread, or inside the handler): written here.
    }
    const bool close = c.close_asked || stopping.load(std::memory_order_relaxed);
    return Reply(c, c.head_only, close, http10, start);
  }

  enum class Served { kClose, kKeep, kDeferred };

  // Serves what is on `c` now: kClose when it must close, kKeep to wait for its next request,
  // kDeferred when a handler answers later (c is then no longer this thread's).
  Served Serve(Conn& c) const {
    if (c.ssl != nullptr && !c.handshaken) {
      if (!Handshake(c)) return Served::kClose;
      c.handshaken = true;
    }
    if (c.write_pending && !FinishPendingWrite(c)) return Served::kClose;
    for (;;) {
      if (c.begin == c.end) {
        const Io r = ReadMore(c, false);
        if (r == Io::kAgain) return Served::kKeep;
        if (r != Io::kOk) return Served::kClose;
      }
      bool deferred = false;
      if (!ServeOne(c, &deferred)) return Served::kClose;
      if (deferred) return Served::kDeferred;
      if (c.begin == c.end && (c.ssl == nullptr || SSL_has_pending(c.ssl) == 0)) {
        return Served::kKeep;
      }
    }
  }

  // ---- threads ----

  // Lets an idle connection go of what a large request or reply left behind: a read buffer
  // grown past 64 KiB by a long head, and request / reply buffers over 1 MiB. The standard
  // 64 KiB read buffer stays, so a keep-alive request allocates nothing.
  static void Trim(Conn& c) {
    if (c.begin == c.end && c.cap > kReadChunk) {
      c.in.reset();
      c.cap = c.begin = c.end = 0;
    }
    constexpr size_t kKeep = 1 << 20;
    if (c.req.body.capacity() > kKeep) std::string().swap(c.req.body);
    if (c.res.body.capacity() > kKeep) std::string().swap(c.res.body);
    if (c.out.capacity() > kKeep) std::string().swap(c.out);
  }

  // Frees a connection already removed from `conns`.
  static void Destroy(Conn* c) {
    if (c->ssl != nullptr) {
      if (c->handshaken) SSL_shutdown(c->ssl);  // best effort: the socket is non-blocking
      SSL_free(c->ssl);
    }
    close(c->fd);
    delete c;
  }

  // A worker parked while enough others wait in epoll.
  struct Parked {
    std::condition_variable cv;
    bool woken = false;
  };

  // At most max_pollers workers wait in epoll_wait; the others park, and the most recently
  // parked is woken first. With every worker in epoll_wait, the kernel wakes the one that has
  // waited longest (a cold thread, often on the other CPU), and on this 2-vCPU machine 64
  // workers served 21-23k Filter calls/s against ~29k for 2-4. A parked worker is woken when
  // the last poller takes a request, so a handler that blocks (a bind, a gRPC call) never
  // leaves the connections unwatched while workers are free.
  void Worker() {
    Parked self;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      while (pollers >= max_pollers && !exiting) {
        self.woken = false;
        parked.push_back(&self);
        self.cv.wait(lock, [&] { return self.woken || exiting; });
        if (!self.woken) parked.erase(std::find(parked.begin(), parked.end(), &self));
      }
      if (exiting) return;
      ++pollers;
      lock.unlock();
      epoll_event ev{};
      int n;
      do {
        n = epoll_wait(epfd, &ev, 1, -1);
      } while (n < 0 && errno == EINTR);
      lock.lock();
      --pollers;
      if (n <= 0 || ev.data.ptr == nullptr) return;  // the stop signal
      if (pollers == 0 && !parked.empty()) {
        Parked* next = parked.back();
        parked.pop_back();
        next->woken = true;
        next->cv.notify_one();
      }
      Conn* c = static_cast<Conn*>(ev.data.ptr);
      c->idle = false;
      lock.unlock();
      const Served served = Serve(*c);
      if (served != Served::kDeferred) Release(c, served == Served::kKeep);
      lock.lock();
    }
  }

  // After a request: back into the epoll set for the next one (`keep`), or closed. Bytes of a
  // next request already read (pipelined behind a deferred reply) are served at once: the
  // connection is armed for EPOLLOUT too, which a writable socket reports straight away.
  void Release(Conn* c, bool keep) {
    if (keep) Trim(*c);
    std::unique_lock<std::mutex> lock(mu);
    if (keep && !stopping.load() && !c->shut) {
      c->idle = true;
      c->last_active = absl::Now();
      epoll_event mod{};
      mod.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
      if (c->begin < c->end) mod.events |= EPOLLOUT;
      mod.data.ptr = c;
      if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &mod) == 0) return;
    }
    conns.erase(c);
    if (conns.empty()) drained.notify_all();
    lock.unlock();
    Destroy(c);
  }

  void Accept() {
    for (;;) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: back off instead of spinning on the pending connection.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (!Add(fd)) return;
    }
  }

  // Serves the connected, non-blocking socket `fd` from now on (or closes it). False once
  // the server is stopping.
  bool Add(int fd) {
    auto* c = new Conn;
    c->server = this;
    c->fd = fd;
    if (ctx != nullptr) {
      c->ssl = SSL_new(ctx);
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, fd) != 1) {
        Destroy(c);
        return true;
      }
      SSL_set_accept_state(c->ssl);
    }
    std::lock_guard<std::mutex> lock(mu);
    if (stopping.load()) {  // Stop() has shut the idle connections already
      Destroy(c);
      return false;
    }
    c->idle = true;
    c->last_active = absl::Now();
    conns.insert(c);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.ptr = c;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      conns.erase(c);
      Destroy(c);
    }
    return true;
  }

  // Shuts idle connections older than idleTimeout; a worker then sees the hang-up and closes.
  void ReapIdle() {
    const absl::Time cutoff = absl::Now() - options.idle_timeout;
    std::lock_guard<std::mutex> lock(mu);
    for (Conn* c : conns) {
      // Bytes waiting mean a request is queued for a busy pool, not an idle connection.
      int pending = 0;
      if (c->idle && !c->shut && c->last_active <= cutoff &&
          (ioctl(c->fd, FIONREAD, &pending) != 0 || pending == 0)) {
        shutdown(c->fd, SHUT_RDWR);
        c->shut = true;
      }
    }
  }

  void Acceptor() {
    const int reap_ms = std::clamp(Millis(options.idle_timeout) / 4, 10, 1000);
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {accept_wake, POLLIN, 0}};
    while (!stopping.load()) {
      const int n = poll(fds, 2, reap_ms);
      if (stopping.load()) return;
      if (n > 0 && (fds[0].revents & POLLIN) != 0) Accept();
      ReapIdle();
    }
  }

  absl::Status MakeTlsContext() {
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) return absl::InternalError("tls: cannot create an OpenSSL context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    // Without a session id context, a TLS 1.2 client resuming a session fails the handshake
    // when client certificates are verified.
    static constexpr unsigned char kSessionContext[] = "fitledger-webhook";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
    bool ok = SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) == 1 &&
              SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) == 1 &&
              SSL_CTX_check_private_key(ctx) == 1;
    if (ok && !options.client_ca_file.empty()) {
      ok = SSL_CTX_load_verify_locations(ctx, options.client_ca_file.c_str(), nullptr) == 1;
      if (ok) {
        STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca_file.c_str());
        if (names != nullptr) SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      }
    }
    ERR_clear_error();
    if (!ok) return absl::InvalidArgumentError("tls: cannot load the certificate files");
    // OpenSSL writes to the socket with write(2): a peer that went away must not kill the
    // process with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    return absl::OkStatus();
  }

  absl::StatusOr<int> Bind(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string service = absl::StrCat(port);
    if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot resolve \"", host, "\""));
    }
    int err = 0;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd =
          socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
        listen_fd = fd;
        break;
      }
      err = errno;
      close(fd);
    }
    freeaddrinfo(found);
    if (listen_fd < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", host, ":", port, ": ", std::strerror(err)));
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
    return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }

  const HttpOptions options;
  const HttpDeferringHandler handler;
  const HttpErrorHandler on_error;
  const HttpObserver observer;
  SSL_CTX* ctx = nullptr;

  int listen_fd = -1;
  int epfd = -1;
  int accept_wake = -1;  // eventfd: wakes the acceptor to stop
  int worker_wake = -1;  // eventfd in the epoll set (data.ptr null): wakes the workers to stop
  std::atomic<bool> stopping{false};
  int max_pollers = 2;
  std::thread acceptor;
  std::vector<std::thread> workers;
  std::atomic<bool> started{false};
  std::atomic<bool> stopped{false};

  // std::mutex, not absl::Mutex: TSan cannot see Debian's uninstrumented absl (common/mutex.h).
  std::mutex mu;
  std::condition_variable drained;   // conns became empty
  absl::flat_hash_set<Conn*> conns;  // guarded by mu
  int pollers = 0;                   // guarded by mu
  std::vector<Parked*> parked;       // guarded by mu
  bool exiting = false;              // guarded by mu
};

HttpServer::HttpServer(HttpOptions options, HttpHandler handler, HttpErrorHandler on_error,
                       HttpObserver observer)
    : HttpServer(std::move(options),
                 HttpDeferringHandler([handler = std::move(handler)](const HttpRequest& req,
                                                                     HttpResponse& res, HttpLater) {
                   handler(req, res);
                   return true;
                 }),
                 std::move(on_error), std::move(observer)) {}

HttpServer::HttpServer(HttpOptions options, HttpDeferringHandler handler, HttpErrorHandler on_error,
                       HttpObserver observer)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(on_error),
                                   std::move(observer))) {}

void HttpLater::Finish() const {
  HttpConnection* c = connection_;
  int expected = kHandling;
  if (c->phase.compare_exchange_strong(expected, kAnswered)) return;  // its worker writes it
  c->server->FinishLater(c);
}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Start(const std::string& host, int port) {
  Impl& d = *impl_;
  if (d.started) return absl::FailedPreconditionError("already started");
  if (!d.options.cert_file.empty()) {
    if (absl::Status s = d.MakeTlsContext(); !s.ok()) return s;
  }
  absl::StatusOr<int> bound = d.Bind(host, port);
  if (!bound.ok()) return bound.status();
  d.epfd = epoll_create1(EPOLL_CLOEXEC);
  d.accept_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  d.worker_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (d.epfd < 0 || d.accept_wake < 0 || d.worker_wake < 0 ||
      epoll_ctl(d.epfd, EPOLL_CTL_ADD, d.worker_wake, &ev) != 0) {
    for (int fd : {d.listen_fd, d.epfd, d.accept_wake, d.worker_wake}) {
      if (fd >= 0) close(fd);
    }
    return absl::UnavailableError(
        absl::StrCat("cannot set up the listener: ", std::strerror(errno)));
  }
  d.started = true;
  const int threads = std::max(1, d.options.threads);
  d.max_pollers =
      d.options.pollers > 0
          ? std::min(d.options.pollers, threads)
          : std::min(threads,
                     std::max(2, 2 * static_cast<int>(std::thread::hardware_concurrency())));
  for (int i = 0; i < std::max(1, d.options.threads); ++i) {
    d.workers.emplace_back([&d] { d.Worker(); });
  }
  d.acceptor = std::thread([&d] { d.Acceptor(); });
  return *bound;
}

absl::Status HttpServer::Adopt(int fd) {
  Impl& d = *impl_;
  if (!d.started || d.stopped) {
    close(fd);
    return absl::FailedPreconditionError("the server is not running");
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("fd ", fd, ": ", std::strerror(errno)));
  }
  if (!d.Add(fd)) return absl::FailedPreconditionError("the server is stopping");
  return absl::OkStatus();
}

void HttpServer::Stop() {
  Impl& d = *impl_;
  if (!d.started || d.stopped) return;
  d.stopped = true;
  const uint64_t one = 1;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.stopping.store(true);
    for (Conn* c : d.conns) {
      if (c->idle && !c->shut) {
        shutdown(c->fd, SHUT_RDWR);
        c->shut = true;
      }
    }
  }
  (void)!write(d.accept_wake, &one, sizeof(one));
  d.acceptor.join();
  close(d.listen_fd);
  // Connections in flight finish their request and close; idle ones were shut above.
  {
    std::unique_lock<std::mutex> lock(d.mu);
    d.drained.wait(lock, [&d] { return d.conns.empty(); });
    d.exiting = true;
    for (Impl::Parked* p : d.parked) p->cv.notify_one();
  }
  (void)!write(d.worker_wake, &one, sizeof(one));
  for (std::thread& t : d.workers) t.join();
  for (int fd : {d.epfd, d.accept_wake, d.worker_wake}) close(fd);
}

}  // namespace fitledger::shim
