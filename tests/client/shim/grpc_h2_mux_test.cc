// The shim's multiplexing gRPC client (client/shim/grpc_h2_mux.h) against fitledger-server's
// unary listener (server/service/grpc_h2_server.h, its peer in production) and against gRPC's own
// C++ server: replies and statuses, many calls on few connections, completions on the
// connection's thread, deadlines, limits, a lost connection, outages and restarts, Stop.
#include "client/shim/grpc_h2_mux.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fitledger/v1/extender.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/grpc_h2_server.h"
#ifndef FITLEDGER_OWN_CLIENTS_ONLY
#include "tests/client/shim/fake_extender.h"
#endif

namespace fitledger::shim {
namespace {

using ::testing::HasSubstr;

constexpr char kFilter[] = "/fitledger.v1.Extender/Filter";
constexpr char kOddMessage[] = "bad 100% \"pod\" \xc3\xbc\nsecond line";

bool WaitFor(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

std::string Request(const std::string& pod, int candidates) {
  v1::ExtenderArgs args;
  args.mutable_pod()->mutable_metadata()->set_name(pod);
  for (int i = 0; i < candidates; ++i) args.add_node_names(absl::StrCat("node-", i));
  return args.SerializeAsString();
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/grpc-mux-XXXXXX";
    path_ = mkdtemp(name) != nullptr ? name : "";
  }
  ~TempDir() {
    std::remove(Path().c_str());
    rmdir(path_.c_str());
  }
  std::string Path() const { return absl::StrCat(path_, "/s.sock"); }
  std::string Socket() const { return absl::StrCat("unix://", Path()); }

 private:
  std::string path_;
};

class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  bool WaitForWaiters(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

// What one call came back with.
struct Outcome {
  grpc::Status status;
  std::string reply;
  std::thread::id thread;
};

// Starts a call; the future is ready once its completion ran. Null when Call refused it.
std::unique_ptr<std::future<Outcome>> Start(GrpcH2MuxClient& mux, const std::string& request,
                                            absl::Time deadline) {
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto future = std::make_unique<std::future<Outcome>>(promise->get_future());
  const bool taken = mux.Call(
      kFilter, request, deadline, [promise](const grpc::Status& status, absl::string_view reply) {
        promise->set_value({status, std::string(reply), std::this_thread::get_id()});
      });
  if (!taken) return nullptr;
  return future;
}

// Calls and waits for the outcome; a refused call fails the test.
Outcome CallAndWait(GrpcH2MuxClient& mux, const std::string& request,
                    absl::Time deadline = Soon()) {
  std::unique_ptr<std::future<Outcome>> future = Start(mux, request, deadline);
  if (future == nullptr) {
    ADD_FAILURE() << "the call was refused";
    return {grpc::Status(grpc::StatusCode::UNKNOWN, "refused"), "", {}};
  }
  return future->get();
}

std::vector<std::string> Names(const std::string& reply) {
  v1::ExtenderFilterResult result;
  EXPECT_TRUE(result.ParseFromString(reply));
  return {result.node_names().begin(), result.node_names().end()};
}

// fitledger's unary listener with a Filter that keeps every other candidate. Pod "fail":
// InvalidArgument with kOddMessage; "block": waits on the gate first.
class MuxTest : public ::testing::Test {
 protected:
  std::unique_ptr<GrpcH2Server> StartServer() {
    std::vector<std::pair<std::string, GrpcUnaryMethod>> methods;
    methods.emplace_back(kFilter, [this](absl::string_view bytes, std::string* out) {
      v1::ExtenderArgs args;
      if (!args.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
        return absl::InvalidArgumentError("cannot parse");
      }
      const std::string& pod = args.pod().metadata().name();
      if (pod == "fail") return absl::InvalidArgumentError(kOddMessage);
      if (pod == "block") gate_.Wait();
      v1::ExtenderFilterResult result;
      for (int i = 0; i < args.node_names_size(); i += 2) result.add_node_names(args.node_names(i));
      result.SerializeToString(out);
      return absl::OkStatus();
    });
    auto server = std::make_unique<GrpcH2Server>(GrpcH2ServerOptions{}, std::move(methods));
    EXPECT_TRUE(server->Listen(dir_.Socket()).ok());
    return server;
  }

  static GrpcH2MuxClient::Options TwoConnections() {
    GrpcH2MuxClient::Options o;
    o.connections = 2;
    o.initial_backoff = absl::Milliseconds(10);
    o.max_backoff = absl::Milliseconds(50);
    return o;
  }

  TempDir dir_;
  Gate gate_;
};

TEST_F(MuxTest, RepliesAndStatusesComeThroughOnTheConnectionsThread) {
  std::unique_ptr<GrpcH2Server> server = StartServer();
  GrpcH2MuxClient mux(dir_.Socket(), TwoConnections());
  mux.Start();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 2; }));

