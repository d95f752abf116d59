// Decoding Kubernetes' protobuf encoding of pods, nodes and watch events
// (server/kube/protobuf_objects.h, DecodeProtobufWatchEvent): against bytes Kubernetes' own
// serializer wrote (tests/data/k8s-api, decoded also as JSON by objects.h and compared field by
// field), against messages built here for the cases those bytes do not hold, and against
// malformed input.
#include "server/kube/protobuf_objects.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "server/kube/objects.h"
#include "server/kube/watcher.h"

namespace fitledger::kube {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& name) {
  std::ifstream in(absl::StrCat(FITLEDGER_SOURCE_DIR, "/tests/data/k8s-api/", name),
                   std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Builds a protobuf message field by field (the test's own encoder, on libprotobuf's
// CodedOutputStream). Copyable: a value of bytes.
class Msg {
 public:
  Msg& Str(int field, absl::string_view value) {
    return Write([&](google::protobuf::io::CodedOutputStream& out) {
      out.WriteTag(static_cast<uint32_t>(field << 3 | 2));
      out.WriteVarint32(static_cast<uint32_t>(value.size()));
      out.WriteRaw(value.data(), static_cast<int>(value.size()));
    });
  }
  Msg& Sub(int field, const Msg& message) { return Str(field, message.bytes()); }
  Msg& Int(int field, uint64_t value) {
    return Write([&](google::protobuf::io::CodedOutputStream& out) {
      out.WriteTag(static_cast<uint32_t>(field << 3));
      out.WriteVarint64(value);
    });
  }
  Msg& Raw(absl::string_view bytes) {
    data_.append(bytes.data(), bytes.size());
    return *this;
  }
  const std::string& bytes() const { return data_; }

 private:
  template <typename Fn>
  Msg& Write(Fn&& fn) {
    google::protobuf::io::StringOutputStream stream(&data_);
    google::protobuf::io::CodedOutputStream out(&stream);
    fn(out);
    return *this;  // `out` trims the string to what was written as it goes
  }
  std::string data_;
};

// "k8s\0" + runtime.Unknown{typeMeta{apiVersion, kind}, raw}.
std::string Envelope(absl::string_view kind, const Msg& object) {
  return absl::StrCat(kProtobufMagic,
                      Msg().Sub(1, Msg().Str(1, "v1").Str(2, kind)).Sub(2, object).bytes());
}

// A map<string, Quantity> entry.
Msg QuantityEntry(absl::string_view name, absl::string_view value) {
  return Msg().Str(1, name).Sub(2, Msg().Str(1, value));
}

// One watch frame's bytes: WatchEvent{type, RawExtension{raw}}.
std::string Frame(absl::string_view type, absl::string_view raw) {
  return Msg().Str(1, type).Sub(2, Msg().Str(1, raw)).bytes();
}

Quantity Q(absl::string_view text) { return *Quantity::Parse(text); }

void ExpectSameQuantities(const QuantityList& a, const QuantityList& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first) << what;
    EXPECT_TRUE(a[i].second == b[i].second) << what << " " << a[i].first;
  }
}

void ExpectSameContainers(const std::vector<Container>& a, const std::vector<Container>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].restartable, b[i].restartable);
    ExpectSameQuantities(a[i].requests, b[i].requests, a[i].name + " requests");
    ExpectSameQuantities(a[i].limits, b[i].limits, a[i].name + " limits");
  }
}

void ExpectSameStatuses(const std::vector<ContainerStatus>& a,
                        const std::vector<ContainerStatus>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].has_resources, b[i].has_resources);
    ExpectSameQuantities(a[i].allocated_resources, b[i].allocated_resources, "allocated");
    ExpectSameQuantities(a[i].status_requests, b[i].status_requests, "status requests");
  }
}

