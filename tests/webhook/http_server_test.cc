// The webhook's HTTP/1.1 server (Boost.Beast), spoken to over raw sockets: framing
// (Content-Length, chunked, 100-continue, pipelining, HTTP/1.0), refusals, deadlines, the
// connection cap, slow and idle clients, Stop(), and replies finished later from another thread.

#include "webhook/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fitledger::webhook {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr absl::Duration kDeadline = absl::Seconds(20);

// A blocking client socket with a read deadline.
class Raw {
 public:
  explicit Raw(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Raw() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return ok_; }

  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }

  // Reads more into buf_; false on EOF, error or deadline.
  bool Fill(absl::Time deadline) {
    pollfd p{fd_, POLLIN, 0};
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0 || poll(&p, 1, static_cast<int>(ms)) <= 0) return false;
    char tmp[65536];
    const ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) {
      // Closed: an orderly close, or a reset (the server closed with bytes of ours unread, as it
      // does to a request it gives up on).
      eof_ = n == 0 || errno == ECONNRESET;
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  struct Response {
    int status = 0;
    std::string head;  // status line and fields
    std::string body;
  };

  // Reads one response (Content-Length framed); status 0 when none came.
  Response Read(absl::Duration timeout = kDeadline) {
    const absl::Time deadline = absl::Now() + timeout;
    Response r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return r;
    }
    r.head = buf_.substr(0, end + 2);
    size_t length = 0;
    const size_t at = r.head.find("Content-Length: ");
    if (at != std::string::npos) {
      length = std::stoul(r.head.substr(at + 16, r.head.find("\r\n", at) - at - 16));
    }
    r.status = std::stoi(r.head.substr(9, 3));
    const bool head_only = r.status == 100 || skip_body_;
    while (!head_only && buf_.size() < end + 4 + length) {
      if (!Fill(deadline)) return Response();
    }
    r.body = head_only ? "" : buf_.substr(end + 4, length);
    buf_.erase(0, end + 4 + (head_only ? 0 : length));
    return r;
  }

  // True when the server closes the connection before `timeout`.
  bool Closed(absl::Duration timeout = kDeadline) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!eof_) {
      if (!Fill(deadline) && !eof_) return false;
    }
    return true;
  }

  void set_skip_body(bool skip) { skip_body_ = skip; }

  // Whether the server has sent something (or closed) by now.
  bool Readable() {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  bool eof_ = false;
  bool skip_body_ = false;
  std::string buf_;
};

std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                      "\r\n", extra, "\r\n", body);
}

// Polls `done` until it holds or kDeadline passes.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kDeadline;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

void JsonError(HttpReply& reply, absl::string_view message) {
  reply.content_type = "application/json";
  reply.body = absl::StrCat("{\"Error\":\"", message, "\"}");
}

// An echo server: "METHOD|PATH|BODY". /throw throws; /later is parked until the test finishes
// it (from another thread); /inline is finished inside the handler; the rest are answered at once.
class HttpServerTest : public ::testing::Test {
 protected:
  struct Parked {
    std::optional<HttpCall> call;
    std::string body;
  };

  void StartServer(HttpServerOptions options = {}) {
    server_ = std::make_unique<HttpServer>(
        options,
        [this](HttpCall call) {
          const HttpRequest& req = call.request();
          if (req.path == "/throw") throw std::runtime_error("boom");
          if (req.path == "/later") {
            std::lock_guard<std::mutex> lock(mu_);
            parked_.push_back({call, req.body});
            cv_.notify_all();
            return;
          }
          call.reply().content_type = "text/plain";
          call.reply().body = absl::StrCat(req.method, "|", req.path, "|", req.body);
          // The body has room for simdjson's padding after it.
          if (req.body.capacity() < req.body.size() + 64) call.reply().status = 599;
          handled_.fetch_add(1);
          call.Finish();
        },
        JsonError,
        [this](const HttpRequest& request, const HttpReply&, absl::Duration elapsed) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            last_reading_ = request.reading;
            last_elapsed_ = elapsed;
          }
          observed_.fetch_add(1);
        });
    absl::StatusOr<int> port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }

  void SetUp() override { StartServer(); }
  void TearDown() override {
    // Finish what a failed test left parked, so Stop() is not kept waiting.
    std::vector<Parked> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(parked_);
    }
    for (Parked& p : left) {
      if (p.call.has_value()) p.call->Finish();
    }
  }

  // The next parked request (generous deadline).
  bool NextParked(Parked* out) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return !parked_.empty(); })) {
      return false;
    }
    *out = parked_.front();
    parked_.erase(parked_.begin());
    return true;
  }

  // Answers `p` with `body` from another thread, as a gRPC completion would, and lets go of the
  // call (as a completion does when it is done).
  static void FinishElsewhere(Parked& p, std::string body) {
    std::thread([call = *std::move(p.call), body = std::move(body)] {
      call.reply().body = body;
      call.Finish();
    }).join();
    p.call.reset();
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::atomic<int> handled_{0};
  std::atomic<int> observed_{0};
  absl::Duration last_reading_;  // the observer's last request.reading (under mu_)
  absl::Duration last_elapsed_;  // and elapsed (under mu_)
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Parked> parked_;
};

