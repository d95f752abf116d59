#include "client/shim/extender_bytes.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "tests/common/wire_variants.h"

namespace fitledger::shim {
namespace {

v1::Pod SomePod() {
  v1::Pod pod;
  pod.mutable_metadata()->set_name("web-0");
  pod.mutable_metadata()->set_namespace_("shop");
  (*pod.mutable_metadata()->mutable_labels())["app"] = "web";
  v1::Container* c = pod.mutable_spec()->add_containers();
  c->set_name("main");
  (*c->mutable_resources()->mutable_requests())["cpu"] = "500m";
  return pod;
}

TEST(ExtenderBytesTest, WritesWhatProtobufWrites) {
  v1::ExtenderArgs args;
  *args.mutable_pod() = SomePod();
  std::vector<absl::string_view> names;
  const std::string long_name(200, 'n');  // a two-byte length
  for (absl::string_view name : {absl::string_view("w1"), absl::string_view(""),
                                 absl::string_view(long_name), absl::string_view("w\"4")}) {
    args.add_node_names(std::string(name));
    names.push_back(name);
  }
  std::string out = "kept";
  WriteExtenderArgs(&args.pod(), names, false, &out);
  EXPECT_EQ(out, "kept" + args.SerializeAsString());
  args.set_reply_node_indexes(true);
  out.clear();
  WriteExtenderArgs(&args.pod(), names, true, &out);
  EXPECT_EQ(out, args.SerializeAsString());

  // No pod: no pod field, as protobuf leaves out an unset message.
  args.clear_pod();
  out.clear();
  WriteExtenderArgs(nullptr, names, true, &out);
  EXPECT_EQ(out, args.SerializeAsString());
  args.clear_node_names();
  out.clear();
  WriteExtenderArgs(nullptr, {}, true, &out);
  EXPECT_EQ(out, args.SerializeAsString());
  out.clear();
  WriteExtenderArgs(nullptr, {}, false, &out);
  EXPECT_EQ(out, "");
}

// The entries of a map, one per key (the last), sorted: what protobuf's map holds.
std::map<std::string, std::string> Collapsed(const FilterResultView::Entries& entries) {
  std::map<std::string, std::string> map;
  for (const auto& [key, value] : entries) map[std::string(key)] = std::string(value);
  return map;
}

std::map<std::string, std::string> AsMap(const google::protobuf::Map<std::string, std::string>& m) {
  return std::map<std::string, std::string>(m.begin(), m.end());
}

// ReadFilterResult agrees with protobuf on `bytes`: what it reads, protobuf parses to the same.
void ExpectFilterResultAgrees(const std::string& bytes, bool* read) {
  FilterResultView view;
  *read = ReadFilterResult(bytes, &view);
  if (!*read) return;
  v1::ExtenderFilterResult parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes)) << "read bytes protobuf refuses";
  ASSERT_EQ(static_cast<int>(view.node_names.size()), parsed.node_names_size());
  for (size_t i = 0; i < view.node_names.size(); ++i) {
    EXPECT_EQ(view.node_names[i], parsed.node_names(static_cast<int>(i)));
  }
  EXPECT_EQ(view.node_indexes,
            std::vector<uint32_t>(parsed.node_indexes().begin(), parsed.node_indexes().end()));
  EXPECT_EQ(Collapsed(view.failed_nodes), AsMap(parsed.failed_nodes()));
  EXPECT_EQ(Collapsed(view.failed_and_unresolvable_nodes),
            AsMap(parsed.failed_and_unresolvable_nodes()));
  EXPECT_EQ(view.error, parsed.error());
  EXPECT_FALSE(parsed.has_nodes());
}

void ExpectPrioritiesAgree(const std::string& bytes, bool* read) {
  HostPriorityView view;
  *read = ReadHostPriorityList(bytes, &view);
  if (!*read) return;
  v1::HostPriorityList parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes)) << "read bytes protobuf refuses";
  ASSERT_EQ(static_cast<int>(view.size()), parsed.items_size());
  for (size_t i = 0; i < view.size(); ++i) {
    EXPECT_EQ(view[i].first, parsed.items(static_cast<int>(i)).host());
    EXPECT_EQ(view[i].second, parsed.items(static_cast<int>(i)).score());
  }
}

v1::ExtenderFilterResult SomeFilterResult() {
  v1::ExtenderFilterResult result;
  for (int i = 0; i < 12; ++i) result.add_node_names(absl::StrCat("node-", i));
  (*result.mutable_failed_nodes())["node-12"] = "Insufficient cpu";
  (*result.mutable_failed_nodes())["node-13"] = std::string(150, 'r');
  (*result.mutable_failed_and_unresolvable_nodes())["node-14"] = "node(s) were unknown";
  (*result.mutable_failed_and_unresolvable_nodes())[""] = "";
  result.set_error("partly");
  return result;
}

// As fitledger-server answers a request with reply_node_indexes.
v1::ExtenderFilterResult SomeIndexedResult() {
  v1::ExtenderFilterResult result;
  for (uint32_t i : {0u, 1u, 127u, 128u, 16384u, 4294967295u}) result.add_node_indexes(i);
  (*result.mutable_failed_nodes())["node-2"] = "Insufficient cpu";
  (*result.mutable_failed_and_unresolvable_nodes())["node-3"] = "node(s) were unknown";
  return result;
}

