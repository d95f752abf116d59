// The simdjson decoder against protobuf's own JSON parser on realistic kube-scheduler bodies,
// the encoders' exact output, and the decoder's errors.
#include "webhook/json_codec.h"

#include <fstream>
#include <map>
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
#include "google/protobuf/arena.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
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

// The fixture `file` decoded by JsonDecoder equals `canonical` decoded by protobuf.
template <typename M, typename Decode>
void ExpectEquivalent(const std::string& file, const std::string& canonical, Decode decode) {
  SCOPED_TRACE(file);
  const std::string body = ReadFixture(file);
  M ours;
  ASSERT_THAT(decode(body, &ours), IsOk());
  const M theirs = ProtobufParse<M>(ReadFixture(canonical));
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(ours, theirs)) << diff;
}

TEST(JsonCodecTest, ExtenderArgsMatchProtobufOnFixtures) {
  JsonDecoder decoder;
  const auto decode = [&](const std::string& body, v1::ExtenderArgs* out) {
    return decoder.DecodeExtenderArgs(body, out, nullptr);
  };
  for (const char* file :
       {"filter_node_names.json", "filter_nodes.json", "prioritize.json", "pod_4k.json"}) {
    ExpectEquivalent<v1::ExtenderArgs>(file, file, decode);
  }
  ExpectEquivalent<v1::ExtenderArgs>("filter_node_names_oddcase.json", "filter_node_names.json",
                                     decode);
}

TEST(JsonCodecTest, BindingArgsMatchProtobufOnFixtures) {
  JsonDecoder decoder;
  const auto decode = [&](const std::string& body, v1::ExtenderBindingArgs* out) {
    return decoder.DecodeBindingArgs(body, out);
  };
  ExpectEquivalent<v1::ExtenderBindingArgs>("bind.json", "bind.json", decode);
  ExpectEquivalent<v1::ExtenderBindingArgs>("bind_oddcase.json", "bind.json", decode);
}

TEST(JsonCodecTest, PreemptionArgsMatchProtobufOnFixtures) {
  JsonDecoder decoder;
  const auto decode = [&](const std::string& body, v1::ExtenderPreemptionArgs* out) {
    return decoder.DecodePreemptionArgs(body, out);
  };
  ExpectEquivalent<v1::ExtenderPreemptionArgs>("preempt_victims.json", "preempt_victims.json",
                                               decode);
  ExpectEquivalent<v1::ExtenderPreemptionArgs>("preempt_meta_victims.json",
                                               "preempt_meta_victims.json", decode);
  ExpectEquivalent<v1::ExtenderPreemptionArgs>("preempt_meta_victims_oddcase.json",
                                               "preempt_meta_victims.json", decode);
}

TEST(JsonCodecTest, FixturesDecodeTheFieldsThatMatter) {
  // Guards against both parsers agreeing on an empty message.
  JsonDecoder decoder;
  v1::ExtenderArgs args;
  ASSERT_THAT(decoder.DecodeExtenderArgs(ReadFixture("pod_4k.json"), &args, nullptr), IsOk());
  const v1::Pod& pod = args.pod();
  EXPECT_EQ(pod.metadata().uid(), "a1b2c3d4-e5f6-4789-abcd-ef0123456789");
  EXPECT_EQ(pod.metadata().deletion_timestamp(), "2026-11-30T12:10:00Z");
  ASSERT_EQ(pod.spec().init_containers_size(), 4);
  EXPECT_EQ(pod.spec().init_containers(1).restart_policy(), "Always");
  EXPECT_EQ(pod.spec().containers(1).resources().requests().at("cpu"), "0.25");
  EXPECT_EQ(pod.spec().overhead().at("memory"), "120Mi");
  EXPECT_EQ(pod.spec().resources().requests().at("cpu"), "6");
  EXPECT_EQ(pod.spec().priority(), 2000000);
  EXPECT_EQ(pod.status().container_statuses(0).allocated_resources().at("cpu"), "4");
  EXPECT_EQ(args.node_names_size(), 8);
  EXPECT_FALSE(args.has_nodes());

  ASSERT_THAT(decoder.DecodeExtenderArgs(ReadFixture("filter_nodes.json"), &args, nullptr), IsOk());
  ASSERT_EQ(args.nodes().items_size(), 3);
  EXPECT_EQ(args.nodes().items(2).status().allocatable().at("example.com/gpu"), "4");
  EXPECT_EQ(args.nodes().items(2).metadata().labels().at("escaped\"key"),
            "tab\tvalue \u00e9\u4e2d");
}

