#include "webhook/http_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"
#include "common/log.h"
#include "common/mutex.h"

namespace fitledger::webhook {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

// simdjson reads up to this many bytes past a document's end (SIMDJSON_PADDING).
constexpr size_t kBodyPadding = 64;
// How much a connection reads at once while it waits for a request, and then for its body.
constexpr size_t kReadChunk = 16 << 10;
constexpr size_t kBodyReadChunk = 64 << 10;
// Buffers a connection keeps between requests beyond this are released.
constexpr size_t kKeepBufferBytes = 1 << 20;

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

// A connection's deadline, in steady-clock nanoseconds; kNever when it has none.
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t DeadlineAfter(absl::Duration d) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);  // saturates at an infinite duration
  const int64_t now = SteadyNowNs();
  return ns >= kNever - now ? kNever : now + std::max<int64_t>(ns, 0);
}

// A request's body: Beast's string_body, except that its reader appends what it is given
// (string_body's resizes the string, zero-filling the bytes it then copies over: a memset of the
// whole body) and reserves room for simdjson's padding past the Content-Length, so the body need
// not be copied to be padded.
struct RequestBody {
  using value_type = std::string;

  class reader {
   public:
    template <bool kIsRequest, class Fields>
    explicit reader(http::header<kIsRequest, Fields>& /*head*/, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, beast::error_code& ec) {
      // The parser has already refused a Content-Length over its body limit (413).
      if (length.has_value()) {
        if (*length > body_.max_size() - kBodyPadding) {
          ec = http::error::buffer_overflow;
          return;
        }
        body_.reserve(static_cast<size_t>(*length) + kBodyPadding);
      }
      ec = {};
    }

    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      const size_t extra = beast::buffer_bytes(buffers);
      if (extra > body_.max_size() - body_.size()) {
        ec = http::error::buffer_overflow;
        return 0;
      }
      for (const auto b : beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(b.data()), b.size());
      }
      ec = {};
      return extra;
    }

    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

// A reply's reason to close the connection after it is written.
enum class After { kKeepAlive, kClose };

