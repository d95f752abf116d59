#include "sim/protobuf.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sim/config.h"
#include "sim/objects.h"
#include "sim/status.h"
#include "sim/store.h"

namespace fitledger::sim {
namespace {

using nlohmann::json;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string TestData(const std::string& name) {
  return ReadBytes(absl::StrCat(FITLEDGER_SOURCE_DIR, "/tests/data/k8s-api/", name));
}

// JSON with what the protobuf encoding does not keep taken out: nulls (absent fields), and empty
// arrays and maps (a repeated field or map without entries is absent).
json WithoutAbsentFields(const json& j) {
  if (j.is_object()) {
    json out = json::object();
    for (const auto& [key, value] : j.items()) {
      if (value.is_null() || (value.is_array() && value.empty())) continue;
      out[key] = WithoutAbsentFields(value);
    }
    return out;
  }
  if (j.is_array()) {
    json out = json::array();
    for (const json& e : j) out.push_back(WithoutAbsentFields(e));
    return out;
  }
  return j;
}

// Kubernetes' own encodings of one object with every field filled in (tests/data/k8s-api): the
// protobuf bytes, decoded with the schema table, give the JSON that Kubernetes wrote of the same
// object; and the JSON, encoded with the table, leaves nothing out and decodes to the same.
void ExpectUpstreamEncodingsAgree(const std::string& kind) {
  SCOPED_TRACE(kind);
  const std::string pb = TestData(absl::StrCat("core.v1.", kind, ".pb"));
  const json upstream = json::parse(TestData(absl::StrCat("core.v1.", kind, ".json")));
  ASSERT_FALSE(pb.empty());
  ASSERT_EQ(pb.substr(0, 4), std::string("k8s\0", 4));

  std::vector<std::string> unknown;
  absl::StatusOr<json> decoded = ProtobufEnvelopeToJson(pb, &unknown);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(unknown.empty()) << absl::StrJoin(unknown, ", ");
  EXPECT_EQ(*decoded, WithoutAbsentFields(upstream))
      << json::diff(WithoutAbsentFields(upstream), *decoded).dump(1);

  std::vector<std::string> omitted;
  absl::StatusOr<std::string> ours = ProtobufEnvelope(upstream, &omitted);
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_TRUE(omitted.empty()) << absl::StrJoin(omitted, ", ");
  absl::StatusOr<json> ours_decoded = ProtobufEnvelopeToJson(*ours);
  ASSERT_TRUE(ours_decoded.ok()) << ours_decoded.status();
  EXPECT_EQ(*ours_decoded, *decoded) << json::diff(*decoded, *ours_decoded).dump(1);
}

TEST(ProtobufTest, DecodesKubernetesPodBytesToKubernetesPodJson) {
  ExpectUpstreamEncodingsAgree("Pod");
}

TEST(ProtobufTest, DecodesKubernetesNodeBytesToKubernetesNodeJson) {
  ExpectUpstreamEncodingsAgree("Node");
}

TEST(ProtobufTest, EnvelopeIsMagicThenUnknownWithTypeMeta) {
  absl::StatusOr<std::string> envelope =
      ProtobufEnvelope(json{{"kind", "Pod"}, {"apiVersion", "v1"}, {"metadata", {{"name", "a"}}}});
  ASSERT_TRUE(envelope.ok()) << envelope.status();
  // k8s\0, Unknown{1: TypeMeta{1: "v1", 2: "Pod"}, 2: Pod{1: ObjectMeta{1: "a"}}}.
  EXPECT_EQ(*envelope, std::string("k8s\0"
                                   "\x0a\x09\x0a\x02v1\x12\x03Pod"
                                   "\x12\x05\x0a\x03\x0a\x01"
                                   "a",
                                   4 + 11 + 7));
}

TEST(ProtobufTest, WatchFrameIsLengthThenWatchEvent) {
  std::string out = "x";
  AppendWatchFrame("ADDED", "ENV", &out);
  // 4-byte big-endian length; WatchEvent{1: "ADDED", 2: RawExtension{1: "ENV"}}.
  EXPECT_EQ(out, std::string("x\0\0\0\x0e\x0a\x05"
                             "ADDED\x12\x05\x0a\x03"
                             "ENV",
                             1 + 4 + 14));
}

TEST(ProtobufTest, TypesMapAsKubernetesDoes) {
  json pod = {{"kind", "Pod"},
              {"apiVersion", "v1"},
              {"metadata",
               {{"name", "p"},
                {"creationTimestamp", "2024-05-06T07:08:09Z"},
                {"deletionTimestamp", nullptr},
                {"labels", {{"b", "2"}, {"a", "1"}}},
                {"managedFields", {{{"fieldsV1", {{"f:spec", json::object()}}}}}}}},
              {"spec",
               {{"priority", -3},
                {"overhead", {{"cpu", 1}, {"memory", "1Gi"}}},
                {"containers",
                 {{{"name", "c"},
                   {"ports", {{{"containerPort", 80}}}},
                   {"livenessProbe", {{"httpGet", {{"port", "http"}}}}},
                   {"readinessProbe", {{"tcpSocket", {{"port", 8080}}}}}}}}}}};
  std::vector<std::string> omitted;
  absl::StatusOr<std::string> envelope = ProtobufEnvelope(pod, &omitted);
  ASSERT_TRUE(envelope.ok()) << envelope.status();
  EXPECT_TRUE(omitted.empty()) << absl::StrJoin(omitted, ", ");
  absl::StatusOr<json> back = ProtobufEnvelopeToJson(*envelope);
  ASSERT_TRUE(back.ok()) << back.status();
  json expected = WithoutAbsentFields(pod);
  expected["spec"]["overhead"]["cpu"] = "1";  // a Quantity is a string in protobuf
  EXPECT_EQ(*back, expected) << json::diff(expected, *back).dump(1);
}

TEST(ProtobufTest, UnknownAndMistypedFieldsAreLeftOutAndCounted) {
  json node = {{"kind", "Node"},
               {"apiVersion", "v1"},
               {"metadata", {{"name", "n"}, {"fooBar", 1}, {"generation", "seven"}}},
               {"spec", {{"taints", {{{"key", "k"}, {"zap", true}}}}}}};
  std::vector<std::string> omitted;
  absl::StatusOr<std::string> envelope = ProtobufEnvelope(node, &omitted);
  ASSERT_TRUE(envelope.ok()) << envelope.status();
  EXPECT_EQ(omitted, (std::vector<std::string>{"metadata.fooBar", "metadata.generation",
                                               "spec.taints[0].zap"}));
  EXPECT_FALSE(ProtobufEnvelope(json{{"kind", "ConfigMap"}, {"apiVersion", "v1"}}).ok());
  EXPECT_FALSE(ProtobufEnvelopeFromText("{").ok());
}

TEST(ProtobufTest, FieldsGoInNumberOrderAndMapEntriesInKeyOrder) {
  // spec (2) before metadata (1), creationTimestamp (8) before name (1), labels unsorted: the
  // bytes are those of the same object with its keys sorted, as Kubernetes writes them.
  const std::string text =
      R"({"spec":{"nodeName":"n","containers":[{"name":"c","image":"i"}]},"apiVersion":"v1",)"
      R"("metadata":{"creationTimestamp":"2024-05-06T07:08:09Z","labels":{"z":"1","a":"2"},)"
      R"("name":"p"},"kind":"Pod"})";
  absl::StatusOr<std::string> unordered = ProtobufEnvelopeFromText(text);
  ASSERT_TRUE(unordered.ok()) << unordered.status();
  absl::StatusOr<std::string> ordered = ProtobufEnvelope(json::parse(text));  // keys sorted
  ASSERT_TRUE(ordered.ok()) << ordered.status();
  EXPECT_EQ(*unordered, *ordered);
  // metadata: name (1) first, then creationTimestamp (8), then labels (11) "a" before "z".
  const size_t name = unordered->find("\x0a\x01p");
  const size_t a =
      unordered->find(std::string("\x0a\x01"
                                  "a\x12\x01"
                                  "2"));
  const size_t z =
      unordered->find(std::string("\x0a\x01z\x12\x01"
                                  "1"));
  ASSERT_NE(name, std::string::npos);
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(z, std::string::npos);
  EXPECT_LT(name, a);
  EXPECT_LT(a, z);
}

TEST(ProtobufTest, FieldsV1KeepsTheTextOfTheStoredJson) {
  const std::string fields =
      R"({"f:spec":{"f:b":{},"f:a":{".":{},"x":[1,2.5,true,false,null,"s\"q\u00e9",[]]}}})";
  absl::StatusOr<std::string> envelope = ProtobufEnvelopeFromText(absl::StrCat(
      R"({"kind":"Pod","apiVersion":"v1","metadata":{"managedFields":[{"manager":"m",)",
      R"("fieldsV1": )", fields, "}]}}"));
  ASSERT_TRUE(envelope.ok()) << envelope.status();
  // Compact, in the stored order; the string re-escaped as nlohmann::json dumps it.
  EXPECT_NE(envelope->find(
                R"({"f:spec":{"f:b":{},"f:a":{".":{},"x":[1,2.5,true,false,null,"s\"qé",[]]}}})"),
            std::string::npos);
}

