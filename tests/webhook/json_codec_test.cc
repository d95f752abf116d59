// The simdjson decoder against protobuf's own JSON parser (and the gRPC edge's conversion to the
// model) on realistic kube-scheduler bodies, the encoders' exact output, and the decoder's errors.
#include "webhook/json_codec.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/json.h"
#include "fitledger/v1/extender.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/service/convert.h"
#include "simdjson.h"
#include "tests/common/status_matchers.h"

namespace fitledger::webhook {
namespace {

using ::fitledger::testing::IsOk;
using ::fitledger::testing::StatusIs;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

std::string ReadFixture(const std::string& name) {
  std::ifstream in(absl::StrCat(FITLEDGER_WEBHOOK_TESTDATA, "/", name));
  EXPECT_TRUE(in.good()) << name;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

template <typename M>
M ProtobufParse(const std::string& json) {
  M message;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(json, &message, options);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return message;
}

// `pod` with every ResourceList sorted by name (the proto path sorts, JSON keeps the document's
// order), and without what the proto does not carry (status.resize and the resize condition).
Pod Normalized(Pod pod) {
  const auto sort = [](QuantityList& list) {
    std::sort(list.begin(), list.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  };
  for (auto* containers : {&pod.containers, &pod.init_containers}) {
    for (Container& c : *containers) {
      sort(c.requests);
      sort(c.limits);
    }
  }
  for (auto* statuses : {&pod.container_statuses, &pod.init_container_statuses}) {
    for (ContainerStatus& c : *statuses) {
      sort(c.allocated_resources);
      sort(c.status_requests);
    }
  }
  sort(pod.overhead);
  if (pod.pod_requests) sort(*pod.pod_requests);
  if (pod.pod_limits) sort(*pod.pod_limits);
  pod.resize.clear();
  pod.resize_pending_reason.clear();
  return pod;
}

// What protobuf's JSON parser and the gRPC edge's conversion make of a filter body: the pod, and
// the candidates' names (the Nodes' names when it has Nodes).
struct ProtoView {
  Pod pod;
  std::vector<std::string> names;
  bool nodes_given = false;
};

ProtoView ViaProtobuf(const std::string& json) {
  const auto args = ProtobufParse<v1::ExtenderArgs>(json);
  ProtoView out;
  absl::StatusOr<Pod> pod = PodFromProto(args.pod());
  EXPECT_THAT(pod.status(), IsOk());
  if (pod.ok()) out.pod = Normalized(*std::move(pod));
  out.nodes_given = args.has_nodes();
  if (args.has_nodes()) {
    for (const v1::Node& node : args.nodes().items()) out.names.push_back(node.metadata().name());
  } else {
    out.names.assign(args.node_names().begin(), args.node_names().end());
  }
  return out;
}

std::vector<std::string> Strings(const std::vector<absl::string_view>& views) {
  return std::vector<std::string>(views.begin(), views.end());
}

// The decoder against protobuf's own JSON parser followed by the gRPC edge's conversion to the
// model (the path fitledger-shim's requests take into the server): the same pod and names.
TEST(JsonCodecTest, ExtenderArgsMatchProtobufOnFixtures) {
  JsonDecoder decoder;
  for (const auto& [file, canonical] : std::vector<std::pair<std::string, std::string>>{
           {"filter_node_names.json", "filter_node_names.json"},
           {"filter_nodes.json", "filter_nodes.json"},
           {"prioritize.json", "prioritize.json"},
           {"pod_4k.json", "pod_4k.json"},
           {"filter_node_names_oddcase.json", "filter_node_names.json"}}) {
    SCOPED_TRACE(file);
    const std::string body = ReadFixture(file);
    Pod pod;
    std::vector<absl::string_view> names;
    ASSERT_THAT(decoder.DecodeExtenderArgs(body, &pod, &names), IsOk());
    const ProtoView theirs = ViaProtobuf(ReadFixture(canonical));
    EXPECT_TRUE(Normalized(pod) == theirs.pod);
    EXPECT_EQ(Strings(names), theirs.names);
    EXPECT_EQ(decoder.nodes_given(), theirs.nodes_given);
  }
}

TEST(JsonCodecTest, BindingArgsMatchProtobufOnFixtures) {
  JsonDecoder decoder;
  const auto theirs = ProtobufParse<v1::ExtenderBindingArgs>(ReadFixture("bind.json"));
  const BindArgs want{theirs.pod_namespace(), theirs.pod_name(), theirs.pod_uid(), theirs.node()};
  EXPECT_FALSE(want.pod_uid.empty());
  for (const char* file : {"bind.json", "bind_oddcase.json"}) {
    SCOPED_TRACE(file);
    BindArgs ours;
    ASSERT_THAT(decoder.DecodeBindingArgs(ReadFixture(file), &ours), IsOk());
    EXPECT_TRUE(ours == want);
  }
}

TEST(JsonCodecTest, PreemptionArgsMatchProtobufOnFixtures) {
  JsonDecoder decoder;
  for (const auto& [file, canonical] : std::vector<std::pair<std::string, std::string>>{
           {"preempt_victims.json", "preempt_victims.json"},
           {"preempt_meta_victims.json", "preempt_meta_victims.json"},
           {"preempt_meta_victims_oddcase.json", "preempt_meta_victims.json"}}) {
    SCOPED_TRACE(file);
    PreemptArgs ours;
    ASSERT_THAT(decoder.DecodePreemptionArgs(ReadFixture(file), &ours), IsOk());
    absl::StatusOr<PreemptArgs> theirs =
        PreemptArgsFromProto(ProtobufParse<v1::ExtenderPreemptionArgs>(ReadFixture(canonical)));
    ASSERT_THAT(theirs.status(), IsOk());
    EXPECT_FALSE(theirs->victims.empty());
    theirs->pod = Normalized(theirs->pod);
    ours.pod = Normalized(ours.pod);
    EXPECT_TRUE(ours == *theirs);
  }
}

TEST(JsonCodecTest, FixturesDecodeTheFieldsThatMatter) {
  // Guards against both paths agreeing on an empty pod.
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  ASSERT_THAT(decoder.DecodeExtenderArgs(ReadFixture("pod_4k.json"), &pod, &names), IsOk());
  EXPECT_EQ(pod.uid, "a1b2c3d4-e5f6-4789-abcd-ef0123456789");
  EXPECT_TRUE(pod.deleting);
  ASSERT_EQ(pod.init_containers.size(), 4u);
  EXPECT_TRUE(pod.init_containers[1].restartable);
  EXPECT_THAT(pod.containers[1].requests, ::testing::Contains(std::pair<std::string, Quantity>(
                                              "cpu", *Quantity::Parse("250m"))));
  EXPECT_THAT(pod.overhead, ::testing::Contains(std::pair<std::string, Quantity>(
                                "memory", *Quantity::Parse("120Mi"))));
  ASSERT_TRUE(pod.pod_requests.has_value());
  EXPECT_THAT(*pod.pod_requests,
              ::testing::Contains(std::pair<std::string, Quantity>("cpu", *Quantity::Parse("6"))));
  EXPECT_EQ(pod.priority, 2000000);
  EXPECT_THAT(pod.container_statuses[0].allocated_resources,
              ::testing::Contains(std::pair<std::string, Quantity>("cpu", *Quantity::Parse("4"))));
  EXPECT_EQ(names.size(), 8u);
  EXPECT_FALSE(decoder.nodes_given());

  ASSERT_THAT(decoder.DecodeExtenderArgs(ReadFixture("filter_nodes.json"), &pod, &names), IsOk());
  EXPECT_TRUE(decoder.nodes_given());
  EXPECT_EQ(names.size(), 3u);
}

TEST(JsonCodecTest, RawNodesAreTheExactItemText) {
  const std::string body =
      "{\"Nodes\": {\"metadata\": {}, \"items\": [ {\"metadata\":{\"name\":\"a\"}} ,\n"
      "{\"metadata\":{\"name\":\"b\"},\"x\":[1,{\"y\":\"}]\"}] }\n\t], \"z\": 1}, "
      "\"NodeNames\": null}";
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  std::vector<absl::string_view> raw;
  ASSERT_THAT(decoder.DecodeExtenderArgs(body, &pod, &names, &raw), IsOk());
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0], "{\"metadata\":{\"name\":\"a\"}}");
  EXPECT_EQ(raw[1], "{\"metadata\":{\"name\":\"b\"},\"x\":[1,{\"y\":\"}]\"}] }");
  EXPECT_THAT(names, ::testing::ElementsAre("a", "b"));
}

TEST(JsonCodecTest, RawNodesOfTheRealisticFixtureParseBackToEachItem) {
  const std::string body = ReadFixture("filter_nodes.json");
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  std::vector<absl::string_view> raw;
  ASSERT_THAT(decoder.DecodeExtenderArgs(body, &pod, &names, &raw), IsOk());
  const auto theirs = ProtobufParse<v1::ExtenderArgs>(body);
  ASSERT_EQ(raw.size(), 3u);
  ASSERT_EQ(theirs.nodes().items_size(), 3);
  EXPECT_EQ(theirs.nodes().items(2).status().allocatable().at("example.com/gpu"), "4");
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(absl::StartsWith(raw[i], "{\"metadata\":{\"name\":"));
    // A whole array element: delimited by [ or , before and , or ] after.
    const size_t at = body.find(std::string(raw[i]));
    ASSERT_NE(at, std::string::npos);
    EXPECT_TRUE(body[at - 1] == '[' || body[at - 1] == ',');
    EXPECT_TRUE(body[at + raw[i].size()] == ']' || body[at + raw[i].size()] == ',');
    EXPECT_TRUE(MessageDifferencer::Equals(ProtobufParse<v1::Node>(std::string(raw[i])),
                                           theirs.nodes().items(i)));
  }
}

// With full Nodes: the items' names, in order, and their exact text; NodeNames beside them are
// ignored wherever they stand; the items' other fields are not read (a wrong type there passes),
// their names are (a wrong type there is an error).
TEST(JsonCodecTest, NodesAsNamesReadOnlyTheNames) {
  const std::string nodes =
      "\"Nodes\": {\"metadata\": {\"resourceVersion\": \"7\"}, \"items\": ["
      "{\"metadata\":{\"labels\":5,\"name\":\"n\\u0061me-1\"},\"status\":\"x\"},"
      "{\"spec\":{}},"
      "{\"metadata\":{\"name\":\"b\"}}]}";
  for (const std::string& body : {absl::StrCat("{\"NodeNames\": [\"x\", \"y\"], ", nodes, "}"),
                                  absl::StrCat("{", nodes, ", \"NodeNames\": [\"x\", 1]}")}) {
    SCOPED_TRACE(body);
    std::string padded = body;
    padded.reserve(padded.size() + 64);
    JsonDecoder decoder;
    Pod pod;
    std::vector<absl::string_view> raw;
    std::vector<absl::string_view> names;
    ASSERT_THAT(decoder.DecodeExtenderArgs(padded, &pod, &names, &raw), IsOk());
    EXPECT_TRUE(decoder.nodes_given());
    EXPECT_THAT(names, ::testing::ElementsAre("name-1", "", "b"));
    EXPECT_FALSE(decoder.node_names_plain());
    ASSERT_EQ(raw.size(), 3u);
    EXPECT_EQ(raw[1], "{\"spec\":{}}");
  }
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  EXPECT_THAT(decoder.DecodeExtenderArgs(R"({"Nodes": {"items": [{"metadata": {"name": 3}}]}})",
                                         &pod, &names),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("Nodes.items[0].metadata.name: expected a string or null")));
  EXPECT_THAT(decoder.DecodeExtenderArgs(R"({"Nodes": {"items": [7]}})", &pod, &names),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("Nodes.items[0]: expected a node object, got number")));
  // Nodes null: the NodeNames are the candidates.
  const std::string body = R"({"Nodes": null, "NodeNames": ["a"]})";  // outlives the views
  ASSERT_THAT(decoder.DecodeExtenderArgs(body, &pod, &names), IsOk());
  EXPECT_FALSE(decoder.nodes_given());
  EXPECT_THAT(names, ::testing::ElementsAre("a"));
}

