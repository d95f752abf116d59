// libFuzzer target: one line of a watch stream, as fitledger-server's watcher decodes it
// (server/kube/watcher.h DecodeWatchEvent, over simdjson and objects.h DecodePod / DecodeNode),
// for a pods, a nodes and a leases watch; and the same bytes as a whole Pod / Node document. The
// same bytes also as a frame of a protobuf watch (DecodeProtobufWatchEvent) and as an enveloped
// protobuf Pod / Node (server/kube/protobuf_objects.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "server/kube/objects.h"
#include "server/kube/protobuf_objects.h"
#include "server/kube/watcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view line(reinterpret_cast<const char*>(data), size);
  // In place (DecodePaddedWatchEvent, as the watcher decodes ApiClient::Stream's lines), with
  // bytes after the line that would complete a cut document: it must decode exactly as the copy.
  std::string padded(line);
  padded.append(R"("}}]}}}})");
  padded.append(fitledger::kube::kWatchLinePadding, '}');
  for (fitledger::kube::ObjectKind kind :
       {fitledger::kube::ObjectKind::kPod, fitledger::kube::ObjectKind::kNode,
        fitledger::kube::ObjectKind::kLease}) {
    absl::StatusOr<fitledger::kube::WatchEvent> copy =
        fitledger::kube::DecodeWatchEvent(kind, line);
    absl::StatusOr<fitledger::kube::WatchEvent> in_place =
        fitledger::kube::DecodePaddedWatchEvent(kind, absl::string_view(padded.data(), size));
    if (copy.status() != in_place.status()) __builtin_trap();
    if (copy.ok() &&
        (copy->type != in_place->type || copy->resource_version != in_place->resource_version ||
         copy->pod.has_value() != in_place->pod.has_value() ||
         (copy->pod.has_value() && copy->pod->uid != in_place->pod->uid))) {
      __builtin_trap();
    }
  }
  absl::StatusOr<fitledger::Pod> pod = fitledger::ParsePod(line);
  if (pod.ok()) (void)fitledger::kube::ToPodRecord(*pod);
  (void)fitledger::kube::ParseNode(line);
  for (fitledger::kube::ObjectKind kind :
       {fitledger::kube::ObjectKind::kPod, fitledger::kube::ObjectKind::kNode,
        fitledger::kube::ObjectKind::kLease}) {
    absl::StatusOr<fitledger::kube::WatchEvent> event =
        fitledger::kube::DecodeProtobufWatchEvent(kind, line);
    // Only the documented errors: DataLoss (not a WatchEvent), InvalidArgument (its object).
    if (!event.ok() && !absl::IsDataLoss(event.status()) &&
        !absl::IsInvalidArgument(event.status())) {
      __builtin_trap();
    }
    if (event.ok() && event->pod.has_value()) (void)fitledger::kube::ToPodRecord(*event->pod);
  }
  absl::StatusOr<fitledger::Pod> pb = fitledger::kube::DecodePodProtobuf(line, nullptr);
  if (pb.ok()) (void)fitledger::kube::ToPodRecord(*pb);
  (void)fitledger::kube::DecodeNodeProtobuf(line);
  return 0;
}
