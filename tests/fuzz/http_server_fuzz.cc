// libFuzzer target: the webhook's front end (webhook/http_server.h on Boost.Beast, with the
// webhook's verbs and JSON codec behind it, over a fake backend) fed arbitrary bytes in arbitrary
// fragments over a socketpair: one server for the process, one connection per input
// (HttpServer::Adopt, so no TCP ports). The first input byte seeds the fragment sizes; the rest is
// the byte stream, sent fragment by fragment. The client half-closes after the input, so every
// read of the server ends at end-of-stream, never at a timeout. Checks that the server never
// crashes (ASan / UBSan), answers only with HTTP/1.x status lines, and always closes. The fake
// backend answers odd pods later from another thread, so late answers meet pipelining and
// garbage too.
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
#include "absl/time/clock.h"
#include "common/metrics.h"
#include "webhook/backend.h"
#include "webhook/http_server.h"
#include "webhook/metrics.h"
#include "webhook/webhook.h"

namespace {

namespace wh = fitledger::webhook;

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "http_server_fuzz: %s: %s\n", what, detail.substr(0, 200).c_str());
  std::abort();
}

// Every candidate but the first fits; a pod whose name has odd length is answered from another
// thread.
class FakeBackend final : public wh::Backend {
 public:
  void Filter(const fitledger::Pod& pod, absl::Span<const absl::string_view> candidates,
              FilterDone done) override {
    fitledger::FilterResult answer;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (i == 0) {
        answer.failed.emplace_back(i, "Insufficient cpu");
      } else {
        answer.fits.push_back(i);
      }
    }
    Answer(pod.name.size() % 2 == 1,
           [answer = std::move(answer), done = std::move(done)]() mutable {
             done(std::move(answer));
           });
  }
  void Prioritize(const fitledger::Pod& pod, absl::Span<const absl::string_view> candidates,
                  PrioritizeDone done) override {
    wh::PrioritizeAnswer answer;
    for (size_t i = 0; i < candidates.size(); ++i) answer.scores.emplace_back(i, i % 11);
    Answer(pod.name.size() % 2 == 1,
           [answer = std::move(answer), done = std::move(done)]() mutable {
             done(std::move(answer));
           });
  }
  void Bind(const fitledger::BindArgs& args, StatusDone done) override {
    Answer(args.pod_name.size() % 2 == 1, [done = std::move(done)]() mutable {
      done(absl::FailedPreconditionError("no longer fits"));
    });
  }
  void Preempt(const fitledger::PreemptArgs&, PreemptDone done) override {
    done(fitledger::NodeVictims());
  }
  void CheckReady(StatusDone done) override { done(absl::OkStatus()); }

 private:
  static void Answer(bool later, absl::AnyInvocable<void()> work) {
    if (!later) return work();
    std::thread([work = std::move(work)]() mutable { work(); }).detach();
  }
};

struct Front {
  Front() {
    wh::HttpServerOptions options;
    options.io_threads = 2;
    options.max_body_bytes = 8192;
    options.max_header_bytes = 2048;
    options.read_timeout = absl::Seconds(2);
    server = new wh::HttpServer(
        options, [this](wh::HttpCall call) { webhook.Serve(std::move(call)); },
        &wh::Webhook::FormatError);
    if (absl::StatusOr<int> port = server->Start("127.0.0.1", 0); !port.ok()) {
      Fail("cannot start", port.status().ToString());
    }
  }
  FakeBackend backend;
  fitledger::MetricsRegistry registry;
  wh::Metrics metrics{&registry};
  wh::Webhook webhook{"/", &backend, &metrics, nullptr};
  wh::HttpServer* server;  // never destroyed: lives as long as the process
};

Front& TheFront() {
  static Front* front = new Front();
  return *front;
}

// Sends `bytes` whole (retrying EINTR, libFuzzer's watchdog); false when the server closed.
bool SendAll(int fd, const uint8_t* data, size_t size) {
  for (size_t off = 0; off < size;) {
    const ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) Fail("socketpair", "");
  if (absl::Status s = TheFront().server->Adopt(sv[0]); !s.ok()) Fail("adopt", s.ToString());
  const int fd = sv[1];
  // Fragments of 1..16 bytes (a simple generator seeded by the first byte), each its own send,
  // so the server's reads end anywhere: inside a token, a header, a chunk size, the body.
  uint32_t seed = data[0] | 1u;
  const uint8_t* stream = data + 1;
  const size_t stream_size = size - 1;
  for (size_t off = 0; off < stream_size;) {
    seed = seed * 1103515245u + 12345u;
    const size_t piece = std::min<size_t>(1 + (seed >> 16) % 16, stream_size - off);
    if (!SendAll(fd, stream + off, piece)) break;
    off += piece;
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
  if (!reply.empty() && !absl::StartsWith(reply, "HTTP/1.1 ") &&
      !absl::StartsWith(reply, "HTTP/1.0 ")) {
    Fail("not an HTTP/1.x reply", reply);
  }
  return 0;
}
