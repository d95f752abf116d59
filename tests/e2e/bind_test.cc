// Bind outcomes end to end, with fitledger-sim's fault switches.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kOneNode[] = R"(
nodes:
  - name: n1
    allocatable: {cpu: "1", memory: 4Gi, pods: 110}
watchLag: 300ms
kubelet: {enabled: true}
)";

constexpr char kOneNodeSlowWatch[] = R"(
nodes:
  - name: n1
    allocatable: {cpu: "1", memory: 4Gi, pods: 110}
watchLag: 3s
kubelet: {enabled: true}
)";

// The reconciler settles an unknown outcome 1 s after the bind gave up.
constexpr char kFastReconcile[] = R"(
kubernetes: {bindTimeout: 500ms}
ledger: {reconcilePeriod: 200ms, assumedReconcileAge: 1s}
)";

// The reconciler waits longer than the API takes to finish the hung binding.
constexpr char kPatientReconcile[] = R"(
kubernetes: {bindTimeout: 500ms}
ledger: {reconcilePeriod: 200ms, assumedReconcileAge: 30s}
)";

int64_t CpuOn(E2eCluster& c, const std::string& node, bool assumed) {
  absl::StatusOr<v1::NodeView> n = c.Node(node);
  if (!n.ok()) return -1;
  return Amount(assumed ? n->assumed() : n->confirmed(), "cpu");
}

// Every test runs in both layouts: the webhook in fitledger-server (the chart's default) and in
// fitledger-shim in front of the server's gRPC.
class BindE2eTest : public ::testing::TestWithParam<Layout> {
 protected:
  ClusterOptions WithLayout(ClusterOptions options) const {
    options.layout = GetParam();
    return options;
  }
};

// A 500 may still be applied by the API server (issue 22, part 3): the pod stays assumed, and
// kube-scheduler's retry of the same pod is not kept off the node by its own assumption.
TEST_P(BindE2eTest, A500FromTheApiKeepsThePodAssumedAndItsRetryBinds) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({kOneNode, ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<nlohmann::json> pod = (*c)->CreatePod("p1", "800m");
  ASSERT_TRUE(pod.ok()) << pod.status();
  ASSERT_EQ((*c)->Api("POST", "/sim/faults/binding",
                      {{"names", {"default/p1"}}, {"mode", "error"}, {"code", 500}})
                .status,
            200);
  absl::StatusOr<std::string> error = (*c)->FilterAndBind(*pod, "n1");
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_THAT(*error, HasSubstr("answered 500"));
  EXPECT_THAT(*error, HasSubstr("binding outcome unknown"));
  EXPECT_EQ(CpuOn(**c, "n1", true), 800);  // kept: the write may still land
  // Another 800m pod does not fit meanwhile.
  absl::StatusOr<nlohmann::json> p2 = (*c)->CreatePod("p2", "800m");
  ASSERT_TRUE(p2.ok());
  HttpResult f = (*c)->Shim("filter", {{"Pod", *p2}, {"NodeNames", {"n1"}}});
  EXPECT_THAT(f.body["FailedNodes"].value("n1", ""), HasSubstr("Insufficient cpu")) << f.raw;
  // The retry of p1 passes Filter and binds; counted once.
  ASSERT_EQ((*c)->Api("DELETE", "/sim/faults/binding").status, 200);
  EXPECT_EQ((*c)->FilterAndBind(*pod, "n1").value_or("?"), "");
  EXPECT_EQ(CpuOn(**c, "n1", true) + CpuOn(**c, "n1", false), 800);
  EXPECT_TRUE(E2eCluster::WaitFor(
      [&] { return CpuOn(**c, "n1", false) == 800 && CpuOn(**c, "n1", true) == 0; },
      absl::Seconds(20)));
}

TEST_P(BindE2eTest, ABindThatHangsPastTheTimeoutStaysAssumedUntilTheWatchConfirms) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c =
      E2eCluster::Start(WithLayout({kOneNode, kPatientReconcile}));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<nlohmann::json> pod = (*c)->CreatePod("p1", "800m");
  ASSERT_TRUE(pod.ok());
  ASSERT_EQ(
      (*c)->Api("POST", "/sim/faults/binding",
                {{"names", {"default/p1"}}, {"mode", "hang"}, {"seconds", 2}, {"thenBind", true}})
          .status,
      200);
  absl::StatusOr<std::string> error = (*c)->FilterAndBind(*pod, "n1");
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_THAT(*error, HasSubstr("outcome unknown"));
  // Still counted: a second pod does not fit.
  EXPECT_EQ(CpuOn(**c, "n1", true), 800);
  absl::StatusOr<nlohmann::json> p2 = (*c)->CreatePod("p2", "800m");
  ASSERT_TRUE(p2.ok());
  HttpResult f = (*c)->Shim("filter", {{"Pod", *p2}, {"NodeNames", {"n1"}}});
  EXPECT_THAT(f.body["FailedNodes"].value("n1", ""), HasSubstr("Insufficient cpu")) << f.raw;
  // The sim binds after the hang; the watch confirms it: counted once, as confirmed.
  EXPECT_TRUE(E2eCluster::WaitFor(
      [&] { return CpuOn(**c, "n1", false) == 800 && CpuOn(**c, "n1", true) == 0; },
      absl::Seconds(20)));
}

