// The exec credential plugin runner: ExecCredential decoding, what the plugin is given, caching
// until expirationTimestamp, refresh after a 401, and plugins that fail, hang or print garbage.
#include "server/kube/exec_credential.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/status_matchers.h"
#include "tests/common/temp_dir.h"

namespace fitledger::kube {
namespace {

using ::fitledger::testing::StatusIs;
using ::fitledger::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kV1[] = "client.authentication.k8s.io/v1";
constexpr char kV1beta1[] = "client.authentication.k8s.io/v1beta1";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string Credential(const std::string& status, const std::string& version = kV1) {
  return absl::StrCat(R"({"kind":"ExecCredential","apiVersion":")", version, R"(","status":)",
                      status, "}");
}

// A plugin script in a fresh folder. Each run appends to `count`, records its arguments, its
// environment, KUBERNETES_EXEC_INFO and what it read on stdin in files numbered by the run, then
// runs `reply.sh` (which the test rewrites between runs).
class Plugin {
 public:
  explicit Plugin(const std::string& name) : temp_("exec-" + name), dir_(temp_.path()) {
    Write(path(),
          "#!/bin/sh\n"
          "d=\"$PLUGIN_DIR\"\n"
          "n=$(( $(cat \"$d/count\" 2>/dev/null || echo 0) + 1 ))\n"
          "echo $n > \"$d/count\"\n"
          "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"$d/args.$n\"\n"
          "env > \"$d/env.$n\"\n"
          "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$d/info.$n\"\n"
          "cat > \"$d/stdin.$n\"\n"
          ". \"$d/reply.sh\"\n");
    chmod(path().c_str(), 0755);
  }
  std::string path() const { return dir_ + "/plugin"; }
  const std::string& dir() const { return dir_; }
  // The next runs print `json`.
  void Reply(const std::string& json) {
    Write(dir_ + "/reply.sh", "cat <<'EOF'\n" + json + "\nEOF\n");
  }
  void ReplyScript(const std::string& script) { Write(dir_ + "/reply.sh", script); }
  int count() const { return std::atoi(Read(dir_ + "/count").c_str()); }
  std::string File(const std::string& kind, int run) const {
    return Read(absl::StrCat(dir_, "/", kind, ".", run));
  }
  ExecConfig Config(const std::string& version = kV1) const {
    ExecConfig c;
    c.command = path();
    c.api_version = version;
    c.interactive_mode = "Never";
    c.env = {{"PLUGIN_DIR", dir_}};
    c.user = "test-user";
    return c;
  }

 private:
  TempDir temp_;  // removed with the Plugin
  std::string dir_;
};

ExecOptions Fast() {
  ExecOptions o;
  o.timeout = absl::Seconds(20);
  o.initial_backoff = absl::Seconds(5);
  o.max_backoff = absl::Seconds(60);
  return o;
}

TEST(ParseExecCredentialTest, AcceptsWhatClientGoAccepts) {
  absl::StatusOr<ExecCredential> c = ParseExecCredential(
      Credential(R"({"token":"t0k","expirationTimestamp":"2030-01-02T03:04:05Z"})"), kV1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "t0k");
  EXPECT_EQ(c->expiry,
            absl::FromCivil(absl::CivilSecond(2030, 1, 2, 3, 4, 5), absl::UTCTimeZone()));

  c = ParseExecCredential(
      Credential(R"({"clientCertificateData":"-----BEGIN CERTIFICATE-----\nC\n",)"
                 R"("clientKeyData":"-----BEGIN PRIVATE KEY-----\nK\n"})",
                 kV1beta1),
      kV1beta1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "");
  EXPECT_EQ(c->client_cert_pem, "-----BEGIN CERTIFICATE-----\nC\n");
  EXPECT_EQ(c->expiry, absl::InfiniteFuture());  // no expirationTimestamp: until a 401
}

TEST(ParseExecCredentialTest, RejectsWhatClientGoRejectsWithoutQuotingSecrets) {
  struct Case {
    std::string output;
    std::string want;
  };
  const Case cases[] = {
      {"", "not JSON"},
      {"Enter your password:", "not JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"status":{"token":"s3cret"}})", "no kind or apiVersion"},
      {R"({"kind":"Secret","apiVersion":"v1","status":{"token":"s3cret"}})", "kind is \"Secret\""},
      {Credential(R"({"token":"s3cret"})", kV1beta1),
       "exec plugin is configured to use API version client.authentication.k8s.io/v1, plugin "
       "returned version client.authentication.k8s.io/v1beta1"},
      {R"({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1"})",
       "didn't return a status field"},
      {Credential("{}"), "didn't return a token or cert/key pair"},
      {Credential(R"({"token":42})"), "token is not a string"},
      {Credential(R"({"clientCertificateData":"-----BEGIN CERTIFICATE-----"})"),
       "returned only certificate or key, not both"},
      {Credential(R"({"clientCertificateData":"s3cret","clientKeyData":"s3cret"})"), "must be PEM"},
      {Credential(R"({"token":"s3cret","expirationTimestamp":"tomorrow"})"),
       "expirationTimestamp \"tomorrow\" is not an RFC 3339 time"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.output);
    absl::StatusOr<ExecCredential> got = ParseExecCredential(c.output, kV1);
    EXPECT_THAT(got, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.want)));
    EXPECT_THAT(std::string(got.status().message()), Not(HasSubstr("s3cret")));
  }
}

