#include "server/kube/connection.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/common/temp_dir.h"

namespace fitledger::kube {
namespace {

using ::fitledger::testing::StatusIs;
using ::fitledger::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Sets (or unsets, for nullptr) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::string old_;
  bool had_ = false;
};

std::string KubeconfigText(const std::string& cluster, const std::string& user) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n"
         "contexts:\n- name: ctx\n  context: {cluster: c, user: u}\n"
         "clusters:\n- name: c\n  cluster:\n" +
         cluster + "users:\n- name: u\n  user:\n" + user;
}

TEST(ConnectionTest, ReadsServerCaTokenAndClientCertificate) {
  std::string ca = absl::Base64Escape("-----BEGIN CERTIFICATE-----\nCA\n");
  std::string cert = absl::Base64Escape("CERT");
  std::string key = absl::Base64Escape("KEY");
  absl::StatusOr<Connection> c = ParseKubeconfig(
      KubeconfigText(
          "    server: https://10.0.0.1:6443/\n    certificate-authority-data: " + ca + "\n",
          "    token: abc\n    client-certificate-data: " + cert + "\n    client-key-data: " + key +
              "\n"),
      "kc", "/etc/kube");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "-----BEGIN CERTIFICATE-----\nCA\n");
  EXPECT_EQ(c->token, "abc");
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->client_key_pem, "KEY");
}

TEST(ConnectionTest, RelativeFilesResolveAgainstTheKubeconfigsFolder) {
  absl::StatusOr<Connection> c = ParseKubeconfig(
      KubeconfigText("    server: https://h:6443\n    certificate-authority: ca.pem\n"
                     "    insecure-skip-tls-verify: false\n",
                     "    client-certificate: certs/c.pem\n    client-key: /abs/k.pem\n"),
      "kc", "/etc/kube");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ca_file, "/etc/kube/ca.pem");
  EXPECT_EQ(c->client_cert_file, "/etc/kube/certs/c.pem");
  EXPECT_EQ(c->client_key_file, "/abs/k.pem");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
}

