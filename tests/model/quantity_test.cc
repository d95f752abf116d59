#include "model/quantity.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger {
namespace {

using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

struct ValidCase {
  std::string text;
  int64_t milli;
  int64_t value;
};

TEST(QuantityTest, ParsesKubernetesGrammarAndRoundsUp) {
  // Examples from the Kubernetes docs ("Resource units in Kubernetes") and apimachinery's
  // quantity grammar.
  const ValidCase cases[] = {
      {"0", 0, 0},
      {"1", 1000, 1},
      {"0.1", 100, 1},
      {"0.5", 500, 1},
      {"100m", 100, 1},
      {"1.5", 1500, 2},
      {"2.", 2000, 2},
      {".5", 500, 1},
      {"+1", 1000, 1},
      {"-1", -1000, -1},
      {"0.5m", 1, 1},  // below a millicore: rounds up to 1m
      {"1u", 1, 1},
      {"100n", 1, 1},
      {"1n", 1, 1},
      {"128974848", 128974848000, 128974848},
      {"129e6", 129000000000, 129000000},
      {"129M", 129000000000, 129000000},
      {"128974848000m", 128974848000, 128974848},
      {"123Mi", 128974848000, 128974848},
      {"1Ki", 1024000, 1024},
      {"1.5Gi", 1610612736000, 1610612736},
      {"0.1Ki", 102400, 103},
      {"1k", 1000000, 1000},
      {"1e3", 1000000, 1000},
      {"1E3", 1000000, 1000},
      {"1e+3", 1000000, 1000},
      {"1e-3", 1, 1},
      {"5E-1", 500, 1},
      {"1E", 0, 1000000000000000000},  // its milli-value overflows int64
      {"1P", 1000000000000000000, 1000000000000000},
      {"1Ti", 1099511627776000, 1099511627776},
      {"0.000000000001", 1, 1},  // below a nano: rounded up to 1n at parse
      {"0000000000000000000000000000001", 1000, 1},
      {"9223372036854775807", 0, 9223372036854775807},
      {"7Ei", 0, 8070450532247928832},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<Quantity> q = Quantity::Parse(c.text);
    ASSERT_TRUE(q.ok()) << q.status();
    if (c.milli != 0 || c.value == 0) {
      absl::StatusOr<int64_t> milli = q->MilliValue();
      ASSERT_TRUE(milli.ok()) << milli.status();
      EXPECT_EQ(*milli, c.milli);
    }
    absl::StatusOr<int64_t> value = q->Value();
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_EQ(*value, c.value);
  }
}

TEST(QuantityTest, RejectsMalformedInputNamingIt) {
  const std::string cases[] = {
      "",    "1.1.M", "0.1mi", "1i",   " 1",  "1 ",        "12Qi", ".",   "+",
      "-",   "m",     "1e",    "1e+",  "Ki",  "1KI",       "1k1",  "e3",  "--1",
      "1..", "1e3.5", "1Mi1",  "0x10", "1,5", "1e1000000", "\xff", "1\n",
  };
  for (const auto& text : cases) {
    SCOPED_TRACE(text);
    EXPECT_THAT(Quantity::Parse(text),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("quantity \"")));
  }
}

TEST(QuantityTest, RejectsValuesBeyondInt64) {
  const std::string cases[] = {"9223372036854775808",
                               "8Ei",
                               "10E",
                               "1e19",
                               "1e400",
                               "99999999999999999999999999999999999999999999"};
  for (const auto& text : cases) {
    SCOPED_TRACE(text);
    EXPECT_THAT(Quantity::Parse(text),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
  }
}

TEST(QuantityTest, SumsAreExactAndRoundedOnce) {
  Quantity a = *Quantity::Parse("500u");
  Quantity b = *Quantity::Parse("500u");
  EXPECT_EQ(*a.MilliValue(), 1);
  EXPECT_EQ(*(a + b).MilliValue(), 1);  // two 500u containers: 1m, not 2m
  Quantity c = *Quantity::Parse("0.3");
  Quantity d = *Quantity::Parse("0.3");
  Quantity e = *Quantity::Parse("0.4");
  EXPECT_EQ(*(c + d + e).Value(), 1);
}

TEST(QuantityTest, MilliValueOverflowIsAnError) {
  Quantity q = *Quantity::Parse("9223372036854775807");
  EXPECT_THAT(q.MilliValue(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("range")));
}

TEST(QuantityTest, ErrorEscapesUnprintableInput) {
  absl::Status s = Quantity::Parse("1\n").status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("\\n"));
}

TEST(QuantityTest, ToStringIsCanonical) {
  EXPECT_EQ(Quantity::Parse("1.5")->ToString(), "1500m");
  EXPECT_EQ(Quantity::Parse("2")->ToString(), "2");
  EXPECT_EQ(Quantity::Parse("1Ki")->ToString(), "1024");
  EXPECT_EQ(Quantity::Parse("-0.5")->ToString(), "-500m");
  EXPECT_EQ(Quantity::Parse("3n")->ToString(), "3n");
  // Beyond 2^64 nano-units (found by the fuzzer): rendered exactly, and parses back.
  Quantity big = *Quantity::Parse("92244444443688.568507");
  EXPECT_EQ(big.ToString(), "92244444443688568507u");
  EXPECT_EQ(*Quantity::Parse(big.ToString()), big);
}

}  // namespace
}  // namespace fitledger