void ExpectSamePod(const Pod& a, const Pod& b) {
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.namespace_name, b.namespace_name);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.node_name, b.node_name);
  EXPECT_EQ(a.scheduler_name, b.scheduler_name);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.status_reason, b.status_reason);
  EXPECT_EQ(a.status_message, b.status_message);
  EXPECT_EQ(a.deleting, b.deleting);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.resize, b.resize);
  EXPECT_EQ(a.resize_pending_reason, b.resize_pending_reason);
  ExpectSameContainers(a.containers, b.containers);
  ExpectSameContainers(a.init_containers, b.init_containers);
  ExpectSameQuantities(a.overhead, b.overhead, "overhead");
  ASSERT_EQ(a.pod_requests.has_value(), b.pod_requests.has_value());
  if (a.pod_requests) ExpectSameQuantities(*a.pod_requests, *b.pod_requests, "pod requests");
  ASSERT_EQ(a.pod_limits.has_value(), b.pod_limits.has_value());
  if (a.pod_limits) ExpectSameQuantities(*a.pod_limits, *b.pod_limits, "pod limits");
  ExpectSameStatuses(a.container_statuses, b.container_statuses);
  ExpectSameStatuses(a.init_container_statuses, b.init_container_statuses);
  EXPECT_EQ(a.has_status_resources, b.has_status_resources);
  ExpectSameQuantities(a.status_pod_requests, b.status_pod_requests, "status pod requests");
  ExpectSameQuantities(a.status_allocated_resources, b.status_allocated_resources,
                       "status allocated resources");
}

TEST(ProtobufObjectsTest, KubernetesOwnPodEncodingsDecodeAlike) {
  const std::string json = ReadFile("core.v1.Pod.json");
  const std::string pb = ReadFile("core.v1.Pod.pb");
  ASSERT_FALSE(json.empty());
  ASSERT_FALSE(pb.empty());
  absl::StatusOr<Pod> from_json = ParsePod(json);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  std::string rv;
  absl::StatusOr<Pod> from_pb = DecodePodProtobuf(pb, &rv);
  ASSERT_TRUE(from_pb.ok()) << from_pb.status();
  EXPECT_EQ(rv, "resourceVersionValue");
  // Not vacuous: the upstream object fills these in.
  EXPECT_EQ(from_pb->name, "nameValue");
  EXPECT_EQ(from_pb->node_name, "nodeNameValue");
  EXPECT_EQ(from_pb->priority, 25);
  EXPECT_TRUE(from_pb->deleting);
  EXPECT_FALSE(from_pb->containers.empty());
  EXPECT_FALSE(from_pb->init_containers.empty());
  EXPECT_FALSE(from_pb->container_statuses.empty());
  EXPECT_TRUE(from_pb->pod_requests.has_value());
  EXPECT_TRUE(from_pb->has_status_resources);
  EXPECT_FALSE(from_pb->status_pod_requests.empty());
  EXPECT_FALSE(from_pb->status_allocated_resources.empty());
  ExpectSamePod(*from_pb, *from_json);
  // The requests the ledger derives are the same too.
  absl::StatusOr<PodRecord> a = ToPodRecord(*from_pb), b = ToPodRecord(*from_json);
  ASSERT_EQ(a.ok(), b.ok());
}

TEST(ProtobufObjectsTest, KubernetesOwnNodeEncodingsDecodeAlike) {
  absl::StatusOr<DecodedNode> from_json = ParseNode(ReadFile("core.v1.Node.json"));
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  absl::StatusOr<DecodedNode> from_pb = DecodeNodeProtobuf(ReadFile("core.v1.Node.pb"));
  ASSERT_TRUE(from_pb.ok()) << from_pb.status();
  EXPECT_EQ(from_pb->node.name, "nameValue");
  EXPECT_EQ(from_pb->node.name, from_json->node.name);
  EXPECT_EQ(from_pb->resource_version, from_json->resource_version);
  EXPECT_EQ(from_pb->node.allocatable, from_json->node.allocatable);
}