// NodeNames read in place (plain names, from a body whose capacity holds simdjson's padding, as
// the HTTP server leaves it) or by simdjson: the names simdjson's DOM parser reads, or an error
// where it finds the JSON malformed or the array not one of strings; plain names point into the
// body.
TEST(JsonCodecTest, NodeNamesAreTheNamesSimdjsonReads) {
  const std::vector<std::string> arrays = {
      R"([])",
      R"([ ])",
      R"(null)",
      R"(["a"])",
      R"(["node-1","node-2","node-3"])",
      "[ \"a\" ,\n\t\"bb\"\r\n, \"\" ]",
      R"(["a","b\u0063","\"quoted\"","back\\slash","h\u00e9","e\u0301"])",
      "[\"caf\xc3\xa9\",\"\xe4\xb8\xad\"]",
      R"(["a",1])",
      R"(["a",null])",
      R"(["a",])",
      R"(["a" "b"])",
      R"(["a",["b"]])",
      R"("a")",
      R"({"a":1})",
      "[\"tab\tinside\"]",
      R"(["x","y")",
      // Found by the fuzzer: after an escaped name, a member inside the array.
      R"(["a3","c\"d","c\"d", "",  "e":"f"])",
      R"(["a", "b":"c"])",
  };
  simdjson::dom::parser dom;
  for (const std::string& names : arrays) {
    SCOPED_TRACE(names);
    std::string body = absl::StrCat(R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":)", names,
                                    R"(,"Nodes":null})");
    // What simdjson's DOM parser reads: the strings of an array of strings, or nothing.
    std::optional<std::vector<std::string>> want;
    simdjson::dom::element root;
    if (dom.parse(body).get(root) == simdjson::SUCCESS) {
      simdjson::dom::element list = root["NodeNames"];
      if (list.is_null()) {
        want.emplace();
      } else if (list.is_array()) {
        want.emplace();
        for (simdjson::dom::element e : list.get_array()) {
          std::string_view text;
          if (e.get_string().get(text) != simdjson::SUCCESS) {
            want.reset();
            break;
          }
          want->emplace_back(text);
        }
      }
    }
    body.reserve(body.size() + 64);  // simdjson's padding in the body, as the HTTP server leaves
    JsonDecoder decoder;
    Pod pod;
    std::vector<absl::string_view> views;
    const absl::Status status = decoder.DecodeExtenderArgs(body, &pod, &views);
    if (!want.has_value()) {
      EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
      continue;
    }
    ASSERT_THAT(status, IsOk());
    EXPECT_EQ(Strings(views), *want);
    const bool plain = names.find('\\') == std::string::npos;  // read in place, into the body
    // Plain names are written back as they are: AppendJsonString would not change them.
    if (decoder.node_names_plain()) {
      for (absl::string_view name : views)
        EXPECT_EQ(JsonString(name), absl::StrCat("\"", name, "\""));
    }
    if (!plain) {
      EXPECT_FALSE(decoder.node_names_plain());
    }
    if (names == R"(["node-1","node-2","node-3"])") {
      EXPECT_TRUE(decoder.node_names_plain());
    }
    for (absl::string_view name : views) {
      if (plain && body.find(absl::StrCat("\"", name, "\"")) != std::string::npos) {
        EXPECT_TRUE(name.data() >= body.data() &&
                    name.data() + name.size() <= body.data() + body.size())
            << name << " is a plain name: a view into the body";
      }
    }
  }
}

