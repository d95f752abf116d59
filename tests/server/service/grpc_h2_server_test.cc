// The unary gRPC server on nghttp2 (server/service/grpc_h2_server.h), called by gRPC's own C++
// client (the reference), by fitledger-shim's client, and by a raw HTTP/2 client for what the
// other two never send: bad framing, compression, other methods and content types, oversize
// requests, garbage. Also deadlines, concurrency, the connection cap and a graceful stop.
#include "server/service/grpc_h2_server.h"

#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/shim/grpc_h2.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace fitledger {
namespace {

using ::testing::HasSubstr;

constexpr char kFilter[] = "/fitledger.v1.Extender/Filter";
constexpr char kOddMessage[] = "bad 100% \"pod\" \xc3\xbc\nsecond line";

// Waits for `done` (polled) up to a generous deadline.
bool WaitFor(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/grpc-h2s-XXXXXX";
    path_ = mkdtemp(name) != nullptr ? name : "";
  }
  ~TempDir() {
    std::remove(absl::StrCat(path_, "/s.sock").c_str());
    rmdir(path_.c_str());
  }
  std::string Path() const { return absl::StrCat(path_, "/s.sock"); }
  std::string Socket() const { return absl::StrCat("unix://", Path()); }

 private:
  std::string path_;
};

// A gate a handler waits on until the test opens it.
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
    cv_.wait(lock, [&] { return open_; });
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

// Filter: keeps every other candidate. Pod "fail": InvalidArgument with kOddMessage; pod
// "block": waits on the gate first. Calls are counted by pod name.
class GrpcH2ServerTest : public ::testing::Test {
 protected:
  std::unique_ptr<GrpcH2Server> MakeServer(GrpcH2ServerOptions options = {}) {
    std::vector<std::pair<std::string, GrpcUnaryMethod>> methods;
    methods.emplace_back(kFilter, [this](absl::string_view bytes, std::string* out) {
      v1::ExtenderArgs args;
      if (!args.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
        return absl::InvalidArgumentError("cannot parse");
      }
      const std::string& pod = args.pod().metadata().name();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++calls_[pod];
      }
      if (pod == "fail") return absl::InvalidArgumentError(kOddMessage);
      if (pod == "block") gate_.Wait();
      v1::ExtenderFilterResult result;
      for (int i = 0; i < args.node_names_size(); i += 2) result.add_node_names(args.node_names(i));
      result.SerializeToString(out);
      return absl::OkStatus();
    });
    return std::make_unique<GrpcH2Server>(options, std::move(methods));
  }

  int Calls(const std::string& pod) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[pod];
  }

  static v1::ExtenderArgs Args(const std::string& pod, int candidates) {
    v1::ExtenderArgs args;
    args.mutable_pod()->mutable_metadata()->set_name(pod);
    for (int i = 0; i < candidates; ++i) args.add_node_names(absl::StrCat("node-", i));
    return args;
  }

  static std::unique_ptr<v1::Extender::Stub> GrpcStub(const std::string& target) {
    return v1::Extender::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  }

  static grpc::Status GrpcFilter(v1::Extender::Stub* stub, const v1::ExtenderArgs& args,
                                 v1::ExtenderFilterResult* result,
                                 absl::Duration timeout = absl::Seconds(20)) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return stub->Filter(&context, args, result);
  }

  TempDir dir_;
  Gate gate_;
  std::mutex mu_;
  std::map<std::string, int> calls_;
};

// What a raw HTTP/2 exchange got back.
struct RawReply {
  bool closed = false;  // the stream ended (not the connection)
  int http_status = 0;
  int grpc_status = -1;
  std::string grpc_message;  // as sent (percent-encoded)
  std::string body;
  uint32_t reset = 0;
};