// A request target's path, without its query. The absolute form ("http://host:port/filter"),
// which RFC 9112 section 3.2.2 says a server must accept although clients send it only to
// proxies, is read as its path ("/" when it has none), as Go's net/http server reads it.
std::string PathOf(beast::string_view target) {
  absl::string_view t(target.data(), target.size());
  for (absl::string_view scheme : {"http://", "https://"}) {
    if (t.size() >= scheme.size() && absl::EqualsIgnoreCase(t.substr(0, scheme.size()), scheme)) {
      const size_t slash = t.find_first_of("/?", scheme.size());
      t = slash == absl::string_view::npos ? absl::string_view("/") : t.substr(slash);
      if (absl::StartsWith(t, "?")) return "/";
      break;
    }
  }
  return std::string(t.substr(0, t.find('?')));
}

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions o, HttpHandler h, HttpErrorFormatter e, HttpObserver ob)
      : options(std::move(o)),
        handler(std::move(h)),
        on_error(std::move(e)),
        observer(std::move(ob)),
        io_threads(options.io_threads > 0
                       ? options.io_threads
                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
        iocs(Contexts(io_threads)),
        acceptor(net::make_strand(*iocs[0])) {}

  static std::vector<std::unique_ptr<net::io_context>> Contexts(int n) {
    std::vector<std::unique_ptr<net::io_context>> out;
    for (int i = 0; i < n; ++i) out.push_back(std::make_unique<net::io_context>(1));
    return out;
  }
  // The context a new connection lives on: each in turn.
  net::io_context& NextContext() {
    return *iocs[next_context.fetch_add(1, std::memory_order_relaxed) % iocs.size()];
  }

  // Registers and starts a session on the accepted (or adopted) socket.
  void Serve(tcp::socket socket);
  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket);

  // How a registered session is asked to close.
  enum class CloseIf { kIdle, kAlways, kPastDeadline };
  struct Registered {
    std::function<void(CloseIf)> close;    // closes the session on its own strand if ...
    const std::atomic<int64_t>* deadline;  // the session's, readable from any thread
  };
  // Sessions call these from their strands.
  void Register(uintptr_t key, Registered entry);
  void Unregister(uintptr_t key);

  // Every `sweep_period`, on the acceptor's strand: closes the sessions past their deadline.
  void Sweep();

  // Constant after construction.
  const HttpServerOptions options;
  const HttpHandler handler;
  const HttpErrorFormatter on_error;
  const HttpObserver observer;
  const int io_threads;

  // One io_context per I/O thread, each run by that thread alone (concurrency hint 1). A
  // connection lives on one context from accept to close (NextContext, in turn), so the thread
  // epoll woke for its socket also runs its handler and writes its reply: no event is handed to
  // another thread, as one context shared by all the threads does when another thread is idle.
  std::vector<std::unique_ptr<net::io_context>> iocs;
  std::atomic<size_t> next_context{0};
  std::optional<ssl::context> tls;  // set in Start, before any session exists
  // On a strand of the first context: the accept loop's completions, the retry timer and Stop's
  // posted close run one at a time (an acceptor is not safe for concurrent use). With one thread
  // per context the strands (this one and each connection's) are already implied; they stay so
  // that the model holds if a context is ever run by more than one thread.
  tcp::acceptor acceptor;
  std::optional<net::steady_timer> accept_retry;  // on the acceptor's strand
  // The connections' deadlines are checked by one timer, not one per connection: a timer armed
  // and cancelled per read and per write cost each request three timerfd_settime calls and the
  // cancelled waits' completions (their share of the CPU: docs/performance.md, "Earlier
  // findings"). A
  // deadline is a number a session stores; the sweep closes a session up to one period late.
  std::optional<net::steady_timer> sweep;  // on the acceptor's strand
  absl::Duration sweep_period;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;  // owned by Start/Stop's caller
  int bound_port = 0;
  bool started = false;
  bool stopped = false;

  std::atomic<bool> stopping{false};
  std::atomic<int64_t> open{0};   // connections not yet closed
  std::atomic<int64_t> alive{0};  // sessions not yet destroyed (a handler may hold one)
  std::atomic<int64_t> refused{0};

  // Wakes Stop() when `open` or `alive` dropped while stopping.
  void SignalDrain() {
    if (!stopping.load()) return;
    MutexLock lock(&drain_mu);
    drain_cv.SignalAll();
  }

  // For Stop: how to close each open session.
  Mutex sessions_mu;
  absl::flat_hash_map<uintptr_t, Registered> sessions ABSL_GUARDED_BY(sessions_mu);
  // Signalled when a session ends while stopping (Stop waits on it for `open` to reach 0).
  Mutex drain_mu;
  CondVar drain_cv;
};

namespace {

// One connection. Every method runs on the connection's strand, except Finish (any thread), the
// constructor and the destructor.
template <typename Stream>
class Session : public internal::Exchange, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  // The caller has counted the connection in server->open.
  Session(HttpServer::Impl* server, tcp::socket&& socket)
      : server_(server), stream_(MakeStream(server, std::move(socket))) {
    server_->alive.fetch_add(1, std::memory_order_relaxed);
  }

  ~Session() override {
    server_->Unregister(reinterpret_cast<uintptr_t>(this));
    if (phase_ != Phase::kClosed) Uncount();
    server_->alive.fetch_sub(1, std::memory_order_relaxed);
    server_->SignalDrain();
  }