TEST(JsonCodecTest, QuantitiesAreTrimmedAndBareNumbersAccepted) {
  // As Kubernetes' Quantity.UnmarshalJSON; protobuf would reject the number.
  const std::string body =
      R"({"Pod":{"spec":{"containers":[{"resources":{"requests":{"cpu":" 500m ","memory":1048576,)"
      R"("example.com/gpu":0.5}}}]}}})";
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  ASSERT_THAT(decoder.DecodeExtenderArgs(body, &pod, &names), IsOk());
  ASSERT_EQ(pod.containers.size(), 1u);
  const QuantityList& requests = pod.containers[0].requests;
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].second.ToString(), "500m");
  EXPECT_EQ(requests[1].second.ToString(), "1048576");
  EXPECT_EQ(requests[2].second.ToString(), "500m");
}

TEST(JsonCodecTest, NullMeansAbsent) {
  JsonDecoder decoder;
  Pod pod;
  pod.name = "from before";
  std::vector<absl::string_view> names = {"from before"};
  ASSERT_THAT(decoder.DecodeExtenderArgs(
                  R"({"Pod":{"metadata":null,"spec":{"resources":null,"containers":null}},)"
                  R"("Nodes":null,"NodeNames":null})",
                  &pod, &names),
              IsOk());
  EXPECT_TRUE(pod == Pod());
  EXPECT_FALSE(decoder.nodes_given());
  EXPECT_TRUE(names.empty());
}