// A raw HTTP/2 client over a Unix socket: sends exactly the headers and bytes it is given.
class RawClient {
 public:
  // `window`: the stream window the client advertises (0: the server may send no DATA).
  explicit RawClient(const std::string& path, uint32_t window = 65535) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, &RawClient::OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &RawClient::OnData);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &RawClient::OnClose);
    nghttp2_session_client_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 1);
  }
  ~RawClient() {
    nghttp2_session_del(session_);
    close(fd_);
  }
  int fd() const { return fd_; }
  bool connected() const { return connected_; }

  // Queues one request; `headers` replace the defaults of the same name. Returns its stream.
  // `keep_open`: the body is sent without END_STREAM, as a streaming client does.
  int32_t Submit(std::vector<std::pair<std::string, std::string>> headers, std::string body,
                 bool keep_open = false) {
    std::map<std::string, std::string> all = {{":method", "POST"},
                                              {":scheme", "http"},
                                              {":path", kFilter},
                                              {":authority", "localhost"},
                                              {"content-type", "application/grpc"},
                                              {"te", "trailers"}};
    for (auto& [name, value] : headers) all[name] = value;
    std::vector<nghttp2_nv> nv;
    for (int pass = 0; pass < 2; ++pass) {  // pseudo-headers first
      for (auto& [name, value] : all) {
        if ((name[0] == ':') != (pass == 0)) continue;
        nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                      value.size(), NGHTTP2_NV_FLAG_NONE});
      }
    }
    nghttp2_data_provider provider{};
    provider.read_callback = &RawClient::Read;
    const int32_t id =
        nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &provider, nullptr);
    sending_[id] = {std::move(body), 0, keep_open};
    return id;
  }
  void Reset(int32_t id) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  }
  // The frames queued so far, serialized (nghttp2 considers them sent).
  std::string Pending() {
    std::string out;
    const uint8_t* data = nullptr;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(session_, &data)) > 0) {
      out.append(reinterpret_cast<const char*>(data), n);
    }
    return out;
  }
  // Writes `bytes` with one send, so the server reads them all at once.
  bool SendRaw(const std::string& bytes) {
    return bytes.empty() || send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
                                static_cast<ssize_t>(bytes.size());
  }
  bool Flush() { return SendRaw(Pending()); }
  // Reads and drops bytes until the server closes the connection (or 20 s pass).
  bool WaitForClose() {
    return WaitFor([&] {
      char buffer[4096];
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) return false;
      return recv(fd_, buffer, sizeof(buffer), 0) <= 0;
    });
  }
  // Runs the session until stream `id` ends (or the connection does, or 20 s pass).
  RawReply Wait(int32_t id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    std::string buffer(1 << 16, '\0');
    while (!replies_[id].closed && absl::Now() < deadline) {
      if (!Flush()) break;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = recv(fd_, buffer.data(), buffer.size(), 0);
      if (n <= 0) break;
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<uint8_t*>(buffer.data()), n) < 0) {
        break;
      }
    }
    return replies_[id];
  }
  RawReply Call(std::vector<std::pair<std::string, std::string>> headers, std::string body) {
    return Wait(Submit(std::move(headers), std::move(body)));
  }

 private:
  static ssize_t Read(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                      nghttp2_data_source*, void* user) {
    Upload& u = static_cast<RawClient*>(user)->sending_[id];
    const size_t n = std::min(length, u.body.size() - u.sent);
    if (n == 0 && u.keep_open) return NGHTTP2_ERR_DEFERRED;
    std::memcpy(buf, u.body.data() + u.sent, n);
    u.sent += n;
    if (u.sent == u.body.size() && !u.keep_open) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t nlen, const uint8_t* value, size_t vlen, uint8_t, void* user) {
    RawReply& r = static_cast<RawClient*>(user)->replies_[frame->hd.stream_id];
    const std::string n(reinterpret_cast<const char*>(name), nlen);
    const std::string v(reinterpret_cast<const char*>(value), vlen);
    if (n == ":status") r.http_status = std::stoi(v);
    if (n == "grpc-status") r.grpc_status = std::stoi(v);
    if (n == "grpc-message") r.grpc_message = v;
    return 0;
  }
  static int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t length,
                    void* user) {
    static_cast<RawClient*>(user)->replies_[id].body.append(reinterpret_cast<const char*>(data),
                                                            length);
    return 0;
  }
  static int OnClose(nghttp2_session*, int32_t id, uint32_t code, void* user) {
    RawReply& r = static_cast<RawClient*>(user)->replies_[id];
    r.closed = true;
    r.reset = code;
    return 0;
  }

  int fd_ = -1;
  bool connected_ = false;
  nghttp2_session* session_ = nullptr;
  struct Upload {
    std::string body;
    size_t sent = 0;
    bool keep_open = false;
  };
  std::map<int32_t, Upload> sending_;
  std::map<int32_t, RawReply> replies_;
};

// gRPC's 5-byte prefix and the message.
std::string Framed(const std::string& message, char flag = 0) {
  const uint32_t n = static_cast<uint32_t>(message.size());
  std::string out = {flag, static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8), static_cast<char>(n)};
  return out + message;
}

