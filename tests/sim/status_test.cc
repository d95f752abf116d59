#include "sim/status.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fitledger::sim {
namespace {

using ::testing::ElementsAre;

// Go's strconv.Quote, as Kubernetes' field errors show values.
TEST(GoQuoteTest, QuotesAsGoDoes) {
  EXPECT_EQ(GoQuote("abc"), "\"abc\"");
  EXPECT_EQ(GoQuote(""), "\"\"");
  EXPECT_EQ(GoQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(GoQuote("\n\t\r\a\b\f\v"), "\"\\n\\t\\r\\a\\b\\f\\v\"");
  EXPECT_EQ(GoQuote(std::string("\x01\x1f\x7f", 3)), "\"\\x01\\x1f\\x7f\"");
  EXPECT_EQ(GoQuote("zürich"), "\"zürich\"");
}

TEST(Dns1123SubdomainErrorsTest, NoneForAValidNameThePatternThenTheLength) {
  EXPECT_TRUE(Dns1123SubdomainErrors("target.name", "worker-1.example.com").empty());
  const std::vector<std::string> bad = Dns1123SubdomainErrors("target.name", "Bad_Node");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_THAT(bad[0], ::testing::StartsWith("target.name: Invalid value: \"Bad_Node\": a lowercase "
                                            "RFC 1123 subdomain must consist of"));
  const std::string long_name(254, 'a');
  EXPECT_THAT(Dns1123SubdomainErrors("metadata.name", long_name),
              ElementsAre("metadata.name: Invalid value: \"" + long_name +
                          "\": must be no more than 253 characters"));
  // Shown as given, checked as masked (a generateName's trailing dash).
  EXPECT_TRUE(Dns1123SubdomainErrors("metadata.generateName", "gen-", "gea").empty());
}

}  // namespace
}  // namespace fitledger::sim
