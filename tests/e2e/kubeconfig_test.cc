// fitledger-server against fitledger-sim with bearer-token auth, configured the way EKS, GKE and
// AKS hand out access: $KUBECONFIG lists two files (cluster + context in one, the user in the
// other) and the user's credentials come from an exec plugin. The plugin script records its
// arguments, environment and KUBERNETES_EXEC_INFO, and hands out whatever token the test's
// "identity provider" (a file) holds, with an expirationTimestamp the test chooses.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kSim[] = R"(
nodes:
  - name: n1
    allocatable: {cpu: "8", memory: 16Gi, pods: 110}
watchLag: 0s
kubelet: {enabled: true}
token: first-token
)";

// The plugin: counts its runs, records what it was given (numbered by run), prints an
// ExecCredential holding the token in $PLUGIN_DIR/token, valid for $PLUGIN_DIR/ttl seconds, and
// writes the expiry it gave and the time it ran (epoch seconds) to expiry.N and time.N.
constexpr char kPlugin[] = R"sh(#!/bin/sh
d="$PLUGIN_DIR"
n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 ))
for a in "$@"; do printf '%s\n' "$a"; done > "$d/args.$n"
env > "$d/env.$n"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$d/info.$n"
ttl=$(cat "$d/ttl")
expiry=$(( $(date +%s) + ttl ))
echo $expiry > "$d/expiry.$n"
date +%s > "$d/time.$n"
printf '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"%s","expirationTimestamp":"%s"}}\n' \
  "$(cat "$d/token")" "$(date -u -d "@$expiry" +%Y-%m-%dT%H:%M:%SZ)"
echo $n > "$d/count"
)sh";

class KubeconfigE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SimProcess>> sim = SimProcess::Start(kSim);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    temp_ = TempDir("kubeconfig-e2e");
    dir_ = temp_.path();
    ASSERT_EQ(system(("mkdir -p " + dir_ + "/cluster " + dir_ + "/user/bin").c_str()), 0);
    // Cluster and context (and current-context) in one file...
    ASSERT_TRUE(WriteFile(dir_ + "/cluster/config",
                          absl::StrCat("apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
                                       "clusters:\n- name: sim\n  cluster:\n    server: "
                                       "http://127.0.0.1:",
                                       sim_->port(),
                                       "\ncontexts:\n- name: sim\n  context: {cluster: sim, user: "
                                       "sim-user}\n"))
                    .ok());
    // ... the user in the other; the plugin path is relative to this file's folder.
    ASSERT_TRUE(WriteFile(dir_ + "/user/config",
                          absl::StrCat("apiVersion: v1\nkind: Config\nusers:\n- name: sim-user\n"
                                       "  user:\n    exec:\n"
                                       "      apiVersion: client.authentication.k8s.io/v1\n"
                                       "      command: bin/get-token\n"
                                       "      args: [token, --cluster, sim, two words]\n"
                                       "      env:\n      - {name: PLUGIN_DIR, value: ",
                                       dir_,
                                       "}\n      - {name: PLUGIN_REGION, value: eu-west-1}\n"
                                       "      interactiveMode: IfAvailable\n"
                                       "      provideClusterInfo: true\n"
                                       "      installHint: see the test\n"))
                    .ok());
    std::string plugin = dir_ + "/user/bin/get-token";
    ASSERT_TRUE(WriteFile(plugin, kPlugin).ok());
    chmod(plugin.c_str(), 0755);
    ASSERT_TRUE(WriteFile(dir_ + "/token", "first-token").ok());
    ASSERT_TRUE(WriteFile(dir_ + "/ttl", "3600").ok());
  }

  // Starts fitledger-server with KUBECONFIG listing both files and no --kubeconfig.
  void StartServer(const std::string& kubeconfig_env) {
    ASSERT_TRUE(WriteFile(dir_ + "/server.yaml", "log: {level: debug}\n").ok());
    std::string ready = dir_ + "/server.ready";
    unlink(ready.c_str());
    absl::StatusOr<std::unique_ptr<ChildProcess>> server = ChildProcess::Start(
        {FITLEDGER_SERVER_PATH, "--config", dir_ + "/server.yaml", "--grpc-listen", "127.0.0.1:0",
         "--monitor-listen", "127.0.0.1:0", "--ready-file", ready},
        dir_ + "/server.log", {"KUBECONFIG=" + kubeconfig_env});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_TRUE(WaitForFile(ready, absl::Seconds(30)).ok()) << Log();
    nlohmann::json ports = nlohmann::json::parse(ReadFileOrEmpty(ready));
    int port = ports["grpc_ports"][0];
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    introspection_ = v1::Introspection::NewStub(channel_);
  }

  std::string Log() const { return ReadFileOrEmpty(dir_ + "/server.log"); }
  int Runs() const { return std::atoi(ReadFileOrEmpty(dir_ + "/count").c_str()); }

  // n1's confirmed cpu in the server's view (millicores), or -1 before the first sync.
  int64_t ConfirmedCpu() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListNodesRequest req;
    v1::ListNodesResponse resp;
    if (!introspection_->ListNodes(&ctx, req, &resp).ok() || !resp.synced()) return -1;
    for (const v1::NodeView& n : resp.nodes()) {
      if (n.name() == "n1") return Amount(n.confirmed(), "cpu");
    }
    return -1;
  }

  // Creates a pod on n1 through the API with `token`.
  void CreateOnNode(const std::string& name, const std::string& cpu, const std::string& token) {
    std::unique_ptr<httplib::Client> client = sim_->Client();
    client->set_bearer_token_auth(token);
    HttpResult r = Call(*client, "POST", "/api/v1/namespaces/default/pods",
                        PodManifest(name, cpu, "64Mi", "n1").dump());
    ASSERT_EQ(r.status, 201) << r.raw;
  }

  void Admin(const std::string& path, const std::string& body = "{}") {
    std::unique_ptr<httplib::Client> client = sim_->Client();
    HttpResult r = Call(*client, "POST", path, body);
    ASSERT_EQ(r.status, 200) << path << ": " << r.raw;
  }

  std::unique_ptr<SimProcess> sim_;
  TempDir temp_;     // before server_: removed after the server is killed
  std::string dir_;  // temp_.path()
  std::unique_ptr<ChildProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Introspection::Stub> introspection_;
};