TEST(JsonCodecTest, RawNodesAreTheExactItemText) {
  const std::string body =
      "{\"Nodes\": {\"metadata\": {}, \"items\": [ {\"metadata\":{\"name\":\"a\"}} ,\n"
      "{\"metadata\":{\"name\":\"b\"},\"x\":[1,{\"y\":\"}]\"}] }\n\t], \"z\": 1}, "
      "\"NodeNames\": null}";
  JsonDecoder decoder;
  v1::ExtenderArgs args;
  std::vector<absl::string_view> raw;
  ASSERT_THAT(decoder.DecodeExtenderArgs(body, &args, &raw), IsOk());
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0], "{\"metadata\":{\"name\":\"a\"}}");
  EXPECT_EQ(raw[1], "{\"metadata\":{\"name\":\"b\"},\"x\":[1,{\"y\":\"}]\"}] }");
  EXPECT_EQ(args.nodes().items(1).metadata().name(), "b");
}

TEST(JsonCodecTest, RawNodesOfTheRealisticFixtureParseBackToEachItem) {
  const std::string body = ReadFixture("filter_nodes.json");
  JsonDecoder decoder;
  v1::ExtenderArgs args;
  std::vector<absl::string_view> raw;
  ASSERT_THAT(decoder.DecodeExtenderArgs(body, &args, &raw), IsOk());
  ASSERT_EQ(raw.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(absl::StartsWith(raw[i], "{\"metadata\":{\"name\":"));
    // A whole array element: delimited by [ or , before and , or ] after.
    const size_t at = body.find(std::string(raw[i]));
    ASSERT_NE(at, std::string::npos);
    EXPECT_TRUE(body[at - 1] == '[' || body[at - 1] == ',');
    EXPECT_TRUE(body[at + raw[i].size()] == ']' || body[at + raw[i].size()] == ',');
    EXPECT_TRUE(MessageDifferencer::Equals(ProtobufParse<v1::Node>(std::string(raw[i])),
                                           args.nodes().items(i)));
  }
}

// With names as views and full Nodes (the webhook's way): the items' names, in order, and their
// exact text; NodeNames beside them are ignored wherever they stand; the items' other fields are
// not read (a wrong type there passes), their names are (a wrong type there is an error).
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
    v1::ExtenderArgs args;
    std::vector<absl::string_view> raw;
    std::vector<absl::string_view> names;
    ASSERT_THAT(decoder.DecodeExtenderArgs(padded, &args, &raw, &names), IsOk());
    EXPECT_TRUE(args.has_nodes());
    EXPECT_EQ(args.nodes().items_size(), 0);
    EXPECT_EQ(args.nodes().metadata().resource_version(), "7");
    EXPECT_THAT(names, ::testing::ElementsAre("name-1", "", "b"));
    EXPECT_FALSE(decoder.node_names_plain());
    ASSERT_EQ(raw.size(), 3u);
    EXPECT_EQ(raw[1], "{\"spec\":{}}");
    // The full decode refuses what the names-only read skipped.
    v1::ExtenderArgs full;
    EXPECT_THAT(decoder.DecodeExtenderArgs(body, &full, nullptr),
                StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  }
  JsonDecoder decoder;
  v1::ExtenderArgs args;
  std::vector<absl::string_view> names;
  EXPECT_THAT(decoder.DecodeExtenderArgs(R"({"Nodes": {"items": [{"metadata": {"name": 3}}]}})",
                                         &args, nullptr, &names),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("Nodes.items[0].metadata.name: expected a string or null")));
  EXPECT_THAT(decoder.DecodeExtenderArgs(R"({"Nodes": {"items": [7]}})", &args, nullptr, &names),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("Nodes.items[0]: expected a node object, got number")));
  // Nodes null: the NodeNames are the candidates.
  v1::ExtenderArgs fresh;
  const std::string body = R"({"Nodes": null, "NodeNames": ["a"]})";  // outlives the views
  ASSERT_THAT(decoder.DecodeExtenderArgs(body, &fresh, nullptr, &names), IsOk());
  EXPECT_FALSE(fresh.has_nodes());
  EXPECT_THAT(names, ::testing::ElementsAre("a"));
}