  void Start() {
    auto self = this->shared_from_this();
    using CloseIf = HttpServer::Impl::CloseIf;
    auto close = [weak = this->weak_from_this()](CloseIf when) {
      if (auto s = weak.lock()) {
        net::dispatch(s->stream_.get_executor(), [s, when] {
          const bool idle = s->phase_ == Phase::kIdle || s->phase_ == Phase::kHandshake;
          // The deadline may have moved since the sweep read it.
          const bool late = s->deadline_ns_.load(std::memory_order_relaxed) <= SteadyNowNs();
          if (when == CloseIf::kAlways || (when == CloseIf::kIdle && idle) ||
              (when == CloseIf::kPastDeadline && late)) {
            s->Close();
          }
        });
      }
    };
    server_->Register(reinterpret_cast<uintptr_t>(this), {std::move(close), &deadline_ns_});
    net::dispatch(stream_.get_executor(), [self] {
      if constexpr (kTls) {
        self->phase_ = Phase::kHandshake;
        self->Deadline(self->server_->options.handshake_timeout);
        self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
          ec ? self->Close() : self->WaitForRequest();
        });
      } else {
        beast::error_code ec;
        self->stream_.non_blocking(true, ec);
        self->sync_io_ = !ec;
        self->WaitForRequest();
      }
    });
  }

  void Finish() override {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->Write(); });
  }

 private:
  enum class Phase { kHandshake, kIdle, kReading, kHandling, kWriting, kClosed };

  static Stream MakeStream(HttpServer::Impl* server, tcp::socket&& socket) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *server->tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  auto& Lowest() { return beast::get_lowest_layer(stream_); }
  // The connection is closed if the step it starts has not finished within `d` (Sweep).
  void Deadline(absl::Duration d) {
    deadline_ns_.store(DeadlineAfter(d), std::memory_order_relaxed);
  }
  void NoDeadline() { deadline_ns_.store(kNever, std::memory_order_relaxed); }

  // Waits for the first byte of the next request (unless pipelined bytes are already here).
  void WaitForRequest() {
    if (server_->stopping.load(std::memory_order_relaxed)) return Close();
    if (buffer_.size() > 0) return StartRequest();
    phase_ = Phase::kIdle;
    Deadline(server_->options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();
                              self->buffer_.commit(n);
                              self->StartRequest();
                            });
  }

  void StartRequest() {
    phase_ = Phase::kReading;
    started_ = absl::Now();
    spare_body_.clear();
    parser_.emplace(std::piecewise_construct, std::make_tuple(std::move(spare_body_)));
    parser_->header_limit(static_cast<uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(server_->options.max_body_bytes));
    header_seen_ = false;
    Deadline(server_->options.read_timeout);
    Parse();
  }

  // Feeds what the buffer holds to Beast's parser, and reads more while the request is not
  // whole. Bytes already received are parsed at once, and a plain connection first tries a read
  // that does not wait: a request that came in one piece is read, parsed and handed to the
  // handler in one pass. (A large one comes in several: Go's HTTP client, kube-scheduler's,
  // writes through a 4 KB buffer, Transport.WriteBufferSize; HttpRequest::reading has that time.)
  // Beast's composed reads (async_read_header, async_read) complete through a post even when the
  // bytes are there: a further turn of the I/O thread's loop, an epoll_wait, for each.
  void Parse() {
    beast::error_code ec;
    for (;;) {
      while (buffer_.size() > 0 && !parser_->is_done()) {
        const size_t used = parser_->put(buffer_.data(), ec);
        buffer_.consume(used);
        if (ec == http::error::need_more) {
          ec = {};
          break;
        }
        if (ec) return ReadFailed(ec);
        if (parser_->is_header_done() && !header_seen_) {
          header_seen_ = true;
          if (!OnHeader()) return;  // refused, or its 100 Continue is being written
        } else if (used == 0) {
          break;  // defensive: no progress without an error; read more
        }
      }
      if (parser_->is_done()) return OnBody();
      const size_t want = header_seen_ ? kBodyReadChunk : kReadChunk;
      if constexpr (!kTls) {
        const size_t n = stream_.read_some(buffer_.prepare(want), ec);
        if (!ec) {
          buffer_.commit(n);
          continue;
        }
        if (ec != net::error::would_block && ec != net::error::try_again) return Close();
        ec = {};
      }
      stream_.async_read_some(buffer_.prepare(want),
                              [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                                if (ec) return self->Close();  // end of stream, reset, closed
                                self->buffer_.commit(n);
                                self->Parse();
                              });
      return;
    }
  }

  // The request's head is in (and RequestBody has made room for the body): refuses what the
  // server does not serve and answers Expect: 100-continue. False if the parse does not go on
  // from here.
  bool OnHeader() {
    const auto& head = parser_->get();  // HTTP/1.0 or 1.1: Beast refuses other versions
    if (auto te = head.find(http::field::transfer_encoding); te != head.end()) {
      const absl::string_view value(te->value().data(), te->value().size());
      if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(value), "chunked")) {
        Refuse(501,
               absl::StrCat("Transfer-Encoding \"", value, "\" is not supported (only chunked)"));
        return false;
      }
    }
    auto expect = head.find(http::field::expect);
    if (expect != head.end()) {
      const absl::string_view value(expect->value().data(), expect->value().size());
      if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(value), "100-continue")) {
        Refuse(417, absl::StrCat("unsupported expectation \"", value, "\""));
        return false;
      }
    }
    parser_->eager(true);  // from here, parse as much of the body as the buffer holds
    if (expect != head.end() && head.version() == 11 && !parser_->is_done()) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      Deadline(server_->options.write_timeout);
      net::async_write(stream_, net::const_buffer(kContinue, sizeof(kContinue) - 1),
                       [self = this->shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->Close();
                         self->Deadline(self->server_->options.read_timeout);
                         self->Parse();
                       });
      return false;
    }
    Deadline(server_->options.read_timeout);  // for the body
    return true;
  }

  void OnBody() {
    NoDeadline();
    auto& message = parser_->get();
    keep_alive_ = message.keep_alive();
    version_ = message.version();
    head_ = message.method() == http::verb::head;
    request.method.assign(message.method_string().data(), message.method_string().size());
    request.path = PathOf(message.target());
    request.body = std::move(message.body());
    request.reading = absl::Now() - started_;
    if (request.body.capacity() < request.body.size() + kBodyPadding) {
      request.body.reserve(request.body.size() + kBodyPadding);
    }
    parser_.reset();
    reply.status = 200;
    reply.content_type = "application/json";
    reply.body.clear();
    reply.headers.clear();
    phase_ = Phase::kHandling;
    try {
      server_->handler(HttpCall(this->shared_from_this()));
    } catch (const std::exception& e) {
      // A handler that throws has not finished the call (handlers finish only on success).
      LogError("http handler threw", {{"path", request.path}, {"error", e.what()}});
      reply = HttpReply();
      server_->on_error(reply, "internal error");
      reply.status = 500;
      Write();
    }
  }

  // A request that could not be read: answer what can be answered, close.
  void ReadFailed(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return Refuse(413, absl::StrCat("request body over ", server_->options.max_body_bytes,
                                      " bytes (maxBodyBytes)"));
    }
    if (ec == http::error::header_limit) {
      return Refuse(
          431, absl::StrCat("request headers over ", server_->options.max_header_bytes, " bytes"));
    }
    if (&ec.category() == &http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Refuse(400, absl::StrCat("malformed request: ", ec.message()));
    }
    Close();  // timeout, reset, end of stream: nothing to answer to
  }

  // Answers a request the server refuses itself, then closes.
  void Refuse(int status, absl::string_view message) {
    if (parser_.has_value()) {
      const auto& head = parser_->get();
      request.method.assign(head.method_string().data(), head.method_string().size());
      request.path = PathOf(head.target());
      version_ = head.version() == 10 ? 10 : 11;
    } else {
      version_ = 11;
    }
    request.body.clear();
    request.reading = absl::Now() - started_;  // as far as it was read
    head_ = false;
    keep_alive_ = false;
    refused_ = true;
    reply = HttpReply();
    server_->on_error(reply, message);
    reply.status = status;
    phase_ = Phase::kHandling;
    Write();
  }

  void Write() {
    if (phase_ != Phase::kHandling) return;  // closed meanwhile (Stop past the drain timeout)
    phase_ = Phase::kWriting;
    ++served_;
    if (server_->observer) server_->observer(request, reply, absl::Now() - started_);
    const bool keep = keep_alive_ && !server_->stopping.load(std::memory_order_relaxed) &&
                      served_ < server_->options.keep_alive_max_requests;
    response_.result(static_cast<unsigned>(reply.status));
    response_.version(version_);
    response_.set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) response_.set(name, value);
    response_.keep_alive(keep);
    response_.body() = std::move(reply.body);
    if (head_) {
      response_.content_length(response_.body().size());
      reply.body = std::move(response_.body());
      response_.body().clear();
    } else {
      response_.prepare_payload();
    }
    // The reply is encoded: a large request body is no longer needed. Released now rather than
    // after the write, so a connection holds its megabytes of reply or of request, not both.
    if (request.body.capacity() > kKeepBufferBytes) std::string().swap(request.body);
    after_ = keep ? After::kKeepAlive : After::kClose;
    Deadline(server_->options.write_timeout);
    serializer_.emplace(response_);
    if constexpr (!kTls) {
      // Written now if the socket takes it all (a reply of tens of kilobytes on a connection
      // whose client reads it does), without the async write's post; what the socket does not
      // take now is written as it drains.
      if (sync_io_) {
        beast::error_code ec;
        while (!ec && !serializer_->is_done()) http::write_some(stream_, *serializer_, ec);
        if (serializer_->is_done()) {
          // The next request already buffered (pipelined) is served from a fresh turn of the
          // loop, not from inside this call: each would otherwise nest one call deeper.
          if (buffer_.size() == 0) return OnWritten({});
          net::post(stream_.get_executor(),
                    [self = this->shared_from_this()] { self->OnWritten({}); });
          return;
        }
        if (ec != net::error::would_block && ec != net::error::try_again) return OnWritten(ec);
      }
    }
    http::async_write(
        stream_, *serializer_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(beast::error_code ec) {
    serializer_.reset();
    // The buffers go round: the next request reads into this one's, the next reply too.
    if (!head_) reply.body = std::move(response_.body());
    response_.clear();
    response_.body().clear();
    spare_body_ = std::move(request.body);
    if (spare_body_.capacity() > kKeepBufferBytes) std::string().swap(spare_body_);
    if (reply.body.capacity() > kKeepBufferBytes) std::string().swap(reply.body);
    if (buffer_.capacity() > kKeepBufferBytes && buffer_.size() == 0) buffer_.shrink_to_fit();
    if (!ec && refused_) return Linger();
    if (ec || after_ == After::kClose) return Close();
    WaitForRequest();
  }

  // After refusing a request whose rest may still be arriving: stop sending, and read and drop
  // what comes for a moment before closing, so the client reads the reply rather than a reset.
  void Linger() {
    if constexpr (kTls) {
      Close();
    } else {
      beast::error_code ignored;
      stream_.shutdown(tcp::socket::shutdown_send, ignored);
      Deadline(absl::Seconds(1));
      Discard();
    }
  }
  void Discard() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Discard();
                            });
  }

  // The connection no longer counts as open (once).
  void Uncount() {
    server_->open.fetch_sub(1, std::memory_order_relaxed);
    server_->SignalDrain();
  }

  void Close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;  // a Finish() still due then writes nothing
    Uncount();
    beast::error_code ignored;
    if constexpr (kTls) {
      // No close_notify exchange: kube-scheduler reads Content-Length framed replies.
      Lowest().shutdown(tcp::socket::shutdown_both, ignored);
      Lowest().close(ignored);
    } else {
      stream_.shutdown(tcp::socket::shutdown_send, ignored);
      stream_.close(ignored);
    }
  }

  HttpServer::Impl* const server_;
  Stream stream_;
  std::atomic<int64_t> deadline_ns_{kNever};
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<RequestBody>> parser_;
  http::response<http::string_body> response_;
  std::optional<http::response_serializer<http::string_body>> serializer_;  // of response_
  bool sync_io_ = false;  // a plain socket in non-blocking mode: reads and writes tried at once
  std::string spare_body_;
  absl::Time started_;
  Phase phase_ = Phase::kIdle;
  After after_ = After::kKeepAlive;
  bool keep_alive_ = true;
  bool head_ = false;
  bool refused_ = false;      // the last reply was the server's own refusal
  bool header_seen_ = false;  // OnHeader has run for the request being read
  unsigned version_ = 11;
  int served_ = 0;
};

}  // namespace

