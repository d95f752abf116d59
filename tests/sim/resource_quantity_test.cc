#include "sim/resource_quantity.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger::sim {
namespace {

using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Values as apimachinery's Quantity.MilliValue() / Value() give them (both round up).
TEST(ResourceQuantityTest, ParsesAsParseQuantityAndRoundsUpAsValueAndMilliValue) {
  struct Case {
    const char* text;
    int64_t milli;
    int64_t value;
  };
  const Case cases[] = {
      {"0", 0, 0},
      {"100m", 100, 1},
      {"1500m", 1500, 2},
      {"1.5", 1500, 2},
      {"2", 2000, 2},
      {"+2", 2000, 2},
      {"-0", 0, 0},
      {"007", 7000, 7},
      {"0.0001", 1, 1},        // below a milli: rounds up
      {"1n", 1, 1},            // a nano: the smallest there is
      {"0.0000000001", 1, 1},  // below a nano: rounded up to one at parse
      {"500u", 1, 1},
      {"1k", 1000000, 1000},
      {"1M", 1000000000, 1000000},
      {"1Gi", 1073741824000, 1073741824},
      {"7500Mi", 7864320000000, 7864320000},
      {"1.5Ki", 1536000, 1536},
      {"0.1Ki", 102400, 103},  // 102.4
      {"1e3", 1000000, 1000},
      {"1E3", 1000000, 1000},
      {"1e-3", 1, 1},
      {"1e+3", 1000000, 1000},
      {"1E", kMax, 1000000000000000000},  // exa; its milli value does not fit
      {"9223372036854775807", kMax, kMax},
      {"16Ei", kMax, kMax},  // a binary quantity above 2^63-1 is capped, as upstream caps it
      {".", 0, 0},           // parseQuantityString reads an empty number as 0
      {"+", 0, 0},
      {"Ki", 0, 0},
      {"5.", 5000, 5},
      {".5", 500, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<ResourceQuantity> q = ResourceQuantity::Parse(c.text);
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_EQ(q->MilliValue(), c.milli);
    EXPECT_EQ(q->Value(), c.value);
  }
}

TEST(ResourceQuantityTest, RejectsWhatParseQuantityRejectsAndWhatTheKubeletNeverSees) {
  const std::string format =
      "quantities must match the regular expression "
      "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
  EXPECT_THAT(ResourceQuantity::Parse(""), StatusIs(absl::StatusCode::kInvalidArgument, format));
  EXPECT_THAT(ResourceQuantity::Parse("lots"),
              StatusIs(absl::StatusCode::kInvalidArgument, format));
  EXPECT_THAT(ResourceQuantity::Parse("1.2.3"),
              StatusIs(absl::StatusCode::kInvalidArgument, format));
  EXPECT_THAT(ResourceQuantity::Parse(" 1"), StatusIs(absl::StatusCode::kInvalidArgument, format));
  EXPECT_THAT(ResourceQuantity::Parse("1e"),
              StatusIs(absl::StatusCode::kInvalidArgument, "unable to parse quantity's suffix"));
  EXPECT_THAT(ResourceQuantity::Parse("1ki"),
              StatusIs(absl::StatusCode::kInvalidArgument, "unable to parse quantity's suffix"));
  EXPECT_THAT(ResourceQuantity::Parse("-1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative quantity")));
  EXPECT_THAT(ResourceQuantity::Parse("1e19"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("above 2^63-1 units")));
}

// PodRequests adds Quantities exactly; only the pod's total is rounded (Resource.Add takes
// MilliValue of the sum).
TEST(ResourceQuantityTest, SumsAreExactAndRoundedOnce) {
  ResourceQuantity sum = *ResourceQuantity::Parse("500u");
  sum += *ResourceQuantity::Parse("500u");
  EXPECT_EQ(sum.MilliValue(), 1);
  EXPECT_TRUE(*ResourceQuantity::Parse("999u") < *ResourceQuantity::Parse("1m"));
  EXPECT_TRUE(*ResourceQuantity::Parse("1000m") == *ResourceQuantity::Parse("1"));
  EXPECT_EQ(ResourceQuantity::FromUnits(3).MilliValue(), 3000);
}

}  // namespace
}  // namespace fitledger::sim
