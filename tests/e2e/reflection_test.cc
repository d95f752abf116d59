// A reflection-based client (Node: @grpc/grpc-js + grpc-js-reflection-client, no generated stubs,
// no .proto files) lists the services, calls Filter with the JSON kube-scheduler sends, and the
// health service reports SERVING.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "proto/fitledger/v1/api_conventions.h"
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

// Health per service and Introspection's errors on gRPC's own server, as a gRPC C++ client sees
// them; every reply carries the server's origin mark (proto/fitledger/v1/api_conventions.h).
TEST(ReflectionE2eTest, HealthPerServiceAndTheServersOwnErrors) {
  absl::StatusOr<std::unique_ptr<E2eCluster>> c =
      E2eCluster::Start({ReadFileOrEmpty(FITLEDGER_SOURCE_DIR "/config/sim/pair.yaml"), ""});
  ASSERT_TRUE(c.ok()) << c.status();
  auto channel = grpc::CreateChannel((*c)->extender().socket, grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  auto introspection = v1::Introspection::NewStub(channel);
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(10); };
  for (const char* service : {"", "fitledger.v1.Extender", "fitledger.v1.Introspection"}) {
    grpc::health::v1::HealthCheckResponse serving;
    EXPECT_TRUE(E2eCluster::WaitFor(
        [&] {
          grpc::ClientContext context;
          context.set_deadline(deadline());
          grpc::health::v1::HealthCheckRequest request;
          request.set_service(service);
          return health->Check(&context, request, &serving).ok() &&
                 serving.status() == grpc::health::v1::HealthCheckResponse::SERVING;
        },
        absl::Seconds(30)))
        << service;
  }
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    grpc::health::v1::HealthCheckRequest request;
    request.set_service("no.such.Service");
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_EQ(health->Check(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  // A bad request gets the service's own InvalidArgument, marked as the server's.
  grpc::ClientContext context;
  context.set_deadline(deadline());
  v1::ExplainResponse response;
  grpc::Status s = introspection->Explain(&context, v1::ExplainRequest(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "node is required");
  EXPECT_EQ(context.GetServerTrailingMetadata().count(v1::kServerOriginMetadata), 1u);
}

}  // namespace
}  // namespace fitledger::testing
