#include "sim/json_edit.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fitledger::sim {
namespace {

using nlohmann::json;

TEST(FindMember, FindsTopLevelValuesNotNestedOnes) {
  const std::string text =
      R"({"a":{"b":"x","c":[1,{"d":"}]"}]},"b":"q\"uo}te","n":-1.5e3,"t":true,"z":null})";
  EXPECT_EQ(FindMember(text, "a").value(), R"({"b":"x","c":[1,{"d":"}]"}]})");
  EXPECT_EQ(FindMember(text, "b").value(), R"("q\"uo}te")");
  EXPECT_EQ(FindMember(text, "n").value(), "-1.5e3");
  EXPECT_EQ(FindMember(text, "t").value(), "true");
  EXPECT_EQ(FindMember(text, "z").value(), "null");
  EXPECT_FALSE(FindMember(text, "d").has_value());
  EXPECT_FALSE(FindMember(text, "c").has_value());
}

TEST(FindMember, ToleratesWhitespaceAndRejectsMalformedText) {
  EXPECT_EQ(FindMember(" { \"k\" : [ 1 , 2 ] , \"j\" : 3 } ", "k").value(), "[ 1 , 2 ]");
  for (const char* bad : {"", "[]", "{", R"({"k":1)", R"({"k" 1})", R"({"k":"unterminated})",
                          R"({"k":1,})", R"({"k":1}x)", R"({"k":})"}) {
    EXPECT_FALSE(FindMember(bad, "k").has_value()) << bad;
  }
}

TEST(SetMembers, ReplacesInPlaceAndAppendsMissingMembers) {
  EXPECT_EQ(SetMembers(R"({"a":1,"b":{"x":[1,2]},"c":"s"})", {{"b", "2"}, {"d", R"("new")"}}),
            R"({"a":1,"b":2,"c":"s","d":"new"})");
  EXPECT_EQ(SetMembers("{}", {{"k", "[]"}}), R"({"k":[]})");
  EXPECT_EQ(SetMembers("{ }", {{"k", "1"}}), R"({"k":1})");
  // Not an object: treated as {}.
  EXPECT_EQ(SetMembers("null", {{"k", "1"}}), R"({"k":1})");
  EXPECT_EQ(SetMembers("[1]", {{"k", "1"}}), R"({"k":1})");
  // A key that needs escaping when it is added.
  EXPECT_EQ(SetMembers("{}", {{"a\"b", "1"}}), R"({"a\"b":1})");
}

TEST(EditMembers, NestedEditsMatchAFullParseAndRewrite) {
  const json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "p"}, {"resourceVersion", "7"}, {"annotations", {{"resourceVersion", "x"}}}}},
      {"spec", {{"containers", json::array({{{"name", "app"}, {"image", "i:1"}}})}}},
      {"status", {{"phase", "Pending"}, {"qosClass", "Burstable"}}}};
  const std::vector<std::pair<absl::string_view, std::string>> metadata = {
      {"resourceVersion", R"("8")"}};
  const std::vector<std::pair<absl::string_view, std::string>> spec = {{"nodeName", R"("n-1")"}};
  std::string edited = EditMembers(pod.dump(), {{"metadata",
                                                 [&](std::optional<absl::string_view> cur) {
                                                   return SetMembers(cur.value_or("{}"), metadata);
                                                 }},
                                                {"spec", [&](std::optional<absl::string_view> cur) {
                                                   return SetMembers(cur.value_or("{}"), spec);
                                                 }}});
  json want = pod;
  want["metadata"]["resourceVersion"] = "8";
  want["spec"]["nodeName"] = "n-1";
  EXPECT_EQ(json::parse(edited), want);
  // The edit function sees the current value, or nullopt for an absent member.
  std::string seen = "unset";
  EditMembers(R"({"a":[1]})", {{"a", [&](auto cur) {
                                  seen = std::string(cur.value_or("absent"));
                                  return "0";
                                }}});
  EXPECT_EQ(seen, "[1]");
  EditMembers(R"({"a":[1]})", {{"b", [&](auto cur) {
                                  seen = std::string(cur.value_or("absent"));
                                  return "0";
                                }}});
  EXPECT_EQ(seen, "absent");
}

}  // namespace
}  // namespace fitledger::sim