TEST_F(HttpServerTest, ContentLengthBodyQueryAndObserver) {
  Raw c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.Send(Post("/echo?x=1", "hello")));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "POST|/echo|hello");
  EXPECT_THAT(r.head, HasSubstr("Content-Type: text/plain\r\n"));
  EXPECT_THAT(r.head, Not(HasSubstr("Connection: close")));
  EXPECT_TRUE(Eventually([&] { return observed_.load() == 1; }));
}

// The observer learns how long the request took to arrive (its first byte to its last), apart
// from the whole: a client that sends its body 500 ms after its head is not the handler's time.
TEST_F(HttpServerTest, TheObserverSeesTheRequestsReadingApart) {
  Raw c(port_);
  ASSERT_TRUE(c.ok());
  const std::string request = Post("/echo", "hello");
  ASSERT_TRUE(c.Send(request.substr(0, request.size() - 5)));
  absl::SleepFor(absl::Milliseconds(500));   // the client's pace (the input), not a wait
  const absl::Time body_sent = absl::Now();  // before: the server cannot have the body earlier
  ASSERT_TRUE(c.Send("hello"));
  EXPECT_EQ(c.Read().body, "POST|/echo|hello");
  const absl::Duration since_body = absl::Now() - body_sent;
  ASSERT_TRUE(Eventually([&] { return observed_.load() == 1; }));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_GE(last_elapsed_, last_reading_);
  // The handling alone began after the body was sent and ended before the reply was read
  // (without the reading apart, it would include the 500 ms, whenever the server read the head).
  EXPECT_LE(last_elapsed_ - last_reading_, since_body);
}

TEST_F(HttpServerTest, ChunkedBodyWithExtensionsAndTrailers) {
  Raw c(port_);
  ASSERT_TRUE(
      c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5;ext=1\r\nhello\r\n1A\r\n abcdefghijklmnopqrstuvwxy\r\n0\r\nX-Trailer: t\r\n\r\n"));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "POST|/echo|hello abcdefghijklmnopqrstuvwxy");
  ASSERT_TRUE(c.Send(Post("/echo", "next")));  // the connection stays usable
  EXPECT_EQ(c.Read().body, "POST|/echo|next");
}

TEST_F(HttpServerTest, ARequestSentInPiecesArrivesWhole) {
  Raw c(port_);
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r"));
  ASSERT_TRUE(c.Send("\nabc"));
  ASSERT_TRUE(c.Send("\r\n2\r\nde\r\n0\r\n"));
  ASSERT_TRUE(c.Send("\r\n"));
  EXPECT_EQ(c.Read().body, "POST|/echo|abcde");
}

TEST_F(HttpServerTest, BadChunkedBodiesAre400AndClose) {
  for (const char* body : {"zz\r\nab\r\n0\r\n\r\n", "2\r\nabc\r\n0\r\n\r\n"}) {
    SCOPED_TRACE(body);
    Raw c(port_);
    ASSERT_TRUE(
        c.Send(absl::StrCat("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", body)));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, 400);
    EXPECT_THAT(r.body, HasSubstr("malformed request"));
    EXPECT_THAT(r.head, HasSubstr("Connection: close"));
    EXPECT_TRUE(c.Closed());
  }
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(HttpServerTest, ExpectContinueGets100BeforeTheBody) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  Raw::Response interim = c.Read();
  EXPECT_EQ(interim.status, 100);
  ASSERT_TRUE(c.Send("body"));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "POST|/echo|body");
}

