// The webhook's HTTP/1.1 server, spoken to over raw sockets: framing (Content-Length, chunked,
// 100-continue, pipelining, HTTP/1.0), refusals, timeouts, idle connections, Stop(), and replies
// a handler finishes later from another thread.

#include "client/shim/http1.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
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

namespace fitledger::shim {
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
      eof_ = n == 0;
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

class Http1Test : public ::testing::Test {
 protected:
  void StartServer(HttpOptions options = {}) {
    server_ = std::make_unique<HttpServer>(
        options,
        [this](const HttpRequest& req, HttpResponse& res) {
          if (req.path == "/throw") throw std::runtime_error("boom");
          if (req.path == "/block") {
            if (blocked_.fetch_add(1) == 0) entered_.Notify();
            release_.WaitForNotificationWithTimeout(3 * kDeadline);
          }
          res.content_type = "text/plain";
          res.body = absl::StrCat(req.method, "|", req.path, "|", req.body);
          if (const std::string* v = req.Header("x-echo")) res.headers.emplace_back("X-Echo", *v);
          handled_.fetch_add(1);
        },
        [](HttpResponse& res, int status, absl::string_view message) {
          res.status = status;
          res.content_type = "application/json";
          res.body = absl::StrCat("{\"Error\":\"", message, "\"}");
        },
        [this](const HttpRequest&, const HttpResponse&, absl::Duration) {
          observed_.fetch_add(1);
        });
    absl::StatusOr<int> port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }

  void SetUp() override { StartServer(); }
  void TearDown() override {
    if (!release_.HasBeenNotified()) release_.Notify();
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::atomic<int> handled_{0};
  std::atomic<int> observed_{0};
  std::atomic<int> blocked_{0};
  absl::Notification entered_;
  absl::Notification release_;
};

TEST_F(Http1Test, ContentLengthBodyAndHeaders) {
  Raw c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.Send(Post("/echo?x=1", "hello", "X-Echo: a b \r\n")));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "POST|/echo|hello");
  EXPECT_THAT(r.head, HasSubstr("Content-Type: text/plain\r\n"));
  EXPECT_THAT(r.head, HasSubstr("X-Echo: a b\r\n"));  // value trimmed
  EXPECT_THAT(r.head, Not(HasSubstr("Connection: close")));
  // The observer runs once the reply is written, maybe after the client read it.
  const absl::Time deadline = absl::Now() + kDeadline;
  while (observed_.load() < 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(observed_.load(), 1);
}

TEST_F(Http1Test, ChunkedBodyWithExtensionsAndTrailers) {
  Raw c(port_);
  ASSERT_TRUE(
      c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5;ext=1\r\nhello\r\n1A\r\n abcdefghijklmnopqrstuvwxy\r\n0\r\nX-Trailer: t\r\n\r\n"));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "POST|/echo|hello abcdefghijklmnopqrstuvwxy");
  // The connection stays usable.
  ASSERT_TRUE(c.Send(Post("/echo", "next")));
  EXPECT_EQ(c.Read().body, "POST|/echo|next");
}

TEST_F(Http1Test, ChunkedBodySentInPiecesArrivesWhole) {
  Raw c(port_);
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r"));
  ASSERT_TRUE(c.Send("\nabc"));
  ASSERT_TRUE(c.Send("\r\n2\r\nde\r\n0\r\n"));
  ASSERT_TRUE(c.Send("\r\n"));
  EXPECT_EQ(c.Read().body, "POST|/echo|abcde");
}

TEST_F(Http1Test, BadChunkedBodiesAre400) {
  for (const char* body :
       {"zz\r\nab\r\n0\r\n\r\n", "2\r\nabc\r\n0\r\n\r\n", "12345678901234567\r\n"}) {
    SCOPED_TRACE(body);
    Raw c(port_);
    ASSERT_TRUE(
        c.Send(absl::StrCat("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", body)));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, 400);
    EXPECT_THAT(r.body, HasSubstr("chunked body"));
    EXPECT_THAT(r.head, HasSubstr("Connection: close"));
    EXPECT_TRUE(c.Closed());
  }
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(Http1Test, ExpectContinueGets100BeforeTheBody) {
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

TEST_F(Http1Test, UnknownExpectationIs417) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", "x", "Expect: something\r\n")));
  EXPECT_EQ(c.Read().status, 417);
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(Http1Test, PipelinedRequestsAreAnsweredInOrder) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(absl::StrCat(Post("/echo", "one"), "\r\n", Post("/echo", "two"),
                                  "GET /three HTTP/1.1\r\nHost: x\r\n\r\n")));
  EXPECT_EQ(c.Read().body, "POST|/echo|one");
  EXPECT_EQ(c.Read().body, "POST|/echo|two");
  EXPECT_EQ(c.Read().body, "GET|/three|");
}

TEST_F(Http1Test, LargeBodyInManyReads) {
  const std::string body(3 << 20, 'b');
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", body)));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), body.size() + 11);  // "POST|/echo|"
}

TEST_F(Http1Test, Http10ClosesUnlessAskedToKeepAlive) {
  {
    Raw c(port_);
    ASSERT_TRUE(c.Send("GET /a HTTP/1.0\r\n\r\n"));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.body, "GET|/a|");
    EXPECT_THAT(r.head, HasSubstr("Connection: close"));
    EXPECT_TRUE(c.Closed());
  }
  Raw c(port_);
  ASSERT_TRUE(c.Send("GET /a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
  EXPECT_THAT(c.Read().head, HasSubstr("Connection: keep-alive"));
  ASSERT_TRUE(c.Send("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  EXPECT_EQ(c.Read().body, "GET|/b|");
}

TEST_F(Http1Test, ConnectionCloseIsHonoured) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", "x", "Connection: close\r\n")));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.head, HasSubstr("Connection: close"));
  EXPECT_TRUE(c.Closed());
}

TEST_F(Http1Test, HeadAnswersWithoutABody) {
  Raw c(port_);
  c.set_skip_body(true);
  ASSERT_TRUE(c.Send("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.head, HasSubstr("Content-Length: 8\r\n"));  // "HEAD|/h|"
  // Nothing but the next reply follows.
  c.set_skip_body(false);
  ASSERT_TRUE(c.Send(Post("/echo", "z")));
  EXPECT_EQ(c.Read().body, "POST|/echo|z");
}

TEST_F(Http1Test, MalformedRequestsAreRefusedAndClosed) {
  struct Case {
    std::string request;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"NOT-HTTP\r\n\r\n", 400, "malformed HTTP request line"},
      {"GET /a HTTP/1.1 extra\r\n\r\n", 400, "malformed HTTP request line"},
      {"GET /a HTTP/2.0\r\n\r\n", 505, "HTTP/2.0 is not supported"},
      {"GET /a HTTP/1.1\r\nNo-Colon\r\n\r\n", 400, "malformed HTTP header field"},
      {"GET /a HTTP/1.1\r\nBad Name: v\r\n\r\n", 400, "malformed HTTP header field"},
      {"GET /a HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, "malformed HTTP header field"},
      {"POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400,
       "conflicting Content-Length"},
      {"POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "bad Content-Length"},
      {"POST /a HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
       "both Transfer-Encoding and Content-Length"},
      {"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "not supported"},
      // A proxy that ends lines at LF would see a chunked body here; this server refuses it.
      {"POST /a HTTP/1.1\r\nX: a\nTransfer-Encoding: chunked\r\n\r\n", 400, "bare CR, LF or NUL"},
      {"GET /a HTTP/1.1\r\nX: a\rb\r\n\r\n", 400, "bare CR, LF or NUL"},
      {std::string("GET /a HTTP/1.1\r\nX: a\0b\r\n\r\n", 28), 400, "bare CR, LF or NUL"},
      {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;a\nb\r\nhello\r\n0\r\n\r\n", 400,
       "chunk-size line"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.request);
    Raw c(port_);
    ASSERT_TRUE(c.Send(k.request));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, k.status);
    EXPECT_THAT(r.body, HasSubstr(k.message));
    EXPECT_THAT(r.head, HasSubstr("Content-Type: application/json"));
    EXPECT_TRUE(c.Closed());
  }
  EXPECT_EQ(handled_.load(), 0);
  // Refusals are observed (they count in the metrics) and the server keeps serving.
  EXPECT_EQ(observed_.load(), static_cast<int>(cases.size()));
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/echo", "ok")));
  EXPECT_EQ(c.Read().status, 200);
}

TEST_F(Http1Test, OversizedHeadersAndBodiesAreRefused) {
  server_.reset();
  HttpOptions options;
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
    EXPECT_THAT(r.body, HasSubstr("the limit (maxBodyBytes) is 100 bytes"));
  }
  {
    // The body was sent before the refusal: the server drains it, so the client reads the
    // 413 instead of a connection reset.
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

TEST_F(Http1Test, AHandlerThatThrowsGets500AndTheServerServesOn) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/throw", "")));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 500);
  EXPECT_THAT(r.body, HasSubstr("internal error"));
  ASSERT_TRUE(c.Send(Post("/echo", "after")));
  EXPECT_EQ(c.Read().body, "POST|/echo|after");
}

TEST_F(Http1Test, KeepAliveMaxRequestsClosesTheConnection) {
  server_.reset();
  HttpOptions options;
  options.threads = 1;  // the smallest pool works too
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

TEST_F(Http1Test, APartialRequestTimesOutWith408) {
  server_.reset();
  HttpOptions options;
  options.read_timeout = absl::Milliseconds(200);
  StartServer(options);
  Raw c(port_);
  ASSERT_TRUE(c.Send("POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 408);
  EXPECT_TRUE(c.Closed());
  EXPECT_EQ(handled_.load(), 0);
}

// readTimeout bounds the whole request from its first byte: a client trickling a byte at a
// time cannot hold a worker for longer.
TEST_F(Http1Test, ATrickledRequestTimesOutAsAWhole) {
  server_.reset();
  HttpOptions options;
  options.read_timeout = absl::Milliseconds(500);
  StartServer(options);
  Raw c(port_);
  const std::string head = "POST /a HTTP/1.1\r\nX-Slow: " + std::string(200, 'v');
  const absl::Time start = absl::Now();
  // A byte every 50 ms (well inside readTimeout for each read) for up to 4 s, until the
  // server answers.
  for (size_t i = 0; i < head.size() && absl::Now() - start < absl::Seconds(4); ++i) {
    if (c.Readable() || !c.Send(head.substr(i, 1))) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  // It answered while the client was still sending: ~500 ms, not 500 ms after the last byte.
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 408);
  EXPECT_TRUE(c.Closed());
}

TEST_F(Http1Test, IdleConnectionsAreClosedAfterIdleTimeout) {
  server_.reset();
  HttpOptions options;
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

// Idle keep-alive connections wait in epoll, not on a thread: two workers serve a new
// connection while twenty others sit open.
TEST_F(Http1Test, IdleConnectionsHoldNoThread) {
  server_.reset();
  HttpOptions options;
  options.threads = 2;
  StartServer(options);
  std::vector<std::unique_ptr<Raw>> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(std::make_unique<Raw>(port_));
    ASSERT_TRUE(idle.back()->Send(Post("/echo", "x")));
    ASSERT_EQ(idle.back()->Read().status, 200);
  }
  Raw fresh(port_);
  ASSERT_TRUE(fresh.Send(Post("/echo", "fresh")));
  EXPECT_EQ(fresh.Read().body, "POST|/echo|fresh");
  // And every idle one is still usable.
  for (auto& c : idle) {
    ASSERT_TRUE(c->Send(Post("/echo", "again")));
    EXPECT_EQ(c->Read().body, "POST|/echo|again");
  }
}

// Handlers that block (a bind, a gRPC call) hold their workers, not the server: with one
// poller and four workers, three blocked requests leave the fourth worker serving.
TEST_F(Http1Test, BlockedHandlersLeaveTheOtherWorkersServing) {
  server_.reset();
  HttpOptions options;
  options.threads = 4;
  options.pollers = 1;
  StartServer(options);
  std::vector<std::unique_ptr<Raw>> blocked;
  for (int i = 0; i < 3; ++i) {
    blocked.push_back(std::make_unique<Raw>(port_));
    ASSERT_TRUE(blocked.back()->Send(Post("/block", absl::StrCat(i))));
    const absl::Time deadline = absl::Now() + kDeadline;
    while (blocked_.load() < i + 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    ASSERT_EQ(blocked_.load(), i + 1);
  }
  for (int i = 0; i < 3; ++i) {
    Raw c(port_);
    ASSERT_TRUE(c.Send(Post("/echo", "free")));
    EXPECT_EQ(c.Read().body, "POST|/echo|free");
  }
  release_.Notify();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(blocked[i]->Read().status, 200);
}

// Stop() lets a request in flight finish (its reply says the connection closes) and closes
// idle connections at once rather than after idleTimeout.
TEST_F(Http1Test, StopFinishesRequestsInFlightAndClosesIdleConnections) {
  server_.reset();
  HttpOptions options;
  options.idle_timeout = absl::Hours(1);
  StartServer(options);
  Raw idle(port_);
  ASSERT_TRUE(idle.Send(Post("/echo", "x")));
  ASSERT_EQ(idle.Read().status, 200);
  Raw busy(port_);
  ASSERT_TRUE(busy.Send(Post("/block", "y")));
  ASSERT_TRUE(entered_.WaitForNotificationWithTimeout(kDeadline));
  std::thread stopper([this] { server_->Stop(); });
  EXPECT_TRUE(idle.Closed());
  release_.Notify();
  Raw::Response r = busy.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "POST|/block|y");
  EXPECT_THAT(r.head, HasSubstr("Connection: close"));
  stopper.join();
  EXPECT_FALSE(Raw(port_).ok());  // no longer listening
}

// Adopt() serves an already connected socket (the fuzzer's way in) until Stop().
TEST_F(Http1Test, AdoptServesAConnectedSocket) {
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
  close(sv[1]);
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

// A handler that answers later (HttpDeferringHandler): POST /later is answered when the test
// finishes it (Finish() from the test's thread); /inline is finished inside the handler before
// it returns false; anything else is answered at once.
class Http1LaterTest : public ::testing::Test {
 protected:
  struct Waiting {
    HttpResponse* res = nullptr;
    std::optional<HttpLater> later;
    std::string body;
  };

  void SetUp() override {
    server_ = std::make_unique<HttpServer>(
        HttpOptions{},
        HttpDeferringHandler([this](const HttpRequest& req, HttpResponse& res, HttpLater later) {
          if (req.path == "/inline") {
            res.body = "inline|" + req.body;
            later.Finish();
            return false;
          }
          if (req.path != "/later") {
            res.body = "now|" + req.body;
            return true;
          }
          std::lock_guard<std::mutex> lock(mu_);
          waiting_.push_back({&res, later, req.body});
          cv_.notify_all();
          return false;
        }),
        [](HttpResponse& res, int status, absl::string_view message) {
          res.status = status;
          res.body = std::string(message);
        },
        [this](const HttpRequest&, const HttpResponse&, absl::Duration) {
          observed_.fetch_add(1);
        });
    absl::StatusOr<int> port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }

  // The next request waiting for its answer (generous deadline).
  bool NextWaiting(Waiting* out) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return !waiting_.empty(); })) {
      return false;
    }
    *out = waiting_.front();
    waiting_.erase(waiting_.begin());
    return true;
  }

  // Answers `w` with `body` from another thread, as the shim's connection threads do.
  static void FinishElsewhere(const Waiting& w, std::string body) {
    std::thread([w, body = std::move(body)] {
      w.res->body = body;
      w.later->Finish();
    }).join();
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::atomic<int> observed_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Waiting> waiting_;
};

TEST_F(Http1LaterTest, AReplyFinishedFromAnotherThreadIsSentAndTheConnectionGoesOn) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "a")));
  Waiting w;
  ASSERT_TRUE(NextWaiting(&w));
  EXPECT_EQ(w.body, "a");
  EXPECT_FALSE(c.Readable());  // nothing before the answer
  FinishElsewhere(w, "later|a");
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "later|a");
  ASSERT_TRUE(c.Send(Post("/now", "b")));
  r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "now|b");
  // Each reply is reported once, after it is written (so possibly after the client has it).
  EXPECT_TRUE(Eventually([&] { return observed_.load() == 2; }));
}

TEST_F(Http1LaterTest, AReplyFinishedBeforeTheHandlerReturnsIsSent) {
  Raw c(port_);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Send(Post("/inline", absl::StrCat(i))));
    Raw::Response r = c.Read();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, absl::StrCat("inline|", i));
  }
}