TEST(ConnectionTest, BadKubeconfigsNameTheFileAndTheField) {
  struct Case {
    std::string yaml;
    std::string want;
  };
  const Case cases[] = {
      {"current-context: [", "invalid YAML"},
      // Found by kubeconfig_fuzz: a byte that is not UTF-8 inside the exec extension reached
      // JSON's serializer, which threw. The file is refused as Go's YAML reader refuses it.
      {KubeconfigText(
           "    server: https://x\n    extensions:\n    - name: client.authentication.k8s.io/exec\n"
           "      extension: {a: \"\xff\"}\n",
           ""),
       "not valid UTF-8"},
      {"kind: Config\n", "current-context: missing"},
      {"current-context: nope\ncontexts: []\n", "no entry named \"nope\""},
      {KubeconfigText("    insecure-skip-tls-verify: true\n", ""), "server: missing"},
      {KubeconfigText("    server: ftp://x\n", ""), "must start with http:// or https://"},
      {KubeconfigText("    server: https://x\n    certificate-authority-data: '%%%'\n", ""),
       "certificate-authority-data: is not valid base64"},
      {KubeconfigText("    server: https://x\n    insecure-skip-tls-verify: maybe\n", ""),
       "must be true or false"},
      {KubeconfigText("    server: https://x\n", "    client-certificate: c.pem\n"),
       "client-certificate and client-key must be given together"},
      {KubeconfigText("    server: https://x\n",
                      "    exec: {apiVersion: client.authentication.k8s.io/v1}\n"),
       "users[u].user.exec.command: missing"},
      {KubeconfigText("    server: https://x\n", "    exec: {command: aws}\n"),
       "exec.apiVersion: missing"},
      {KubeconfigText(
           "    server: https://x\n",
           "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1alpha1}\n"),
       "exec.apiVersion: \"client.authentication.k8s.io/v1alpha1\" is not supported"},
      {KubeconfigText("    server: https://x\n",
                      "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}\n"),
       "exec.interactiveMode: must be specified with client.authentication.k8s.io/v1"},
      {KubeconfigText("    server: https://x\n",
                      "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1, "
                      "interactiveMode: Always}\n"),
       "exec.interactiveMode: Always needs a terminal"},
      {KubeconfigText("    server: https://x\n",
                      "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1, "
                      "interactiveMode: Sometimes}\n"),
       "exec.interactiveMode: \"Sometimes\" is not one of Never, IfAvailable, Always"},
      {KubeconfigText("    server: https://x\n",
                      "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1, "
                      "interactiveMode: Never, env: [{value: x}]}\n"),
       "exec.env: every variable needs a name"},
      {KubeconfigText("    server: https://x\n", "    exec: [aws]\n"), "exec: must be a mapping"},
      {KubeconfigText("    server: https://x\n", "    auth-provider: {name: gcp, config: {}}\n"),
       "users[u].user.auth-provider: auth-provider plugins are not supported"},
      {KubeconfigText("    server: https://x\n", "    username: admin\n    password: pw\n"),
       "users[u].user.username: basic authentication (username/password) is not supported"},
      {KubeconfigText("    server: https://x\n", "    password: pw\n"),
       "users[u].user.password: basic authentication"},
      {KubeconfigText("    server: https://x\n", "    token: t\n    as: admin\n"),
       "users[u].user.as: impersonation is not supported"},
      {KubeconfigText("    server: https://x\n    proxy-url: ftp://proxy:21\n", ""),
       "proxy-url: unsupported scheme \"ftp\", must be http, https, or socks5"},
      {KubeconfigText("    server: https://x\n    insecure-skip-tls-verify: [true]\n", ""),
       "must be true or false"},
      {"current-context: ctx\nclusters:\n- name: c\n  cluster: {server: https://a}\n"
       "- name: c\n  cluster: {server: https://b}\n",
       "clusters: duplicate name \"c\""},
      {"current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: gone, user: u}\n",
       "clusters: no entry named \"gone\""},
      {"current-context: ctx\nclusters:\n- name: c\n  cluster: {server: https://a}\n"
       "contexts:\n- name: ctx\n  context: {cluster: c, user: gone}\n",
       "users: no entry named \"gone\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    absl::StatusOr<Connection> conn = ParseKubeconfig(c.yaml, "/path/kc.yaml", "/path");
    EXPECT_THAT(conn, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("/path/kc.yaml")));
    EXPECT_THAT(conn.status().message(), HasSubstr(c.want));
  }
}

TEST(ConnectionTest, SecretsNeverAppearInErrors) {
  absl::StatusOr<Connection> c =
      ParseKubeconfig(KubeconfigText("    server: https://x\n",
                                     "    token: sup3rs3cret\n    client-certificate: c\n"),
                      "kc", "");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), Not(HasSubstr("sup3rs3cret")));
}

TEST(ConnectionTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadKubeconfig("/nonexistent/kubeconfig"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/kubeconfig")));
}

TEST(ConnectionTest, InClusterUsesTheServiceAccountAndRereadsTheToken) {
  const TempDir temp("sa");
  const std::string& dir = temp.path();
  ASSERT_EQ(system(("mkdir -p " + dir + " && echo tok > " + dir + "/token").c_str()), 0);
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  absl::StatusOr<Connection> c = InClusterConnection(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token_file, dir + "/token");
  EXPECT_EQ(c->ca_file, dir + "/ca.crt");
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_THAT(InClusterConnection(dir), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                 HasSubstr("KUBERNETES_SERVICE_HOST")));
}

// The shape EKS, GKE and AKS hand out: cluster and context in one file, the user (an exec plugin)
// in another, merged from $KUBECONFIG.
constexpr char kClusterFile[] = R"(apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod-cluster
  cluster:
    server: https://prod.example:6443
    certificate-authority: ca.pem
    tls-server-name: kubernetes.default
    proxy-url: socks5://proxy.example:1080
contexts:
- name: prod
  context: {cluster: prod-cluster, user: prod-user, namespace: kube-system}