// RFC 9112 section 3.2.2: a server must accept the absolute form of the target (it read
// "http://x/echo" as an unknown path).
TEST_F(HttpServerTest, AnAbsoluteFormTargetIsReadAsItsPath) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(absl::StrCat(
      "POST http://127.0.0.1:1/echo?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na",
      "GET HTTPS://host HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET http://host?q HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /plain?q HTTP/1.1\r\nHost: x\r\n\r\n")));
  EXPECT_EQ(c.Read().body, "POST|/echo|a");
  EXPECT_EQ(c.Read().body, "GET|/|");
  EXPECT_EQ(c.Read().body, "GET|/|");
  EXPECT_EQ(c.Read().body, "GET|/plain|");
}

TEST_F(HttpServerTest, UnknownExpectationIs417) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", "x", "Expect: something\r\n")));
  EXPECT_EQ(c.Read().status, 417);
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(absl::StrCat(Post("/echo", "one"), Post("/echo", "two"),
                                  "GET /three HTTP/1.1\r\nHost: x\r\n\r\n")));
  EXPECT_EQ(c.Read().body, "POST|/echo|one");
  EXPECT_EQ(c.Read().body, "POST|/echo|two");
  EXPECT_EQ(c.Read().body, "GET|/three|");
}

// Thousands of requests sent back to back, faster than they are answered: each is answered, in
// order. (Requests already received are served one per turn of the I/O loop, not each from
// inside the previous one's reply: 20,000 nested calls would overflow the thread's stack.)
TEST_F(HttpServerTest, ThousandsOfPipelinedRequestsAreAnsweredInOrder) {
  server_.reset();
  HttpServerOptions options;
  options.keep_alive_max_requests = 1000000;
  StartServer(options);
  constexpr int kRequests = 20000;
  std::string all;
  for (int i = 0; i < kRequests; ++i) {
    absl::StrAppend(&all, "GET /", i, " HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  Raw c(port_);
  std::atomic<bool> sent{false};
  std::thread sender([&] { sent = c.Send(all); });
  int answered = 0;
  for (; answered < kRequests; ++answered) {
    const Raw::Response r = c.Read();
    if (r.status != 200 || r.body != absl::StrCat("GET|/", answered, "|")) break;
  }
  sender.join();
  EXPECT_TRUE(sent.load());
  EXPECT_EQ(answered, kRequests);
}

TEST_F(HttpServerTest, LargeBodyInManyReads) {
  const std::string body(3 << 20, 'b');
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", body)));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), body.size() + 11);  // "POST|/echo|"
}

TEST_F(HttpServerTest, Http10ClosesUnlessAskedToKeepAlive) {
  {
    Raw c(port_);
    ASSERT_TRUE(c.Send("GET /a HTTP/1.0\r\n\r\n"));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.body, "GET|/a|");
    EXPECT_TRUE(c.Closed());
  }
  Raw c(port_);
  ASSERT_TRUE(c.Send("GET /a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
  EXPECT_THAT(c.Read().head, HasSubstr("Connection: keep-alive"));
  ASSERT_TRUE(c.Send("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  EXPECT_EQ(c.Read().body, "GET|/b|");
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", "x", "Connection: close\r\n")));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.head, HasSubstr("Connection: close"));
  EXPECT_TRUE(c.Closed());
}

TEST_F(HttpServerTest, HeadAnswersWithoutABody) {
  Raw c(port_);
  c.set_skip_body(true);
  ASSERT_TRUE(c.Send("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.head, HasSubstr("Content-Length: 8\r\n"));  // "HEAD|/h|"
  c.set_skip_body(false);
  ASSERT_TRUE(c.Send(Post("/echo", "z")));  // nothing but the next reply follows
  EXPECT_EQ(c.Read().body, "POST|/echo|z");
}

TEST_F(HttpServerTest, MalformedRequestsAreRefusedAndClosed) {
  struct Case {
    std::string request;
    int status;
  };
  const std::vector<Case> cases = {
      {"NOT-HTTP\r\n\r\n", 400},
      {"GET /a HTTP/1.1 extra\r\n\r\n", 400},
      {"GET /a HTTP/2.0\r\n\r\n", 400},  // Beast takes HTTP/1.0 and HTTP/1.1 only
      {"GET /a HTTP/1.2\r\n\r\n", 400},
      {"GET /a HTTP/1.1\r\nNo-Colon\r\n\r\n", 400},
      {"GET /a HTTP/1.1\r\nBad Name: v\r\n\r\n", 400},
      {"POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
      {"POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST /a HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"GET /a HTTP/1.1\r\nX: a\rb\r\n\r\n", 400},
      {std::string("GET /a HTTP/1.1\r\nX: a\0b\r\n\r\n", 28), 400},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.request);
    Raw c(port_);
    ASSERT_TRUE(c.Send(k.request));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, k.status);
    EXPECT_THAT(r.head, HasSubstr("Content-Type: application/json"));
    EXPECT_THAT(r.body, StartsWith("{\"Error\":"));
    EXPECT_TRUE(c.Closed());
  }
  EXPECT_EQ(handled_.load(), 0);
  // Refusals are observed (they count in the metrics) and the server keeps serving.
  EXPECT_TRUE(Eventually([&] { return observed_.load() == static_cast<int>(cases.size()); }));
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", "ok")));
  EXPECT_EQ(c.Read().status, 200);
}

TEST_F(HttpServerTest, OversizedHeadersAndBodiesAreRefused) {
  server_.reset();
  HttpServerOptions options;
  options.max_body_bytes = 100;
  options.max_header_bytes = 1024;
  StartServer(options);
  {
    Raw c(port_);
    ASSERT_TRUE(
        c.Send(absl::StrCat("GET /a HTTP/1.1\r\nX-Big: ", std::string(2000, 'v'), "\r\n\r\n")));
    EXPECT_EQ(c.Read().status, 431);
    EXPECT_TRUE(c.Closed());
  }
  {
    // The Content-Length alone refuses it: the body is never sent.
    Raw c(port_);
    ASSERT_TRUE(c.Send("POST /a HTTP/1.1\r\nContent-Length: 101\r\n\r\n"));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, 413);
    EXPECT_THAT(r.body, HasSubstr("over 100 bytes (maxBodyBytes)"));
  }
  {
    // The body was sent before the refusal: the server reads and drops it for a moment, so the
    // client reads the 413 rather than a connection reset.
    Raw c(port_);
    ASSERT_TRUE(c.Send(absl::StrCat("POST /a HTTP/1.1\r\nContent-Length: 200000\r\n\r\n",
                                    std::string(200000, 'b'))));
    EXPECT_EQ(c.Read().status, 413);
  }
  {
    Raw c(port_);
    ASSERT_TRUE(c.Send(absl::StrCat("POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                                    "40\r\n", std::string(64, 'a'), "\r\n40\r\n")));
    EXPECT_EQ(c.Read().status, 413);
  }
  EXPECT_EQ(handled_.load(), 0);
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", std::string(100, 'a'))));
  EXPECT_EQ(c.Read().status, 200);
}

TEST_F(HttpServerTest, AHandlerThatThrowsGets500AndTheServerServesOn) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/throw", "")));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 500);
  EXPECT_THAT(r.body, HasSubstr("internal error"));
  ASSERT_TRUE(c.Send(Post("/echo", "after")));
  EXPECT_EQ(c.Read().body, "POST|/echo|after");
}

TEST_F(HttpServerTest, KeepAliveMaxRequestsClosesTheConnection) {
  server_.reset();
  HttpServerOptions options;
  options.io_threads = 1;
  options.keep_alive_max_requests = 3;
  StartServer(options);
  Raw c(port_);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Send(Post("/echo", "x")));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(absl::StrContains(r.head, "Connection: close"), i == 2) << i;
  }
  EXPECT_TRUE(c.Closed());
}

// A request whose rest does not come within readTimeout is dropped (the connection closes;
// there is nobody to answer who sends that slowly).
TEST_F(HttpServerTest, APartialRequestIsClosedAfterReadTimeout) {
  server_.reset();
  HttpServerOptions options;
  options.read_timeout = absl::Milliseconds(200);
  StartServer(options);
  Raw c(port_);
  ASSERT_TRUE(c.Send("POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"));
  EXPECT_TRUE(c.Closed());
  EXPECT_EQ(handled_.load(), 0);
}

// readTimeout bounds the headers as a whole from the request's first byte: a client trickling a
// byte at a time is closed after it, not after a pause.
TEST_F(HttpServerTest, ATrickledRequestIsClosedAfterReadTimeout) {
  server_.reset();
  HttpServerOptions options;
  options.read_timeout = absl::Milliseconds(500);
  StartServer(options);
  Raw c(port_);
  const std::string head = "POST /a HTTP/1.1\r\nX-Slow: " + std::string(200, 'v');
  const absl::Time start = absl::Now();
  for (size_t i = 0; i < head.size() && absl::Now() - start < absl::Seconds(8); ++i) {
    if (c.Readable() || !c.Send(head.substr(i, 1))) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(c.Closed());
  // Closed while the client was still sending (a generous bound: 500 ms is the deadline).
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(HttpServerTest, IdleConnectionsAreClosedAfterIdleTimeout) {
  server_.reset();
  HttpServerOptions options;
  options.idle_timeout = absl::Milliseconds(300);
  StartServer(options);
  Raw used(port_);
  ASSERT_TRUE(used.Send(Post("/echo", "x")));
  EXPECT_EQ(used.Read().status, 200);
  Raw never(port_);
  ASSERT_TRUE(never.ok());
  EXPECT_TRUE(used.Closed());
  EXPECT_TRUE(never.Closed());
}

// A reply the client does not read is given up after writeTimeout: the connection closes.
TEST_F(HttpServerTest, AReplyNotReadWithinWriteTimeoutClosesTheConnection) {
  server_.reset();
  HttpServerOptions options;
  options.write_timeout = absl::Milliseconds(300);
  StartServer(options);
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "big")));
  Parked p;
  ASSERT_TRUE(NextParked(&p));
  ASSERT_EQ(server_->open_connections(), 1);
  p.call->reply().body = std::string(64 << 20, 'x');  // more than the sockets' buffers hold
  p.call->Finish();
  p.call.reset();
  EXPECT_TRUE(Eventually([&] { return server_->open_connections() == 0; }));
}

// A request the handler holds has no deadline: a reply due longer than every timeout is sent.
TEST_F(HttpServerTest, ARequestHeldByTheHandlerPastEveryTimeoutIsAnswered) {
  server_.reset();
  HttpServerOptions options;
  options.idle_timeout = absl::Milliseconds(50);
  options.read_timeout = absl::Milliseconds(50);
  options.write_timeout = absl::Milliseconds(50);
  StartServer(options);
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "slow")));
  Parked p;
  ASSERT_TRUE(NextParked(&p));
  // Several sweeps (each 12.5 ms here) pass while the call is held; the condition waited for is
  // the sweep's own progress, not time: an idle connection opened after this one is closed.
  Raw idle(port_);
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle.Closed());
  ASSERT_EQ(server_->open_connections(), 1);
  FinishElsewhere(p, "done");
  const Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "done");
}

