#include "server/service/extender_wire.h"

#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/service/grpc_services.h"
#include "tests/common/wire_variants.h"

namespace fitledger {
namespace {

using ::google::protobuf::util::MessageDifferencer;

v1::Pod SomePod() {
  v1::Pod pod;
  pod.mutable_metadata()->set_name("web-0");
  pod.mutable_metadata()->set_namespace_("shop");
  pod.mutable_metadata()->set_uid("4c1b0e9a-uid");
  (*pod.mutable_metadata()->mutable_labels())["app"] = "web";
  v1::Container* c = pod.mutable_spec()->add_containers();
  c->set_name("main");
  (*c->mutable_resources()->mutable_requests())["cpu"] = "500m";
  (*c->mutable_resources()->mutable_requests())["memory"] = "1Gi";
  pod.mutable_spec()->set_priority(7);
  return pod;
}

v1::ExtenderArgs SomeArgs(int names) {
  v1::ExtenderArgs args;
  *args.mutable_pod() = SomePod();
  for (int i = 0; i < names; ++i) args.add_node_names(absl::StrCat("node-", i));
  return args;
}

// ReadExtenderArgs agrees with protobuf's parser on `bytes`: when it reads them, protobuf parses
// them too, to the same pod and names.
void ExpectAgreesWithProtobuf(const std::string& bytes, bool* read) {
  v1::Pod pod;
  std::vector<absl::string_view> names;
  bool by_index = false;
  *read = ReadExtenderArgs(bytes, &pod, &names, &by_index);
  if (!*read) return;
  v1::ExtenderArgs parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes)) << "read bytes protobuf refuses";
  EXPECT_FALSE(parsed.has_nodes());
  EXPECT_EQ(by_index, parsed.reply_node_indexes());
  EXPECT_TRUE(MessageDifferencer::Equals(pod, parsed.pod()));
  ASSERT_EQ(static_cast<int>(names.size()), parsed.node_names_size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i], parsed.node_names(i));
}

TEST(ExtenderWireTest, ReadsThePodAndTheNamesProtobufWrote) {
  const v1::ExtenderArgs args = SomeArgs(500);
  const std::string bytes = args.SerializeAsString();
  v1::Pod pod;
  std::vector<absl::string_view> names;
  bool by_index = true;  // left over from an earlier call
  ASSERT_TRUE(ReadExtenderArgs(bytes, &pod, &names, &by_index));
  EXPECT_FALSE(by_index);
  EXPECT_TRUE(MessageDifferencer::Equals(pod, args.pod()));
  ASSERT_EQ(names.size(), 500u);
  EXPECT_EQ(names[0], "node-0");
  EXPECT_EQ(names[499], "node-499");
  // The views point into the request, not into copies.
  EXPECT_GE(names[0].data(), bytes.data());
  EXPECT_LT(names[499].data(), bytes.data() + bytes.size());
}

TEST(ExtenderWireTest, NoPodReadsAsAnEmptyPodAndALongNameKeepsItsLength) {
  v1::ExtenderArgs args;
  const std::string long_name(300, 'n');  // a two-byte length
  args.add_node_names(long_name);
  args.add_node_names("");
  v1::Pod pod = SomePod();  // left over from an earlier call
  std::vector<absl::string_view> names = {"stale"};
  bool by_index = false;
  const std::string bytes = args.SerializeAsString();
  ASSERT_TRUE(ReadExtenderArgs(bytes, &pod, &names, &by_index));
  EXPECT_TRUE(MessageDifferencer::Equals(pod, v1::Pod()));
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0], long_name);
  EXPECT_EQ(names[1], "");
  ASSERT_TRUE(ReadExtenderArgs("", &pod, &names, &by_index));
  EXPECT_TRUE(names.empty());
}