TEST(ProtobufTest, InlinedMessagesTakeTheirFieldsFromTheParent) {
  // Volume.volumeSource, Probe.handler and ConfigMapVolumeSource.localObjectReference are
  // inlined in JSON (Go's json:",inline") and messages of their own in protobuf.
  json pod = {
      {"kind", "Pod"},
      {"apiVersion", "v1"},
      {"spec",
       {{"volumes", {{{"name", "v"}, {"configMap", {{"name", "cm"}, {"defaultMode", 420}}}}}},
        {"containers",
         {{{"name", "c"},
           {"livenessProbe", {{"exec", {{"command", {"true"}}}}, {"periodSeconds", 10}}}}}}}}};
  std::vector<std::string> omitted;
  absl::StatusOr<std::string> envelope = ProtobufEnvelope(pod, &omitted);
  ASSERT_TRUE(envelope.ok()) << envelope.status();
  EXPECT_TRUE(omitted.empty()) << absl::StrJoin(omitted, ", ");
  // Volume {1 name "v", 2 volumeSource {19 configMap {1 localObjectReference {1 "cm"},
  // 3 defaultMode 420}}}.
  EXPECT_NE(envelope->find(std::string("\x0a\x01v\x12\x0c\x9a\x01\x09\x0a\x04\x0a\x02"
                                       "cm\x18\xa4\x03")),
            std::string::npos);
  absl::StatusOr<json> back = ProtobufEnvelopeToJson(*envelope);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, pod);
}