// No connection holds a thread: with one I/O thread, requests parked by the handler, idle
// connections and a slow sender leave a fresh connection served at once.
TEST_F(HttpServerTest, OneIoThreadServesPastParkedIdleAndSlowConnections) {
  server_.reset();
  HttpServerOptions options;
  options.io_threads = 1;
  StartServer(options);
  std::vector<std::unique_ptr<Raw>> others;
  for (int i = 0; i < 3; ++i) {
    others.push_back(std::make_unique<Raw>(port_));
    ASSERT_TRUE(others.back()->Send(Post("/later", absl::StrCat(i))));
  }
  for (int i = 0; i < 20; ++i) others.push_back(std::make_unique<Raw>(port_));
  others.push_back(std::make_unique<Raw>(port_));
  ASSERT_TRUE(others.back()->Send("POST /echo HTTP/1.1\r\nContent-Len"));
  Raw fresh(port_);
  ASSERT_TRUE(fresh.Send(Post("/echo", "fresh")));
  EXPECT_EQ(fresh.Read().body, "POST|/echo|fresh");
  for (int i = 0; i < 3; ++i) {
    Parked p;
    ASSERT_TRUE(NextParked(&p));
    FinishElsewhere(p, absl::StrCat("later|", p.body));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(others[i]->Read().status, 200);
}

// Beyond maxConnections a new connection is closed at once; a slot frees when one closes.
TEST_F(HttpServerTest, ConnectionsBeyondTheCapAreClosedAtOnce) {
  server_.reset();
  HttpServerOptions options;
  options.max_connections = 3;
  StartServer(options);
  std::vector<std::unique_ptr<Raw>> open;
  for (int i = 0; i < 3; ++i) {
    open.push_back(std::make_unique<Raw>(port_));
    ASSERT_TRUE(open.back()->Send(Post("/echo", "x")));
    ASSERT_EQ(open.back()->Read().status, 200);
  }
  EXPECT_EQ(server_->open_connections(), 3);
  Raw extra(port_);
  ASSERT_TRUE(extra.ok());  // the kernel accepts it; the server closes it
  EXPECT_TRUE(extra.Closed());
  EXPECT_EQ(server_->refused_connections(), 1);
  open.pop_back();
  ASSERT_TRUE(Eventually([&] { return server_->open_connections() == 2; }));
  Raw again(port_);
  ASSERT_TRUE(again.Send(Post("/echo", "again")));
  EXPECT_EQ(again.Read().body, "POST|/echo|again");
}

// Slow and idle clients (a slowloris) cost no thread: while they hold their connections, a
// fresh connection is answered within a second, every time; once they go, all is as before.
TEST_F(HttpServerTest, SlowAndIdleClientsDoNotDelayOthers) {
  constexpr int kAttackers = 64;  // each kind; tests/e2e/slow_client_test.cc runs 256
  std::vector<std::unique_ptr<Raw>> slow;
  std::vector<std::unique_ptr<Raw>> idle;
  for (int i = 0; i < kAttackers; ++i) {
    slow.push_back(std::make_unique<Raw>(port_));
    ASSERT_TRUE(slow.back()->Send("POST /echo HTTP/1.1\r\nHost: x\r\nX-Slow: "));
    idle.push_back(std::make_unique<Raw>(port_));
  }
  for (int round = 0; round < 5; ++round) {
    for (auto& c : slow) c->Send("v");
    const absl::Time start = absl::Now();
    Raw fresh(port_);
    ASSERT_TRUE(fresh.Send(Post("/echo", "fresh")));
    Raw::Response r = fresh.Read(absl::Seconds(1));
    EXPECT_EQ(r.status, 200) << "round " << round;
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    absl::SleepFor(absl::Milliseconds(200));  // the attackers' pace, not a wait for an effect
  }
  slow.clear();
  idle.clear();
  ASSERT_TRUE(Eventually([&] { return server_->open_connections() == 0; }));
  Raw after(port_);
  ASSERT_TRUE(after.Send(Post("/echo", "after")));
  EXPECT_EQ(after.Read().body, "POST|/echo|after");
}

// Stop() lets a request in flight be answered (its reply says the connection closes) and closes
// idle connections at once rather than after idleTimeout.
TEST_F(HttpServerTest, StopAnswersRequestsInFlightAndClosesIdleConnections) {
  server_.reset();
  HttpServerOptions options;
  options.idle_timeout = absl::Hours(1);
  StartServer(options);
  Raw idle(port_);
  ASSERT_TRUE(idle.Send(Post("/echo", "x")));
  ASSERT_EQ(idle.Read().status, 200);
  Raw busy(port_);
  ASSERT_TRUE(busy.Send(Post("/later", "y")));
  Parked p;
  ASSERT_TRUE(NextParked(&p));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server_->Stop();
    stopped = true;
  });
  EXPECT_TRUE(idle.Closed());
  EXPECT_TRUE(Eventually([&] { return !Raw(port_).ok(); }));  // no longer listening
  EXPECT_FALSE(stopped.load());
  FinishElsewhere(p, "later|y");
  Raw::Response r = busy.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "later|y");
  EXPECT_THAT(r.head, HasSubstr("Connection: close"));
  stopper.join();
  EXPECT_TRUE(stopped.load());
  EXPECT_TRUE(busy.Closed());
}