// fitledger-shim's flag: a bool, so any value but 0 is true and the last one counts.
TEST(ExtenderWireTest, ReadsTheFlagAsProtobufDoes) {
  v1::ExtenderArgs args = SomeArgs(3);
  args.set_reply_node_indexes(true);
  const std::string flagged = args.SerializeAsString();
  const std::string usual = SomeArgs(3).SerializeAsString();
  struct Case {
    std::string bytes;
    bool want;
  };
  const Case cases[] = {
      {flagged, true},
      {flagged + std::string("\x20\x00", 2), false},
      {usual + std::string("\x20\x02", 2), true},
      {std::string("\x20\x80\x01", 3) + usual, true},  // a two-byte varint, before the pod
      {usual + std::string("\x20\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11), true},  // 2^63
      {usual + std::string("\x20\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 12), false},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE(i);
    bool read = false;
    ExpectAgreesWithProtobuf(cases[i].bytes, &read);
    if (i + 1 < std::size(cases)) {
      EXPECT_TRUE(read);
      v1::Pod pod;
      std::vector<absl::string_view> names;
      bool by_index = !cases[i].want;
      ASSERT_TRUE(ReadExtenderArgs(cases[i].bytes, &pod, &names, &by_index));
      EXPECT_EQ(by_index, cases[i].want);
      EXPECT_EQ(names.size(), 3u);
    } else {
      EXPECT_FALSE(read);  // an 11-byte varint: malformed, for protobuf too
    }
  }
}

TEST(ExtenderWireTest, LeavesEveryOtherShapeToProtobuf) {
  struct Case {
    std::string name;
    std::string bytes;
  };
  const std::string usual = SomeArgs(3).SerializeAsString();
  v1::ExtenderArgs with_nodes = SomeArgs(0);
  with_nodes.mutable_nodes()->add_items()->mutable_metadata()->set_name("n1");
  v1::ExtenderArgs not_ascii = SomeArgs(1);
  not_ascii.add_node_names(
      "n\xc3\xb6"
      "de");
  const Case cases[] = {
      {"full nodes", with_nodes.SerializeAsString()},
      // Two encodings back to back are one message: protobuf merges the two pods.
      {"a second pod", usual + usual},
      {"an unknown field", usual + std::string("\x48\x01", 2)},
      {"a name that is not ASCII", not_ascii.SerializeAsString()},
      {"names as a varint", std::string("\x18\x05", 2)},
      {"a length past the end", std::string("\x1a\x05node", 5)},
      {"a truncated tag", std::string("\x9a", 1)},
      {"a bad pod", std::string("\x0a\x02\x0a\x05", 4)},
      {"reply_node_indexes truncated", usual + std::string("\x20\x80", 2)},
      {"reply_node_indexes length-delimited", usual + std::string("\x22\x01\x01", 3)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::Pod pod;
    std::vector<absl::string_view> names;
    bool by_index = false;
    EXPECT_FALSE(ReadExtenderArgs(c.bytes, &pod, &names, &by_index));
  }
}

// A pod nested `depth` unknown groups deep, followed by one candidate name.
std::string NestedGroupsPod(int depth) {
  const std::string groups = std::string(depth, '\x23') + std::string(depth, '\x24');  // field 4
  std::string bytes = "\x0a";
  bytes += static_cast<char>(0x80 | (groups.size() & 0x7f));
  bytes += static_cast<char>(groups.size() >> 7);
  return bytes + groups + std::string("\x1a\x02n1", 4);
}

TEST(ExtenderWireTest, ThePodGetsTheNestingBudgetItHasInsideTheRequest) {
  // Protobuf limits nesting (100 levels by default); the pod is one level into the request.
  int protobuf_reads = 0;
  for (int depth = 90; depth <= 110; ++depth) {
    SCOPED_TRACE(depth);
    v1::ExtenderArgs parsed;
    const bool protobuf_read = parsed.ParseFromString(NestedGroupsPod(depth));
    bool read = false;
    ExpectAgreesWithProtobuf(NestedGroupsPod(depth), &read);
    EXPECT_EQ(read, protobuf_read);
    protobuf_reads += protobuf_read;
  }
  EXPECT_GT(protobuf_reads, 0);
  EXPECT_LT(protobuf_reads, 21);  // the limit is inside the range
}

TEST(ExtenderWireTest, EveryPrefixAndMutationItReadsProtobufReadsTheSame) {
  v1::ExtenderArgs args = SomeArgs(20);
  args.set_reply_node_indexes(true);
  const std::string bytes = args.SerializeAsString();
  google::protobuf::LogSilencer quiet;  // protobuf logs each bad UTF-8 string it refuses
  const std::vector<std::string> inputs = testing::PrefixesAndMutations(bytes, 20000, 12345);
  int prefix_reads = 0;
  int mutated_reads = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool read = false;
    ExpectAgreesWithProtobuf(inputs[i], &read);
    (i <= bytes.size() ? prefix_reads : mutated_reads) += read;
    if (::testing::Test::HasFailure()) FAIL() << "input " << i;
  }
  EXPECT_GT(prefix_reads, 20);     // every whole-field prefix
  EXPECT_GT(mutated_reads, 1000);  // the check ran on read inputs, not only on refusals
}

TEST(ExtenderWireTest, FilterResultParsesToTheNamesAndReasons) {
  const std::string long_reason(200, 'r');
  const std::vector<absl::string_view> names = {"a", "bb", "", "d", "a"};
  FilterResult result;
  result.fits = {0, 2, 4};
  result.failed = {{1, "Insufficient cpu"}, {3, long_reason}};
  result.unresolvable = {{3, "node(s) were unknown"}};
  std::string out = "kept";
  WriteFilterResult(names, result, false, &out);
  ASSERT_EQ(out.substr(0, 4), "kept");
  v1::ExtenderFilterResult parsed;
  ASSERT_TRUE(parsed.ParseFromString(out.substr(4)));
  v1::ExtenderFilterResult expected;
  expected.add_node_names("a");
  expected.add_node_names("");
  expected.add_node_names("a");
  (*expected.mutable_failed_nodes())["bb"] = "Insufficient cpu";
  (*expected.mutable_failed_nodes())["d"] = long_reason;
  (*expected.mutable_failed_and_unresolvable_nodes())["d"] = "node(s) were unknown";
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected)) << parsed.DebugString();

  std::string empty;
  WriteFilterResult(names, FilterResult{}, false, &empty);
  EXPECT_EQ(empty, "");
  WriteFilterResult(names, FilterResult{}, true, &empty);
  EXPECT_EQ(empty, "");  // proto3 leaves out an empty packed field
}

TEST(ExtenderWireTest, FilterResultByIndexIsWhatProtobufWrites) {
  const std::vector<absl::string_view> names(70000, "n");
  FilterResult result;
  result.fits = {0, 1, 127, 128, 300, 16383, 16384, 69999};  // varints of 1, 2 and 3 bytes
  v1::ExtenderFilterResult expected;
  for (size_t i : result.fits) expected.add_node_indexes(static_cast<uint32_t>(i));
  std::string out;
  WriteFilterResult(names, result, true, &out);
  EXPECT_EQ(out, expected.SerializeAsString());  // no maps: protobuf's bytes, exactly

  const std::vector<absl::string_view> few = {"a", "bb", "c"};
  FilterResult mixed;
  mixed.fits = {2};
  mixed.failed = {{0, "Insufficient cpu"}};
  mixed.unresolvable = {{1, "node(s) were unknown"}};
  out.clear();
  WriteFilterResult(few, mixed, true, &out);
  v1::ExtenderFilterResult parsed;
  ASSERT_TRUE(parsed.ParseFromString(out));
  v1::ExtenderFilterResult want;
  want.add_node_indexes(2);
  (*want.mutable_failed_nodes())["a"] = "Insufficient cpu";
  (*want.mutable_failed_and_unresolvable_nodes())["bb"] = "node(s) were unknown";
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, want)) << parsed.DebugString();
}

