// The shim's own unary gRPC client (client/shim/grpc_h2.h) against a real gRPC C++ server (the
// fake Extender): replies and statuses, connection reuse, flow control with large messages,
// deadlines, outages and restarts, concurrency, and a peer that does not speak HTTP/2.
#include "client/shim/grpc_h2.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/client/shim/fake_extender.h"

namespace fitledger::shim {
namespace {

using ::fitledger::shim::testing::FakeExtender;
using ::fitledger::shim::testing::FakeServer;
using ::testing::HasSubstr;

constexpr char kFilter[] = "/fitledger.v1.Extender/Filter";

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

v1::ExtenderArgs ArgsFor(const std::string& pod, int candidates) {
  v1::ExtenderArgs args;
  args.mutable_pod()->mutable_metadata()->set_namespace_("default");
  args.mutable_pod()->mutable_metadata()->set_name(pod);
  for (int i = 0; i < candidates; ++i) args.add_node_names(absl::StrCat("node-", i));
  return args;
}

// A temporary directory for unix sockets, removed with its socket.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/grpc-h2-XXXXXX";
    path_ = mkdtemp(name) != nullptr ? name : "";
  }
  ~TempDir() {
    std::remove(absl::StrCat(path_, "/s.sock").c_str());
    rmdir(path_.c_str());
  }
  std::string Socket() const { return absl::StrCat("unix://", path_, "/s.sock"); }

 private:
  std::string path_;
};

TEST(GrpcH2ClientTest, CheckTargetAcceptsTheConfiguredForms) {
  EXPECT_TRUE(GrpcH2Client::CheckTarget("unix:///run/fitledger/server.sock").ok());
  EXPECT_TRUE(GrpcH2Client::CheckTarget("unix:relative.sock").ok());
  EXPECT_TRUE(GrpcH2Client::CheckTarget("127.0.0.1:50051").ok());
  EXPECT_TRUE(GrpcH2Client::CheckTarget("dns:///fitledger.kube-system.svc:50051").ok());
  EXPECT_TRUE(GrpcH2Client::CheckTarget("[::1]:50051").ok());
  EXPECT_FALSE(GrpcH2Client::CheckTarget("localhost").ok());
  EXPECT_FALSE(GrpcH2Client::CheckTarget("localhost:0").ok());
  EXPECT_FALSE(GrpcH2Client::CheckTarget("localhost:http").ok());
  EXPECT_FALSE(GrpcH2Client::CheckTarget("[::1:50051").ok());
  EXPECT_FALSE(GrpcH2Client::CheckTarget("unix://relative.sock").ok());
  EXPECT_FALSE(GrpcH2Client::CheckTarget(":50051").ok());
}

TEST(GrpcH2ClientTest, CallsOverTcpAndUnixReuseOneConnection) {
  FakeExtender fake;
  fake.set_filter([](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
    for (int i = 0; i < args.node_names_size(); i += 2) result->add_node_names(args.node_names(i));
    (*result->mutable_failed_nodes())["node-1"] = "Insufficient cpu";
    return grpc::Status::OK;
  });
  TempDir dir;
  for (const std::string& address : {std::string("127.0.0.1:0"), dir.Socket()}) {
    SCOPED_TRACE(address);
    std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, address);
    ASSERT_NE(server, nullptr);
    GrpcH2Client client(server->target());
    for (int i = 0; i < 20; ++i) {
      v1::ExtenderFilterResult result;
      grpc::Status s = client.Call(kFilter, ArgsFor(absl::StrCat("p", i), 5), &result, Soon());
      ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
      EXPECT_THAT(result.node_names(), ::testing::ElementsAre("node-0", "node-2", "node-4"));
      EXPECT_EQ(result.failed_nodes().at("node-1"), "Insufficient cpu");
    }
    EXPECT_EQ(fake.last_filter().pod().metadata().name(), "p19");
    EXPECT_EQ(client.connections_dialled(), 1);
  }
}

