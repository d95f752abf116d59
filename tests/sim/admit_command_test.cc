#include "sim/admit_command.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/status_matchers.h"

namespace fitledger::sim {
namespace {

using ::fitledger::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

json GpuPod(const std::string& name, int gpus) {
  const json gpu = {{"example.com/gpu", std::to_string(gpus)}};
  return {{"metadata", {{"name", name}}},
          {"spec",
           {{"containers",
             {{{"name", "main"}, {"resources", {{"requests", gpu}, {"limits", gpu}}}}}}}}};
}

TEST(AdmitCommandTest, JudgesThePodsInOrderOnOneNode) {
  const json input = {
      {"node",
       {{"metadata", {{"name", "g"}}},
        {"status", {{"allocatable", {{"cpu", "1"}, {"pods", "3"}, {"example.com/gpu", "2"}}}}}}},
      {"devices", {{"example.com/gpu", 2}}},
      {"pods", {GpuPod("a", 1), GpuPod("b", 2), GpuPod("c", 1), GpuPod("d", 0), GpuPod("e", 0)}}};
  absl::StatusOr<std::string> out = RunAdmitCommand(input.dump());
  ASSERT_TRUE(out.ok()) << out.status();
  const json verdicts = json::parse(*out);
  ASSERT_EQ(verdicts.size(), 5u);
  EXPECT_EQ(verdicts[0], json::parse(R"({"name":"a","admit":true,"reason":"","message":""})"));
  EXPECT_EQ(verdicts[1]["reason"], "UnexpectedAdmissionError");
  EXPECT_EQ(verdicts[1]["message"],
            "Allocate failed due to requested number of devices unavailable for example.com/gpu. "
            "Requested: 2, Available: 1, which is unexpected");
  EXPECT_EQ(verdicts[2]["admit"], true);
  EXPECT_EQ(verdicts[3]["admit"], true);  // b, refused, took no slot
  EXPECT_EQ(verdicts[4]["reason"], "OutOfpods");
  EXPECT_EQ(verdicts[4]["message"],
            "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3");
}

TEST(AdmitCommandTest, BadInputNamesWhatIsWrong) {
  EXPECT_THAT(RunAdmitCommand("{not json"),
              StatusIs(absl::StatusCode::kInvalidArgument, "the input is not JSON"));
  EXPECT_THAT(RunAdmitCommand("[]"),
              StatusIs(absl::StatusCode::kInvalidArgument, "the input must be a JSON object"));
  EXPECT_THAT(RunAdmitCommand(R"({"pods":[]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node: a v1.Node object")));
  EXPECT_THAT(RunAdmitCommand(R"({"node":{},"pods":[],"extra":1})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown key \"extra\"")));
  EXPECT_THAT(RunAdmitCommand(R"({"node":{"status":{"allocatable":{"cpu":"4x"}}},"pods":[]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node.status.allocatable")));
  EXPECT_THAT(RunAdmitCommand(R"({"node":{},"devices":{"example.com/gpu":-1},"pods":[]})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("devices.example.com/gpu: must be an integer >= 0")));
  EXPECT_THAT(RunAdmitCommand(R"({"node":{},"devices":{"gpu":1},"pods":[]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extended resource name")));
  EXPECT_THAT(RunAdmitCommand(R"({"node":{},"pods":{}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pods: a list")));
  EXPECT_THAT(
      RunAdmitCommand(
          R"({"node":{},"pods":[{"spec":{"containers":[{"resources":{"requests":{"cpu":"1q"}}}]}}]})"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pods[0]: ")));
}

}  // namespace
}  // namespace fitledger::sim