TEST_F(GrpcH2ServerTest, MalformedRequestsGetAClearStatusAndTheConnectionGoesOn) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  RawClient raw(dir_.Path());
  ASSERT_TRUE(raw.connected());
  const std::string message = Args("p", 4).SerializeAsString();

  RawReply r = raw.Call({}, "");  // no message at all
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(r.grpc_message, HasSubstr("no message"));

  r = raw.Call({}, Framed(message) + Framed(message));  // two messages on a unary call
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(r.grpc_message, HasSubstr("one message"));

  r = raw.Call({}, Framed(message).substr(0, 10));  // the prefix promises more than came
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));

  r = raw.Call({{"grpc-encoding", "gzip"}}, Framed(message, 1));
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));
  EXPECT_THAT(r.grpc_message, HasSubstr("compressed"));

  r = raw.Call({}, Framed("\xff\xff\xff"));  // not a protobuf
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));

  // A malformed grpc-timeout is ignored: the call runs. Only digits count as the value (a
  // sign or a blank would have read as 0, an expired call). A leading blank never arrives:
  // HTTP/2 refuses such a header value.
  r = raw.Call({{"grpc-timeout", "banana"}}, Framed(Args("banana", 2).SerializeAsString()));
  EXPECT_EQ(r.grpc_status, 0);
  EXPECT_EQ(Calls("banana"), 1);
  for (const char* timeout : {"+0m", "-0m", "0 m"}) {
    SCOPED_TRACE(timeout);
    const std::string name = absl::StrCat("timeout[", timeout, "]");
    r = raw.Call({{"grpc-timeout", timeout}}, Framed(Args(name, 2).SerializeAsString()));
    EXPECT_EQ(r.grpc_status, 0);
    EXPECT_EQ(Calls(name), 1);
  }

  // Headers over 16 KiB: RESOURCE_EXHAUSTED, and the method does not run.
  r = raw.Call({{"x-big", std::string(20000, 'x')}},
               Framed(Args("big-headers", 2).SerializeAsString()));
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  EXPECT_EQ(Calls("big-headers"), 0);

  r = raw.Call({{":path", "/no.Such/Method"}}, Framed(message));
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));

  // A streaming call to a method that is not here is answered at once, while its upload is
  // still open (as grpcurl's reflection stream waits for a reply to its first message).
  const int32_t stream = raw.Submit({{":path",
                                      "/grpc.reflection.v1alpha.ServerReflection/"
                                      "ServerReflectionInfo"}},
                                    Framed("\x1a\x00"), /*keep_open=*/true);
  r = raw.Wait(stream);
  EXPECT_TRUE(r.closed);
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));

  r = raw.Call({{":method", "GET"}}, "");
  EXPECT_EQ(r.http_status, 405);
  EXPECT_EQ(r.grpc_status, -1);

  r = raw.Call({{"content-type", "application/json"}}, "{}");
  EXPECT_EQ(r.http_status, 415);
  EXPECT_THAT(r.body, HasSubstr("application/grpc"));
  r = raw.Call({{"content-type", "application/grpc-web"}}, Framed(message));
  EXPECT_EQ(r.http_status, 415);
  r = raw.Call({{"content-type", "application/grpc+proto"}}, Framed(message));
  EXPECT_EQ(r.grpc_status, 0);

  // A proper call on the same connection still works, with a percent-free reply.
  r = raw.Call({}, Framed(message));
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.grpc_status, 0);
  v1::ExtenderFilterResult result;
  ASSERT_GE(r.body.size(), 5u);
  ASSERT_TRUE(result.ParseFromString(r.body.substr(5)));
  EXPECT_EQ(result.node_names_size(), 2);
  EXPECT_EQ(Calls("p"), 2);  // only the proper calls reached the method
}

TEST_F(GrpcH2ServerTest, TheErrorMessageIsPercentEncodedOnTheWire) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  RawClient raw(dir_.Path());
  RawReply r = raw.Call({}, Framed(Args("fail", 1).SerializeAsString()));
  EXPECT_EQ(r.grpc_message, "bad 100%25 \"pod\" %C3%BC%0Asecond line");
}

TEST_F(GrpcH2ServerTest, ARequestOverTheLimitIsRefusedWithoutReachingTheMethod) {
  GrpcH2ServerOptions options;
  options.max_message_bytes = 64 << 10;
  auto server = MakeServer(options);
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  shim::GrpcH2Client client(dir_.Socket());
  v1::ExtenderFilterResult result;
  grpc::Status s =
      client.Call(kFilter, Args("big", 20000), &result, absl::Now() + absl::Seconds(20));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("larger than 65536"));
  EXPECT_EQ(Calls("big"), 0);
  s = client.Call(kFilter, Args("p", 100), &result, absl::Now() + absl::Seconds(20));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(result.node_names_size(), 50);
}

