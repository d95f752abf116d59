// libFuzzer target: the kubeconfig loader (server/kube/connection.h ParseKubeconfig) on
// arbitrary YAML. Relative paths resolve under a directory that does not exist, so nothing is
// read from disk.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/kube/connection.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)fitledger::kube::ParseKubeconfig(text, "fuzz.kubeconfig", "/nonexistent-fitledger-fuzz");
  return 0;
}