TEST(ProtobufTest, StringsAreUnescaped) {
  absl::StatusOr<std::string> envelope =
      ProtobufEnvelopeFromText(R"( { "kind" : "Pod" , "apiVersion":"v1", "metadata" : { "name" : )"
                               R"("a\u00e9\ud83d\ude00\n\"\\\/b" } } )");
  ASSERT_TRUE(envelope.ok()) << envelope.status();
  absl::StatusOr<json> back = ProtobufEnvelopeToJson(*envelope);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)["metadata"]["name"], "a\xc3\xa9\xf0\x9f\x98\x80\n\"\\/b");
}

TEST(ProtobufTest, MalformedJsonIsInvalidArgument) {
  for (const char* text :
       {"", "{", R"({"kind":"Pod","apiVersion":"v1")", R"({"kind":"Pod","metadata":{"name":"a"})",
        R"({"kind":"Pod","metadata":{"name":"a\q"}})", R"({"kind":"Pod",})",
        R"({"kind":"Pod","metadata":[}])", R"({"kind":"Pod"} x)", R"({"kind":"Pod","a":tru})",
        R"({"kind":"Pod","metadata":{"name":"\ud800"}})", R"([{"kind":"Pod"}])"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<std::string> envelope = ProtobufEnvelopeFromText(text);
    EXPECT_EQ(envelope.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ProtobufTest, StatusObjectsRoundTrip) {
  json status = StatusObject(410, "Expired", "too old resource version: 5 (9)");
  std::vector<std::string> omitted;
  absl::StatusOr<std::string> envelope = ProtobufEnvelope(status, &omitted);
  ASSERT_TRUE(envelope.ok()) << envelope.status();
  EXPECT_TRUE(omitted.empty()) << absl::StrJoin(omitted, ", ");
  absl::StatusOr<json> back = ProtobufEnvelopeToJson(*envelope);
  ASSERT_TRUE(back.ok()) << back.status();
  json expected = WithoutAbsentFields(status);
  expected.erase("metadata");  // an empty ListMeta
  json got = *back;
  got.erase("metadata");
  EXPECT_EQ(got, expected);
}

// Every pod and node the sim generates, basic and realistic, on every cloud's naming: the table
// knows every field, and protobuf -> JSON gives the object back.
TEST(ProtobufTest, SimObjectsRoundTripWithNothingLeftOut) {
  struct Case {
    std::string name;
    ObjectProfile objects;
    NodeNaming naming;
  };
  const std::vector<Case> cases = {
      {"basic", ObjectProfile::kBasic, NodeNaming::kPrefix},
      {"realistic-mixed", ObjectProfile::kRealistic, NodeNaming::kMixed},
      {"realistic-gke", ObjectProfile::kRealistic, NodeNaming::kGke},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GenerateSpec spec;
    spec.nodes = 30;
    spec.pods_per_node = 10;
    spec.node_naming = c.naming;
    spec.objects = c.objects;
    spec.seed = 42;
    spec.node_allocatable = {{"cpu", "7910m"},
                             {"memory", "28902052Ki"},
                             {"pods", "110"},
                             {"ephemeral-storage", "47060071478"}};
    spec.full_nodes.fraction = 0.3;
    spec.full_nodes.free = {{"cpu", "200m"}};
    ClusterStore store({});
    ASSERT_TRUE(store.Generate(spec).ok());
    int objects = 0;
    for (Kind kind : {Kind::kPod, Kind::kNode}) {
      ObjectFilter filter;
      filter.kind = kind;
      auto list = store.List(filter, 0, "");
      ASSERT_TRUE(list.ok()) << list.status();
      for (const ObjectPtr& object : list->items) {
        ++objects;
        std::vector<std::string> omitted;
        absl::StatusOr<std::string> envelope = ProtobufEnvelopeFromText(object->json, &omitted);
        ASSERT_TRUE(envelope.ok()) << envelope.status();
        ASSERT_TRUE(omitted.empty()) << object->fields.name << ": " << absl::StrJoin(omitted, ", ");
        EXPECT_EQ(object->protobuf.Get(object->json), *envelope);
        absl::StatusOr<json> back = ProtobufEnvelopeToJson(*envelope);
        ASSERT_TRUE(back.ok()) << back.status();
        const json original = WithoutAbsentFields(json::parse(object->json));
        ASSERT_EQ(*back, original) << json::diff(original, *back).dump(1);
      }
    }
    EXPECT_GE(objects, 30 + 300);  // and the pods that fill the full nodes
  }
}

TEST(ProtobufTest, AcceptPrefersTheHighestQualityThenTheEarlierEntry) {
  struct Case {
    std::string accept;
    bool protobuf;
  };
  const std::vector<Case> cases = {
      {"", false},
      {"application/json", false},
      {"application/vnd.kubernetes.protobuf", true},
      {"application/vnd.kubernetes.protobuf, application/json", true},  // client-go's informers
      {"application/json, application/vnd.kubernetes.protobuf", false},
      {"application/json;q=0.5, application/vnd.kubernetes.protobuf", true},
      {"application/vnd.kubernetes.protobuf;q=0.9, application/json", false},
      {"application/vnd.kubernetes.protobuf;q=0.5, application/json;q=0.5", true},  // tie: first
      {"application/vnd.kubernetes.protobuf;q=0, application/json;q=0.1", false},
      {"application/vnd.kubernetes.protobuf;q=0", false},
      {"*/*", false},
      {"application/*", false},
      {"*/*;q=0.8, application/vnd.kubernetes.protobuf", true},
      {"application/*, application/vnd.kubernetes.protobuf", false},
      {"text/html, application/vnd.kubernetes.protobuf;q=0.1", true},  // text/html: cannot
      {"application/yaml, application/vnd.kubernetes.protobuf;q=0.5", true},
      {" APPLICATION/VND.KUBERNETES.PROTOBUF ; q=1 ", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.accept);
    EXPECT_EQ(PrefersProtobuf(c.accept), c.protobuf);
  }
}

TEST(ProtobufTest, CopiedStoredObjectStartsWithAnEmptyCache) {
  StoredObject object;
  object.json = R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}})";
  const std::string first(object.protobuf.Get(object.json));
  StoredObject copy = object;
  copy.json = R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":"b"}})";
  EXPECT_EQ(object.protobuf.Get(object.json), first);
  absl::StatusOr<json> decoded = ProtobufEnvelopeToJson(copy.protobuf.Get(copy.json));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ((*decoded)["metadata"]["name"], "b");
}

}  // namespace
}  // namespace fitledger::sim
