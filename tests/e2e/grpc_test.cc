// fitledger-server's gRPC services as a gRPC C++ client sees them. (What a user's tool sees,
// grpcurl over server reflection, is checked with the real grpcurl in
// tests/upstream/suite/e2e/grpcurl_test.go.)
#include <chrono>
#include <memory>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "proto/fitledger/v1/api_conventions.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

// Health per service and Introspection's errors on gRPC's own server, as a gRPC C++ client sees
// them; every reply carries the server's origin mark (proto/fitledger/v1/api_conventions.h).
TEST(GrpcE2eTest, HealthPerServiceAndTheServersOwnErrors) {
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