TEST(ExecCredentialSourceTest, GivesThePluginItsArgsEnvAndClusterInfoButNoStdin) {
  Plugin plugin("args");
  plugin.Reply(Credential(R"({"token":"from-plugin"})"));
  setenv("FITLEDGER_TEST_OVERRIDDEN", "from-parent", 1);
  setenv("FITLEDGER_TEST_INHERITED", "inherited", 1);
  ExecConfig config = plugin.Config();
  config.args = {"--region", "eu west"};
  config.env.emplace_back("FITLEDGER_TEST_OVERRIDDEN", "from-config");
  config.provide_cluster_info = true;
  config.cluster.server = "https://api.example:6443";
  config.cluster.tls_server_name = "kubernetes";
  config.cluster.ca_pem = "CA";
  config.cluster.proxy_url = "http://proxy:3128";
  config.cluster.config_json = R"({"audience":"x"})";
  ExecCredentialSource source(config, Fast());
  absl::StatusOr<ExecCredential> cred = source.Get(absl::Now());
  ASSERT_TRUE(cred.ok()) << cred.status();
  EXPECT_EQ(cred->token, "from-plugin");
  EXPECT_EQ(cred->generation, 1u);
  EXPECT_EQ(plugin.File("args", 1), "--region\neu west\n");
  std::string env = plugin.File("env", 1);
  EXPECT_THAT(env, HasSubstr("FITLEDGER_TEST_OVERRIDDEN=from-config\n"));
  EXPECT_THAT(env, Not(HasSubstr("from-parent")));
  EXPECT_THAT(env, HasSubstr("FITLEDGER_TEST_INHERITED=inherited\n"));
  EXPECT_EQ(plugin.File("stdin", 1), "");
  nlohmann::json info = nlohmann::json::parse(plugin.File("info", 1));
  EXPECT_EQ(info, nlohmann::json::parse(R"({
    "kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1",
    "spec": {"interactive": false, "cluster": {
      "server": "https://api.example:6443", "tls-server-name": "kubernetes",
      "certificate-authority-data": "Q0E=", "proxy-url": "http://proxy:3128",
      "config": {"audience": "x"}}}})"));

  // Without provideClusterInfo the spec carries no cluster.
  config.provide_cluster_info = false;
  EXPECT_EQ(ExecInfoJson(config),
            R"({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",)"
            R"("spec":{"interactive":false}})");
}