TEST_P(BindE2eTest, ABindThatHangsAndNeverBindsIsForgottenByTheReconciler) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c =
      E2eCluster::Start(WithLayout({kOneNode, kFastReconcile}));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<nlohmann::json> pod = (*c)->CreatePod("p1", "800m");
  ASSERT_TRUE(pod.ok());
  ASSERT_EQ((*c)->Api("POST", "/sim/faults/binding",
                      {{"names", {"default/p1"}}, {"mode", "hang"}, {"seconds", 2}})
                .status,
            200);
  absl::StatusOr<std::string> error = (*c)->FilterAndBind(*pod, "n1");
  ASSERT_TRUE(error.ok());
  EXPECT_THAT(*error, HasSubstr("outcome unknown"));
  EXPECT_EQ(CpuOn(**c, "n1", true), 800);
  // After the hang the API says the pod is unbound; the reconciler settles it.
  EXPECT_TRUE(E2eCluster::WaitFor([&] { return CpuOn(**c, "n1", true) == 0; }, absl::Seconds(20)));
  EXPECT_EQ(CpuOn(**c, "n1", false), 0);
}

TEST_P(BindE2eTest, APodDeletedBeforeItsWatchEventStopsCounting) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c =
      E2eCluster::Start(WithLayout({kOneNodeSlowWatch, ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<nlohmann::json> pod = (*c)->CreatePod("p1", "800m");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*c)->FilterAndBind(*pod, "n1").value_or("?"), "");
  EXPECT_EQ(CpuOn(**c, "n1", true), 800);  // assumed: the watch is 3 s behind
  ASSERT_EQ((*c)->Api("DELETE", "/api/v1/namespaces/default/pods/p1").status, 200);
  EXPECT_TRUE(E2eCluster::WaitFor(
      [&] { return CpuOn(**c, "n1", true) == 0 && CpuOn(**c, "n1", false) == 0; },
      absl::Seconds(20)));
}

TEST_P(BindE2eTest, RepeatedBindToTheSameNodeSucceedsAndCountsOnce) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({kOneNode, ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<nlohmann::json> pod = (*c)->CreatePod("p1", "300m");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*c)->FilterAndBind(*pod, "n1").value_or("?"), "");
  EXPECT_EQ((*c)->FilterAndBind(*pod, "n1").value_or("?"), "");  // 409 same node = success
  EXPECT_TRUE(
      E2eCluster::WaitFor([&] { return CpuOn(**c, "n1", false) == 300; }, absl::Seconds(20)));
  EXPECT_EQ(CpuOn(**c, "n1", true), 0);
}