TEST(JsonCodecTest, DecoderIsReusableAcrossBodies) {
  JsonDecoder decoder;
  for (int i = 0; i < 3; ++i) {
    BindArgs bind;
    ASSERT_THAT(decoder.DecodeBindingArgs(ReadFixture("bind.json"), &bind), IsOk());
    EXPECT_EQ(bind.node, "w2");
    Pod pod;
    std::vector<absl::string_view> names;
    ASSERT_THAT(decoder.DecodeExtenderArgs(ReadFixture("pod_4k.json"), &pod, &names), IsOk());
    EXPECT_EQ(names.size(), 8u);
  }
}

TEST(JsonCodecTest, BadInputNamesTheField) {
  struct Case {
    const char* name;
    std::string body;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"empty", "", "empty request body: expected a JSON object"},
      {"blank", " \n", "empty request body: expected a JSON object"},
      {"array body", "[]", "request body: expected a JSON object, got array"},
      {"node names number", R"({"NodeNames": 5})",
       "NodeNames: expected an array of strings or null, got number"},
      {"node name not string", R"({"NodeNames": ["a", 7]})",
       "NodeNames[1]: expected a string, got number"},
      {"pod array", R"({"Pod": []})", "Pod: expected an object or null, got array"},
      {"bad quantity",
       R"({"Pod":{"spec":{"containers":[{"resources":{"requests":{"cpu":"abc"}}}]}}})",
       "Pod: field spec.containers[0].resources.requests.cpu: "},
      {"quantity bool", R"({"Pod":{"spec":{"overhead":{"memory":true}}}})",
       "Pod: field spec.overhead.memory: a quantity must be a string or a number"},
      {"name number", R"({"Pod":{"metadata":{"name":1}}})", "Pod: field metadata.name: "},
      {"priority float", R"({"Pod":{"spec":{"priority":1.5}}})", "Pod: field spec.priority: "},
      {"truncated", R"({"NodeNames": ["a")", "malformed JSON"},
      {"trailing garbage", R"({"NodeNames": []} x)", "malformed JSON"},
      {"nodes items", R"({"Nodes": {"items": [1]}})",
       "Nodes.items[0]: expected a node object, got number"},
  };
  JsonDecoder decoder;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Pod pod;
    std::vector<absl::string_view> names;
    EXPECT_THAT(decoder.DecodeExtenderArgs(c.body, &pod, &names),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
  BindArgs bind;
  EXPECT_THAT(decoder.DecodeBindingArgs(R"({"PodUID": {}})", &bind),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "PodUID: expected a string or null, got object"));
  PreemptArgs preempt;
  EXPECT_THAT(
      decoder.DecodePreemptionArgs(
          R"({"NodeNameToMetaVictims": {"w1": {"NumPDBViolations": "1"}}})", &preempt),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          R"(NodeNameToMetaVictims["w1"].NumPDBViolations: expected an integer or null, got string)"));
  EXPECT_THAT(
      decoder.DecodePreemptionArgs(
          R"({"NodeNameToVictims": {"w1": {"Pods": [{"spec": {"overhead": []}}]}}})", &preempt),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(R"(NodeNameToVictims["w1"].Pods[0]: field spec.overhead)")));
  // Still usable after errors.
  Pod pod;
  std::vector<absl::string_view> names;
  EXPECT_THAT(decoder.DecodeExtenderArgs(ReadFixture("prioritize.json"), &pod, &names), IsOk());
}