TEST(ExecCredentialSourceTest, CachesUntilExpirationTimestampAndRefreshesOnceAfterA401) {
  Plugin plugin("cache");
  const absl::Time expiry =
      absl::FromCivil(absl::CivilSecond(2030, 1, 1, 0, 0, 0), absl::UTCTimeZone());
  plugin.ReplyScript(
      "printf '{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\","
      "\"status\":{\"token\":\"token-%s\",\"expirationTimestamp\":\"2030-01-01T00:00:00Z\"}}' "
      "$n\n");
  ExecCredentialSource source(plugin.Config(), Fast());
  absl::StatusOr<ExecCredential> first = source.Get(expiry - absl::Hours(1));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->token, "token-1");
  EXPECT_EQ(first->expiry, expiry);
  absl::StatusOr<ExecCredential> cached = source.Get(expiry - absl::Seconds(1));
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->token, "token-1");
  EXPECT_EQ(source.runs(), 1u);

  absl::StatusOr<ExecCredential> expired = source.Get(expiry + absl::Seconds(1));
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(expired->token, "token-2");
  EXPECT_EQ(expired->generation, 2u);

  // A 401 to the current credential runs the plugin again; a 401 to an older one (another
  // request already refreshed) does not.
  absl::StatusOr<ExecCredential> refreshed =
      source.RefreshAfterUnauthorized(expired->generation, expiry - absl::Hours(1));
  ASSERT_TRUE(refreshed.ok()) << refreshed.status();
  EXPECT_EQ(refreshed->token, "token-3");
  absl::StatusOr<ExecCredential> again =
      source.RefreshAfterUnauthorized(expired->generation, expiry - absl::Hours(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->token, "token-3");
  EXPECT_EQ(source.runs(), 3u);
  EXPECT_EQ(plugin.count(), 3);
}

TEST(ExecCredentialSourceTest, ConcurrentCallersShareOneRun) {
  Plugin plugin("concurrent");
  plugin.ReplyScript("sleep 0.3\ncat <<'EOF'\n" + Credential(R"({"token":"t"})") + "\nEOF\n");
  ExecCredentialSource source(plugin.Config(), Fast());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (source.Get(absl::Now()).ok()) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(plugin.count(), 1);
}

TEST(ExecCredentialSourceTest, AFailingPluginGivesItsExitCodeAndStderrThenBacksOff) {
  Plugin plugin("fail");
  plugin.ReplyScript("echo 'error: the SSO session has expired' >&2\nexit 3\n");
  ExecCredentialSource source(plugin.Config(), Fast());
  const absl::Time now = absl::Now();
  absl::StatusOr<ExecCredential> cred = source.Get(now);
  EXPECT_THAT(cred, StatusIs(absl::StatusCode::kUnavailable,
                             HasSubstr("exec plugin \"" + plugin.path() +
                                       "\" (users[test-user]): executable " + plugin.path() +
                                       " failed with exit code 3; stderr: error: the SSO session "
                                       "has expired")));
  // Within the backoff the plugin is not run again; the error says when it will be.
  cred = source.Get(now + absl::Seconds(1));
  EXPECT_THAT(cred, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("next attempt in")));
  EXPECT_THAT(cred.status().message(), HasSubstr("exit code 3"));
  EXPECT_EQ(plugin.count(), 1);
  // After it, the plugin runs again; the backoff has doubled (5 s, then 10 s).
  cred = source.Get(now + absl::Seconds(6));
  EXPECT_FALSE(cred.ok());
  EXPECT_EQ(plugin.count(), 2);
  EXPECT_THAT(source.Get(now + absl::Seconds(13)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("next attempt in")));
  EXPECT_EQ(plugin.count(), 2);
  // Fixed: the next attempt succeeds and resets the backoff.
  plugin.Reply(Credential(R"({"token":"t"})"));
  cred = source.Get(now + absl::Seconds(60));
  ASSERT_TRUE(cred.ok()) << cred.status();
  EXPECT_EQ(cred->token, "t");
}