TEST_P(BindE2eTest, BindingAPodThatIsGoneFailsWithoutAnAssumption) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({kOneNode, ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<nlohmann::json> pod = (*c)->CreatePod("p1", "300m");
  ASSERT_TRUE(pod.ok());
  HttpResult f = (*c)->Shim("filter", {{"Pod", *pod}, {"NodeNames", {"n1"}}});
  ASSERT_EQ(f.status, 200);
  ASSERT_EQ((*c)->Api("DELETE", "/api/v1/namespaces/default/pods/p1").status, 200);
  HttpResult b = (*c)->Shim("bind", {{"PodName", "p1"},
                                     {"PodNamespace", "default"},
                                     {"PodUID", (*pod)["metadata"]["uid"]},
                                     {"Node", "n1"}});
  ASSERT_EQ(b.status, 200);
  EXPECT_THAT(b.body.value("Error", ""), HasSubstr("not found"));
  EXPECT_EQ(CpuOn(**c, "n1", true), 0);
  absl::StatusOr<v1::ListAssumedResponse> assumed = (*c)->Assumed();
  ASSERT_TRUE(assumed.ok());
  EXPECT_THAT(assumed->assumed(), IsEmpty());
}

TEST_P(BindE2eTest, BadInputGetsClearErrorsAndTheServiceKeepsAnswering) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({kOneNode, ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  // Through the shim.
  EXPECT_EQ((*c)->ShimRaw("filter", "{not json").status, 400);
  EXPECT_EQ((*c)->ShimRaw("filter", "").status, 400);
  HttpResult bad_quantity = (*c)->Shim(
      "filter",
      {{"Pod",
        {{"metadata", {{"name", "x"}}},
         {"spec",
          {{"containers", {{{"name", "c"}, {"resources", {{"requests", {{"cpu", "1.1.M"}}}}}}}}}}}},
       {"NodeNames", {"n1"}}});
  EXPECT_EQ(bad_quantity.status, 400) << bad_quantity.raw;
  EXPECT_THAT(bad_quantity.raw, HasSubstr("1.1.M"));
  // Through gRPC directly.
  v1::ExtenderArgs args;
  args.add_node_names("n1");
  args.mutable_pod()->mutable_metadata()->set_name("x");
  auto* container = args.mutable_pod()->mutable_spec()->add_containers();
  (*container->mutable_resources()->mutable_requests())["cpu"] = "12Qi";
  grpc::ClientContext ctx;
  v1::ExtenderFilterResult result;
  grpc::Status s = (*c)->extender().extender->Filter(&ctx, args, &result);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("12Qi"));
  // No pod (or a null one, or one without a name) is an error, not a pod that fits everywhere.
  v1::ExtenderArgs no_pod;
  no_pod.add_node_names("n1");
  grpc::ClientContext ctx2;
  s = (*c)->extender().extender->Filter(&ctx2, no_pod, &result);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("Pod: missing, or without metadata.name"));
  HttpResult null_pod = (*c)->Shim("filter", {{"Pod", nullptr}, {"NodeNames", {"n1"}}});
  EXPECT_THAT(null_pod.raw, HasSubstr("Pod: missing, or without metadata.name")) << null_pod.raw;
  // Still answering correctly.
  absl::StatusOr<nlohmann::json> pod = (*c)->CreatePod("p1", "300m");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*c)->FilterAndBind(*pod, "n1").value_or("?"), "");
}

// The server reuses Filter's and Prioritize's messages from call to call (MessagePool): no call may
// see anything of the one before it.
TEST_P(BindE2eTest, GrpcCallsOnReusedMessagesAnswerEachCallAlone) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({kOneNode, ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  auto args_for = [](std::vector<std::string> names, const std::string& cpu) {
    v1::ExtenderArgs args;
    args.mutable_pod()->mutable_metadata()->set_name("probe");
    args.mutable_pod()->mutable_metadata()->set_namespace_("default");
    auto* container = args.mutable_pod()->mutable_spec()->add_containers();
    container->set_name("c");
    (*container->mutable_resources()->mutable_requests())["cpu"] = cpu;
    for (const std::string& name : names) args.add_node_names(name);
    return args;
  };
  auto failed = [](const v1::ExtenderFilterResult& r) {
    std::vector<std::string> keys;
    for (const auto& [name, why] : r.failed_nodes()) keys.push_back(name);
    for (const auto& [name, why] : r.failed_and_unresolvable_nodes()) keys.push_back(name);
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  auto* stub = (*c)->extender().extender.get();
  for (int i = 0; i < 10; ++i) {
    SCOPED_TRACE(i);
    v1::ExtenderFilterResult wide;
    grpc::ClientContext ctx1;
    ASSERT_TRUE(stub->Filter(&ctx1, args_for({"n1", "gone-1", "gone-2"}, "300m"), &wide).ok());
    EXPECT_THAT(wide.node_names(), ElementsAre("n1"));
    EXPECT_THAT(failed(wide), ElementsAre("gone-1", "gone-2"));
    v1::ExtenderFilterResult narrow;
    grpc::ClientContext ctx2;
    ASSERT_TRUE(stub->Filter(&ctx2, args_for({"n1"}, "2"), &narrow).ok());
    EXPECT_THAT(narrow.node_names(), IsEmpty());
    EXPECT_THAT(failed(narrow), ElementsAre("n1"));
    v1::HostPriorityList two;
    grpc::ClientContext ctx3;
    ASSERT_TRUE(stub->Prioritize(&ctx3, args_for({"n1", "gone-1"}, "300m"), &two).ok());
    EXPECT_EQ(two.items_size(), 2);
    v1::HostPriorityList one;
    grpc::ClientContext ctx4;
    ASSERT_TRUE(stub->Prioritize(&ctx4, args_for({"n1"}, "300m"), &one).ok());
    ASSERT_EQ(one.items_size(), 1);
    EXPECT_EQ(one.items(0).host(), "n1");
  }
}

TEST_P(BindE2eTest, SigtermShutsDownCleanly) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start(WithLayout({kOneNode, ""}));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<int> code = (*c)->StopServer();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, BindE2eTest, ::testing::Values(Layout::kInServer, Layout::kShim),
                         LayoutName);

}  // namespace
}  // namespace fitledger::testing