TEST_F(KubeconfigE2eTest, SyncsThroughAnExecPluginFromTwoMergedFilesAndFollowsItsCredential) {
  StartServer(dir_ + "/cluster/config:" + dir_ + "/user/config");
  ASSERT_TRUE(E2eCluster::WaitFor([&] { return ConfirmedCpu() == 0; }, absl::Seconds(30))) << Log();

  // The plugin got its args, its env on top of the server's, and the cluster's info.
  ASSERT_GE(Runs(), 1);
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/args.1"), "token\n--cluster\nsim\ntwo words\n");
  std::string env = ReadFileOrEmpty(dir_ + "/env.1");
  EXPECT_THAT(env, HasSubstr("PLUGIN_REGION=eu-west-1\n"));
  EXPECT_THAT(env, HasSubstr("PLUGIN_DIR=" + dir_ + "\n"));
  nlohmann::json info = nlohmann::json::parse(ReadFileOrEmpty(dir_ + "/info.1"));
  EXPECT_EQ(info["apiVersion"], "client.authentication.k8s.io/v1");
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], absl::StrCat("http://127.0.0.1:", sim_->port()));
  // One credential serves every request until it expires or is refused.
  CreateOnNode("a", "100m", "first-token");
  ASSERT_TRUE(E2eCluster::WaitFor([&] { return ConfirmedCpu() == 100; }, absl::Seconds(30)));
  EXPECT_EQ(Runs(), 1);

  // The API server stops accepting the token (the identity provider rotated it). Open watches
  // go on; the next connection is refused with 401, the server runs the plugin again and
  // reconnects with the new token.
  ASSERT_TRUE(WriteFile(dir_ + "/token", "second-token").ok());
  Admin("/sim/auth/token", R"({"token":"second-token"})");
  Admin("/sim/faults/drop-watches");
  CreateOnNode("b", "200m", "second-token");
  ASSERT_TRUE(E2eCluster::WaitFor([&] { return ConfirmedCpu() == 300; }, absl::Seconds(30)))
      << Log();
  EXPECT_EQ(Runs(), 2);

  // Expiry: credentials that expire after 1 s. The API server accepts the same token all along
  // (no 401 can happen), so every further run is the server noticing the expiry.
  ASSERT_TRUE(WriteFile(dir_ + "/ttl", "1").ok());
  Admin("/sim/faults/drop-watches");  // forces requests; the cached (1 h) credential still holds
  CreateOnNode("c", "300m", "second-token");
  ASSERT_TRUE(E2eCluster::WaitFor([&] { return ConfirmedCpu() == 600; }, absl::Seconds(30)));
  EXPECT_EQ(Runs(), 2);
  // Make the credential a short-lived one: a 401 forces a run, whose answer expires in 1 s.
  ASSERT_TRUE(WriteFile(dir_ + "/token", "third-token").ok());
  Admin("/sim/auth/token", R"({"token":"third-token"})");
  Admin("/sim/faults/drop-watches");
  ASSERT_TRUE(E2eCluster::WaitFor([&] { return Runs() >= 3; }, absl::Seconds(30))) << Log();
  const int64_t expiry = std::atoll(ReadFileOrEmpty(dir_ + "/expiry.3").c_str());
  ASSERT_GT(expiry, 0);
  ASSERT_TRUE(E2eCluster::WaitFor([&] { return absl::ToUnixSeconds(absl::Now()) > expiry; },
                                  absl::Seconds(30)));
  // New connections now need a credential, and the cached one has expired: the plugin runs
  // again (the token has not changed since run 3, so no request was refused).
  Admin("/sim/faults/drop-watches");
  CreateOnNode("d", "400m", "third-token");
  ASSERT_TRUE(E2eCluster::WaitFor([&] { return ConfirmedCpu() == 1000; }, absl::Seconds(30)))
      << Log();
  int last = Runs();
  ASSERT_GE(last, 4);
  EXPECT_GE(std::atoll(ReadFileOrEmpty(absl::StrCat(dir_, "/time.", last)).c_str()), expiry);
  EXPECT_TRUE(!server_->Exited());
}

TEST_F(KubeconfigE2eTest, AMissingPluginIsAClearErrorAndTheServerKeepsTrying) {
  ASSERT_TRUE(WriteFile(dir_ + "/user/config",
                        "users:\n- name: sim-user\n  user:\n    exec:\n"
                        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                        "      command: fitledger-e2e-no-such-plugin\n"
                        "      installHint: 'Install it: see docs/operations.md'\n")
                  .ok());
  StartServer(dir_ + "/cluster/config:" + dir_ + "/user/config");
  ASSERT_TRUE(E2eCluster::WaitFor(
      [&] {
        return absl::StrContains(Log(), "executable fitledger-e2e-no-such-plugin not found") &&
               absl::StrContains(Log(), "Install it: see docs/operations.md");
      },
      absl::Seconds(30)))
      << Log();
  EXPECT_EQ(ConfirmedCpu(), -1);  // never synced
  EXPECT_FALSE(server_->Exited());
  // The server keeps answering (not ready) and keeps trying with backoff.
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
  EXPECT_NE(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace fitledger::testing