TEST_F(GrpcH2ServerTest, ACallPastItsDeadlineOrResetBeforeItRanDoesNotRun) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  RawClient raw(dir_.Path());
  ASSERT_TRUE(raw.connected());
  // grpc-timeout 0: expired by the time it is dispatched.
  RawReply r = raw.Call({{"grpc-timeout", "0m"}}, Framed(Args("expired", 2).SerializeAsString()));
  EXPECT_EQ(r.grpc_status, static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED));
  EXPECT_EQ(Calls("expired"), 0);
  r = raw.Call({{"grpc-timeout", "20S"}}, Framed(Args("timely", 2).SerializeAsString()));
  EXPECT_EQ(r.grpc_status, 0);
  EXPECT_EQ(Calls("timely"), 1);
  // Two requests and the client's reset of the second arrive together: the server reads them
  // all before it runs anything, so the cancelled one never runs. (The requests are serialized
  // before the reset is queued, or nghttp2 would drop the second request's HEADERS itself.)
  const int32_t kept = raw.Submit({}, Framed(Args("kept", 2).SerializeAsString()));
  const int32_t cancelled = raw.Submit({}, Framed(Args("cancelled", 2).SerializeAsString()));
  std::string bytes = raw.Pending();
  ASSERT_THAT(bytes, HasSubstr("cancelled"));
  raw.Reset(cancelled);
  bytes += raw.Pending();
  ASSERT_TRUE(raw.SendRaw(bytes));
  r = raw.Wait(kept);
  EXPECT_EQ(r.grpc_status, 0);
  r = raw.Call({}, Framed(Args("after", 2).SerializeAsString()));  // runs after both were judged
  EXPECT_EQ(r.grpc_status, 0);
  EXPECT_EQ(Calls("kept"), 1);
  EXPECT_EQ(Calls("cancelled"), 0);
}

TEST_F(GrpcH2ServerTest, ConcurrentClientsEachGetTheirOwnReplies) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  auto client = std::make_shared<shim::GrpcH2Client>(dir_.Socket());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const int n = 2 + (t * 200 + i) % 37;
        v1::ExtenderFilterResult result;
        grpc::Status s = client->Call(kFilter, Args(absl::StrCat("t", t), n), &result,
                                      absl::Now() + absl::Seconds(20));
        if (!s.ok() || result.node_names_size() != (n + 1) / 2) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(client->connections_dialled(), 8);
  int total = 0;
  for (int t = 0; t < 8; ++t) total += Calls(absl::StrCat("t", t));
  EXPECT_EQ(total, 1600);
}

TEST_F(GrpcH2ServerTest, ConnectionsOverTheCapAreClosed) {
  GrpcH2ServerOptions options;
  options.max_connections = 1;
  auto server = MakeServer(options);
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  shim::GrpcH2Client first(dir_.Socket());
  v1::ExtenderFilterResult result;
  ASSERT_TRUE(first.Call(kFilter, Args("p", 2), &result, absl::Now() + absl::Seconds(20)).ok());
  ASSERT_EQ(server->connections(), 1);
  shim::GrpcH2Client second(dir_.Socket());
  grpc::Status s = second.Call(kFilter, Args("p", 2), &result, absl::Now() + absl::Seconds(20));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(first.Call(kFilter, Args("p", 2), &result, absl::Now() + absl::Seconds(20)).ok());
}

TEST_F(GrpcH2ServerTest, AClosedConnectionsThreadIsJoinedWithoutWaitingForTheNextOne) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  {
    shim::GrpcH2Client client(dir_.Socket());
    v1::ExtenderFilterResult result;
    ASSERT_TRUE(client.Call(kFilter, Args("p", 2), &result, absl::Now() + absl::Seconds(20)).ok());
    ASSERT_EQ(server->connections(), 1);
    ASSERT_EQ(server->threads(), 1);
  }  // the client closes its connection
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 0; }));
  // No new connection arrives: the listener joins the finished thread by itself.
  EXPECT_TRUE(WaitFor([&] { return server->threads() == 0; })) << server->threads();
}

