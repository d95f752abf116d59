// libFuzzer target: one line of a watch stream, as fitledger-server's watcher decodes it
// (server/kube/watcher.h DecodeWatchEvent, over simdjson and objects.h DecodePod / DecodeNode),
// for both a pods and a nodes watch; and the same bytes as a whole Pod / Node document.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/kube/objects.h"
#include "server/kube/watcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view line(reinterpret_cast<const char*>(data), size);
  (void)fitledger::kube::DecodeWatchEvent(/*nodes=*/false, line);
  (void)fitledger::kube::DecodeWatchEvent(/*nodes=*/true, line);
  absl::StatusOr<fitledger::Pod> pod = fitledger::kube::ParsePod(line);
  if (pod.ok()) (void)fitledger::kube::ToPodRecord(*pod);
  (void)fitledger::kube::ParseNode(line);
  return 0;
}