TEST(ExtenderWireTest, HostPriorityListIsWhatProtobufWrites) {
  const std::vector<absl::string_view> names = {"a", "", "c", "d", "e"};
  const std::vector<int64_t> scores = {10, 3, 0, -1, int64_t{1} << 40};
  v1::HostPriorityList expected;
  for (size_t i = 0; i < names.size(); ++i) {
    v1::HostPriority* item = expected.add_items();
    item->set_host(std::string(names[i]));
    item->set_score(scores[i]);
  }
  std::string out;
  WriteHostPriorityList(names, scores, &out);
  // One field per message, in field order: protobuf's bytes, exactly.
  EXPECT_EQ(out, expected.SerializeAsString());
}

// A binder Filter and Prioritize never call.
class NoBinder : public kube::Binder {
 public:
  kube::BindResult Bind(const std::string&, const std::string&, const std::string&,
                        const std::string&, absl::Time) override {
    ADD_FAILURE() << "Bind called";
    return {};
  }
  absl::StatusOr<Pod> GetPod(const std::string&, const std::string&, absl::Time) override {
    ADD_FAILURE() << "GetPod called";
    return absl::NotFoundError("Filter and Prioritize read no pod from the API");
  }
};

class ExtenderServiceWireTest : public ::testing::Test {
 protected:
  ExtenderServiceWireTest()
      : ledger_(AccountingPolicy{}, ScoringStrategy::kLeastAllocated),
        extender_(&ledger_, &binder_, ExtenderOptions{}, [] { return true; }),
        metrics_(&registry_),
        service_(&extender_, &metrics_) {
    for (int i = 0; i < 6; ++i) {
      NodeRecord n;
      n.name = absl::StrCat("node-", i);
      n.allocatable.milli_cpu = i % 2 == 0 ? 4000 : 100;  // odd nodes are too small
      n.allocatable.memory_bytes = int64_t{8} << 30;
      n.allocatable.pods = 110;
      ledger_.UpsertNode(n);
    }
  }

