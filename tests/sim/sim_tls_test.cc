// HTTPS with client-certificate verification and a bearer token, checked with kubectl through
// the kubeconfig the sim writes. Certificates come from the openssl command line.
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sim/sim_process.h"

namespace fitledger::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// Runs openssl in `dir`; fails the test on error.
void OpenSsl(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  auto r = RunCommand(args, {}, absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;
}

TEST(SimTlsTest, ServesHttpsAndRequiresClientCertificatesAndToken) {
  struct stat st;
  ASSERT_EQ(stat("/usr/bin/openssl", &st), 0) << "openssl is required";
  ASSERT_EQ(stat("/usr/bin/kubectl", &st), 0) << "kubectl is required";
  const TempDir dir("tls");
  const std::string& d = dir.path();
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                       "-nodes"};
  auto req = [&](std::vector<std::string> head) {
    head.insert(head.end(), ec.begin(), ec.end());
    return head;
  };
  OpenSsl(d, req({"req", "-x509", "-days", "2", "-subj", "/CN=fitledger-sim-ca", "-keyout",
                  d + "/ca.key", "-out", d + "/ca.pem"}));
  ASSERT_TRUE(WriteFile(d + "/server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n").ok());
  ASSERT_TRUE(WriteFile(d + "/client.ext", "extendedKeyUsage=clientAuth\n").ok());
  for (const std::string name : {"server", "client"}) {
    OpenSsl(d, req({"req", "-subj", "/CN=" + name, "-keyout", d + "/" + name + ".key", "-out",
                    d + "/" + name + ".csr"}));
    OpenSsl(d, {"x509", "-req", "-days", "2", "-in", d + "/" + name + ".csr", "-CA", d + "/ca.pem",
                "-CAkey", d + "/ca.key", "-CAcreateserial", "-out", d + "/" + name + ".pem",
                "-extfile", d + "/" + name + ".ext"});
  }
  auto sim = SimProcess::Start(absl::StrCat(
      "nodes: [{name: secure-1, allocatable: {cpu: 1}}]\n"
      "token: s3cret\n"
      "tls: {certFile: ",
      d, "/server.pem, keyFile: ", d, "/server.key, clientCAFile: ", d,
      "/ca.pem}\n"
      "kubeconfigOut: {caFile: ",
      d, "/ca.pem, clientCertFile: ", d, "/client.pem, clientKeyFile: ", d, "/client.key}\n"));
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_THAT((*sim)->output(), HasSubstr("listening on https://127.0.0.1:"));
  const std::string kubeconfig = ReadFileOrEmpty((*sim)->kubeconfig_path());
  EXPECT_THAT(kubeconfig, HasSubstr("certificate-authority: \"" + d + "/ca.pem\""));

  auto kubectl =
      RunCommand({"/usr/bin/kubectl", "get", "nodes"},
                 {"HOME=" + d, "KUBECONFIG=" + (*sim)->kubeconfig_path()}, absl::Seconds(30));
  ASSERT_TRUE(kubectl.ok()) << kubectl.status();
  EXPECT_EQ(kubectl->exit_code, 0) << kubectl->output;
  EXPECT_THAT(kubectl->output, ContainsRegex("secure-1 +Ready"));

  // Without a client certificate the TLS handshake fails.
  httplib::SSLClient anonymous("127.0.0.1", (*sim)->port());
  anonymous.set_ca_cert_path((d + "/ca.pem").c_str());
  anonymous.set_bearer_token_auth("s3cret");
  EXPECT_FALSE(anonymous.Get("/api/v1/nodes"));

  // With the certificate but without the token: 401.
  httplib::SSLClient no_token("127.0.0.1", (*sim)->port(), d + "/client.pem", d + "/client.key");
  no_token.set_ca_cert_path((d + "/ca.pem").c_str());
  auto res = no_token.Get("/api/v1/nodes");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
}

}  // namespace
}  // namespace fitledger::testing