// NodeNames as views (the shim's way: plain names read in place, the rest by simdjson) and as
// strings: the same names, or the same error, on every spelling; plain names point into the body.
TEST(JsonCodecTest, NodeNamesAsViewsAreTheNamesAsStrings) {
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
  for (const std::string& names : arrays) {
    SCOPED_TRACE(names);
    std::string body = absl::StrCat(R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":)", names,
                                    R"(,"Nodes":null})");
    body.reserve(body.size() + 64);  // simdjson's padding in the body, as the HTTP server leaves
    JsonDecoder as_views;
    JsonDecoder as_strings;
    v1::ExtenderArgs views_args;
    v1::ExtenderArgs strings_args;
    std::vector<absl::string_view> views;
    const absl::Status a = as_views.DecodeExtenderArgs(body, &views_args, nullptr, &views);
    const absl::Status b = as_strings.DecodeExtenderArgs(body, &strings_args, nullptr);
    EXPECT_EQ(a, b);
    if (!a.ok() || !b.ok()) continue;
    EXPECT_EQ(std::vector<std::string>(views.begin(), views.end()),
              std::vector<std::string>(strings_args.node_names().begin(),
                                       strings_args.node_names().end()));
    const bool plain = names.find('\\') == std::string::npos;  // read in place, into the body
    // Plain names are written back as they are: AppendJsonString would not change them.
    if (as_views.node_names_plain()) {
      for (absl::string_view name : views)
        EXPECT_EQ(JsonString(name), absl::StrCat("\"", name, "\""));
    }
    if (!plain) {
      EXPECT_FALSE(as_views.node_names_plain());
    }
    if (names == R"(["node-1","node-2","node-3"])") {
      EXPECT_TRUE(as_views.node_names_plain());
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
  v1::ExtenderArgs args;
  ASSERT_THAT(decoder.DecodeExtenderArgs(body, &args, nullptr), IsOk());
  const auto& requests = args.pod().spec().containers(0).resources().requests();
  EXPECT_EQ(requests.at("cpu"), "500m");
  EXPECT_EQ(requests.at("memory"), "1048576");
  EXPECT_EQ(requests.at("example.com/gpu"), "0.5");
}

TEST(JsonCodecTest, NullMeansAbsent) {
  JsonDecoder decoder;
  v1::ExtenderArgs args;
  ASSERT_THAT(decoder.DecodeExtenderArgs(
                  R"({"Pod":{"metadata":null,"spec":{"resources":null,"containers":null}},)"
                  R"("Nodes":null,"NodeNames":null})",
                  &args, nullptr),
              IsOk());
  EXPECT_TRUE(args.has_pod());
  EXPECT_FALSE(args.pod().has_metadata());
  EXPECT_FALSE(args.pod().spec().has_resources());
  EXPECT_FALSE(args.has_nodes());
  EXPECT_EQ(args.node_names_size(), 0);
}

TEST(JsonCodecTest, DecoderIsReusableAcrossBodies) {
  JsonDecoder decoder;
  for (int i = 0; i < 3; ++i) {
    v1::ExtenderBindingArgs bind;
    ASSERT_THAT(decoder.DecodeBindingArgs(ReadFixture("bind.json"), &bind), IsOk());
    EXPECT_EQ(bind.node(), "w2");
    v1::ExtenderArgs args;
    ASSERT_THAT(decoder.DecodeExtenderArgs(ReadFixture("pod_4k.json"), &args, nullptr), IsOk());
    EXPECT_EQ(args.node_names_size(), 8);
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
       R"(Pod.spec.containers[0].resources.requests["cpu"]: )"},
      {"quantity bool", R"({"Pod":{"spec":{"overhead":{"memory":true}}}})",
       R"(Pod.spec.overhead["memory"]: expected a quantity string, got boolean)"},
      {"name number", R"({"Pod":{"metadata":{"name":1}}})",
       "Pod.metadata.name: expected a string or null, got number"},
      {"priority float", R"({"Pod":{"spec":{"priority":1.5}}})",
       "Pod.spec.priority: expected an integer, got 1.5"},
      {"truncated", R"({"NodeNames": ["a")", "malformed JSON"},
      {"trailing garbage", R"({"NodeNames": []} x)", "malformed JSON"},
      {"nodes items", R"({"Nodes": {"items": [1]}})",
       "Nodes.items[0]: expected a node object, got number"},
  };
  JsonDecoder decoder;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::ExtenderArgs args;
    EXPECT_THAT(decoder.DecodeExtenderArgs(c.body, &args, nullptr),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
  v1::ExtenderBindingArgs bind;
  EXPECT_THAT(decoder.DecodeBindingArgs(R"({"PodUID": {}})", &bind),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "PodUID: expected a string or null, got object"));
  v1::ExtenderPreemptionArgs preempt;
  EXPECT_THAT(
      decoder.DecodePreemptionArgs(
          R"({"NodeNameToMetaVictims": {"w1": {"NumPDBViolations": "1"}}})", &preempt),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          R"(NodeNameToMetaVictims["w1"].NumPDBViolations: expected an integer or null, got string)"));
  // Still usable after errors.
  v1::ExtenderArgs args;
  EXPECT_THAT(decoder.DecodeExtenderArgs(ReadFixture("prioritize.json"), &args, nullptr), IsOk());
}