TEST_F(Http1LaterTest, PipelinedRequestsBehindADeferredReplyAreAnsweredInOrder) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "first") + Post("/now", "second") + Post("/later", "third")));
  Waiting w;
  ASSERT_TRUE(NextWaiting(&w));
  EXPECT_EQ(w.body, "first");
  EXPECT_FALSE(c.Readable());  // "second" waits behind "first"
  FinishElsewhere(w, "later|first");
  ASSERT_TRUE(NextWaiting(&w));
  EXPECT_EQ(w.body, "third");
  FinishElsewhere(w, "later|third");
  EXPECT_EQ(c.Read().body, "later|first");
  EXPECT_EQ(c.Read().body, "now|second");
  EXPECT_EQ(c.Read().body, "later|third");
}

// A reply larger than the socket takes at once, to a client that is not reading: Finish()
// returns without waiting for the client, and a worker writes the rest once it reads.
TEST_F(Http1LaterTest, AReplyTooLargeToWriteAtOnceIsFinishedByAWorker) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "big")));
  Waiting w;
  ASSERT_TRUE(NextWaiting(&w));
  const std::string big(64 << 20, 'x');
  w.res->body = big;
  w.later->Finish();  // on this thread: would hang here if it waited for the reader below
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), big.size());
  EXPECT_EQ(r.body, big);
  ASSERT_TRUE(c.Send(Post("/now", "after")));
  EXPECT_EQ(c.Read().body, "now|after");
  EXPECT_TRUE(Eventually([&] { return observed_.load() == 2; }));
}

