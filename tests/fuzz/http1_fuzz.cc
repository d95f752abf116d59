// The webhook's HTTP/1.1 server (client/shim/http1.h) fed arbitrary bytes over a socketpair:
// one server for the process, one connection per input (HttpServer::Adopt, so no TCP ports or
// TIME_WAIT). The client half-closes after the input, so every read of the server ends at
// end-of-stream, never at a timeout. Checks that the server never crashes (ASan / UBSan),
// answers only with HTTP/1.1 status lines, and always closes; some paths are answered later
// from another thread (HttpLater), so deferred replies meet pipelining and garbage too.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/shim/http1.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "http1_fuzz: %s: %s\n", what, detail.substr(0, 200).c_str());
  std::abort();
}

fitledger::shim::HttpServer* server = nullptr;  // lives as long as the process

fitledger::shim::HttpServer& Server() {
  if (server == nullptr) {
    fitledger::shim::HttpOptions options;
    options.threads = 2;
    options.max_body_bytes = 4096;
    options.max_header_bytes = 2048;
    options.read_timeout = absl::Seconds(2);
    server = new fitledger::shim::HttpServer(
        options,
        fitledger::shim::HttpDeferringHandler([](const fitledger::shim::HttpRequest& req,
                                                 fitledger::shim::HttpResponse& res,
                                                 fitledger::shim::HttpLater later) {
          res.content_type = "text/plain";
          res.body = absl::StrCat(req.method, " ", req.path, " ", req.headers.size(), " ",
                                  req.body.size());
          // Paths starting "/l" are answered later from another thread, "/i" later but
          // before the handler returns (as the shim's Filter may be); the rest at once.
          if (absl::StartsWith(req.path, "/l")) {
            std::thread([later] { later.Finish(); }).detach();
            return false;
          }
          if (absl::StartsWith(req.path, "/i")) {
            later.Finish();
            return false;
          }
          return true;
        }),
        [](fitledger::shim::HttpResponse& res, int status, absl::string_view message) {
          res.status = status;
          res.body = std::string(message);
        },
        nullptr);
    if (absl::StatusOr<int> port = server->Start("127.0.0.1", 0); !port.ok()) {
      Fail("cannot start", port.status().ToString());
    }
  }
  return *server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) Fail("socketpair", "");
  if (absl::Status s = Server().Adopt(sv[0]); !s.ok()) Fail("adopt", s.ToString());
  const int fd = sv[1];
  // Send what fits (the server may refuse and close early: that is fine), then half-close.
  // libFuzzer's SIGALRM watchdog interrupts system calls: EINTR is retried.
  for (size_t off = 0; off < size;) {
    const ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[8192];
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, 100);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0 && absl::Now() < deadline) continue;
    if (ready <= 0) Fail("no reply or close within 10 s", reply);
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (!reply.empty() && !absl::StartsWith(reply, "HTTP/1.1 ")) Fail("not an HTTP/1.1 reply", reply);
  return 0;
}