users:
- name: other
  user: {token: other-token}
)";

constexpr char kUserFile[] = R"(apiVersion: v1
kind: Config
current-context: ignored-second
clusters:
- name: prod-cluster
  cluster: {server: https://never-used.example}
contexts:
- name: ignored-second
  context: {cluster: prod-cluster, user: other}
users:
- name: prod-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: bin/get-token
      args: [--cluster, prod]
      env:
      - {name: REGION, value: eu-west-1}
      installHint: install get-token from example.com
      provideClusterInfo: true
- name: other
  user: {token: second-files-other}
)";

TEST(KubeconfigMergeTest, FirstFileToSetANameWinsAndCurrentContextComesFromTheFirstToSetIt) {
  absl::StatusOr<Kubeconfig> a = ParseKubeconfigFile(kClusterFile, "/a/config", "/a");
  absl::StatusOr<Kubeconfig> b = ParseKubeconfigFile(kUserFile, "/b/user", "/b");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  Kubeconfig merged = MergeKubeconfigs({*a, *b});
  EXPECT_EQ(merged.current_context, "prod");
  EXPECT_THAT(merged.files, ElementsAre("/a/config", "/b/user"));
  // The first file's entries are kept whole.
  EXPECT_EQ(merged.clusters.at("prod-cluster").server, "https://prod.example:6443");
  EXPECT_EQ(merged.clusters.at("prod-cluster").ca_file, "/a/ca.pem");
  EXPECT_EQ(merged.users.at("other").token, "other-token");
  EXPECT_EQ(merged.contexts.size(), 2u);
  EXPECT_EQ(merged.users.at("prod-user").exec.command, "/b/bin/get-token");

  // The other order: the second file's current-context and entries win.
  Kubeconfig reversed = MergeKubeconfigs({*b, *a});
  EXPECT_EQ(reversed.current_context, "ignored-second");
  EXPECT_EQ(reversed.clusters.at("prod-cluster").server, "https://never-used.example");
  EXPECT_EQ(reversed.users.at("other").token, "second-files-other");

  // A later file fills what the first leaves unset only at the top level, never inside an entry.
  absl::StatusOr<Kubeconfig> no_current = ParseKubeconfigFile(
      "clusters:\n- name: c\n  cluster: {server: https://first}\n", "/c/x", "/c");
  absl::StatusOr<Kubeconfig> later = ParseKubeconfigFile(
      "current-context: late\nclusters:\n- name: c\n  cluster:\n    server: https://second\n"
      "    certificate-authority: ca.pem\n",
      "/d/y", "/d");
  ASSERT_TRUE(no_current.ok() && later.ok());
  Kubeconfig m = MergeKubeconfigs({*no_current, *later});
  EXPECT_EQ(m.current_context, "late");
  EXPECT_EQ(m.clusters.at("c").server, "https://first");
  EXPECT_EQ(m.clusters.at("c").ca_file, "");
}

