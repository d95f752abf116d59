#include "server/kube/connection.h"

#include <cstdlib>
#include <string>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger::kube {
namespace {

using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Kubeconfig(const std::string& cluster, const std::string& user) {
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
      Kubeconfig("    server: https://10.0.0.1:6443/\n    certificate-authority-data: " + ca + "\n",
                 "    token: abc\n    client-certificate-data: " + cert +
                     "\n    client-key-data: " + key + "\n"),
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
      Kubeconfig("    server: https://h:6443\n    certificate-authority: ca.pem\n"
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
      {"kind: Config\n", "current-context: missing"},
      {"current-context: nope\ncontexts: []\n", "no entry named \"nope\""},
      {Kubeconfig("    insecure-skip-tls-verify: true\n", ""), "server: missing"},
      {Kubeconfig("    server: ftp://x\n", ""), "must start with http:// or https://"},
      {Kubeconfig("    server: https://x\n    certificate-authority-data: '%%%'\n", ""),
       "certificate-authority-data: is not valid base64"},
      {Kubeconfig("    server: https://x\n    insecure-skip-tls-verify: maybe\n", ""),
       "must be true or false"},
      {Kubeconfig("    server: https://x\n", "    client-certificate: c.pem\n"),
       "client-certificate and client-key must be given together"},
      {Kubeconfig("    server: https://x\n", "    exec: {command: aws}\n"),
       "exec and auth-provider credentials are not supported"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    absl::StatusOr<Connection> conn = ParseKubeconfig(c.yaml, "/path/kc.yaml", "/path");
    EXPECT_THAT(conn, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("/path/kc.yaml")));
    EXPECT_THAT(conn.status().message(), HasSubstr(c.want));
  }
}

TEST(ConnectionTest, SecretsNeverAppearInErrors) {
  absl::StatusOr<Connection> c = ParseKubeconfig(
      Kubeconfig("    server: https://x\n", "    token: sup3rs3cret\n    client-certificate: c\n"),
      "kc", "");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), Not(HasSubstr("sup3rs3cret")));
}

TEST(ConnectionTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadKubeconfig("/nonexistent/kubeconfig"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/kubeconfig")));
}

TEST(ConnectionTest, InClusterUsesTheServiceAccountAndRereadsTheToken) {
  std::string dir = ::testing::TempDir() + "/sa";
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

}  // namespace
}  // namespace fitledger::kube
