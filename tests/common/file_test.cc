#include "common/file.h"

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/common/temp_dir.h"

namespace fitledger {
namespace {

using ::fitledger::testing::IsOk;
using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ParseDurationTest, GoUnitsAndABareZero) {
  EXPECT_EQ(*ParseDuration("0"), absl::ZeroDuration());
  EXPECT_EQ(*ParseDuration("1m30s"), absl::Seconds(90));
  EXPECT_EQ(*ParseDuration("250ms"), absl::Milliseconds(250));
  for (const char* bad : {"-1s", "2", "", "inf", "1x"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ParseDuration(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a duration")));
  }
}

TEST(WriteFileAtomicallyTest, ReplacesTheWholeFileAndLeavesNoTemporary) {
  testing::TempDir dir("file-test");
  const std::string path = dir.path() + "/ready";
  ASSERT_THAT(WriteFileAtomically(path, "first, and longer\n"), IsOk());
  ASSERT_THAT(WriteFileAtomically(path, "second\n"), IsOk());
  EXPECT_EQ(*ReadFile(path), "second\n");
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_THAT(WriteFileAtomically(dir.path() + "/no/such/dir/file", "x"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("cannot write ")));
}

}  // namespace
}  // namespace fitledger