// Victims by full pods (their UIDs) count only when no MetaVictims are given.
TEST(JsonCodecTest, MetaVictimsWinOverFullVictims) {
  JsonDecoder decoder;
  PreemptArgs args;
  ASSERT_THAT(decoder.DecodePreemptionArgs(
                  R"({"NodeNameToVictims": {"w1": {"Pods": [{"metadata": {"uid": "full"}}]}},)"
                  R"( "NodeNameToMetaVictims": {"w2": {"Pods": [{"UID": "meta"}],)"
                  R"( "NumPDBViolations": 2}}})",
                  &args),
              IsOk());
  ASSERT_EQ(args.victims.size(), 1u);
  EXPECT_THAT(args.victims["w2"].pod_uids, ::testing::ElementsAre("meta"));
  EXPECT_EQ(args.victims["w2"].num_pdb_violations, 2);
  ASSERT_THAT(decoder.DecodePreemptionArgs(
                  R"({"NodeNameToVictims": {"w1": {"Pods": [{"metadata": {"uid": "full"}}]},)"
                  R"( "w3": null}, "NodeNameToMetaVictims": {}})",
                  &args),
              IsOk());
  ASSERT_EQ(args.victims.size(), 2u);
  EXPECT_THAT(args.victims["w1"].pod_uids, ::testing::ElementsAre("full"));
  EXPECT_TRUE(args.victims["w3"].pod_uids.empty());
}