// A pod with what the upstream object leaves at values of no consequence: real quantities, a
// sidecar, status resources, pod-level resources in the spec and the status, a negative
// priority, a resize condition.
Msg RichPod() {
  Msg container = Msg()
                      .Str(1, "app")
                      .Str(2, "registry.example/app:1")  // image: skipped
                      .Sub(8, Msg()
                                  .Sub(2, QuantityEntry("cpu", "250m"))
                                  .Sub(2, QuantityEntry("memory", "256Mi"))
                                  .Sub(1, QuantityEntry("cpu", "1")));
  Msg sidecar =
      Msg().Str(1, "proxy").Str(24, "Always").Sub(8, Msg().Sub(2, QuantityEntry("cpu", "100m")));
  Msg status = Msg()
                   .Str(1, "app")
                   .Sub(10, QuantityEntry("cpu", "300m"))
                   .Sub(11, Msg().Sub(2, QuantityEntry("cpu", "300m")));
  return Msg()
      .Sub(1, Msg()
                  .Str(1, "web-1")
                  .Str(3, "shop")
                  .Str(5, "uid-1")
                  .Str(6, "42")
                  .Sub(12, Msg().Str(1, "note").Str(2, "x")))
      .Sub(2, Msg()
                  .Sub(20, sidecar)
                  .Sub(2, container)
                  .Str(10, "node-a")
                  .Str(19, "fitledger")
                  .Int(25, static_cast<uint64_t>(int64_t{-5}))
                  .Sub(32, QuantityEntry("cpu", "10m"))
                  .Sub(40, Msg().Sub(2, QuantityEntry("cpu", "900m"))))
      .Sub(3, Msg()
                  .Str(1, "Running")
                  .Sub(2, Msg().Str(1, "Ready").Str(5, "x"))
                  .Sub(2, Msg().Str(1, "PodResizePending").Str(5, "Infeasible"))
                  .Sub(2, Msg().Str(1, "PodResizePending").Str(5, "Deferred"))
                  .Sub(8, status)
                  .Sub(19, QuantityEntry("cpu", "700m"))
                  .Sub(20, Msg().Sub(2, QuantityEntry("cpu", "600m"))));
}

TEST(ProtobufObjectsTest, DecodesWhatTheLedgerReads) {
  std::string rv;
  absl::StatusOr<Pod> pod = DecodePodProtobuf(Envelope("Pod", RichPod()), &rv);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(rv, "42");
  EXPECT_EQ(pod->name, "web-1");
  EXPECT_EQ(pod->namespace_name, "shop");
  EXPECT_EQ(pod->uid, "uid-1");
  EXPECT_EQ(pod->node_name, "node-a");
  EXPECT_EQ(pod->scheduler_name, "fitledger");
  EXPECT_EQ(pod->priority, -5);
  EXPECT_FALSE(pod->deleting);
  EXPECT_EQ(pod->phase, "Running");
  EXPECT_EQ(pod->resize_pending_reason, "Infeasible");  // the first PodResizePending
  ASSERT_EQ(pod->containers.size(), 1u);
  EXPECT_THAT(pod->containers[0].requests,
              ::testing::ElementsAre(::testing::Pair("cpu", Q("250m")),
                                     ::testing::Pair("memory", Q("256Mi"))));
  EXPECT_THAT(pod->containers[0].limits, ::testing::ElementsAre(::testing::Pair("cpu", Q("1"))));
  ASSERT_EQ(pod->init_containers.size(), 1u);
  EXPECT_TRUE(pod->init_containers[0].restartable);
  ASSERT_EQ(pod->container_statuses.size(), 1u);
  EXPECT_TRUE(pod->container_statuses[0].has_resources);
  EXPECT_THAT(pod->overhead, ::testing::ElementsAre(::testing::Pair("cpu", Q("10m"))));
  EXPECT_TRUE(pod->has_status_resources);
  EXPECT_THAT(pod->status_pod_requests, ::testing::ElementsAre(::testing::Pair("cpu", Q("600m"))));
  EXPECT_THAT(pod->status_allocated_resources,
              ::testing::ElementsAre(::testing::Pair("cpu", Q("700m"))));
  absl::StatusOr<PodRecord> record = ToPodRecord(*pod);
  ASSERT_TRUE(record.ok()) << record.status();
  // The resize is infeasible: the pod-level status (allocated 700m), not the spec's 900m, plus
  // the overhead.
  EXPECT_EQ(record->requests.milli_cpu, 710);
  // The ledger's sum is the same whichever encoding the pod came in (objects.h, JSON).
  absl::StatusOr<Pod> json = ParsePod(R"({"metadata":{"uid":"uid-1"},"spec":{
      "initContainers":[{"name":"proxy","restartPolicy":"Always",
                         "resources":{"requests":{"cpu":"100m"}}}],
      "containers":[{"name":"app","resources":{"requests":{"cpu":"250m","memory":"256Mi"},
                                               "limits":{"cpu":"1"}}}],
      "overhead":{"cpu":"10m"},"resources":{"requests":{"cpu":"900m"}}},
      "status":{"conditions":[{"type":"Ready","reason":"x"},
                              {"type":"PodResizePending","reason":"Infeasible"},
                              {"type":"PodResizePending","reason":"Deferred"}],
                "containerStatuses":[{"name":"app","allocatedResources":{"cpu":"300m"},
                                      "resources":{"requests":{"cpu":"300m"}}}],
                "allocatedResources":{"cpu":"700m"},"resources":{"requests":{"cpu":"600m"}}}})");
  ASSERT_TRUE(json.ok()) << json.status();
  absl::StatusOr<PodRecord> json_record = ToPodRecord(*json);
  ASSERT_TRUE(json_record.ok());
  EXPECT_EQ(record->requests, json_record->requests);
}