TEST_F(GrpcH2ServerTest, StopLetsTheCallInFlightFinishThenRefusesConnections) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  shim::GrpcH2Client client(dir_.Socket());
  grpc::Status in_flight;
  std::thread call([&] {
    v1::ExtenderFilterResult result;
    in_flight = client.Call(kFilter, Args("block", 4), &result, absl::Now() + absl::Seconds(20));
  });
  ASSERT_TRUE(WaitFor([&] { return gate_.waiting() == 1; }));
  std::thread stop([&] { server->Stop(); });
  // Stop waits for the call; open the gate once Stop has begun (the socket file is gone).
  ASSERT_TRUE(WaitFor([&] { return access(dir_.Path().c_str(), F_OK) != 0; }));
  gate_.Open();
  call.join();
  stop.join();
  EXPECT_TRUE(in_flight.ok()) << in_flight.error_message();
  EXPECT_EQ(server->connections(), 0);
  shim::GrpcH2Client later(dir_.Socket());
  v1::ExtenderFilterResult result;
  EXPECT_EQ(later.Call(kFilter, Args("p", 2), &result, absl::Now() + absl::Seconds(5)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server->Listen(dir_.Socket()).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(GrpcH2ServerTest, TheServerWideByteBudgetRefusesAndIsGivenBack) {
  GrpcH2ServerOptions options;
  options.max_buffered_bytes = 8 << 10;
  auto server = MakeServer(options);
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  shim::GrpcH2Client client(dir_.Socket());
  v1::ExtenderFilterResult result;
  auto call = [&](const std::string& pod, int candidates) {
    return client.Call(kFilter, Args(pod, candidates), &result, absl::Now() + absl::Seconds(20));
  };
  grpc::Status s = call("huge", 3000);  // ~30 KB
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("too many request bytes"));
  EXPECT_EQ(Calls("huge"), 0);
  // The refused bytes were given back: ~6 KB fits, again and again.
  for (int i = 0; i < 5; ++i) {
    s = call("fits", 600);
    ASSERT_TRUE(s.ok()) << i << ": " << s.error_message();
  }
  EXPECT_EQ(Calls("fits"), 5);
}

TEST_F(GrpcH2ServerTest, SilentIdleAndStalledConnectionsAreClosed) {
  GrpcH2ServerOptions options;
  options.first_bytes_timeout = absl::Milliseconds(100);
  options.idle_timeout = absl::Milliseconds(300);
  options.write_timeout = absl::Milliseconds(300);
  auto server = MakeServer(options);
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  {
    RawClient silent(dir_.Path());  // connects, sends nothing
    ASSERT_TRUE(silent.connected());
    EXPECT_TRUE(silent.WaitForClose());
  }
  {
    // A client whose window stays shut: the reply cannot be sent.
    RawClient stalled(dir_.Path(), /*window=*/0);
    stalled.Submit({}, Framed(Args("stalled", 2).SerializeAsString()));
    ASSERT_TRUE(stalled.Flush());
    EXPECT_TRUE(stalled.WaitForClose());
    EXPECT_EQ(Calls("stalled"), 1);
  }
  // An idle pooled connection is closed; the shim's client notices and dials a new one.
  shim::GrpcH2Client client(dir_.Socket());
  v1::ExtenderFilterResult result;
  ASSERT_TRUE(client.Call(kFilter, Args("p", 2), &result, absl::Now() + absl::Seconds(20)).ok());
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 0; }));
  grpc::Status s = client.Call(kFilter, Args("p", 2), &result, absl::Now() + absl::Seconds(20));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(client.connections_dialled(), 2);
}

TEST_F(GrpcH2ServerTest, StopIsBoundedByAClientThatNeverFinishesItsRequest) {
  GrpcH2ServerOptions options;
  options.write_timeout = absl::Milliseconds(300);
  auto server = MakeServer(options);
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  RawClient stuck(dir_.Path());
  stuck.Submit({}, Framed(Args("stuck", 2).SerializeAsString()).substr(0, 8), /*keep_open=*/true);
  ASSERT_TRUE(stuck.Flush());
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 1; }));
  std::atomic<bool> stopped{false};
  std::thread stop([&] {
    server->Stop();
    stopped = true;
  });
  EXPECT_TRUE(WaitFor([&] { return stopped.load(); }));  // write_timeout + the 1 s linger
  stop.join();
  EXPECT_TRUE(stuck.WaitForClose());
  EXPECT_EQ(Calls("stuck"), 0);
}