TEST(JsonCodecTest, EncodesFilterResultWithNames) {
  FilterResultView result;
  result.node_names = {"w1", "w\"2"};
  result.failed_nodes = {{"w4", "Insufficient memory"},
                         {"w3", "Insufficient cpu, Insufficient memory"}};
  result.failed_and_unresolvable_nodes = {{"w5", "Insufficient example.com/gpu"}};
  std::string out;
  EncodeFilterResult(result, &out);
  EXPECT_EQ(
      out,
      R"({"NodeNames":["w1","w\"2"],"FailedNodes":{"w3":"Insufficient cpu, Insufficient memory",)"
      R"("w4":"Insufficient memory"},"FailedAndUnresolvableNodes":{"w5":"Insufficient example.com/gpu"},)"
      R"("Error":""})");
  out.clear();
  EncodeFilterResult(FilterResultView(), &out);
  EXPECT_EQ(out, R"({"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""})");
}

// Names known to need no escaping are written without looking, in NodeNames and as the keys of
// both failure maps (sorted, the last of a repeated key kept): the same bytes.
TEST(JsonCodecTest, PlainNamesEncodeAsAnyNames) {
  const std::vector<std::vector<absl::string_view>> lists = {
      {}, {"a"}, {"", "node-1", "b"}, {"node-1", "node-2", "x-very-long-node-name-0123456789"}};
  for (const auto& names : lists) {
    FilterResultView view;
    view.node_names = names;
    view.failed_nodes = {{"f", "Insufficient cpu"}};
    for (absl::string_view name : names) {
      view.failed_nodes.emplace_back(name, "Insufficient memory");
      view.failed_and_unresolvable_nodes.emplace(view.failed_and_unresolvable_nodes.begin(), name,
                                                 "Insufficient \"x\"");
    }
    view.failed_nodes.emplace_back("f", "Too many pods");
    view.error = "e";
    std::string looked = "kept";
    EncodeFilterResult(view, &looked);
    std::string unlooked = "kept";
    EncodeFilterResult(view, &unlooked, /*names_plain=*/true);
    EXPECT_EQ(unlooked, looked);
  }
}