TEST_F(Http1LaterTest, StopWaitsForADeferredReplyAndThenClosesTheConnection) {
  Raw c(port_);
  ASSERT_TRUE(c.Send(Post("/later", "x")));
  Waiting w;
  ASSERT_TRUE(NextWaiting(&w));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server_->Stop();
    stopped = true;
  });
  // Stop has begun once the listener is closed; the deferred reply then holds it.
  EXPECT_TRUE(Eventually([&] { return !Raw(port_).ok(); }));
  EXPECT_FALSE(stopped.load());
  FinishElsewhere(w, "later|x");
  Raw::Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "later|x");
  EXPECT_THAT(r.head, HasSubstr("Connection: close"));
  stopper.join();
  EXPECT_TRUE(stopped.load());
  EXPECT_TRUE(c.Closed());
}

TEST(Http1StartTest, ABusyPortIsUnavailableAndBadTlsFilesAreInvalid) {
  const auto handler = [](const HttpRequest&, HttpResponse&) {};
  const auto on_error = [](HttpResponse&, int, absl::string_view) {};
  HttpServer first({}, handler, on_error, nullptr);
  absl::StatusOr<int> port = first.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  HttpServer second({}, handler, on_error, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(second.Start("127.0.0.1", *port).status()));
  HttpOptions tls;
  tls.cert_file = "/nonexistent/cert.pem";
  tls.key_file = "/nonexistent/key.pem";
  HttpServer third(tls, handler, on_error, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(third.Start("127.0.0.1", 0).status()));
}

}  // namespace
}  // namespace fitledger::shim