TEST(ProtobufObjectsTest, DeletionTimestampAndMissingValues) {
  // A deletionTimestamp with seconds is a pod being deleted; a present zero Time is not (JSON
  // writes the zero Time as null, which objects.h reads as absent).
  Msg deleting = Msg().Sub(1, Msg().Str(5, "u").Sub(9, Msg().Int(1, 1767225600)));
  EXPECT_TRUE(DecodePodProtobuf(Envelope("Pod", deleting), nullptr)->deleting);
  Msg zero = Msg().Sub(1, Msg().Str(5, "u").Sub(9, Msg()));
  EXPECT_FALSE(DecodePodProtobuf(Envelope("Pod", zero), nullptr)->deleting);
  // A quantity entry without a value is Go's zero Quantity.
  Msg no_value =
      Msg().Sub(2, Msg().Sub(2, Msg().Str(1, "c").Sub(8, Msg().Sub(2, Msg().Str(1, "cpu")))));
  absl::StatusOr<Pod> pod = DecodePodProtobuf(Envelope("Pod", no_value), nullptr);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_THAT(pod->containers[0].requests, ::testing::ElementsAre(::testing::Pair("cpu", Q("0"))));
  // A node without allocatable counts its capacity, as objects.h does for JSON.
  Msg node =
      Msg()
          .Sub(1, Msg().Str(1, "n1").Str(6, "7"))
          .Sub(3, Msg().Sub(1, QuantityEntry("cpu", "4")).Sub(1, QuantityEntry("pods", "110")));
  absl::StatusOr<DecodedNode> decoded = DecodeNodeProtobuf(Envelope("Node", node));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->node.name, "n1");
  EXPECT_EQ(decoded->resource_version, "7");
  EXPECT_EQ(decoded->node.allocatable.milli_cpu, 4000);
  node.Sub(3, Msg().Sub(2, QuantityEntry("cpu", "3500m")));
  decoded = DecodeNodeProtobuf(Envelope("Node", node));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->node.allocatable.milli_cpu, 3500);
}

TEST(ProtobufObjectsTest, BadInputIsInvalidArgumentNamingTheField) {
  auto error = [](const std::string& bytes) {
    absl::StatusOr<Pod> pod = DecodePodProtobuf(bytes, nullptr);
    EXPECT_TRUE(absl::IsInvalidArgument(pod.status())) << pod.status();
    return std::string(pod.status().message());
  };
  EXPECT_THAT(error("{\"kind\":\"Pod\"}"), HasSubstr("no \"k8s\\0\" prefix"));
  EXPECT_THAT(error(Envelope("Node", Msg())), HasSubstr("expected Pod, got Node"));
  EXPECT_THAT(error(absl::StrCat(kProtobufMagic, Msg().Sub(1, Msg().Str(2, "Pod")).bytes())),
              HasSubstr("envelope.raw: missing"));
  EXPECT_THAT(error(absl::StrCat(kProtobufMagic, Msg().Sub(2, Msg()).Str(3, "gzip").bytes())),
              HasSubstr("unsupported content encoding"));
  // A string field sent as a varint.
  EXPECT_THAT(error(Envelope("Pod", Msg().Sub(1, Msg().Int(1, 7)))),
              HasSubstr("field metadata.name: malformed protobuf"));
  // A malformed quantity, named by its path.
  Msg bad = Msg().Sub(
      2, Msg().Sub(2, Msg().Str(1, "c").Sub(8, Msg().Sub(2, QuantityEntry("cpu", "1.5.5")))));
  EXPECT_THAT(error(Envelope("Pod", bad)), HasSubstr("spec.containers[0].resources.requests.cpu"));
  // A length running past the end, a group, field number 0.
  EXPECT_THAT(error(Envelope("Pod", Msg().Raw("\x0a\x05"
                                              "ab"))),
              HasSubstr("past the message"));
  EXPECT_THAT(error(Envelope("Pod", Msg().Raw("\x0b"))), HasSubstr("wire type 3"));
  EXPECT_THAT(error(Envelope("Pod", Msg().Raw("\x02\x00"))), HasSubstr("bad field tag"));
}