// The failure maps come out as Go writes a map: keys in bytewise order, each once, with the value
// of its last entry. Seeded keys that share long prefixes (as a cluster's node names do), end
// inside the 16 bytes compared at once or long after them (a prefix of 300 bytes, compared whole
// and scanned 16 bytes at a time by the escaper), repeat, or hold NUL and bytes of 0x80 and up;
// checked against std::map (bytewise, last insert wins). The values repeat as a call's reasons
// do, by address or as equal copies, more kinds of them than the encoder keeps escaped.
TEST(JsonCodecTest, FailureMapsComeOutSortedByKeyOnceEachLastValueKept) {
  std::mt19937 rng(24);
  const std::vector<std::string> prefixes = {"",
                                             "gke-prod-pool-1-",
                                             "gke-prod-pool-2-",
                                             "ip-10-",
                                             std::string("ip-10-\0", 7),
                                             "aks-a-12345678-vmss",
                                             "gke-a-long-cluster-name-default-pool-1a2b3c4d-",
                                             std::string(300, 'n') + "-"};
  const std::vector<std::string> reasons = {"Insufficient cpu",
                                            "Insufficient memory",
                                            "Insufficient cpu, Insufficient memory",
                                            "Too many pods",
                                            "say \"no\"\n",
                                            std::string("\0x", 2),
                                            "Insufficient example.com/gpu",
                                            ""};
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::string> keys;
    std::vector<std::string> values;
    std::vector<absl::string_view> views;
    std::vector<bool> shared;
    const size_t n = rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      if (!keys.empty() && rng() % 5 == 0) {
        keys.push_back(keys[rng() % keys.size()]);  // a repeated key
      } else {
        std::string key = prefixes[rng() % prefixes.size()];
        const bool long_key = rng() % 3 == 0;
        for (size_t len = rng() % (long_key ? 40 : 14); len > 0; --len) {
          const unsigned r = rng();
          key.push_back(r % 6 == 0 ? static_cast<char>(r >> 8 & 0xff) : "0123ab"[r % 6]);
        }
        keys.push_back(key);
      }
      // A value of its own, or one of a few reasons (more than the encoder keeps escaped at once,
      // some to escape, one empty), shared by address or an equal copy; or a view at the address
      // of a longer reason (its first 16 bytes, or none), or an empty view with no address.
      const unsigned r = rng();
      std::string value = r % 3 == 0 ? absl::StrCat("reason ", i) : reasons[r / 3 % reasons.size()];
      absl::string_view view_of;
      switch (r / 64 % 8) {
        case 0:
          view_of = absl::string_view(reasons[2]).substr(0, 16);
          break;
        case 1:
          view_of = absl::string_view(reasons[2]).substr(0, 0);
          break;
        case 2:
          view_of = absl::string_view();
          break;
        default:
          view_of = r % 3 != 0 && r / 16 % 2 == 0
                        ? absl::string_view(*std::find(reasons.begin(), reasons.end(), value))
                        : absl::string_view();
      }
      if (r / 64 % 8 < 3) value = std::string(view_of);
      values.push_back(value);
      views.push_back(view_of);
      shared.push_back(r / 64 % 8 < 3 || view_of.data() != nullptr);
    }
    FilterResultView view;
    std::map<std::string, std::string> want;
    for (size_t i = 0; i < n; ++i) {
      view.failed_nodes.emplace_back(keys[i], shared[i] ? views[i] : absl::string_view(values[i]));
      want[keys[i]] = values[i];
    }
    std::string expected = R"({"NodeNames":[],"FailedNodes":{)";
    bool first = true;
    for (const auto& [key, value] : want) {
      if (!first) expected.push_back(',');
      first = false;
      AppendJsonString(key, &expected);
      expected.push_back(':');
      AppendJsonString(value, &expected);
    }
    expected += R"(},"FailedAndUnresolvableNodes":{},"Error":""})";
    std::string out;
    EncodeFilterResult(view, &out);
    ASSERT_EQ(out, expected) << "trial " << trial;
  }
}