v1::HostPriorityList SomePriorities() {
  v1::HostPriorityList list;
  const int64_t scores[] = {10, 0, -3, int64_t{1} << 40};
  for (int i = 0; i < 4; ++i) {
    v1::HostPriority* item = list.add_items();
    item->set_host(i == 1 ? "" : absl::StrCat("node-", i));
    item->set_score(scores[i]);
  }
  return list;
}

TEST(ExtenderBytesTest, ReadsWhatProtobufWrote) {
  bool read = false;
  ExpectFilterResultAgrees(SomeFilterResult().SerializeAsString(), &read);
  EXPECT_TRUE(read);
  ExpectFilterResultAgrees("", &read);
  EXPECT_TRUE(read);
  ExpectFilterResultAgrees(SomeIndexedResult().SerializeAsString(), &read);
  EXPECT_TRUE(read);
  // Indexes not packed (protobuf reads both ways), and packed ones after them: one list.
  ExpectFilterResultAgrees(
      std::string("\x30\x05\x30\x80\x01", 5) + SomeIndexedResult().SerializeAsString(), &read);
  EXPECT_TRUE(read);
  FilterResultView view;
  ASSERT_TRUE(ReadFilterResult(std::string("\x30\x05\x32\x03\x07\x80\x01", 7), &view));
  EXPECT_EQ(view.node_indexes, (std::vector<uint32_t>{5, 7, 128}));
  ExpectPrioritiesAgree(SomePriorities().SerializeAsString(), &read);
  EXPECT_TRUE(read);

  // Two encodings back to back are one message: the maps' later entries win.
  v1::ExtenderFilterResult later;
  (*later.mutable_failed_nodes())["node-12"] = "Too many pods";
  ExpectFilterResultAgrees(SomeFilterResult().SerializeAsString() + later.SerializeAsString(),
                           &read);
  EXPECT_TRUE(read);
}

TEST(ExtenderBytesTest, LeavesEveryOtherShapeToProtobuf) {
  v1::ExtenderFilterResult with_nodes;
  with_nodes.mutable_nodes()->add_items()->mutable_metadata()->set_name("n1");
  v1::ExtenderFilterResult not_ascii;
  (*not_ascii.mutable_failed_nodes())["n1"] = "zu wenig Speicher \xc3\xbc";
  const std::string filter_cases[] = {
      with_nodes.SerializeAsString(),
      not_ascii.SerializeAsString(),
      SomeFilterResult().SerializeAsString() + std::string("\x48\x01", 2),  // unknown field
      std::string("\x12\x05w1", 4),                                         // past the end
      std::string("\x1a\x02\x18\x01", 4),                  // a map entry with a varint field
      std::string("\x32\x02\x05\x80", 4),                  // a packed index cut short
      std::string("\x32\x06\x80\x80\x80\x80\x80\x01", 8),  // an index in 6 bytes
      std::string("\x30\x80\x80\x80\x80\x10", 6),          // 2^32: over uint32
  };
  for (const std::string& bytes : filter_cases) {
    FilterResultView view;
    EXPECT_FALSE(ReadFilterResult(bytes, &view));
  }
  const std::string priority_cases[] = {
      std::string("\x0a\x02\x18\x01", 4),  // an unknown field in an item
      std::string("\x12\x00", 2),          // an unknown field in the list
      std::string("\x0a\x03\x0a\x01\xc3", 5),
  };
  for (const std::string& bytes : priority_cases) {
    HostPriorityView view;
    EXPECT_FALSE(ReadHostPriorityList(bytes, &view));
  }
}

TEST(ExtenderBytesTest, EveryPrefixAndMutationReadIsWhatProtobufReads) {
  google::protobuf::LogSilencer quiet;  // protobuf logs each bad UTF-8 string it refuses
  const std::string inputs[] = {SomeFilterResult().SerializeAsString(),
                                SomePriorities().SerializeAsString(),
                                SomeIndexedResult().SerializeAsString()};
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind == 1 ? "HostPriorityList" : "ExtenderFilterResult");
    const std::string& bytes = inputs[kind];
    auto check = [&](const std::string& b, bool* read) {
      if (kind != 1) {
        ExpectFilterResultAgrees(b, read);
      } else {
        ExpectPrioritiesAgree(b, read);
      }
    };
    const std::vector<std::string> variants =
        testing::PrefixesAndMutations(bytes, 20000, 4321 + kind);
    int prefix_reads = 0;
    int mutated_reads = 0;
    for (size_t i = 0; i < variants.size(); ++i) {
      bool read = false;
      check(variants[i], &read);
      (i <= bytes.size() ? prefix_reads : mutated_reads) += read;
      if (::testing::Test::HasFailure()) FAIL() << "input " << i;
    }
    EXPECT_GE(prefix_reads, kind == 2 ? 4 : 5);  // every whole-field prefix
    EXPECT_GT(mutated_reads, 1000);  // the comparison ran on read inputs, not only on refusals
  }
}

}  // namespace
}  // namespace fitledger::shim