TEST(ProtobufObjectsTest, EveryTruncationOfKubernetesOwnPodFailsCleanly) {
  // Cut anywhere, Kubernetes' own bytes either decode (a cut between top-level fields is a
  // shorter pod) or give InvalidArgument; never anything else (AddressSanitizer watches reads).
  const std::string pb = ReadFile("core.v1.Pod.pb");
  ASSERT_GT(pb.size(), 1000u);
  size_t errors = 0;
  for (size_t n = 0; n < pb.size(); ++n) {
    const std::string cut = pb.substr(0, n);
    absl::StatusOr<Pod> pod = DecodePodProtobuf(cut, nullptr);
    if (!pod.ok()) {
      ++errors;
      EXPECT_TRUE(absl::IsInvalidArgument(pod.status())) << n << ": " << pod.status();
    }
    for (ObjectKind kind : {ObjectKind::kPod, ObjectKind::kNode, ObjectKind::kLease}) {
      absl::StatusOr<WatchEvent> event = DecodeProtobufWatchEvent(kind, Frame("ADDED", cut));
      EXPECT_TRUE(event.ok() || absl::IsInvalidArgument(event.status()) ||
                  absl::IsDataLoss(event.status()))
          << n << ": " << event.status();
    }
  }
  EXPECT_GT(errors, pb.size() / 2);
}

TEST(ProtobufWatchEventTest, EventsAsTheApiServerFramesThem) {
  const std::string pod = Envelope("Pod", RichPod());
  std::string rv;
  absl::StatusOr<WatchEvent> added =
      DecodeProtobufWatchEvent(ObjectKind::kPod, Frame("ADDED", pod), &rv);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->type, WatchEvent::Type::kAdded);
  EXPECT_EQ(added->resource_version, "42");
  ASSERT_TRUE(added->pod.has_value());
  EXPECT_EQ(added->pod->uid, "uid-1");

  absl::StatusOr<WatchEvent> modified =
      DecodeProtobufWatchEvent(ObjectKind::kPod, Frame("MODIFIED", ReadFile("core.v1.Pod.pb")));
  ASSERT_TRUE(modified.ok()) << modified.status();
  EXPECT_EQ(modified->type, WatchEvent::Type::kModified);
  EXPECT_EQ(modified->pod->name, "nameValue");

  absl::StatusOr<WatchEvent> node =
      DecodeProtobufWatchEvent(ObjectKind::kNode, Frame("DELETED", ReadFile("core.v1.Node.pb")));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->type, WatchEvent::Type::kDeleted);
  ASSERT_TRUE(node->node.has_value());
  EXPECT_EQ(node->node->name, "nameValue");

  // The WatchList's end: a Pod carrying only metadata.resourceVersion and the annotation.
  Msg bookmark = Msg().Sub(
      1, Msg().Str(6, "1234").Sub(12, Msg().Str(1, "k8s.io/initial-events-end").Str(2, "true")));
  absl::StatusOr<WatchEvent> end =
      DecodeProtobufWatchEvent(ObjectKind::kPod, Frame("BOOKMARK", Envelope("Pod", bookmark)));
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->type, WatchEvent::Type::kBookmark);
  EXPECT_EQ(end->resource_version, "1234");
  EXPECT_TRUE(end->initial_events_end);
  absl::StatusOr<WatchEvent> plain = DecodeProtobufWatchEvent(
      ObjectKind::kPod, Frame("BOOKMARK", Envelope("Pod", Msg().Sub(1, Msg().Str(6, "1300")))));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->resource_version, "1300");
  EXPECT_FALSE(plain->initial_events_end);

  // ERROR: a meta/v1 Status (3 message, 6 code).
  Msg status = Msg()
                   .Str(2, "Failure")
                   .Str(3, "too old resource version: 1 (5)")
                   .Str(4, "Expired")
                   .Int(6, 410);
  absl::StatusOr<WatchEvent> error =
      DecodeProtobufWatchEvent(ObjectKind::kNode, Frame("ERROR", Envelope("Status", status)));
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_EQ(error->type, WatchEvent::Type::kError);
  EXPECT_EQ(error->error_code, 410);
  EXPECT_EQ(error->error_message, "too old resource version: 1 (5)");
}