void HttpServer::Impl::Register(uintptr_t key, Registered entry) {
  MutexLock lock(&sessions_mu);
  sessions[key] = std::move(entry);
}

void HttpServer::Impl::Unregister(uintptr_t key) {
  MutexLock lock(&sessions_mu);
  sessions.erase(key);
}

void HttpServer::Impl::Sweep() {
  sweep->expires_after(Chrono(sweep_period));
  sweep->async_wait([this](beast::error_code ec) {
    if (ec || stopping.load()) return;
    const int64_t now = SteadyNowNs();
    std::vector<std::function<void(CloseIf)>> late;
    {
      MutexLock lock(&sessions_mu);
      for (const auto& [key, entry] : sessions) {
        if (entry.deadline->load(std::memory_order_relaxed) <= now) late.push_back(entry.close);
      }
    }
    for (auto& close : late) close(CloseIf::kPastDeadline);
    Sweep();
  });
}

void HttpServer::Impl::Serve(tcp::socket socket) {
  if (open.fetch_add(1, std::memory_order_relaxed) >= options.max_connections) {
    open.fetch_sub(1, std::memory_order_relaxed);
    refused.fetch_add(1, std::memory_order_relaxed);
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  if (tls.has_value()) {
    std::make_shared<Session<beast::ssl_stream<tcp::socket>>>(this, std::move(socket))->Start();
  } else {
    std::make_shared<Session<tcp::socket>>(this, std::move(socket))->Start();
  }
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept(
      net::make_strand(NextContext()),
      [this](beast::error_code ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (stopping.load() || !acceptor.is_open()) return;
  if (!ec) {
    Serve(std::move(socket));
    return Accept();
  }
  if (ec == net::error::operation_aborted) return;
  // Out of descriptors (or another transient failure): try again shortly rather than spin.
  LogWarn("http accept failed", {{"error", ec.message()}});
  accept_retry.emplace(acceptor.get_executor(), std::chrono::milliseconds(50));
  accept_retry->async_wait([this](beast::error_code wait_ec) {
    if (!wait_ec) Accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, HttpErrorFormatter on_error,
                       HttpObserver observer)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(on_error),
                                   std::move(observer))) {}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Start(const std::string& host, int port) {
  Impl& d = *impl_;
  if (d.started) return absl::FailedPreconditionError("http server already started");
  const HttpServerOptions& o = d.options;
  if (!o.cert_file.empty()) {
    d.tls.emplace(ssl::context::tls_server);
    ssl::context& ctx = *d.tls;
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                    ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                    ssl::context::single_dh_use);
    beast::error_code ec;
    ctx.use_certificate_chain_file(o.cert_file, ec);
    if (!ec) ctx.use_private_key_file(o.key_file, ssl::context::pem, ec);
    if (!ec && !o.client_ca_file.empty()) {
      ctx.load_verify_file(o.client_ca_file, ec);
      if (!ec) ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    }
    if (ec) {
      d.tls.reset();
      return absl::InvalidArgumentError(absl::StrCat(
          "tls: cannot load certFile ", o.cert_file, ", keyFile ", o.key_file,
          o.client_ca_file.empty() ? "" : absl::StrCat(" or clientCAFile ", o.client_ca_file), ": ",
          ec.message()));
    }
  }
  beast::error_code ec;
  const net::ip::address address =
      net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("\"", host, "\" is not an IP address"));
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  d.acceptor.open(endpoint.protocol(), ec);
  if (!ec) d.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) d.acceptor.bind(endpoint, ec);
  if (!ec) d.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    d.acceptor.close(ignored);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, ": ", ec.message()));
  }
  d.bound_port = d.acceptor.local_endpoint().port();
  d.started = true;
  for (auto& ioc : d.iocs) d.work.push_back(net::make_work_guard(*ioc));
  // A quarter of the shortest timeout, within [5 ms, 250 ms]: a deadline is kept to within
  // that, and an idle server wakes at most four times a second for it.
  absl::Duration shortest = std::min({o.idle_timeout, o.read_timeout, o.write_timeout});
  if (d.tls.has_value()) shortest = std::min(shortest, o.handshake_timeout);
  d.sweep_period = std::clamp(shortest / 4, absl::Milliseconds(5), absl::Milliseconds(250));
  d.sweep.emplace(d.acceptor.get_executor());
  net::post(d.acceptor.get_executor(), [&d] { d.Sweep(); });
  d.Accept();
  for (auto& ioc : d.iocs) {
    d.threads.emplace_back([ioc = ioc.get()] { ioc->run(); });
  }
  return d.bound_port;
}