  NoBinder binder_;
  Ledger ledger_;
  Extender extender_;
  MetricsRegistry registry_;
  RpcMetrics metrics_;
  ExtenderService service_;
};

TEST_F(ExtenderServiceWireTest, InPlaceAnswersAreTheMessageAnswers) {
  const v1::ExtenderArgs args = SomeArgs(8);  // node-6 and node-7 are unknown
  const std::string bytes = args.SerializeAsString();
  v1::Pod pod;
  std::vector<absl::string_view> names;
  bool by_index = true;
  ASSERT_TRUE(ReadExtenderArgs(bytes, &pod, &names, &by_index));
  ASSERT_FALSE(by_index);

  v1::ExtenderFilterResult by_message;
  ASSERT_TRUE(service_.DoFilter(&args, &by_message).ok());
  std::string wire;
  ASSERT_TRUE(service_.FilterToWire(pod, names, false, &wire).ok());
  v1::ExtenderFilterResult in_place;
  ASSERT_TRUE(in_place.ParseFromString(wire));
  EXPECT_TRUE(MessageDifferencer::Equals(in_place, by_message))
      << in_place.DebugString() << "\nvs\n"
      << by_message.DebugString();
  EXPECT_EQ(by_message.node_names_size(), 3);  // node-0, -2, -4
  EXPECT_EQ(by_message.node_indexes_size(), 0);
  EXPECT_EQ(by_message.failed_nodes_size() + by_message.failed_and_unresolvable_nodes_size(), 5);

  // Asked by index, both ways answer the same positions, and no names.
  v1::ExtenderArgs indexed = args;
  indexed.set_reply_node_indexes(true);
  v1::ExtenderFilterResult indexed_by_message;
  ASSERT_TRUE(service_.DoFilter(&indexed, &indexed_by_message).ok());
  wire.clear();
  ASSERT_TRUE(service_.FilterToWire(pod, names, true, &wire).ok());
  ASSERT_TRUE(in_place.ParseFromString(wire));
  EXPECT_TRUE(MessageDifferencer::Equals(in_place, indexed_by_message))
      << in_place.DebugString() << "\nvs\n"
      << indexed_by_message.DebugString();
  EXPECT_THAT(indexed_by_message.node_indexes(), ::testing::ElementsAre(0, 2, 4));
  EXPECT_EQ(indexed_by_message.node_names_size(), 0);
  using Reasons = std::map<std::string, std::string>;
  EXPECT_EQ(
      Reasons(indexed_by_message.failed_nodes().begin(), indexed_by_message.failed_nodes().end()),
      Reasons(by_message.failed_nodes().begin(), by_message.failed_nodes().end()));
  EXPECT_EQ(Reasons(indexed_by_message.failed_and_unresolvable_nodes().begin(),
                    indexed_by_message.failed_and_unresolvable_nodes().end()),
            Reasons(by_message.failed_and_unresolvable_nodes().begin(),
                    by_message.failed_and_unresolvable_nodes().end()));

  v1::HostPriorityList scores_by_message;
  ASSERT_TRUE(service_.DoPrioritize(&args, &scores_by_message).ok());
  wire.clear();
  ASSERT_TRUE(service_.PrioritizeToWire(pod, names, &wire).ok());
  EXPECT_EQ(wire, scores_by_message.SerializeAsString());

  // A bad request is refused alike.
  v1::ExtenderArgs bad = args;
  (*bad.mutable_pod()
        ->mutable_spec()
        ->mutable_containers(0)
        ->mutable_resources()
        ->mutable_requests())["cpu"] = "lots";
  v1::ExtenderFilterResult unused;
  const grpc::Status refused = service_.DoFilter(&bad, &unused);
  wire.clear();
  const grpc::Status refused_in_place = service_.FilterToWire(bad.pod(), names, true, &wire);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused_in_place.error_code(), refused.error_code());
  EXPECT_EQ(refused_in_place.error_message(), refused.error_message());
}

}  // namespace
}  // namespace fitledger