TEST(ProtobufObjectsTest, AnErrorBodyInProtobufReadsAsItsStatus) {
  // kube-apiserver refuses a request in the encoding it negotiated: a watch that asked for
  // protobuf gets a protobuf Status (responsewriters/writers.go ErrorNegotiated).
  Msg status = Msg()
                   .Str(2, "Failure")
                   .Str(3, "sendInitialEvents is forbidden for watch")
                   .Str(4, "Invalid")
                   .Int(6, 422);
  EXPECT_EQ(ErrorBodyText(Envelope("Status", status)),
            "Status 422: sendInitialEvents is forbidden for watch");
  // JSON (or any other body) as it is; protobuf that is not a Status (or not readable), said so.
  EXPECT_EQ(ErrorBodyText(R"({"kind":"Status","code":403})"), R"({"kind":"Status","code":403})");
  EXPECT_EQ(ErrorBodyText(Envelope("Pod", Msg())), "(a protobuf body that is not a Status)");
  EXPECT_EQ(ErrorBodyText(std::string("k8s\0\xff", 5)), "(a protobuf body that is not a Status)");
}

TEST(ProtobufWatchEventTest, DamageAndUndecodableObjects) {
  // Not a WatchEvent at all: DataLoss (the stream resumes from the last good version).
  EXPECT_TRUE(absl::IsDataLoss(DecodeProtobufWatchEvent(ObjectKind::kPod,
                                                        "\x0a\x7f"
                                                        "ADD")
                                   .status()));
  EXPECT_TRUE(absl::IsDataLoss(
      DecodeProtobufWatchEvent(ObjectKind::kPod, Frame("RENAMED", Envelope("Pod", RichPod())))
          .status()));
  EXPECT_TRUE(
      absl::IsDataLoss(DecodeProtobufWatchEvent(ObjectKind::kPod, Frame("ADDED", "")).status()));
  // A well-framed event whose object cannot be decoded: InvalidArgument with its version, so
  // the event can be skipped; a DELETED one still names what went.
  Msg bad = Msg()
                .Sub(1, Msg().Str(1, "web-1").Str(5, "uid-9").Str(6, "77"))
                .Sub(2, Msg().Sub(32, QuantityEntry("cpu", "lots")));
  std::string rv;
  absl::StatusOr<WatchEvent> added =
      DecodeProtobufWatchEvent(ObjectKind::kPod, Frame("ADDED", Envelope("Pod", bad)), &rv);
  EXPECT_TRUE(absl::IsInvalidArgument(added.status())) << added.status();
  EXPECT_THAT(added.status().message(), HasSubstr("spec.overhead.cpu"));
  EXPECT_EQ(rv, "77");
  absl::StatusOr<WatchEvent> deleted =
      DecodeProtobufWatchEvent(ObjectKind::kPod, Frame("DELETED", Envelope("Pod", bad)));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->deleted_key, "uid-9");
  EXPECT_EQ(deleted->resource_version, "77");
  // A pods watch that gets a Node: the object cannot be a pod.
  EXPECT_TRUE(absl::IsInvalidArgument(
      DecodeProtobufWatchEvent(ObjectKind::kPod, Frame("ADDED", ReadFile("core.v1.Node.pb")))
          .status()));
  // Leases are watched as JSON only: a protobuf one is refused, by name.
  absl::StatusOr<WatchEvent> lease =
      DecodeProtobufWatchEvent(ObjectKind::kLease, Frame("ADDED", Envelope("Pod", RichPod())));
  EXPECT_TRUE(absl::IsInvalidArgument(lease.status())) << lease.status();
  EXPECT_THAT(lease.status().message(), HasSubstr("watch leases"));
}

}  // namespace
}  // namespace fitledger::kube
