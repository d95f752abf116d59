// ListSplitter: a LIST body split into its items and metadata as it arrives, in fragments of any
// size (the bytes are untrusted: malformed bodies are errors, never crashes).
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/kube/objects.h"
#include "tests/common/status_matchers.h"

namespace fitledger::kube {
namespace {

using ::fitledger::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Split {
  std::vector<std::string> items;
  std::string metadata;
  absl::Status status;
};

// Feeds `body` in fragments of the sizes `sizes` yields, cycling.
Split SplitInFragments(const std::string& body, const std::vector<size_t>& sizes) {
  Split out;
  ListSplitter splitter([&](absl::string_view item) {
    out.items.emplace_back(item);
    return true;
  });
  size_t at = 0, k = 0;
  while (at < body.size()) {
    size_t n = std::min(sizes[k++ % sizes.size()], body.size() - at);
    if (!splitter.Feed(absl::string_view(body).substr(at, n))) break;
    at += n;
  }
  out.status = splitter.Finish();
  out.metadata = splitter.metadata();
  return out;
}

const char kItem1[] =
    R"({"metadata":{"name":"a","labels":{"x":"}{]["}},"spec":{"c":[1,[2,{"d":"\"}"}]]}})";
const char kItem2[] = R"({"metadata":{"name":"b\\"},"status":{}})";

std::string Body() {
  return absl::StrCat(R"( {"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42",)",
                      R"("continue":"eyJ9","remainingItemCount":7},"items":[ )", kItem1, " ,\n",
                      kItem2, R"(],"extra":[{"x":"y"}],"n":12,"b":true} )");
}

TEST(ListSplitterTest, ItemsAndMetadataWhateverTheFragments) {
  const std::string body = Body();
  std::vector<std::vector<size_t>> plans = {{body.size()}, {1}, {2}, {3}, {7}, {64}};
  std::mt19937 rng(7);
  for (int r = 0; r < 50; ++r) {
    std::vector<size_t> sizes;
    for (int i = 0; i < 20; ++i) sizes.push_back(1 + rng() % 40);
    plans.push_back(sizes);
  }
  for (const auto& sizes : plans) {
    SCOPED_TRACE(sizes.size() == 1 ? absl::StrCat("fragments of ", sizes[0]) : "random sizes");
    Split s = SplitInFragments(body, sizes);
    EXPECT_TRUE(s.status.ok()) << s.status;
    EXPECT_THAT(s.items, ElementsAre(kItem1, kItem2));
    EXPECT_EQ(s.metadata, R"({"resourceVersion":"42","continue":"eyJ9","remainingItemCount":7})");
  }
}

TEST(ListSplitterTest, ItemsBeforeMetadataNullItemsAndAnEmptyList) {
  Split s = SplitInFragments(
      absl::StrCat(R"({"items":[)", kItem2, R"(],"metadata":{"resourceVersion":"9"}})"), {5});
  EXPECT_TRUE(s.status.ok()) << s.status;
  EXPECT_THAT(s.items, ElementsAre(kItem2));
  EXPECT_EQ(s.metadata, R"({"resourceVersion":"9"})");
  s = SplitInFragments(R"({"metadata":{},"items":null})", {3});
  EXPECT_TRUE(s.status.ok()) << s.status;
  EXPECT_TRUE(s.items.empty());
  s = SplitInFragments(R"({"metadata":{"resourceVersion":"1"},"items":[]})", {1});
  EXPECT_TRUE(s.status.ok()) << s.status;
  EXPECT_TRUE(s.items.empty());
}

TEST(ListSplitterTest, MalformedBodiesAreErrors) {
  EXPECT_THAT(SplitInFragments("[1,2]", {4}).status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a JSON object")));
  EXPECT_THAT(SplitInFragments(R"({"items":[1]})", {4}).status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a JSON object")));
  const std::string body = Body();
  for (size_t cut : {size_t{1}, size_t{40}, body.size() / 2, body.size() - 3}) {
    Split s = SplitInFragments(body.substr(0, cut), {16});
    EXPECT_THAT(s.status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ends before")))
        << cut;
  }
  EXPECT_THAT(SplitInFragments(R"({"items":[]} x)", {2}).status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("after the list")));
}

TEST(ListSplitterTest, StopsWhenAskedTo) {
  int seen = 0;
  ListSplitter splitter([&](absl::string_view) { return ++seen < 1; });
  EXPECT_FALSE(splitter.Feed(Body()));
  EXPECT_EQ(seen, 1);
  EXPECT_THAT(splitter.Finish(), StatusIs(absl::StatusCode::kCancelled, HasSubstr("abandoned")));
}

}  // namespace
}  // namespace fitledger::kube