TEST(ExecCredentialSourceTest, AMissingCommandShowsTheInstallHint) {
  ExecConfig config;
  config.command = "fitledger-no-such-credential-plugin";
  config.api_version = kV1;
  config.interactive_mode = "Never";
  config.install_hint = "Install it with: apt install fitledger-credential-plugin";
  config.user = "eks";
  ExecCredentialSource source(config, Fast());
  EXPECT_THAT(
      source.Get(absl::Now()),
      StatusIs(absl::StatusCode::kUnavailable,
               HasSubstr("exec plugin \"fitledger-no-such-credential-plugin\" (users[eks]): "
                         "executable fitledger-no-such-credential-plugin not found")));
  config.command = "/nonexistent/dir/plugin";
  ExecCredentialSource by_path(config, Fast());
  EXPECT_THAT(by_path.Get(absl::Now()),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("not found (it looks like a client-go credential plugin that is "
                                 "not installed, or not in fitledger-server's PATH). Install it "
                                 "with: apt install fitledger-credential-plugin")));
}

TEST(ExecCredentialSourceTest, AHangingPluginIsKilledWithWhatItStartedAfterTheTimeout) {
  Plugin plugin("hang");
  plugin.ReplyScript(
      "sleep 60 &\necho $! > \"$d/child\"\necho 'waiting for you to log in' >&2\n"
      "wait\n");
  ExecOptions options = Fast();
  options.timeout = absl::Milliseconds(500);
  ExecCredentialSource source(plugin.Config(), options);
  absl::Time start = absl::Now();
  absl::StatusOr<ExecCredential> cred = source.Get(start);
  EXPECT_THAT(cred, StatusIs(absl::StatusCode::kUnavailable,
                             HasSubstr("did not finish within 500ms; killed it (a plugin must not "
                                       "prompt); stderr: waiting for you to log in")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  // The background `sleep` was in the plugin's process group: killed too (gone, or a zombie
  // waiting for whoever reaps orphans).
  int child = std::atoi(Read(plugin.dir() + "/child").c_str());
  ASSERT_GT(child, 0);
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  bool gone = false;
  while (!gone && absl::Now() < deadline) {
    std::string stat = Read(absl::StrCat("/proc/", child, "/stat"));
    gone = stat.empty() || stat.find(") Z") != std::string::npos;
    if (!gone) usleep(20 * 1000);
  }
  EXPECT_TRUE(gone) << "pid " << child << " still runs";
}

TEST(ExecCredentialSourceTest, GarbageAndFloodsAreClearErrors) {
  Plugin plugin("garbage");
  plugin.ReplyScript("echo 'Please open https://login.example/device and enter ABCD'\n");
  ExecCredentialSource source(plugin.Config(), Fast());
  EXPECT_THAT(source.Get(absl::Now()),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("(users[test-user]): decoding stdout: not JSON")));

  Plugin flood("flood");
  flood.ReplyScript("head -c 3000000 /dev/zero\n");
  ExecCredentialSource flooded(flood.Config(), Fast());
  EXPECT_THAT(flooded.Get(absl::Now()),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("printed more than 1048576 bytes; killed it")));
}

TEST(ExecCredentialSourceTest, ANewClientCertificateMovesTheCertificateGeneration) {
  Plugin plugin("certs");
  plugin.ReplyScript(
      "printf '{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/"
      "v1beta1\",\"status\":{\"clientCertificateData\":\"-----BEGIN CERTIFICATE-----\\\\n%s\\\\n"
      "\",\"clientKeyData\":\"-----BEGIN PRIVATE KEY-----\\\\nK\\\\n\"}}' $(( n < 3 ? 1 : n ))\n");
  ExecConfig config = plugin.Config(kV1beta1);
  config.interactive_mode = "IfAvailable";
  ExecCredentialSource source(config, Fast());
  absl::StatusOr<ExecCredential> one = source.Get(absl::Now());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->client_cert_pem, "-----BEGIN CERTIFICATE-----\n1\n");
  EXPECT_EQ(source.cert_generation(), 0u);
  absl::StatusOr<ExecCredential> same = source.RefreshAfterUnauthorized(1, absl::Now());
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(source.cert_generation(), 0u);  // the same certificate again: connections stay
  absl::StatusOr<ExecCredential> rotated = source.RefreshAfterUnauthorized(2, absl::Now());
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  EXPECT_EQ(rotated->client_cert_pem, "-----BEGIN CERTIFICATE-----\n3\n");
  EXPECT_EQ(source.cert_generation(), 1u);
}

}  // namespace
}  // namespace fitledger::kube