TEST(JsonCodecTest, EncodesFilterResultWithNames) {
  v1::ExtenderFilterResult result;
  result.add_node_names("w1");
  result.add_node_names("w\"2");
  (*result.mutable_failed_nodes())["w4"] = "Insufficient memory";
  (*result.mutable_failed_nodes())["w3"] = "Insufficient cpu, Insufficient memory";
  (*result.mutable_failed_and_unresolvable_nodes())["w5"] = "Insufficient example.com/gpu";
  std::string out;
  EncodeFilterResult(result, &out);
  EXPECT_EQ(
      out,
      R"({"NodeNames":["w1","w\"2"],"FailedNodes":{"w3":"Insufficient cpu, Insufficient memory",)"
      R"("w4":"Insufficient memory"},"FailedAndUnresolvableNodes":{"w5":"Insufficient example.com/gpu"},)"
      R"("Error":""})");
  out.clear();
  EncodeFilterResult(v1::ExtenderFilterResult(), &out);
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
// inside the 8 bytes compared at once, repeat, or hold NUL and bytes of 0x80 and up; checked
// against std::map (bytewise, last insert wins).
TEST(JsonCodecTest, FailureMapsComeOutSortedByKeyOnceEachLastValueKept) {
  std::mt19937 rng(24);
  const std::vector<std::string> prefixes = {
      "",       "gke-prod-pool-1-",         "gke-prod-pool-2-",
      "ip-10-", std::string("ip-10-\0", 7), "aks-a-12345678-vmss"};
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::string> keys;
    std::vector<std::string> values;
    const size_t n = rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      if (!keys.empty() && rng() % 5 == 0) {
        keys.push_back(keys[rng() % keys.size()]);  // a repeated key
      } else {
        std::string key = prefixes[rng() % prefixes.size()];
        for (size_t len = rng() % 14; len > 0; --len) {
          const unsigned r = rng();
          key.push_back(r % 6 == 0 ? static_cast<char>(r >> 8 & 0xff) : "0123ab"[r % 6]);
        }
        keys.push_back(key);
      }
      values.push_back(absl::StrCat("reason ", i));
    }
    FilterResultView view;
    std::map<std::string, std::string> want;
    for (size_t i = 0; i < n; ++i) {
      view.failed_nodes.emplace_back(keys[i], values[i]);
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
  v1::ExtenderFilterResult result;
  (*result.mutable_failed_nodes())["b"] = "Too many pods";
  const std::vector<absl::string_view> nodes = {R"({"metadata":{"name":"a"}})",
                                                R"({"metadata":{"name":"c"},"x":1})"};
  std::string out;
  EncodeFilterResultWithNodes(result, nodes, &out);
  EXPECT_EQ(out, R"({"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}},)"
                 R"({"metadata":{"name":"c"},"x":1}]},"FailedNodes":{"b":"Too many pods"},)"
                 R"("FailedAndUnresolvableNodes":{},"Error":""})");
}

TEST(JsonCodecTest, EncodesHostPriorityListAsABareArray) {
  v1::HostPriorityList list;
  auto* a = list.add_items();
  a->set_host("n1");
  a->set_score(7);
  auto* b = list.add_items();
  b->set_host("n2");
  b->set_score(0);
  std::string out;
  EncodeHostPriorityList(list, &out);
  EXPECT_EQ(out, R"([{"Host":"n1","Score":7},{"Host":"n2","Score":0}])");
  out.clear();
  EncodeHostPriorityList(v1::HostPriorityList(), &out);
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
  v1::ExtenderPreemptionResult result;
  v1::MetaVictims& w2 = (*result.mutable_node_name_to_meta_victims())["w2"];
  w2.add_pods()->set_uid("u1");
  w2.add_pods()->set_uid("u2");
  w2.set_num_pdb_violations(1);
  (*result.mutable_node_name_to_meta_victims())["w1"];
  std::string out;
  EncodePreemptionResult(result, &out);
  EXPECT_EQ(out, R"({"NodeNameToMetaVictims":{"w1":{"Pods":[],"NumPDBViolations":0},)"
                 R"("w2":{"Pods":[{"UID":"u1"},{"UID":"u2"}],"NumPDBViolations":1}}})");
  out.clear();
  EncodePreemptionResult(v1::ExtenderPreemptionResult(), &out);
  EXPECT_EQ(out, R"({"NodeNameToMetaVictims":{}})");
}

TEST(JsonCodecTest, EncodedResultsParseBackWithProtobuf) {
  v1::ExtenderFilterResult result;
  result.add_node_names("w1");
  (*result.mutable_failed_nodes())["w2"] = "Insufficient cpu";
  result.set_error("x");
  std::string out;
  EncodeFilterResult(result, &out);
  EXPECT_TRUE(MessageDifferencer::Equals(ProtobufParse<v1::ExtenderFilterResult>(out), result));
}

}  // namespace
}  // namespace fitledger::webhook