  Outcome ok = CallAndWait(mux, Request("p", 5));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_THAT(Names(ok.reply), ::testing::ElementsAre("node-0", "node-2", "node-4"));
  EXPECT_NE(ok.thread, std::this_thread::get_id());

  Outcome failed = CallAndWait(mux, Request("fail", 1));
  EXPECT_EQ(failed.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(failed.status.error_message(), kOddMessage);
  EXPECT_EQ(mux.calls_taken(), 2);
}

TEST_F(MuxTest, ManyConcurrentCallsShareTheConnectionsAndEachGetsItsOwnReply) {
  std::unique_ptr<GrpcH2Server> server = StartServer();
  GrpcH2MuxClient mux(dir_.Socket(), TwoConnections());
  mux.Start();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 2; }));
  constexpr int kThreads = 4;
  constexpr int kCalls = 100;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<int, std::unique_ptr<std::future<Outcome>>>> calls;
      for (int i = 0; i < kCalls; ++i) {
        const int candidates = 1 + (t * kCalls + i) % 37;
        calls.emplace_back(candidates,
                           Start(mux, Request(absl::StrCat("p-", t, "-", i), candidates), Soon()));
      }
      for (auto& [candidates, future] : calls) {
        if (future == nullptr) continue;
        Outcome o = future->get();
        if (o.status.ok() && Names(o.reply).size() == static_cast<size_t>((candidates + 1) / 2)) {
          ++good;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), kThreads * kCalls);
  EXPECT_EQ(server->connections(), 2);  // 400 calls, two connections
}

TEST_F(MuxTest, AMissedDeadlineIsDeadlineExceededAndTheConnectionStays) {
  std::unique_ptr<GrpcH2Server> server = StartServer();
  GrpcH2MuxClient::Options o = TwoConnections();
  o.connections = 1;
  GrpcH2MuxClient mux(dir_.Socket(), o);
  mux.Start();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 1; }));
  const absl::Time start = absl::Now();
  Outcome late = CallAndWait(mux, Request("block", 1), absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  gate_.Open();
  Outcome next = CallAndWait(mux, Request("p", 2));
  EXPECT_TRUE(next.status.ok()) << next.status.error_message();
  EXPECT_EQ(server->connections(), 1);
}

TEST_F(MuxTest, AReplyOverTheLimitIsRefusedAndTheNextCallWorks) {
  std::unique_ptr<GrpcH2Server> server = StartServer();
  GrpcH2MuxClient::Options o = TwoConnections();
  o.connections = 1;
  o.max_response_bytes = 100;
  GrpcH2MuxClient mux(dir_.Socket(), o);
  mux.Start();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 1; }));
  Outcome big = CallAndWait(mux, Request("p", 500));
  EXPECT_EQ(big.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(big.status.error_message(), HasSubstr("larger than 100 bytes"));
  Outcome small = CallAndWait(mux, Request("p", 3));
  EXPECT_TRUE(small.status.ok()) << small.status.error_message();
  EXPECT_THAT(Names(small.reply), ::testing::ElementsAre("node-0", "node-2"));
}

