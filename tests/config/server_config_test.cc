#include "config/server_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger::config {
namespace {

using ::fitledger::testing::IsOk;
using ::fitledger::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ServerConfigTest, BindAndFitDefaults) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig("", "server.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->bind_timeout, absl::Seconds(3));
  EXPECT_EQ(c->bind_budget, absl::Seconds(4));
  EXPECT_THAT(c->ignored_resources, IsEmpty());
  EXPECT_THAT(c->ignored_resource_groups, IsEmpty());
  EXPECT_THAT(c->scoring_resources, IsEmpty());
  EXPECT_EQ(c->filter_cache_size, 10000);
  EXPECT_EQ(c->content_type, "application/vnd.kubernetes.protobuf");  // as kube-scheduler's
  EXPECT_THAT(ValidateServerConfig(*c), IsOk());
  c = ParseServerConfig("kubernetes: {contentType: application/json}", "server.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->content_type, "application/json");
}

TEST(ServerConfigTest, ReadsTheBindBudgetIgnoredResourcesAndScoringResources) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig(R"(
kubernetes:
  bindTimeout: 2s
  bindBudget: 3500ms
ledger:
  ignoredResources: [example.com/foo, nvidia.com/gpu]
  ignoredResourceGroups: [other.example.org]
  scoring: MostAllocated
  filterCacheSize: 0
  scoringResources:
    - {name: cpu, weight: 2}
    - {name: memory}
    - {name: example.com/gpu-mem, weight: 100}
)",
                                                     "server.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->bind_timeout, absl::Seconds(2));
  EXPECT_EQ(c->bind_budget, absl::Milliseconds(3500));
  EXPECT_THAT(c->ignored_resources, ElementsAre("example.com/foo", "nvidia.com/gpu"));
  EXPECT_THAT(c->ignored_resource_groups, ElementsAre("other.example.org"));
  ASSERT_EQ(c->scoring_resources.size(), 3u);
  EXPECT_EQ(c->scoring_resources[0].name, "cpu");
  EXPECT_EQ(c->scoring_resources[0].weight, 2);
  EXPECT_EQ(c->scoring_resources[1].weight, 1);
  EXPECT_EQ(c->scoring_resources[2].name, "example.com/gpu-mem");
  EXPECT_EQ(c->filter_cache_size, 0);
  EXPECT_THAT(ValidateServerConfig(*c), IsOk());
}

TEST(ServerConfigTest, RejectsBadBindAndFitValues) {
  struct Case {
    std::string yaml;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"kubernetes: {bindBudget: 0s}", "key kubernetes.bindBudget: must be positive"},
           {"kubernetes: {bindBudget: -1s}", "is not a duration"},
           {"kubernetes: {contentType: application/yaml}",
            "key kubernetes.contentType: must be application/vnd.kubernetes.protobuf or "
            "application/json"},
           // NodeResourcesFitArgs validation: names are qualified names; groups have no "/".
           {"ledger: {ignoredResources: [\"example.com/\"]}", "is not a resource name"},
           {"ledger: {ignoredResourceGroups: [example.com/aa]}", "can't contain '/'"},
           {"ledger: {ignoredResourceGroups: [\"-bad\"]}", "is not a resource group"},
           {"ledger: {accounting: {mode: managed, managed: [example.com/gpu]}, "
            "ignoredResources: [example.com/gpu]}",
            "\"example.com/gpu\" is both managed (ledger.accounting.managed) and ignored"},
           {"ledger: {accounting: {mode: managed, managed: [example.com/gpu]}, "
            "ignoredResourceGroups: [example.com]}",
            "is both managed"},
           // Weights are 1..100 (upstream: "resource weight larger than MaxNodeScore", "resource
           // with zero weight").
           {"ledger: {scoringResources: [{name: cpu, weight: 101}]}", "weight"},
           {"ledger: {scoringResources: [{name: cpu, weight: 0}]}", "weight"},
           {"ledger: {scoringResources: [{name: pods}]}", "is not a resource fitledger can score"},
           {"ledger: {scoringResources: [{name: cpu}, {name: cpu}]}", "is listed twice"},
           {"ledger: {scoringResources: [{name: cpu, wieght: 2}]}", "unknown key"},
           {"ledger: {scoringResources: {cpu: 1}}", "must be a list of mappings"},
           {"ledger: {filterCacheSize: -1}", "filterCacheSize"},
           {"ledger: {filterCacheSize: 1000001}", "filterCacheSize"},
       }) {
    SCOPED_TRACE(c.yaml);
    EXPECT_THAT(ParseServerConfig(c.yaml, "server.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.error)));
  }
  ServerConfig flags;
  flags.bind_budget = absl::ZeroDuration();
  EXPECT_THAT(ValidateServerConfig(flags),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bindBudget")));
}

TEST(ServerConfigTest, TheShippedServerYamlLoads) {
  absl::StatusOr<ServerConfig> c =
      LoadServerConfig(std::string(FITLEDGER_SOURCE_DIR) + "/config/server.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->bind_budget, absl::Seconds(4));
  EXPECT_THAT(ValidateServerConfig(*c), IsOk());
}

}  // namespace
}  // namespace fitledger::config
