// The fitledger-shim binary as a process (flags, the "listening" line, --port-file, SIGTERM,
// config errors), and HTTPS with client-certificate verification (certificates made with the
// openssl CLI).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/client/shim/fake_extender.h"
#include "tests/common/temp_dir.h"

extern char** environ;

namespace fitledger::shim {
namespace {

using ::fitledger::shim::testing::FakeExtender;
using ::fitledger::shim::testing::FakeServer;
using ::fitledger::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kFilterArgs[] =
    R"({"Pod":{"metadata":{"name":"p","namespace":"ns"}},"NodeNames":["w1","w2"]})";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A child process with stdout on a pipe and stderr in a file.
class Process {
 public:
  Process(const std::vector<std::string>& args, const std::string& stderr_file) {
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    std::vector<char*> argv;
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    stdout_fd_ = out[0];
  }
  ~Process() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    close(stdout_fd_);
  }

  // Reads stdout up to the first newline, or "" after `timeout`.
  std::string ReadLine(absl::Duration timeout) {
    std::string line;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      pollfd p{stdout_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char c;
      if (read(stdout_fd_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line.push_back(c);
    }
    return "";
  }

  // Reads stdout to EOF, or what arrived within `timeout`.
  std::string ReadAll(absl::Duration timeout) {
    std::string out;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      pollfd p{stdout_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(stdout_fd_, buffer, sizeof(buffer));
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    return out;
  }

  void Signal(int sig) { kill(pid_, sig); }

  // The exit code, or -signal; waits at most `timeout`, then kills.
  int Wait(absl::Duration timeout = absl::Seconds(20)) {
    const absl::Time deadline = absl::Now() + timeout;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
};

TEST(ShimProcessTest, ServesUntilSigtermThenExitsZero) {
  FakeExtender fake;
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  TempDir dir("shim-test");
  const std::string port_file = dir.File("port");
  Process shim({FITLEDGER_SHIM_BINARY, "--listen=127.0.0.1:0", "--server", server->target(),
                "--monitor-listen=127.0.0.1:0", "--port-file", port_file, "--prefix=/fl/"},
               dir.File("stderr"));
  const std::string line = shim.ReadLine(absl::Seconds(20));
  ASSERT_THAT(line, ::testing::StartsWith("fitledger-shim listening on http://127.0.0.1:"))
      << ReadFile(dir.File("stderr"));
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripSuffix(ReadFile(port_file), "\n"), &port));
  EXPECT_EQ(line, absl::StrCat("fitledger-shim listening on http://127.0.0.1:", port));

  httplib::Client client("127.0.0.1", port);
  client.set_tcp_nodelay(true);
  httplib::Result res = client.Post("/fl/filter", kFilterArgs, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, R"({"NodeNames":["w1","w2"],"FailedNodes":{},)"
                       R"("FailedAndUnresolvableNodes":{},"Error":""})");
  EXPECT_EQ(client.Get("/readyz")->status, 200);

  shim.Signal(SIGTERM);
  EXPECT_EQ(shim.Wait(), 0);
  const std::string log = ReadFile(dir.File("stderr"));
  EXPECT_THAT(
      log,
      HasSubstr(
          "\"level\":\"info\",\"msg\":\"fitledger-shim serving\",\"url\":\"http://127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("\"level\":\"info\",\"msg\":\"fitledger-shim stopped\""));
}

TEST(ShimProcessTest, BadConfigExitsTwoNamingKeyAndLine) {
  TempDir dir("shim-test");
  {
    std::ofstream config(dir.File("shim.yaml"));
    config << "listen: 127.0.0.1:0\nserverTimeout: soon\n";
  }
  Process shim({FITLEDGER_SHIM_BINARY, "--config", dir.File("shim.yaml")}, dir.File("stderr"));
  EXPECT_EQ(shim.Wait(), 2);
  EXPECT_THAT(ReadFile(dir.File("stderr")),
              HasSubstr(absl::StrCat(dir.File("shim.yaml"), ":2: key serverTimeout: ")));
}

TEST(ShimProcessTest, AServerAddressItCannotDialExitsTwo) {
  for (const char* server : {"fitledger-server", "some.sock", "http://127.0.0.1:1", "unix:rel"}) {
    SCOPED_TRACE(server);
    TempDir dir("shim-test");
    Process shim({FITLEDGER_SHIM_BINARY, "--listen", "127.0.0.1:0", "--server", server},
                 dir.File("stderr"));
    EXPECT_EQ(shim.Wait(), 2);
    EXPECT_THAT(ReadFile(dir.File("stderr")), HasSubstr("key server: \\\""));
    EXPECT_THAT(ReadFile(dir.File("stderr")), HasSubstr("use unix:///absolute/path or host:port"));
  }
}

TEST(ShimProcessTest, HelpListsTheFlags) {
  TempDir dir("shim-test");
  Process shim({FITLEDGER_SHIM_BINARY, "--help"}, dir.File("stderr"));
  const std::string out = shim.ReadAll(absl::Seconds(20));
  shim.Wait();
  for (const char* flag :
       {"--config", "--listen", "--server", "--prefix", "--monitor-listen", "--port-file"}) {
    EXPECT_THAT(out, HasSubstr(flag));
  }
}

// HTTPS with client certificates, on the shim binary.
class ShimTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A refused handshake closes the socket the client may still write to.
    signal(SIGPIPE, SIG_IGN);
    const std::string script = absl::StrCat(
        "set -e; cd '", dir_.File(""), "';",
        "ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';",
        "openssl req -x509 $ec -keyout ca.key -out ca.crt -days 1 -subj /CN=fitledger-test-ca;",
        "openssl req $ec -keyout server.key -out server.csr -subj /CN=127.0.0.1;",
        "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > server.ext;",
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
        "-extfile server.ext -out server.crt;",
        "openssl req $ec -keyout client.key -out client.csr -subj /CN=kube-scheduler;",
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext;",
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
        "-extfile client.ext -out client.crt;",
        "openssl req -x509 $ec -keyout other.key -out other.crt -days 1 -subj /CN=intruder");
    {
      std::ofstream out(dir_.File("make-certs.sh"));
      out << script << "\n";
    }
    ASSERT_EQ(std::system(absl::StrCat("sh '", dir_.File("make-certs.sh"), "' > '",
                                       dir_.File("openssl.log"), "' 2>&1")
                              .c_str()),
              0)
        << ReadFile(dir_.File("openssl.log"));
    server_ = FakeServer::Start(&fake_, "127.0.0.1:0");
    ASSERT_NE(server_, nullptr);
    {
      std::ofstream config(dir_.File("shim.yaml"));
      config << "listen: 127.0.0.1:0\nserver: " << server_->target() << "\n"
             << "tlsHandshakeTimeout: 1s\ntls:\n  certFile: " << dir_.File("server.crt")
             << "\n  keyFile: " << dir_.File("server.key")
             << "\n  clientCAFile: " << dir_.File("ca.crt") << "\n";
    }
    shim_ = std::make_unique<Process>(
        std::vector<std::string>{FITLEDGER_SHIM_BINARY, "--config", dir_.File("shim.yaml"),
                                 "--port-file", dir_.File("port")},
        dir_.File("stderr"));
    line_ = shim_->ReadLine(absl::Seconds(20));
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripSuffix(ReadFile(dir_.File("port")), "\n"), &port_))
        << ReadFile(dir_.File("stderr"));
  }

  std::unique_ptr<httplib::SSLClient> Client(const std::string& cert, const std::string& key) {
    auto client = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port_)
                               : std::make_unique<httplib::SSLClient>(
                                     "127.0.0.1", port_, dir_.File(cert), dir_.File(key));
    client->set_ca_cert_path(dir_.File("ca.crt").c_str());
    client->enable_server_certificate_verification(true);
    client->set_connection_timeout(5);
    client->set_read_timeout(5);
    return client;
  }

  TempDir dir_{"shim-tls"};
  FakeExtender fake_;
  std::unique_ptr<FakeServer> server_;
  std::unique_ptr<Process> shim_;
  std::string line_;
  int port_ = 0;

 public:
  ~ShimTlsTest() override {
    if (shim_ != nullptr) {
      shim_->Signal(SIGTERM);
      shim_->Wait();
    }
  }
};

