// Listener security: gRPC on a non-loopback address needs TLS; the TLS listener serves only TLS
// clients, and with clientCAFile only clients holding a certificate from that CA. The same for
// the server's own webhook listener (webhook.tls), as kube-scheduler's tlsConfig reaches it.
#include <signal.h>
#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSim[] = R"(
nodes:
  - name: n1
    allocatable: {cpu: "1", memory: 1Gi, pods: 10}
watchLag: 0s
)";

// fitledgerctl health against 127.0.0.1:port with extra flags; returns its exit code and output.
CommandResult Health(int port, std::vector<std::string> flags) {
  std::vector<std::string> argv = {FITLEDGER_CTL_PATH, "--server", absl::StrCat("127.0.0.1:", port),
                                   "--timeout-seconds", "5"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("health");
  absl::StatusOr<CommandResult> r = RunCommand(argv, {}, absl::Seconds(30));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.value_or(CommandResult{});
}

class SecurityE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SimProcess>> sim = SimProcess::Start(kSim);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    absl::StatusOr<TempDir> certs = MakeTestCertificates();
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_dir_ = *std::move(certs);
    certs_ = certs_dir_.path();
    temp_ = TempDir("security");
    dir_ = temp_.path();
  }

  // Starts the server with `config_yaml`; returns its TCP gRPC port (0 on failure).
  int StartServer(const std::string& config_yaml) {
    std::string config = dir_ + "/server.yaml";
    EXPECT_TRUE(WriteFile(config, config_yaml).ok());
    std::string ready = dir_ + "/ready";
    absl::StatusOr<std::unique_ptr<ChildProcess>> server =
        ChildProcess::Start({FITLEDGER_SERVER_PATH, "--config", config, "--kubeconfig",
                             sim_->kubeconfig_path(), "--ready-file", ready},
                            dir_ + "/server.log");
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return 0;
    server_ = *std::move(server);
    if (!WaitForFile(ready, absl::Seconds(30)).ok()) {
      ADD_FAILURE() << ReadFileOrEmpty(dir_ + "/server.log");
      return 0;
    }
    return nlohmann::json::parse(ReadFileOrEmpty(ready))["grpc_ports"][0];
  }

  std::string TlsConfig(bool client_ca) {
    return absl::StrCat("grpc:\n  listen: [\"127.0.0.1:0\"]\n  tls:\n    certFile: ", certs_,
                        "/server.pem\n    keyFile: ", certs_, "/server-key.pem\n",
                        client_ca ? absl::StrCat("    clientCAFile: ", certs_, "/ca.pem\n") : "");
  }

  // The webhook port of the server started last (0 when off).
  int WebhookPort() {
    return nlohmann::json::parse(ReadFileOrEmpty(dir_ + "/ready"))["webhook_port"];
  }

  // Declared first: removed (private keys too) after the processes are killed.
  TempDir certs_dir_;
  TempDir temp_;
  std::unique_ptr<SimProcess> sim_;
  std::unique_ptr<ChildProcess> server_;
  std::string certs_;  // certs_dir_.path()
  std::string dir_;    // temp_.path()
};