TEST(KubeconfigMergeTest, SplitFilesGiveTheContextsClusterAndTheOtherFilesExecUser) {
  const TempDir temp("merge-split");
  const std::string& dir = temp.path();
  ASSERT_EQ(system(("mkdir -p " + dir + "/a " + dir + "/b").c_str()), 0);
  Write(dir + "/a/config", kClusterFile);
  Write(dir + "/a/ca.pem", "-----BEGIN CERTIFICATE-----\nFROM-FILE\n");
  Write(dir + "/b/user", kUserFile);
  absl::StatusOr<Kubeconfig> merged = LoadKubeconfigFiles(SplitKubeconfigPaths(
      dir + "/a/config::" + dir + "/missing:" + dir + "/b/user:" + dir + "/a/config"));
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_THAT(merged->files, ElementsAre(dir + "/a/config", dir + "/b/user"));
  absl::StatusOr<Connection> c = ConnectionFromKubeconfig(*merged);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://prod.example:6443");
  EXPECT_EQ(c->ca_file, dir + "/a/ca.pem");
  EXPECT_EQ(c->tls_server_name, "kubernetes.default");
  EXPECT_EQ(c->proxy_url, "socks5://proxy.example:1080");
  EXPECT_EQ(c->token, "");
  ASSERT_TRUE(c->exec.has_value());
  const ExecConfig& exec = *c->exec;
  EXPECT_EQ(exec.command, dir + "/b/bin/get-token");  // relative to the user's file
  EXPECT_THAT(exec.args, ElementsAre("--cluster", "prod"));
  EXPECT_THAT(exec.env, ElementsAre(Pair("REGION", "eu-west-1")));
  EXPECT_EQ(exec.api_version, "client.authentication.k8s.io/v1beta1");
  EXPECT_EQ(exec.interactive_mode, "IfAvailable");  // v1beta1's default
  EXPECT_EQ(exec.install_hint, "install get-token from example.com");
  EXPECT_EQ(exec.user, "prod-user");
  ASSERT_TRUE(exec.provide_cluster_info);
  EXPECT_EQ(exec.cluster.server, "https://prod.example:6443");
  EXPECT_EQ(exec.cluster.tls_server_name, "kubernetes.default");
  EXPECT_EQ(exec.cluster.proxy_url, "socks5://proxy.example:1080");
  EXPECT_EQ(exec.cluster.ca_pem, "-----BEGIN CERTIFICATE-----\nFROM-FILE\n");  // the file's data
}

TEST(KubeconfigMergeTest, MissingFilesAreSkippedButABrokenOneIsAnError) {
  const TempDir temp("merge-broken");
  const std::string& dir = temp.path();
  Write(dir + "/broken", "clusters: {not: a list}\n");
  Write(dir + "/empty", "");
  absl::StatusOr<Kubeconfig> none = LoadKubeconfigFiles({dir + "/nope", dir + "/empty"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  EXPECT_THAT(LoadKubeconfigFiles({dir + "/empty", dir + "/broken"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(dir + "/broken:1: clusters: must be a list")));
}

TEST(KubeconfigTest, ExecPluginCommandsWithoutASlashAreLookedUpInPath) {
  absl::StatusOr<Connection> c = ParseKubeconfig(
      KubeconfigText("    server: https://x\n    certificate-authority-data: " +
                         absl::Base64Escape("CA-DATA") +
                         "\n    extensions:\n    - name: client.authentication.k8s.io/exec\n"
                         "      extension: {audience: abc, retries: 3, debug: true}\n",
                     "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                     "      command: gke-gcloud-auth-plugin\n      interactiveMode: Never\n"
                     "      provideClusterInfo: true\n"),
      "/etc/kc", "/etc");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->exec.has_value());
  EXPECT_EQ(c->exec->command, "gke-gcloud-auth-plugin");
  EXPECT_EQ(c->exec->interactive_mode, "Never");
  EXPECT_EQ(c->exec->cluster.ca_pem, "CA-DATA");
  EXPECT_EQ(c->exec->cluster.config_json, R"({"audience":"abc","debug":true,"retries":3})");
}

TEST(KubeconfigTest, AStaticTokenOrCertificateWinsOverExec) {
  // client-go's exec Authenticator.UpdateTransportConfig steps aside when the user already has
  // token or certificate auth.
  const std::string exec =
      "    exec: {command: x, apiVersion: client.authentication.k8s.io/v1, "
      "interactiveMode: Never}\n";
  absl::StatusOr<Connection> c = ParseKubeconfig(
      KubeconfigText("    server: https://x\n", exec + "    token: t\n"), "kc", "/");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->exec.has_value());
  EXPECT_EQ(c->token, "t");
  c = ParseKubeconfig(KubeconfigText("    server: https://x\n", exec + "    tokenFile: t\n"), "kc",
                      "/d");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->exec.has_value());
  EXPECT_EQ(c->token_file, "/d/t");
}

