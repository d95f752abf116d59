#include "sim/selectors.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger::sim {
namespace {

using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

ObjectFields Pod(std::string node, std::string phase) {
  ObjectFields f;
  f.namespace_name = "default";
  f.name = "p";
  f.node_name = std::move(node);
  f.phase = std::move(phase);
  f.scheduler_name = "default-scheduler";
  f.labels = {{"app", "web"}, {"tier", "front"}};
  return f;
}

TEST(FieldSelectorTest, SchedulerSelectors) {
  struct Case {
    const char* selector;
    ObjectFields fields;
    bool matches;
  };
  const Case cases[] = {
      {"", Pod("", "Pending"), true},
      {"spec.nodeName=", Pod("", "Pending"), true},
      {"spec.nodeName=", Pod("n1", "Running"), false},
      {"spec.nodeName!=", Pod("n1", "Running"), true},
      {"spec.nodeName!=", Pod("", "Pending"), false},
      {"spec.nodeName=n1", Pod("n1", "Running"), true},
      {"spec.nodeName==n1", Pod("n2", "Running"), false},
      {"status.phase!=Succeeded,status.phase!=Failed", Pod("n1", "Running"), true},
      {"status.phase!=Succeeded,status.phase!=Failed", Pod("n1", "Failed"), false},
      {"status.phase!=Succeeded,status.phase!=Failed", Pod("n1", "Succeeded"), false},
      {"metadata.name=p", Pod("", ""), true},
      {"metadata.name=q", Pod("", ""), false},
      {"metadata.namespace=default,spec.schedulerName=default-scheduler", Pod("", ""), true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.selector);
    auto s = FieldSelector::Parse(c.selector, Kind::kPod);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->Matches(c.fields), c.matches);
  }
}

// The rest of the pod fields the API server converts (pkg/apis/core/v1/conversion.go) and selects
// on (pkg/registry/core/pod/strategy.go ToSelectableFields), and the node's.
TEST(FieldSelectorTest, EveryFieldTheApiServerSupports) {
  ObjectFields pod = Pod("n1", "Running");
  pod.restart_policy = "Always";
  pod.service_account_name = "default";
  pod.pod_ip = "10.64.0.5";
  pod.nominated_node_name = "";
  ObjectFields node;
  node.name = "n1";
  node.unschedulable = true;
  struct Case {
    const char* selector;
    Kind kind;
    bool matches;
  };
  const Case cases[] = {
      {"spec.restartPolicy=Always", Kind::kPod, true},
      {"spec.restartPolicy=Never", Kind::kPod, false},
      {"spec.serviceAccountName=default", Kind::kPod, true},
      {"spec.hostNetwork=false", Kind::kPod, true},
      {"spec.hostNetwork=true", Kind::kPod, false},
      {"status.podIP=10.64.0.5", Kind::kPod, true},
      {"status.nominatedNodeName=", Kind::kPod, true},
      {"status.nominatedNodeName!=", Kind::kPod, false},
      {"spec.host=n1", Kind::kPod, true},  // the old spelling of spec.nodeName
      // Converted but not a selectable field: always "".
      {"status.podIPs=", Kind::kPod, true},
      {"status.podIPs=10.64.0.5", Kind::kPod, false},
      {"metadata.name=n1,spec.unschedulable=true", Kind::kNode, true},
      {"spec.unschedulable=false", Kind::kNode, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.selector);
    auto s = FieldSelector::Parse(c.selector, c.kind);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->Matches(c.kind == Kind::kPod ? pod : node), c.matches);
  }
}

TEST(FieldSelectorTest, UnknownFieldsAreBadRequests) {
  EXPECT_THAT(
      FieldSelector::Parse("spec.priority=0", Kind::kPod),
      StatusIs(absl::StatusCode::kInvalidArgument, "field label not supported: spec.priority"));
  EXPECT_THAT(
      FieldSelector::Parse("status.hostIP=10.0.0.1", Kind::kPod),
      StatusIs(absl::StatusCode::kInvalidArgument, "field label not supported: status.hostIP"));
  EXPECT_THAT(FieldSelector::Parse("spec.nodeName=x", Kind::kNode),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not supported")));
  EXPECT_THAT(FieldSelector::Parse("metadata.namespace=x", Kind::kNode),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "field label not supported: metadata.namespace"));
  EXPECT_THAT(FieldSelector::Parse("garbage", Kind::kPod),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid selector")));
}

TEST(LabelSelectorTest, EqualityAndExistence) {
  struct Case {
    const char* selector;
    bool matches;
  };
  const Case cases[] = {{"", true},
                        {"app=web", true},
                        {"app==web", true},
                        {"app=db", false},
                        {"app!=db", true},
                        {"app!=web", false},
                        {"tier", true},
                        {"missing", false},
                        {"!missing", true},
                        {"!app", false},
                        {"app=web,tier=front", true},
                        {"app=web,tier=back", false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.selector);
    auto s = LabelSelector::Parse(c.selector);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->Matches(Pod("", "").labels), c.matches);
  }
}

TEST(LabelSelectorTest, SetBasedSelectorsMatchAsTheApiServersDo) {
  struct Case {
    const char* selector;
    bool matches;
  };
  // The pod's labels: app=web, tier=front.
  const Case cases[] = {{"app in (web,db)", true},     {"app in ( db , web )", true},
                        {"app in (db)", false},        {"missing in (web)", false},
                        {"app notin (db)", true},      {"app notin (db,web)", false},
                        {"missing notin (web)", true}, {"app in (web,db),tier=front", true},
                        {"app in (db,)", false},       {"missing notin (web,)", true},
                        {"tier in (front,)", true},    {"tier=front,app notin (web)", false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.selector);
    auto s = LabelSelector::Parse(c.selector);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->Matches(Pod("", "").labels), c.matches);
  }
}

TEST(LabelSelectorTest, MalformedSetBasedSelectorsAreRefused) {
  for (const char* bad : {"app in ()", "app in (web", "app within (web)", "app (web)",
                          "app in (we b)", "app in (a=b)"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(LabelSelector::Parse(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unable to parse")));
  }
}

}  // namespace
}  // namespace fitledger::sim