TEST_F(SecurityE2eTest, TheServersWebhookOverMutualTlsServesOnlyClientsOfItsCa) {
  const std::string config =
      absl::StrCat("webhook:\n  listen: 127.0.0.1:0\n  tls:\n    certFile: ", certs_,
                   "/server.pem\n    keyFile: ", certs_,
                   "/server-key.pem\n    clientCAFile: ", certs_, "/ca.pem\n");
  signal(SIGPIPE, SIG_IGN);  // a refused handshake closes the socket the client writes to
  ASSERT_NE(StartServer(config + "grpc:\n  listen: [\"127.0.0.1:0\"]\n"), 0);
  const int port = WebhookPort();
  ASSERT_GT(port, 0);
  auto client = [&](const std::string& cert, const std::string& key) {
    auto c = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                          : std::make_unique<httplib::SSLClient>(
                                "127.0.0.1", port, certs_ + "/" + cert, certs_ + "/" + key);
    c->set_ca_cert_path((certs_ + "/ca.pem").c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(5);
    c->set_read_timeout(5);
    return c;
  };
  EXPECT_TRUE(E2eCluster::WaitFor(
      [&] {
        auto r = client("client.pem", "client-key.pem")->Get("/readyz");
        return r && r->status == 200;
      },
      absl::Seconds(30)));
  auto bad = client("client.pem", "client-key.pem")->Post("/filter", "{", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_FALSE(client("", "")->Get("/healthz"));  // no client certificate
  EXPECT_FALSE(client("other-client.pem", "other-client-key.pem")->Get("/healthz"));
  httplib::Client plaintext("127.0.0.1", port);
  plaintext.set_connection_timeout(5);
  plaintext.set_read_timeout(5);
  EXPECT_FALSE(plaintext.Get("/healthz"));
}

TEST_F(SecurityE2eTest, ANonLoopbackListenerWithoutTlsIsRefusedAtStart) {
  std::string config = dir_ + "/server.yaml";
  ASSERT_TRUE(WriteFile(config, "grpc:\n  listen: [\"0.0.0.0:0\"]\n").ok());
  absl::StatusOr<CommandResult> r = RunCommand(
      {FITLEDGER_SERVER_PATH, "--config", config, "--kubeconfig", sim_->kubeconfig_path()}, {},
      absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_THAT(r->output,
              HasSubstr("\"0.0.0.0:0\" is not a loopback address: set grpc.tls.certFile"));
}

// Keys and flags of removed features are refused with what to use instead, not ignored.
TEST_F(SecurityE2eTest, RemovedListenersAreRefusedWithWhatToUseInstead) {
  struct Case {
    std::string yaml;
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"grpc:\n  unaryListen: [\"unix:///tmp/fitledger-unary.sock\"]\n",
       {},
       "key grpc.unaryListen: was removed with fitledger's own HTTP/2 server"},
      {"",
       {"--grpc-unary-listen", "unix:///tmp/fitledger-unary.sock"},
       "--grpc-unary-listen was removed with fitledger's own HTTP/2 server"},
      {"",
       {"--grpc_unary_listen=unix:///tmp/fitledger-unary.sock"},
       "--grpc-unary-listen was removed with fitledger's own HTTP/2 server"},
      {"webhook:\n  threads: 64\n", {}, "key webhook.threads: was removed"},
  };
  for (const Case& c : cases) {
    std::string config = dir_ + "/server.yaml";
    ASSERT_TRUE(WriteFile(config, c.yaml).ok());
    std::vector<std::string> argv = {FITLEDGER_SERVER_PATH, "--config", config, "--kubeconfig",
                                     sim_->kubeconfig_path()};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    absl::StatusOr<CommandResult> r = RunCommand(argv, {}, absl::Seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 2) << c.yaml;
    EXPECT_THAT(r->output, HasSubstr(c.message)) << c.yaml;
  }
}

// What a newcomer mistypes gets an answer that says what to do (issue 25, part 4).
TEST_F(SecurityE2eTest, StartupMistakesAreRefusedWithWhatToDo) {
  ASSERT_TRUE(WriteFile(dir_ + "/server.yaml", "").ok());
  ASSERT_TRUE(WriteFile(dir_ + "/a-file", "").ok());
  const std::vector<std::string> base = {FITLEDGER_SERVER_PATH, "--config", dir_ + "/server.yaml",
                                         "--kubeconfig", sim_->kubeconfig_path()};
  auto run = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<CommandResult> r = RunCommand(argv, {}, absl::Seconds(30));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  };
  CommandResult level = run({"--log-level", "verbose"});
  EXPECT_EQ(level.exit_code, 2);
  EXPECT_THAT(level.output, HasSubstr("--log-level: log level \"verbose\" must be one of"));
  // A socket whose folder cannot be made (a file is in the way).
  CommandResult folder = run({"--grpc-listen", "unix://" + dir_ + "/a-file/sub/server.sock"});
  EXPECT_NE(folder.exit_code, 0);
  EXPECT_THAT(folder.output, HasSubstr("cannot create its folder " + dir_ + "/a-file/sub"));
  EXPECT_THAT(folder.output, HasSubstr("set grpc.listen (or --grpc-listen)"));
  // A help text: exits 0 (as --help always has), printed to standard output.
  auto help_of = [](std::vector<std::string> argv) {
    absl::StatusOr<CommandResult> r = RunCommand(argv, {}, absl::Seconds(30));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return std::string();
    EXPECT_EQ(r->exit_code, 0) << argv.back();
    return r->output;
  };
  // --help: the usage once, this binary's flags with dashes, no build paths.
  const std::string help = help_of({FITLEDGER_SERVER_PATH, "--help"});
  EXPECT_THAT(help, HasSubstr("  --grpc-listen\n"));
  EXPECT_THAT(help, HasSubstr("  --log-level\n"));
  EXPECT_THAT(help, Not(HasSubstr("Flags from")));
  EXPECT_THAT(help, Not(HasSubstr("main.cc")));
  EXPECT_THAT(help, Not(HasSubstr("fitledger-server: fitledger-server")));
  EXPECT_THAT(help, Not(HasSubstr("  --flagfile\n")));
  // No removed flag listed; --config is optional (every key has a default).
  EXPECT_THAT(help, Not(HasSubstr("unary")));
  EXPECT_THAT(help, HasSubstr("Usage: fitledger-server [--config FILE]"));
  // --helpfull: the same, then Abseil's own flags, the same way.
  const std::string full = help_of({FITLEDGER_SERVER_PATH, "--helpfull"});
  EXPECT_THAT(full, HasSubstr("  --grpc-listen\n"));
  EXPECT_THAT(full, HasSubstr("Abseil's flags:\n  --flagfile\n"));
  EXPECT_THAT(full, Not(HasSubstr("Flags from")));
  EXPECT_THAT(full, Not(HasSubstr("main.cc")));
  EXPECT_THAT(full, Not(HasSubstr("Try --helpfull")));
  // fitledgerctl: `help` is --help; its usage spells flags as its flag list does.
  const std::string ctl = help_of({FITLEDGER_CTL_PATH, "help"});
  EXPECT_THAT(ctl, HasSubstr("scheduler [--scheduler-name NAME]"));
  EXPECT_THAT(ctl, HasSubstr("--namespace NS]"));
  EXPECT_THAT(ctl, HasSubstr("  --scheduler-name\n"));
  EXPECT_THAT(ctl, Not(HasSubstr("--scheduler_name")));
}

// A socket folder that does not exist yet is made (the default's /run/fitledger is missing on a
// fresh machine).
TEST_F(SecurityE2eTest, TheSocketsFolderIsCreated) {
  const std::string socket = dir_ + "/made/here/server.sock";
  ASSERT_NE(
      StartServer(absl::StrCat("grpc:\n  listen: [\"unix://", socket, "\", \"127.0.0.1:0\"]\n")),
      0);
  struct stat st;
  ASSERT_EQ(stat(socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
}

// fitledgerctl nodes --watch redraws in place on a terminal (a pty from script(1)) and appends
// table after table when its output is piped (issue 25, part 4).
TEST_F(SecurityE2eTest, NodesWatchRedrawsOnATerminalAndAppendsWhenPiped) {
  const int port = StartServer("grpc:\n  listen: [\"127.0.0.1:0\"]\n");
  ASSERT_NE(port, 0);
  const std::string ctl = absl::StrCat(FITLEDGER_CTL_PATH, " --server 127.0.0.1:", port,
                                       " nodes --watch --interval-ms 100");
  const std::string clear = "\033[H\033[2J";
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  // Each run ends by timeout(1) after 3 s, by then many tables were drawn.
  absl::StatusOr<CommandResult> piped =
      RunCommand({"timeout", "3", "sh", "-c", ctl}, {}, absl::Seconds(30));
  ASSERT_TRUE(piped.ok()) << piped.status();
  EXPECT_GE(count(piped->output, "n1"), 2) << piped->output;
  EXPECT_EQ(count(piped->output, clear), 0);
  absl::StatusOr<CommandResult> tty =
      RunCommand({"timeout", "3", "script", "-qefc", ctl, "/dev/null"}, {}, absl::Seconds(30));
  ASSERT_TRUE(tty.ok()) << tty.status();
  EXPECT_GE(count(tty->output, "n1"), 2) << tty->output;
  EXPECT_GE(count(tty->output, clear), 2) << tty->output;
}

TEST_F(SecurityE2eTest, TheTlsListenerServesTlsClientsOnly) {
  int port = StartServer(TlsConfig(false));
  ASSERT_NE(port, 0);
  bool serving = E2eCluster::WaitFor(
      [&] {
        return Health(port, {"--tls-ca", certs_ + "/ca.pem"}).exit_code == 0;
      },
      absl::Seconds(30));
  EXPECT_TRUE(serving);
  CommandResult plaintext = Health(port, {});
  EXPECT_NE(plaintext.exit_code, 0) << plaintext.output;
  CommandResult wrong_ca = Health(port, {"--tls-ca", certs_ + "/other-ca.pem"});
  EXPECT_NE(wrong_ca.exit_code, 0) << wrong_ca.output;
}

TEST_F(SecurityE2eTest, MutualTlsRequiresAClientCertificateFromTheConfiguredCa) {
  int port = StartServer(TlsConfig(true));
  ASSERT_NE(port, 0);
  std::vector<std::string> good = {"--tls-ca",   certs_ + "/ca.pem",
                                   "--tls-cert", certs_ + "/client.pem",
                                   "--tls-key",  certs_ + "/client-key.pem"};
  EXPECT_TRUE(
      E2eCluster::WaitFor([&] { return Health(port, good).exit_code == 0; }, absl::Seconds(30)));
  CommandResult no_cert = Health(port, {"--tls-ca", certs_ + "/ca.pem"});
  EXPECT_NE(no_cert.exit_code, 0) << no_cert.output;
  CommandResult other =
      Health(port, {"--tls-ca", certs_ + "/ca.pem", "--tls-cert", certs_ + "/other-client.pem",
                    "--tls-key", certs_ + "/other-client-key.pem"});
  EXPECT_NE(other.exit_code, 0) << other.output;
}

}  // namespace
}  // namespace fitledger::testing