TEST(KubeconfigTest, EmptyUnsupportedFieldsSetNothing) {
  // `as: ""`, `username: ""` and an empty `as-groups` are what kubectl writes when unset.
  absl::StatusOr<Connection> c = ParseKubeconfig(
      KubeconfigText("    server: https://x\n",
                     "    token: t\n    as: \"\"\n    username: \"\"\n    as-groups: []\n"),
      "kc", "/");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "t");
}

TEST(KubeconfigTest, DataWinsOverFilesAndTokenOverTokenFile) {
  absl::StatusOr<Connection> c = ParseKubeconfig(
      KubeconfigText("    server: https://x\n    certificate-authority: ca.pem\n"
                     "    certificate-authority-data: " +
                         absl::Base64Escape("CA") + "\n",
                     "    token: t\n    tokenFile: tf\n    client-certificate: c.pem\n"
                     "    client-certificate-data: " +
                         absl::Base64Escape("CERT") + "\n    client-key: k.pem\n"),
      "kc", "/d");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_EQ(c->ca_file, "");
  EXPECT_EQ(c->token, "t");
  EXPECT_EQ(c->token_file, "");
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->client_cert_file, "");
  EXPECT_EQ(c->client_key_file, "/d/k.pem");
}

TEST(KubeconfigTest, ProvideClusterInfoNeedsAReadableCertificateAuthority) {
  absl::StatusOr<Connection> c = ParseKubeconfig(
      KubeconfigText("    server: https://x\n    certificate-authority: /nonexistent/ca.pem\n",
                     "    exec: {command: x, apiVersion: client.authentication.k8s.io/v1, "
                     "interactiveMode: Never, provideClusterInfo: true}\n"),
      "kc", "/d");
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/ca.pem")));
}

TEST(KubeconfigTest, ResolveConnectionFollowsKubectlsOrder) {
  const TempDir temp("resolve");
  const std::string& dir = temp.path();
  Write(dir + "/one", kClusterFile);
  Write(dir + "/two", kUserFile);
  Write(dir + "/ca.pem", "CA");
  Write(dir + "/explicit", KubeconfigText("    server: https://explicit:1\n", "    token: e\n"));
  ScopedEnv no_host("KUBERNETES_SERVICE_HOST", nullptr);
  {
    // --kubeconfig: that file alone, $KUBECONFIG ignored.
    ScopedEnv kubeconfig("KUBECONFIG", (dir + "/one:" + dir + "/two").c_str());
    absl::StatusOr<Connection> c = ResolveConnection(dir + "/explicit");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->server, "https://explicit:1");
    EXPECT_THAT(ResolveConnection(dir + "/missing"),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr(dir + "/missing")));
    // $KUBECONFIG: every file, merged.
    c = ResolveConnection("");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->server, "https://prod.example:6443");
    ASSERT_TRUE(c->exec.has_value());
    EXPECT_EQ(c->exec->command, dir + "/bin/get-token");
  }
  {
    // No $KUBECONFIG: ~/.kube/config.
    ScopedEnv kubeconfig("KUBECONFIG", nullptr);
    ScopedEnv home("HOME", dir.c_str());
    ASSERT_EQ(system(("mkdir -p " + dir + "/.kube").c_str()), 0);
    Write(dir + "/.kube/config", KubeconfigText("    server: https://home:2\n", ""));
    absl::StatusOr<Connection> c = ResolveConnection("");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->server, "https://home:2");
  }
  {
    // Nothing found and no cluster around: the error says where it looked.
    ScopedEnv kubeconfig("KUBECONFIG", (dir + "/nope1:" + dir + "/nope2").c_str());
    EXPECT_THAT(ResolveConnection(""),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("no kubeconfig found at " + dir + "/nope1:" + dir + "/nope2")));
    // ... and in a pod, the service account.
    std::string sa = dir + "/sa";
    ASSERT_EQ(system(("mkdir -p " + sa + " && echo tok > " + sa + "/token").c_str()), 0);
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
    EXPECT_THAT(ResolveConnection(""),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr("/var/run/secrets/kubernetes.io")));
  }
}

}  // namespace
}  // namespace fitledger::kube