TEST_F(ShimTlsTest, ClientWithCertificateSignedByTheCaIsServed) {
  EXPECT_THAT(line_, ::testing::StartsWith("fitledger-shim listening on https://127.0.0.1:"));
  auto client = Client("client.crt", "client.key");
  httplib::Result res = client->Post("/filter", kFilterArgs, "application/json");
  ASSERT_TRUE(res) << static_cast<int>(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, ::testing::StartsWith(R"({"NodeNames":["w1","w2"])"));
}

// One TLS connection carries many requests, and a body far larger than one TLS record (16 KiB)
// or one read (64 KiB) arrives whole.
TEST_F(ShimTlsTest, KeepAliveAndALargeBodyOverTls) {
  auto client = Client("client.crt", "client.key");
  client->set_keep_alive(true);
  std::string names;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&names, ",\"extra-node-", i, "\"");
  std::string big = kFilterArgs;
  big.insert(big.rfind(']'), names);
  ASSERT_GT(big.size(), 300000u);
  for (int i = 0; i < 5; ++i) {
    httplib::Result res =
        client->Post("/filter", i % 2 == 0 ? big : kFilterArgs, "application/json");
    ASSERT_TRUE(res) << static_cast<int>(res.error());
    EXPECT_EQ(res->status, 200) << res->body;
    if (i % 2 == 0) {
      EXPECT_GT(res->body.size(), 300000u);
    }
  }
  EXPECT_EQ(fake_.calls(), 5);
}

// A TLS handshake that never comes holds no thread and ends at tlsHandshakeTimeout; a client
// meanwhile is served.
TEST_F(ShimTlsTest, AStalledHandshakeIsClosedAfterItsDeadline) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  auto client = Client("client.crt", "client.key");
  httplib::Result res = client->Post("/filter", kFilterArgs, "application/json");
  ASSERT_TRUE(res) << static_cast<int>(res.error());
  EXPECT_EQ(res->status, 200);
  pollfd p{fd, POLLIN, 0};
  ASSERT_GT(poll(&p, 1, 20000), 0);  // closed by the server (tlsHandshakeTimeout: 1s)
  char byte;
  EXPECT_LE(recv(fd, &byte, 1, 0), 0);
  close(fd);
}

TEST_F(ShimTlsTest, ClientWithoutCertificateIsRefused) {
  auto client = Client("", "");
  httplib::Result res = client->Post("/filter", kFilterArgs, "application/json");
  EXPECT_FALSE(res);
  EXPECT_EQ(fake_.calls(), 0);
}

TEST_F(ShimTlsTest, ClientWithCertificateFromAnotherCaIsRefused) {
  auto client = Client("other.crt", "other.key");
  httplib::Result res = client->Post("/filter", kFilterArgs, "application/json");
  EXPECT_FALSE(res);
  EXPECT_EQ(fake_.calls(), 0);
}

}  // namespace
}  // namespace fitledger::shim