// Past drain_timeout, Stop() closes a connection whose reply is still due; the handler's late
// Finish() writes nothing and harms nothing.
TEST_F(HttpServerTest, StopPastTheDrainTimeoutClosesBusyConnections) {
  server_.reset();
  HttpServerOptions options;
  options.drain_timeout = absl::Milliseconds(100);
  StartServer(options);
  Raw busy(port_);
  ASSERT_TRUE(busy.Send(Post("/later", "y")));
  Parked p;
  ASSERT_TRUE(NextParked(&p));
  std::thread stopper([&] { server_->Stop(); });
  EXPECT_TRUE(busy.Closed());
  FinishElsewhere(p, "too late");
  stopper.join();
}

// Adopt() serves an already connected socket (the fuzzer's way in) until Stop().
TEST_F(HttpServerTest, AdoptServesAConnectedSocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(server_->Adopt(sv[0]).ok());
  const std::string request = Post("/echo", "paired");
  ASSERT_EQ(send(sv[1], request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string reply;
  char buf[4096];
  while (reply.find("paired") == std::string::npos) {
    pollfd p{sv[1], POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 20000), 0);
    const ssize_t n = recv(sv[1], buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    reply.append(buf, static_cast<size_t>(n));
  }
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200 OK\r\n"));
  close(sv[1]);
  server_->Stop();
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(server_->Adopt(sv[0])));
  close(sv[0]);
  close(sv[1]);
}

TEST_F(HttpServerTest, AReplyFinishedFromAnotherThreadIsSentAndTheConnectionGoesOn) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "a")));
  Parked p;
  ASSERT_TRUE(NextParked(&p));
  EXPECT_EQ(p.body, "a");
  EXPECT_FALSE(c.Readable());  // nothing before the answer
  FinishElsewhere(p, "later|a");
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "later|a");
  ASSERT_TRUE(c.Send(Post("/now", "b")));
  EXPECT_EQ(c.Read().body, "POST|/now|b");
  EXPECT_TRUE(Eventually([&] { return observed_.load() == 2; }));
}

