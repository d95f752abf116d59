// A reflection-based client (Node: @grpc/grpc-js + grpc-js-reflection-client, no generated stubs,
// no .proto files) lists the services, calls Filter with the JSON kube-scheduler sends, and the
// health service reports SERVING.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using ::testing::ElementsAre;

TEST(ReflectionE2eTest, AReflectionClientCallsFilterWithKubeSchedulersJson) {
  const std::string dir = FITLEDGER_SOURCE_DIR "/tests/e2e/reflection";
  ASSERT_FALSE(
      ReadFileOrEmpty(dir + "/node_modules/grpc-js-reflection-client/package.json").empty())
      << "run scripts/install-deps (it installs the npm test tooling in " << dir << ")";
  absl::StatusOr<std::unique_ptr<E2eCluster>> c =
      E2eCluster::Start({ReadFileOrEmpty(FITLEDGER_SOURCE_DIR "/config/sim/pair.yaml"), ""});
  ASSERT_TRUE(c.ok()) << c.status();
  // The body exactly as kube-scheduler POSTs it with nodeCacheCapable: PascalCase extender keys,
  // a full API pod (fields fitledger does not read included), Nodes null.
  std::string args = R"({"Pod":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1",
    "namespace":"default","uid":"9d1f0c1e-1111-4a2b-8c3d-0123456789ab","labels":{"app":"web"},
    "creationTimestamp":"2026-11-30T12:00:00Z"},"spec":{"schedulerName":"fitledger-scheduler",
    "containers":[{"name":"app","image":"nginx","resources":{"requests":{"cpu":"3","memory":"1Gi"}}}],
    "tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute"}]},
    "status":{"phase":"Pending","qosClass":"Burstable"}},"Nodes":null,
    "NodeNames":["worker-1","worker-2","worker-9"]})";
  std::string file = (*c)->dir() + "/args.json";
  ASSERT_TRUE(WriteFile(file, args).ok());
  absl::StatusOr<CommandResult> r = RunCommand(
      {"node", dir + "/reflect.js", absl::StrCat("127.0.0.1:", (*c)->extender().grpc_port), file},
      {}, absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;
  nlohmann::json out = nlohmann::json::parse(r->output.substr(r->output.find('{')), nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << r->output;
  EXPECT_THAT(out["services"].get<std::vector<std::string>>(),
              ElementsAre("fitledger.v1.Extender", "fitledger.v1.Introspection",
                          "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"));
  EXPECT_EQ(out["filter"]["NodeNames"], nlohmann::json({"worker-1"}));
  EXPECT_EQ(out["filter"]["FailedAndUnresolvableNodes"]["worker-2"], "Insufficient cpu");
  EXPECT_EQ(out["filter"]["FailedNodes"]["worker-9"], "node not found");
  EXPECT_EQ(out["health"], "SERVING");
}

// grpc.unaryListen (fitledger's own HTTP/2 server), called by gRPC's C++ client: the same
// answers as grpc.listen for the unary methods, health included; reflection is not there.
TEST(ReflectionE2eTest, TheUnaryListenerAnswersLikeTheGrpcServerButHasNoReflection) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c =
      E2eCluster::Start({ReadFileOrEmpty(FITLEDGER_SOURCE_DIR "/config/sim/pair.yaml"), ""});
  ASSERT_TRUE(c.ok()) << c.status();
  auto channel =
      grpc::CreateChannel((*c)->extender().unary_socket, grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  auto introspection = v1::Introspection::NewStub(channel);
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(10); };
  grpc::health::v1::HealthCheckResponse serving;
  ASSERT_TRUE(E2eCluster::WaitFor(
      [&] {
        grpc::ClientContext context;
        context.set_deadline(deadline());
        grpc::health::v1::HealthCheckRequest request;
        request.set_service("fitledger.v1.Extender");
        return health->Check(&context, request, &serving).ok() &&
               serving.status() == grpc::health::v1::HealthCheckResponse::SERVING;
      },
      absl::Seconds(30)));
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    grpc::health::v1::HealthCheckRequest request;
    request.set_service("no.such.Service");
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_EQ(health->Check(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  // ListNodes: the same view on both listeners.
  auto nodes = [&](v1::Introspection::StubInterface* stub) {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    v1::ListNodesResponse response;
    grpc::Status s = stub->ListNodes(&context, v1::ListNodesRequest(), &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> names;
    for (const v1::NodeView& n : response.nodes()) {
      names.push_back(absl::StrCat(n.name(), " ", n.allocatable().ShortDebugString()));
    }
    return names;
  };
  std::vector<std::string> via_unary = nodes(introspection.get());
  EXPECT_EQ(via_unary.size(), 2u);
  EXPECT_EQ(via_unary, nodes((*c)->extender().introspection.get()));
  // A bad request gets the service's own InvalidArgument.
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    v1::ExplainResponse response;
    grpc::Status s = introspection->Explain(&context, v1::ExplainRequest(), &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "node is required");
  }
  // Reflection (a streaming service) lives on grpc.listen only.
  absl::StatusOr<CommandResult> r =
      RunCommand({FITLEDGER_SOURCE_DIR "/tests/tools/grpcurl/grpcurl", "-plaintext", "-unix",
                  (*c)->extender().unary_socket.substr(strlen("unix://")), "list"},
                 {}, absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->exit_code, 0);
  EXPECT_THAT(r->output, ::testing::HasSubstr("does not support the reflection API"));
}

}  // namespace
}  // namespace fitledger::testing
