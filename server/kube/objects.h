// Kubernetes objects as the server keeps them: a Node's record from its JSON (decoded by
// model/objects_json.h), a pod's record, a Lease's (the leader fence's), and the splitter of LIST
// bodies.
#ifndef FITLEDGER_SERVER_KUBE_OBJECTS_H_
#define FITLEDGER_SERVER_KUBE_OBJECTS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "model/objects_json.h"
#include "model/pod.h"
#include "server/ledger/ledger.h"
#include "simdjson.h"

namespace fitledger::kube {

// A Lease's spec as leader election reads it (client-go
// tools/leaderelection/resourcelock/leaselock.go, LeaseSpecToLeaderElectionRecord: an absent
// field is the zero value).
struct LeaseRecord {
  std::string namespace_name;
  std::string name;
  std::string resource_version;
  std::string holder_identity;         // "" when released (leaderelection.go release) or unset
  int64_t lease_duration_seconds = 0;  // 0: unset
  std::optional<absl::Time> acquire_time;
  std::optional<absl::Time> renew_time;
  int64_t lease_transitions = 0;
};

// Decodes a Lease object (JSON). InvalidArgument naming the field for a wrong type, or a time
// that is not RFC 3339 (MicroTime: "2024-05-01T10:00:00.123456Z"). Pure.
absl::StatusOr<LeaseRecord> ParseLease(absl::string_view json);

struct DecodedNode {
  NodeRecord node;
  std::string resource_version;
};

// Decodes a Node object: its name and allocatable (model/objects_json.h DecodeNode).
absl::StatusOr<DecodedNode> DecodeNode(simdjson::ondemand::value value);
// The record of a decoded node.
absl::StatusOr<DecodedNode> ToDecodedNode(Node node, std::string resource_version);

// Sets `node`'s allocatable from a node's ResourceList: cpu in millicores, the rest in units
// (rounded up). InvalidArgument when an amount overflows int64.
absl::Status SetNodeAllocatable(const QuantityList& list, NodeRecord* node);

// The whole-document version (copies `json` into a padded buffer).
absl::StatusOr<DecodedNode> ParseNode(absl::string_view json);

// The ledger's view of a pod already in the cluster (requests per RequestBasis::kSpecAndStatus).
absl::StatusOr<PodRecord> ToPodRecord(const Pod& pod);
// The same, taking the pod's uid and node name rather than copying them (the watch's path: a
// sync makes 150,000 records, each a uid and a node name past the short-string buffer).
absl::StatusOr<PodRecord> ToPodRecord(Pod&& pod);

// Splits a LIST response body (a JSON object with "metadata" and "items") as it arrives, in
// fragments of any size, into each item's JSON text and the metadata's, so a list of 150,000
// pods is never held whole: memory is one item at a time. Keys other than "metadata" and "items"
// are skipped; the items must be JSON objects. Thread-compatible.
class ListSplitter {
 public:
  // `on_item` gets each item's text (valid during the call); returning false stops the split.
  explicit ListSplitter(std::function<bool(absl::string_view item)> on_item);

  // Feeds the next fragment. False once the body is malformed (see Finish) or `on_item` stopped.
  bool Feed(absl::string_view fragment);
  // After the last fragment: OK if the body was one whole JSON object; InvalidArgument naming
  // what was wrong (truncated, not an object, an item that is not an object) otherwise.
  absl::Status Finish() const;
  // The text of the top-level "metadata" value (ListMeta), once Feed has passed it.
  const std::string& metadata() const { return metadata_; }

 private:
  void Fail(std::string why);

  // Constant after construction.
  const std::function<bool(absl::string_view)> on_item_;

  std::string error_;
  bool stopped_ = false;
  int depth_ = 0;  // nesting of objects and arrays; the top-level object is depth 1
  bool in_string_ = false;
  bool escaped_ = false;
  bool done_ = false;  // the top-level object closed
  // At depth 1: reading a key, and the last key read.
  bool expect_key_ = true;
  bool in_key_ = false;
  std::string key_;
  // What the current top-level value is: skipped, the metadata (captured), or the items.
  enum class Value { kNone, kSkip, kMetadata, kItems } value_ = Value::kNone;
  std::string metadata_;
  std::string item_;  // the item being captured (depth >= 3 inside "items")
  bool in_item_ = false;
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_OBJECTS_H_