TEST_F(HttpServerTest, PipelinedRequestsBehindALaterReplyAreAnsweredInOrder) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "first") + Post("/now", "second") + Post("/later", "third")));
  Parked p;
  ASSERT_TRUE(NextParked(&p));
  EXPECT_EQ(p.body, "first");
  EXPECT_FALSE(c.Readable());  // "second" waits behind "first"
  FinishElsewhere(p, "later|first");
  ASSERT_TRUE(NextParked(&p));
  EXPECT_EQ(p.body, "third");
  FinishElsewhere(p, "later|third");
  EXPECT_EQ(c.Read().body, "later|first");
  EXPECT_EQ(c.Read().body, "POST|/now|second");
  EXPECT_EQ(c.Read().body, "later|third");
}

// A reply larger than the socket takes at once, to a client that is not reading yet: Finish()
// returns without waiting for the client.
TEST_F(HttpServerTest, FinishNeverWaitsForTheClient) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "big")));
  Parked p;
  ASSERT_TRUE(NextParked(&p));
  const std::string big(64 << 20, 'x');
  p.call->reply().body = big;
  p.call->Finish();  // on this thread: would hang here if it waited for the reader below
  p.call.reset();
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), big.size());
  EXPECT_EQ(r.body, big);
  ASSERT_TRUE(c.Send(Post("/now", "after")));
  EXPECT_EQ(c.Read().body, "POST|/now|after");
}

TEST(HttpServerStartTest, ABusyPortIsUnavailableAndBadTlsFilesAreInvalid) {
  const auto handler = [](HttpCall call) { call.Finish(); };
  HttpServer first({}, handler, JsonError);
  absl::StatusOr<int> port = first.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  HttpServer second({}, handler, JsonError);
  EXPECT_TRUE(absl::IsUnavailable(second.Start("127.0.0.1", *port).status()));
  HttpServerOptions tls;
  tls.cert_file = "/nonexistent/cert.pem";
  tls.key_file = "/nonexistent/key.pem";
  HttpServer third(tls, handler, JsonError);
  EXPECT_TRUE(absl::IsInvalidArgument(third.Start("127.0.0.1", 0).status()));
  HttpServer fourth({}, handler, JsonError);
  EXPECT_TRUE(absl::IsInvalidArgument(fourth.Start("not-an-ip", 0).status()));
}

}  // namespace
}  // namespace fitledger::webhook