TEST_F(GrpcH2ServerTest, ListenReportsBadAndBusyAddresses) {
  auto server = MakeServer();
  EXPECT_EQ(server->Listen("unix://relative.sock").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server->Listen("localhost").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server->Listen("[::1:0").status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<int> port = server->Listen("127.0.0.1:0");
  ASSERT_TRUE(port.ok());
  auto other = MakeServer();
  EXPECT_EQ(other->Listen(absl::StrCat("127.0.0.1:", *port)).status().code(),
            absl::StatusCode::kUnavailable);
  // A file that is not a socket is not replaced.
  FILE* file = std::fopen(dir_.Path().c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fclose(file);
  EXPECT_EQ(other->Listen(dir_.Socket()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(access(dir_.Path().c_str(), F_OK), 0);
}

// The tests below call with gRPC's C++ client, whose threads ThreadSanitizer cannot see into
// (Debian's libgrpc is not instrumented): the TSan build (grpc_h2_server_race_test) leaves them
// out.
#ifndef FITLEDGER_OWN_CLIENTS_ONLY

TEST_F(GrpcH2ServerTest, GrpcsOwnClientGetsRepliesOverUnixAndTcp) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  absl::StatusOr<int> port = server->Listen("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_GT(*port, 0);
  for (const std::string& target : {dir_.Socket(), absl::StrCat("127.0.0.1:", *port)}) {
    auto stub = GrpcStub(target);
    for (int call = 0; call < 3; ++call) {
      v1::ExtenderFilterResult result;
      grpc::Status s = GrpcFilter(stub.get(), Args("p", 10), &result);
      ASSERT_TRUE(s.ok()) << target << ": " << s.error_message();
      EXPECT_THAT(result.node_names(),
                  ::testing::ElementsAre("node-0", "node-2", "node-4", "node-6", "node-8"));
    }
  }
  EXPECT_EQ(Calls("p"), 6);
}

TEST_F(GrpcH2ServerTest, AnErrorStatusAndItsMessageArriveIntactAtBothClients) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  auto stub = GrpcStub(dir_.Socket());
  v1::ExtenderFilterResult result;
  grpc::Status s = GrpcFilter(stub.get(), Args("fail", 3), &result);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), kOddMessage);

  shim::GrpcH2Client client(dir_.Socket());
  s = client.Call(kFilter, Args("fail", 3), &result, absl::Now() + absl::Seconds(20));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), kOddMessage);
  // The connection survives an error status.
  s = client.Call(kFilter, Args("p", 4), &result, absl::Now() + absl::Seconds(20));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(result.node_names_size(), 2);
  EXPECT_EQ(client.connections_dialled(), 1);
}

TEST_F(GrpcH2ServerTest, UnknownMethodsAreUnimplemented) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  auto stub = GrpcStub(dir_.Socket());
  grpc::ClientContext context;
  v1::ExtenderBindingArgs args;
  v1::ExtenderBindingResult result;
  grpc::Status s = stub->Bind(&context, args, &result);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(s.error_message(), HasSubstr("/fitledger.v1.Extender/Bind"));
}

TEST_F(GrpcH2ServerTest, LargeMessagesCrossTheFlowControlWindowsBothWays) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  auto stub = GrpcStub(dir_.Socket());
  v1::ExtenderFilterResult result;
  grpc::Status s = GrpcFilter(stub.get(), Args("p", 400000), &result);  // ~5 MB in, ~2.5 out
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(result.node_names_size(), 200000);
  EXPECT_EQ(result.node_names(199999), "node-399998");
}

TEST_F(GrpcH2ServerTest, GarbageClosesOnlyThatConnection) {
  auto server = MakeServer();
  ASSERT_TRUE(server->Listen(dir_.Socket()).ok());
  RawClient raw(dir_.Path());
  ASSERT_TRUE(raw.connected());
  const std::string http1 = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(raw.fd(), http1.data(), http1.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(http1.size()));
  // The server answers GOAWAY (or nothing) and closes: recv reaches end of stream.
  bool closed = WaitFor([&] {
    char buffer[4096];
    pollfd p{raw.fd(), POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) return false;
    return recv(raw.fd(), buffer, sizeof(buffer), 0) <= 0;
  });
  EXPECT_TRUE(closed);
  auto stub = GrpcStub(dir_.Socket());
  v1::ExtenderFilterResult result;
  EXPECT_TRUE(GrpcFilter(stub.get(), Args("p", 2), &result).ok());
  EXPECT_TRUE(WaitFor([&] { return server->connections() == 1; }));
}

#endif  // FITLEDGER_OWN_CLIENTS_ONLY

}  // namespace
}  // namespace fitledger