absl::Status HttpServer::Adopt(int fd) {
  Impl& d = *impl_;
  if (!d.started || d.stopping.load()) {
    return absl::FailedPreconditionError("http server is not running");
  }
  net::io_context& ioc = d.NextContext();
  tcp::socket socket(net::make_strand(ioc));
  beast::error_code ec;
  socket.assign(tcp::v4(), fd, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot adopt fd: ", ec.message()));
  net::post(ioc, [&d, s = std::make_shared<tcp::socket>(std::move(socket))]() mutable {
    d.Serve(std::move(*s));
  });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  Impl& d = *impl_;
  if (!d.started || d.stopped) return;
  d.stopped = true;
  d.stopping.store(true);
  net::post(d.acceptor.get_executor(), [&d] {
    beast::error_code ignored;
    d.acceptor.close(ignored);
    if (d.accept_retry.has_value()) d.accept_retry->cancel();
    d.sweep->cancel();
  });
  using CloseIf = Impl::CloseIf;
  auto close_sessions = [&d](CloseIf when) {
    std::vector<std::function<void(CloseIf)>> closers;
    {
      MutexLock lock(&d.sessions_mu);
      for (const auto& [key, entry] : d.sessions) closers.push_back(entry.close);
    }
    for (auto& close : closers) close(when);
  };
  close_sessions(CloseIf::kIdle);
  bool drained = false;
  {
    const absl::Time deadline = absl::Now() + d.options.drain_timeout;
    MutexLock lock(&d.drain_mu);
    while (d.open.load() > 0 && absl::Now() < deadline) {
      d.drain_cv.WaitFor(&d.drain_mu, Chrono(deadline - absl::Now()));
    }
    drained = d.open.load() == 0;
  }
  if (!drained) {
    LogWarn("http server stop: closing connections still busy after the drain timeout",
            {{"connections", absl::StrCat(d.open.load())}});
    close_sessions(CloseIf::kAlways);
  }
  {
    // Every session gone: a handler finishing a call late (on a closed connection) touches this
    // server's io_contexts, so it must have let go of its HttpCall before the threads stop.
    MutexLock lock(&d.drain_mu);
    while (d.open.load() > 0 || d.alive.load() > 0) d.drain_cv.Wait(&d.drain_mu);
  }
  d.work.clear();
  for (auto& ioc : d.iocs) ioc->stop();
  for (std::thread& t : d.threads) t.join();
  d.threads.clear();
}

int HttpServer::port() const { return impl_->bound_port; }
bool HttpServer::tls() const { return impl_->tls.has_value(); }
int64_t HttpServer::open_connections() const { return impl_->open.load(); }
int64_t HttpServer::refused_connections() const { return impl_->refused.load(); }

}  // namespace fitledger::webhook