TEST_F(MuxTest, WithoutAServerCallsAreRefusedThenARestartedServerIsRedialled) {
  GrpcH2MuxClient mux(dir_.Socket(), TwoConnections());
  mux.Start();
  EXPECT_EQ(mux.connections_up(), 0);
  EXPECT_EQ(Start(mux, Request("p", 1), Soon()), nullptr);

  std::unique_ptr<GrpcH2Server> server = StartServer();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 2; }));
  EXPECT_TRUE(CallAndWait(mux, Request("p", 1)).status.ok());

  server->Stop();  // GOAWAY and close
  server.reset();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 0; }));
  EXPECT_EQ(Start(mux, Request("p", 1), Soon()), nullptr);

  server = StartServer();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 2; }));
  Outcome again = CallAndWait(mux, Request("p", 4));
  EXPECT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_THAT(Names(again.reply), ::testing::ElementsAre("node-0", "node-2"));
}

TEST_F(MuxTest, ACallOnAConnectionThatIsLostIsUnavailable) {
  // A peer that takes the connection, reads the request, and hangs up without answering.
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, dir_.Path().c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  GrpcH2MuxClient::Options o = TwoConnections();
  o.connections = 1;
  GrpcH2MuxClient mux(dir_.Socket(), o);
  mux.Start();
  const int peer = accept(listener, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  close(listener);  // no second connection: the redial fails
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 1; }));
  std::unique_ptr<std::future<Outcome>> call = Start(mux, Request("p", 50), Soon());
  ASSERT_NE(call, nullptr);
  // The client preface (24 bytes), SETTINGS, WINDOW_UPDATE, HEADERS and DATA: well over 200.
  size_t got = 0;
  char buffer[4096];
  while (got < 200) {
    const ssize_t n = recv(peer, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  EXPECT_GE(got, 200u);
  close(peer);
  Outcome lost = call->get();
  EXPECT_EQ(lost.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(lost.status.error_message(), HasSubstr("lost"));
  EXPECT_TRUE(WaitFor([&] { return mux.connections_up() == 0; }));
  EXPECT_EQ(Start(mux, Request("p", 1), Soon()), nullptr);
}

TEST_F(MuxTest, StopEndsTheCallsInFlightCancelledAndRefusesNewOnes) {
  std::unique_ptr<GrpcH2Server> server = StartServer();
  GrpcH2MuxClient mux(dir_.Socket(), TwoConnections());
  mux.Start();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 2; }));
  std::unique_ptr<std::future<Outcome>> blocked = Start(mux, Request("block", 1), Soon());
  ASSERT_NE(blocked, nullptr);
  ASSERT_TRUE(gate_.WaitForWaiters(1));
  mux.Stop();
  Outcome o = blocked->get();
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(mux.connections_up(), 0);
  EXPECT_EQ(Start(mux, Request("p", 1), Soon()), nullptr);
  gate_.Open();
}

TEST(MuxClientTest, ABadAddressIsRefused) {
  GrpcH2MuxClient mux("no-port-here", GrpcH2MuxClient::Options{});
  mux.Start();
  EXPECT_EQ(Start(mux, Request("p", 1), Soon()), nullptr);
  EXPECT_EQ(mux.connections_up(), 0);
}

#ifndef FITLEDGER_OWN_CLIENTS_ONLY
// gRPC's own server, the reference for the wire: replies, and a status with its message.
TEST(MuxClientTest, GrpcsOwnServerAnswersAndItsStatusComesThrough) {
  testing::FakeExtender fake;
  std::unique_ptr<testing::FakeServer> server = testing::FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  GrpcH2MuxClient mux(server->target(), GrpcH2MuxClient::Options{});
  mux.Start();
  ASSERT_TRUE(WaitFor([&] { return mux.connections_up() == 2; }));
  Outcome ok = CallAndWait(mux, Request("p", 3));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_THAT(Names(ok.reply), ::testing::ElementsAre("node-0", "node-1", "node-2"));
  fake.set_filter([](const v1::ExtenderArgs&, v1::ExtenderFilterResult*) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, kOddMessage);
  });
  Outcome failed = CallAndWait(mux, Request("p", 1));
  EXPECT_EQ(failed.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(failed.status.error_message(), kOddMessage);
}
#endif

}  // namespace
}  // namespace fitledger::shim
