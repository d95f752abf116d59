// libFuzzer target: the kubeconfig loader (server/kube/connection.h) and the exec plugin's
// output decoder (server/kube/exec_credential.h) on arbitrary bytes. The input is split at its
// first NUL into two files, each parsed (ParseKubeconfigFile), merged as $KUBECONFIG's files are
// (MergeKubeconfigs) and resolved to a connection (ConnectionFromKubeconfig); the whole input is
// also decoded as an ExecCredential. Relative paths resolve under a directory that does not
// exist, so nothing is read from disk.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/kube/connection.h"
#include "server/kube/exec_credential.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string dir = "/nonexistent-fitledger-fuzz";
  (void)fitledger::kube::ParseKubeconfig(text, "fuzz.kubeconfig", dir);
  size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    auto first = fitledger::kube::ParseKubeconfigFile(text.substr(0, nul), "first", dir + "/a");
    auto second = fitledger::kube::ParseKubeconfigFile(text.substr(nul + 1), "second", dir + "/b");
    if (first.ok() && second.ok()) {
      (void)fitledger::kube::ConnectionFromKubeconfig(
          fitledger::kube::MergeKubeconfigs({*first, *second}));
    }
  }
  (void)fitledger::kube::ParseExecCredential(text, "client.authentication.k8s.io/v1");
  return 0;
}