TEST(JsonCodecTest, EncodesFilterResultWithRawNodes) {
  FilterResultView result;
  result.failed_nodes = {{"b", "Too many pods"}};
  const std::vector<absl::string_view> nodes = {R"({"metadata":{"name":"a"}})",
                                                R"({"metadata":{"name":"c"},"x":1})"};
  std::string out;
  EncodeFilterResultWithNodes(result, nodes, &out);
  EXPECT_EQ(out, R"({"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}},)"
                 R"({"metadata":{"name":"c"},"x":1}]},"FailedNodes":{"b":"Too many pods"},)"
                 R"("FailedAndUnresolvableNodes":{},"Error":""})");
}

TEST(JsonCodecTest, EncodesHostPriorityListAsABareArray) {
  const HostPriorityView list = {{"n1", 7}, {"n2", 0}};
  std::string out;
  EncodeHostPriorityList(list, &out);
  EXPECT_EQ(out, R"([{"Host":"n1","Score":7},{"Host":"n2","Score":0}])");
  out.clear();
  EncodeHostPriorityList(HostPriorityView(), &out);
  EXPECT_EQ(out, "[]");
}

TEST(JsonCodecTest, EncodesBindingResultAndErrors) {
  std::string out;
  EncodeError("", &out);
  EXPECT_EQ(out, R"({"Error":""})");
  out.clear();
  EncodeError("bad \"x\"\n\x01 \\ é", &out);
  EXPECT_EQ(out, "{\"Error\":\"bad \\\"x\\\"\\n\\u0001 \\\\ é\"}");
}

TEST(JsonCodecTest, EncodesPreemptionResult) {
  NodeVictims result;
  result["w2"] = Victims{{"u1", "u2"}, 1};
  result["w1"];
  std::string out;
  EncodePreemptionResult(result, &out);
  EXPECT_EQ(out, R"({"NodeNameToMetaVictims":{"w1":{"Pods":[],"NumPDBViolations":0},)"
                 R"("w2":{"Pods":[{"UID":"u1"},{"UID":"u2"}],"NumPDBViolations":1}}})");
  out.clear();
  EncodePreemptionResult(NodeVictims(), &out);
  EXPECT_EQ(out, R"({"NodeNameToMetaVictims":{}})");
}

TEST(JsonCodecTest, EncodedResultsParseBackWithProtobuf) {
  FilterResultView view;
  view.node_names = {"w1"};
  view.failed_nodes = {{"w2", "Insufficient cpu"}};
  view.error = "x";
  std::string out;
  EncodeFilterResult(view, &out);
  v1::ExtenderFilterResult want;
  want.add_node_names("w1");
  (*want.mutable_failed_nodes())["w2"] = "Insufficient cpu";
  want.set_error("x");
  EXPECT_TRUE(MessageDifferencer::Equals(ProtobufParse<v1::ExtenderFilterResult>(out), want));
  NodeVictims victims;
  victims["w1"] = Victims{{"u1"}, 3};
  out.clear();
  EncodePreemptionResult(victims, &out);
  EXPECT_TRUE(VictimsFromProto(ProtobufParse<v1::ExtenderPreemptionResult>(out)) == victims);
}

}  // namespace
}  // namespace fitledger::webhook
