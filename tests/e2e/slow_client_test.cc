// The front door under a slow-client attack, on the real binaries: on each HTTP port (the
// webhook, the server's monitor, and in the split layout the shim's monitor) hundreds of
// connections send a partial request and then one byte a second, and as many sit idle. Meanwhile
// /healthz and a small Filter on a fresh connection must answer within 1 s, every time; when the
// attackers go, everything serves as before. FITLEDGER_ATTACK_CONNECTIONS sets the count of each
// kind per port (default 256; fewer when the open-file limit is low).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

std::string PairYaml() { return ReadFileOrEmpty(FITLEDGER_SOURCE_DIR "/config/sim/pair.yaml"); }

// A non-blocking connection to 127.0.0.1:port, or -1.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Slow and idle connections to `ports`; the slow ones get one more byte a second (and are
// replaced when the server closes them) until Stop().
class Attack {
 public:
  Attack(std::vector<int> ports, int per_kind) : ports_(std::move(ports)), per_kind_(per_kind) {}
  ~Attack() { Stop(); }

  void Start() {
    for (int port : ports_) {
      for (int i = 0; i < per_kind_; ++i) {
        slow_.push_back({port, OpenSlow(port)});
        idle_.push_back(Connect(port));
      }
    }
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        for (Slow& s : slow_) {
          if (s.fd < 0 || send(s.fd, "v", 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
            if (s.fd >= 0) close(s.fd);
            s.fd = OpenSlow(s.port);  // closed by the server's deadline: come back
          }
        }
        for (int i = 0; i < 10 && !stop_.load(); ++i) absl::SleepFor(absl::Milliseconds(100));
      }
    });
  }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (Slow& s : slow_) {
      if (s.fd >= 0) close(s.fd);
    }
    for (int fd : idle_) {
      if (fd >= 0) close(fd);
    }
    slow_.clear();
    idle_.clear();
  }

  int open_count() const {
    int n = 0;
    for (const Slow& s : slow_) n += s.fd >= 0;
    for (int fd : idle_) n += fd >= 0;
    return n;
  }

 private:
  struct Slow {
    int port;
    int fd;
  };
  static int OpenSlow(int port) {
    const int fd = Connect(port);
    static const char kPartial[] = "POST /filter HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    if (fd >= 0) send(fd, kPartial, sizeof(kPartial) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    return fd;
  }

  const std::vector<int> ports_;
  const int per_kind_;
  std::vector<Slow> slow_;
  std::vector<int> idle_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int AttackersPerKind() {
  int wanted = 256;
  if (const char* env = std::getenv("FITLEDGER_ATTACK_CONNECTIONS")) wanted = std::atoi(env);
  // Two kinds on up to three ports, plus room for the test's own connections.
  const int64_t limit = RaiseOpenFileLimit();
  const int affordable = static_cast<int>((limit - 200) / 6);
  return std::max(1, std::min(wanted, affordable));
}

class SlowClientE2eTest : public ::testing::TestWithParam<Layout> {};

TEST_P(SlowClientE2eTest, ProbesAndFilterAnswerWithinASecondUnderAttackAndAfter) {
  ClusterOptions options{PairYaml(), ""};
  options.layout = GetParam();
  absl::StatusOr<std::unique_ptr<E2eCluster>> started = E2eCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  E2eCluster& c = **started;
  absl::StatusOr<nlohmann::json> pod = c.CreatePod("victim", "100m");
  ASSERT_TRUE(pod.ok()) << pod.status();
  const std::string filter =
      nlohmann::json{{"Pod", *pod}, {"NodeNames", {"worker-1", "worker-2"}}}.dump();

  std::vector<int> probe_ports = {c.extender().shim_port, c.extender().monitor_port};
  if (GetParam() == Layout::kShim) probe_ports.push_back(c.extender().shim_monitor_port);
  const int per_kind = AttackersPerKind();
  Attack attack(probe_ports, per_kind);
  attack.Start();
  ASSERT_GE(attack.open_count(), static_cast<int>(probe_ports.size()) * per_kind * 2 * 9 / 10)
      << "could not open the attack's connections";

  // Every 250 ms for 6 s (past the server's 5 s readTimeout, so slow connections are cut and
  // come back meanwhile): each probe and a Filter, each on a fresh connection, within 1 s.
  int rounds = 0;
  for (const absl::Time end = absl::Now() + absl::Seconds(6); absl::Now() < end; ++rounds) {
    for (int port : probe_ports) {
      const absl::Time start = absl::Now();
      HttpResult r = Request(port, "GET", "/healthz", "");
      const absl::Duration took = absl::Now() - start;
      EXPECT_EQ(r.status, 200) << "port " << port << " round " << rounds;
      EXPECT_LT(took, absl::Seconds(1)) << "port " << port << " round " << rounds;
    }
    const absl::Time start = absl::Now();
    HttpResult f = c.ShimRaw("filter", filter);
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(f.status, 200) << f.raw;
    EXPECT_EQ(f.body.value("Error", "?"), "") << f.raw;
    EXPECT_LT(took, absl::Seconds(1)) << "filter, round " << rounds;
    absl::SleepFor(absl::Milliseconds(250));  // the pace of the checks, not a wait for an effect
  }
  EXPECT_GE(rounds, 10);

  attack.Stop();
  // Afterwards: the scheduler's whole cycle works.
  EXPECT_EQ(c.FilterAndBind(*pod, "worker-1").value_or("?"), "");
  for (int port : probe_ports) EXPECT_EQ(Request(port, "GET", "/readyz", "").status, 200);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SlowClientE2eTest,
                         ::testing::Values(Layout::kInServer, Layout::kShim), LayoutName);

}  // namespace
}  // namespace fitledger::testing