TEST(GrpcH2ClientTest, TheServersStatusAndMessageComeThrough) {
  FakeExtender fake;
  const std::string message = "bad pod: 100% \"quoted\", \xc3\xbcnicode, new\nline";
  fake.set_filter([&](const v1::ExtenderArgs&, v1::ExtenderFilterResult*) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
  });
  fake.set_bind([](const v1::ExtenderBindingArgs&, v1::ExtenderBindingResult*) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "");
  });
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  H2ExtenderStub stub(std::make_shared<GrpcH2Client>(server->target()));

  grpc::ClientContext filter_context;
  filter_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ExtenderFilterResult filter_result;
  grpc::Status s = stub.Filter(&filter_context, ArgsFor("p", 3), &filter_result);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), message);

  grpc::ClientContext bind_context;  // no deadline
  v1::ExtenderBindingResult bind_result;
  s = stub.Bind(&bind_context, v1::ExtenderBindingArgs(), &bind_result);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // Errors leave the connection usable.
  grpc::ClientContext prioritize_context;
  v1::HostPriorityList priorities;
  s = stub.Prioritize(&prioritize_context, ArgsFor("p", 2), &priorities);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(priorities.items_size(), 2);
  EXPECT_EQ(stub.client().connections_dialled(), 1);

  v1::ExtenderFilterResult unused;
  s = stub.client().Call("/fitledger.v1.Extender/NoSuchMethod", ArgsFor("p", 1), &unused, Soon());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST(GrpcH2ClientTest, HealthCheckAnswersTheServingStatus) {
  FakeExtender fake;
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  auto client = std::make_shared<GrpcH2Client>(server->target());
  H2HealthStub health(client);
  for (bool serving : {true, false, true}) {
    server->SetServing(serving);
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = health.Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.status(), serving ? grpc::health::v1::HealthCheckResponse::SERVING
                                         : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  }
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest unknown;
  unknown.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_EQ(health.Check(&context, unknown, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(client->connections_dialled(), 1);
}

// ~2.6 MB each way: many HTTP/2 frames and window updates in both directions.
TEST(GrpcH2ClientTest, LargeRequestsAndRepliesCrossTheFlowControlWindows) {
  FakeExtender fake;
  fake.set_filter([](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
    *result->mutable_node_names() = args.node_names();
    return grpc::Status::OK;
  });
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  GrpcH2Client client(server->target());
  const v1::ExtenderArgs args = ArgsFor("big", 200'000);
  ASSERT_GT(args.ByteSizeLong(), 2'000'000u);
  for (int i = 0; i < 3; ++i) {
    v1::ExtenderFilterResult result;
    grpc::Status s = client.Call(kFilter, args, &result, Soon());
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(result.node_names_size(), 200'000);
    EXPECT_EQ(result.node_names(199'999), "node-199999");
  }
  EXPECT_EQ(client.connections_dialled(), 1);
}

TEST(GrpcH2ClientTest, AReplyOverTheLimitIsRefusedAndTheNextCallWorks) {
  FakeExtender fake;
  fake.set_filter([](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
    *result->mutable_node_names() = args.node_names();
    return grpc::Status::OK;
  });
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  GrpcH2Client client(server->target(), GrpcH2Client::Options{.max_response_bytes = 1000});
  v1::ExtenderFilterResult result;
  grpc::Status s = client.Call(kFilter, ArgsFor("big", 500), &result, Soon());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("larger than 1000 bytes"));
  s = client.Call(kFilter, ArgsFor("small", 3), &result, Soon());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(result.node_names_size(), 3);
}

TEST(GrpcH2ClientTest, AMissedDeadlineIsDeadlineExceededAndTheNextCallWorks) {
  FakeExtender fake;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  fake.set_filter([&](const v1::ExtenderArgs& args, v1::ExtenderFilterResult*) {
    if (args.pod().metadata().name() != "slow") return grpc::Status::OK;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return release; });
    return grpc::Status::OK;
  });
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  GrpcH2Client client(server->target());
  v1::ExtenderFilterResult result;
  const absl::Time start = absl::Now();
  grpc::Status s =
      client.Call(kFilter, ArgsFor("slow", 1), &result, absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  s = client.Call(kFilter, ArgsFor("fast", 1), &result, Soon());
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST(GrpcH2ClientTest, ACallPastItsDeadlineIsNotSent) {
  FakeExtender fake;
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  GrpcH2Client client(server->target());
  v1::ExtenderFilterResult result;
  grpc::Status s =
      client.Call(kFilter, ArgsFor("late", 1), &result, absl::Now() - absl::Milliseconds(1));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  s = client.Call(kFilter, ArgsFor("on-time", 1), &result, Soon());
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(fake.calls(), 1);
  EXPECT_EQ(fake.last_filter().pod().metadata().name(), "on-time");
  EXPECT_EQ(client.connections_dialled(), 1);
}

TEST(GrpcH2ClientTest, NoServerIsUnavailableThenAServerRestartCostsNoCall) {
  TempDir dir;
  // No backoff after the failed dials, so "the first call after it" is not backed off.
  GrpcH2Client client(dir.Socket(), GrpcH2Client::Options{.initial_backoff = absl::ZeroDuration(),
                                                          .max_backoff = absl::ZeroDuration()});
  v1::ExtenderFilterResult result;
  grpc::Status s = client.Call(kFilter, ArgsFor("p", 1), &result, Soon());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("cannot connect"));

  FakeExtender fake;
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, dir.Socket());
  ASSERT_NE(server, nullptr);
  s = client.Call(kFilter, ArgsFor("p", 1), &result, Soon());
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(client.RefreshIdle(), 1);

  // The server goes away: its GOAWAY or close reaches the idle connection, which is dropped.
  server->Shutdown();
  const absl::Time deadline = Soon();
  while (client.RefreshIdle() != 0 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(client.RefreshIdle(), 0);
  s = client.Call(kFilter, ArgsFor("p", 1), &result, Soon());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);

  // Back: the first call after it works.
  server = FakeServer::Start(&fake, dir.Socket());
  ASSERT_NE(server, nullptr);
  s = client.Call(kFilter, ArgsFor("p", 1), &result, Soon());
  EXPECT_TRUE(s.ok()) << s.error_message();
  server.reset();
}

// After a failed dial, calls fail at once until the backoff has passed, even if the server is
// back meanwhile; then the next call dials.
TEST(GrpcH2ClientTest, AFailedDialBacksOff) {
  TempDir dir;
  GrpcH2Client client(dir.Socket(), GrpcH2Client::Options{.initial_backoff = absl::Seconds(600),
                                                          .max_backoff = absl::Seconds(600)});
  v1::ExtenderFilterResult result;
  grpc::Status s = client.Call(kFilter, ArgsFor("p", 1), &result, Soon());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr("next attempt")));
  FakeExtender fake;
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, dir.Socket());
  ASSERT_NE(server, nullptr);
  s = client.Call(kFilter, ArgsFor("p", 1), &result, Soon());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("next attempt in"));
  EXPECT_EQ(fake.calls(), 0);

  GrpcH2Client fresh(dir.Socket());
  s = fresh.Call(kFilter, ArgsFor("p", 1), &result, Soon());
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST(GrpcH2ClientTest, ConcurrentCallsEachGetTheirOwnReply) {
  constexpr int kThreads = 8;
  constexpr int kCalls = 200;
  FakeExtender fake;
  fake.set_filter([](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
    result->add_node_names(args.pod().metadata().name());
    return grpc::Status::OK;
  });
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  GrpcH2Client client(server->target());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const std::string pod = absl::StrCat("t", t, "-", i);
        v1::ExtenderFilterResult result;
        grpc::Status s = client.Call(kFilter, ArgsFor(pod, 10), &result, Soon());
        if (!s.ok() || result.node_names_size() != 1 || result.node_names(0) != pod) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(fake.calls(), kThreads * kCalls);
  EXPECT_LE(client.connections_dialled(), kThreads);
}

// A peer that answers HTTP/1.1 and closes: an error, not a crash or a hang.
TEST(GrpcH2ClientTest, APeerThatIsNotHttp2IsAnError) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::thread peer([listener] {
    const int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    char buffer[4096];
    (void)!recv(fd, buffer, sizeof(buffer), 0);
    const char reply[] =
        "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    (void)!send(fd, reply, sizeof(reply) - 1, MSG_NOSIGNAL);
    close(fd);
  });
  GrpcH2Client client(absl::StrCat("127.0.0.1:", ntohs(address.sin_port)));
  v1::ExtenderFilterResult result;
  grpc::Status s = client.Call(kFilter, ArgsFor("p", 1), &result, Soon());
  peer.join();
  close(listener);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.error_code() == grpc::StatusCode::INTERNAL ||
              s.error_code() == grpc::StatusCode::UNAVAILABLE)
      << s.error_code() << " " << s.error_message();
}

}  // namespace
}  // namespace fitledger::shim
