// fitledger-shim wired in process as main.cc wires it (the webhook library over GrpcBackend) on
// 127.0.0.1:0, in front of a fake Extender gRPC server: each verb's status code and exact body,
// bad input, server outages and recovery, probes and metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/shim/grpc_backend.h"
#include "common/metrics.h"
#include "config/shim_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/client/shim/fake_extender.h"
#include "tests/common/temp_dir.h"
#include "webhook/http_server.h"
#include "webhook/metrics.h"
#include "webhook/webhook.h"

namespace fitledger::shim {
namespace {

using ::fitledger::shim::testing::FakeExtender;
using ::fitledger::shim::testing::FakeServer;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string ReadFixture(const std::string& name) {
  std::ifstream in(absl::StrCat(FITLEDGER_SHIM_TESTDATA, "/", name));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Polls `condition` until it holds or `timeout` passes.
template <typename Fn>
bool WaitFor(Fn condition, absl::Duration timeout = absl::Seconds(15)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

// The shim wired as main.cc wires it, serving on free ports.
class Shim {
 public:
  explicit Shim(const std::string& server_target, config::ShimConfig config = {})
      : metrics_(&registry_),
        backend_(server_target, DialServer(server_target),
                 GrpcBackend::Options{.timeout = absl::Seconds(3)}),
        webhook_(config.webhook.prefix, &backend_, &metrics_,
                 [this] { return registry_.Render(); }) {
    auto observe = [this](const webhook::HttpRequest& request, const webhook::HttpReply& reply,
                          absl::Duration elapsed) { webhook_.Observe(request, reply, elapsed); };
    webhook::HttpServerOptions options;
    options.max_body_bytes = config.webhook.max_body_bytes;
    options.io_threads = static_cast<int>(config.webhook.io_threads);
    options.read_timeout = config.webhook.read_timeout;
    options.idle_timeout = config.webhook.idle_timeout;
    server_ = std::make_unique<webhook::HttpServer>(
        options, [this](webhook::HttpCall call) { webhook_.Serve(std::move(call)); },
        &webhook::Webhook::FormatError, observe);
    monitor_ = std::make_unique<webhook::HttpServer>(
        webhook::HttpServerOptions{},
        [this](webhook::HttpCall call) { webhook_.ServeMonitor(std::move(call)); },
        &webhook::Webhook::FormatError, observe);
    absl::StatusOr<int> port = server_->Start("127.0.0.1", 0);
    absl::StatusOr<int> monitor_port = monitor_->Start("127.0.0.1", 0);
    status_ = !port.ok() ? port.status() : monitor_port.status();
  }

  ~Shim() {
    server_->Stop();
    monitor_->Stop();
  }

  const absl::Status& status() const { return status_; }
  int port() const { return server_->port(); }

  std::unique_ptr<httplib::Client> Client() const { return MakeClient(server_->port()); }
  std::unique_ptr<httplib::Client> Monitor() const { return MakeClient(monitor_->port()); }

 private:
  static std::unique_ptr<httplib::Client> MakeClient(int port) {
    auto client = std::make_unique<httplib::Client>("127.0.0.1", port);
    client->set_connection_timeout(5);
    client->set_read_timeout(10);
    client->set_tcp_nodelay(true);  // as Go's net/http does
    return client;
  }

  MetricsRegistry registry_;
  webhook::Metrics metrics_;
  GrpcBackend backend_;
  webhook::Webhook webhook_;
  std::unique_ptr<webhook::HttpServer> server_;
  std::unique_ptr<webhook::HttpServer> monitor_;
  absl::Status status_;
};

struct HttpReply {
  int status = 0;
  std::string body;
  std::string content_type;
};

HttpReply Post(httplib::Client& client, const std::string& path, const std::string& body) {
  httplib::Result res = client.Post(path.c_str(), body, "application/json");
  if (!res) return {-1, absl::StrCat("transport error ", static_cast<int>(res.error())), ""};
  return {res->status, res->body, res->get_header_value("Content-Type")};
}

HttpReply Get(httplib::Client& client, const std::string& path) {
  httplib::Result res = client.Get(path.c_str());
  if (!res) return {-1, absl::StrCat("transport error ", static_cast<int>(res.error())), ""};
  return {res->status, res->body, res->get_header_value("Content-Type")};
}

constexpr char kFilterArgs[] =
    R"({"Pod":{"metadata":{"name":"p","namespace":"ns","uid":"u1"},)"
    R"("spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}},)"
    R"("Nodes":null,"NodeNames":["w1","w2","w3","w4"]})";

class ShimHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = FakeServer::Start(&fake_, "127.0.0.1:0");
    ASSERT_NE(server_, nullptr);
    shim_ = std::make_unique<Shim>(server_->target());
    ASSERT_TRUE(shim_->status().ok()) << shim_->status();
    client_ = shim_->Client();
  }

  FakeExtender fake_;
  std::unique_ptr<FakeServer> server_;
  std::unique_ptr<Shim> shim_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ShimHttpTest, FilterWithNodeNamesAnswersNamesAndFailures) {
  fake_.set_filter([](const v1::ExtenderArgs&, v1::ExtenderFilterResult* result) {
    result->add_node_names("w1");
    result->add_node_names("w3");
    (*result->mutable_failed_nodes())["w2"] = "Insufficient cpu";
    (*result->mutable_failed_and_unresolvable_nodes())["w4"] = "Insufficient example.com/gpu";
    return grpc::Status::OK;
  });
  // Go's transport always offers gzip; the reply must stay plain.
  client_->set_default_headers({{"Accept-Encoding", "gzip, deflate"}});
  httplib::Result res = client_->Post("/filter", kFilterArgs, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body,
            R"({"NodeNames":["w1","w3"],"FailedNodes":{"w2":"Insufficient cpu"},)"
            R"("FailedAndUnresolvableNodes":{"w4":"Insufficient example.com/gpu"},"Error":""})");
  EXPECT_THAT(res->get_header_value("Content-Type"), StartsWith("application/json"));
  EXPECT_FALSE(res->has_header("Content-Encoding"));
  const v1::ExtenderArgs sent = fake_.last_filter();
  EXPECT_EQ(sent.pod().metadata().name(), "p");
  EXPECT_EQ(sent.pod().spec().containers(0).resources().requests().at("cpu"), "1");
  EXPECT_THAT(sent.node_names(), ::testing::ElementsAre("w1", "w2", "w3", "w4"));
}

TEST_F(ShimHttpTest, FilterDropsNamesThatWereNotCandidates) {
  fake_.set_filter([](const v1::ExtenderArgs&, v1::ExtenderFilterResult* result) {
    for (const char* name : {"w3", "zz", "w1"}) result->add_node_names(name);
    return grpc::Status::OK;
  });
  HttpReply reply = Post(*client_, "/filter", kFilterArgs);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, R"({"NodeNames":["w3","w1"],"FailedNodes":{},)"
                        R"("FailedAndUnresolvableNodes":{},"Error":""})");
}

// Names that need escaping are escaped in the answer, whichever way the server answered.
TEST_F(ShimHttpTest, FilterAnswersNamesThatNeedEscapingEscaped) {
  const std::string body = R"({"Pod":{"metadata":{"name":"p","namespace":"ns","uid":"u1"}},)"
                           R"("NodeNames":["plain","q\"uote","tab\t","\u006e1"]})";
  for (bool by_name : {false, true}) {
    SCOPED_TRACE(by_name ? "by name" : "as the server answers");
    if (by_name) {
      fake_.set_filter([](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
        *result->mutable_node_names() = args.node_names();
        return grpc::Status::OK;
      });
    }
    HttpReply reply = Post(*client_, "/filter", body);
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, R"({"NodeNames":["plain","q\"uote","tab\t","n1"],"FailedNodes":{},)"
                          R"("FailedAndUnresolvableNodes":{},"Error":""})");
  }
}

TEST_F(ShimHttpTest, FilterWithFullNodesEchoesTheNodeObjectsAsReceived) {
  const std::string a =
      R"({"metadata":{"name":"a","labels":{"x":"1"}},"status":{"allocatable":{"cpu":"4"}},"spec":{"unschedulable":false}})";
  const std::string b = R"({ "metadata" : { "name" : "b" }, "extra": [1, 2.50, "\u00e9"] })";
  const std::string c = R"({"metadata":{"name":"c"},"status":{"capacity":{"cpu":"2"}}})";
  const std::string body =
      absl::StrCat(R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[)", a,
                   ",\n  ", b, " , ", c, "]},\"NodeNames\":null}");
  fake_.set_filter([](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
    // The server decides from its own view of the nodes: the shim sends their names only.
    EXPECT_FALSE(args.has_nodes());
    EXPECT_THAT(args.node_names(), ::testing::ElementsAre("a", "b", "c"));
    result->add_node_names("c");
    result->add_node_names("b");
    (*result->mutable_failed_nodes())["a"] = "Insufficient cpu";
    return grpc::Status::OK;
  });
  HttpReply reply = Post(*client_, "/filter", body);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, absl::StrCat(R"({"Nodes":{"metadata":{},"items":[)", c, ",", b,
                                     R"(]},"FailedNodes":{"a":"Insufficient cpu"},)"
                                     R"("FailedAndUnresolvableNodes":{},"Error":""})"));
}

TEST_F(ShimHttpTest, FilterWithTheRealisticNodesFixture) {
  const std::string body = ReadFixture("filter_nodes.json");
  fake_.set_filter([](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
    result->add_node_names("gpu-node-01");
    (*result->mutable_failed_nodes())["w1"] = "Insufficient memory";
    (*result->mutable_failed_nodes())["w2"] = "Insufficient memory";
    return grpc::Status::OK;
  });
  HttpReply reply = Post(*client_, "/filter", body);
  ASSERT_EQ(reply.status, 200);
  const std::string prefix = R"({"Nodes":{"metadata":{},"items":[)";
  ASSERT_THAT(reply.body, StartsWith(prefix));
  const size_t end = reply.body.find(R"(]},"FailedNodes")");
  ASSERT_NE(end, std::string::npos);
  const std::string node = reply.body.substr(prefix.size(), end - prefix.size());
  EXPECT_THAT(node, StartsWith(R"({"metadata":{"name":"gpu-node-01")"));
  // Byte for byte what kube-scheduler sent, delimited as an array element in the request.
  const size_t at = body.find(node);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(body[at - 1], ',');
  EXPECT_EQ(body[at + node.size()], ']');
}

TEST_F(ShimHttpTest, PrioritizeAnswersABareArray) {
  fake_.set_prioritize([](const v1::ExtenderArgs&, v1::HostPriorityList* result) {
    auto* a = result->add_items();
    a->set_host("w1");
    a->set_score(7);
    auto* b = result->add_items();
    b->set_host("w2");
    b->set_score(3);
    return grpc::Status::OK;
  });
  HttpReply reply = Post(*client_, "/prioritize", kFilterArgs);
  EXPECT_EQ(reply.status, 200);
  // w3 and w4 are not listed (score 0), so nothing is taken off w1 and w2.
  EXPECT_EQ(reply.body, R"([{"Host":"w1","Score":7},{"Host":"w2","Score":3}])");
}

TEST_F(ShimHttpTest, BindSucceedsAndReportsRejectionsAsError) {
  HttpReply reply = Post(*client_, "/bind", ReadFixture("bind_oddcase.json"));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, R"({"Error":""})");
  const v1::ExtenderBindingArgs sent = fake_.last_bind();
  EXPECT_EQ(sent.pod_name(), "burst-7d9f-abcde");
  EXPECT_EQ(sent.pod_namespace(), "sched-lab");
  EXPECT_EQ(sent.pod_uid(), "6f1c2e1a-0b5e-4a43-9a55-1d2f3e4a5b6c");
  EXPECT_EQ(sent.node(), "w2");

  fake_.set_bind([](const v1::ExtenderBindingArgs&, v1::ExtenderBindingResult*) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "pod sched-lab/burst-7d9f-abcde no longer fits node w2: Insufficient cpu");
  });
  reply = Post(*client_, "/bind", ReadFixture("bind.json"));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, R"({"Error":"fitledger bind: FAILED_PRECONDITION: pod )"
                        R"(sched-lab/burst-7d9f-abcde no longer fits node w2: Insufficient cpu"})");
}

TEST_F(ShimHttpTest, PreemptAnswersMetaVictims) {
  HttpReply reply = Post(*client_, "/preempt", ReadFixture("preempt_meta_victims_oddcase.json"));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(
      reply.body,
      R"({"NodeNameToMetaVictims":{"w1":{"Pods":[{"UID":"6f1c2e1a-0b5e-4a43-9a55-1d2f3e4a5b6c"},)"
      R"({"UID":"7f1c2e1a-0b5e-4a43-9a55-1d2f3e4a5b6d"}],"NumPDBViolations":1},)"
      R"("w3":{"Pods":[],"NumPDBViolations":0}}})");
  EXPECT_EQ(fake_.last_preempt().pod().metadata().name(), "trainer-5f6d7c8b9-qwert");

  // Full victims reach the server as MetaVictims: their UIDs are all it reads.
  fake_.set_preempt([](const v1::ExtenderPreemptionArgs& args, v1::ExtenderPreemptionResult* r) {
    EXPECT_EQ(args.node_name_to_victims_size(), 0);
    EXPECT_EQ(args.node_name_to_meta_victims().at("w1").pods_size(), 2);
    auto& w1 = (*r->mutable_node_name_to_meta_victims())["w1"];
    w1.add_pods()->set_uid(args.node_name_to_meta_victims().at("w1").pods(0).uid());
    return grpc::Status::OK;
  });
  reply = Post(*client_, "/preempt", ReadFixture("preempt_victims.json"));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, R"({"NodeNameToMetaVictims":{"w1":{"Pods":[{"UID":)"
                        R"("6f1c2e1a-0b5e-4a43-9a55-1d2f3e4a5b6c"}],"NumPDBViolations":0}}})");
}

TEST_F(ShimHttpTest, BadInputGetsExactCodesAndTheShimKeepsServing) {
  struct Case {
    const char* name;
    const char* method;
    const char* path;
    std::string body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"malformed", "POST", "/filter", "{\"NodeNames\": [", 400,
       R"({"Error":"malformed JSON at NodeNames)"},
      {"wrong type", "POST", "/filter", R"({"NodeNames": 5})", 400,
       R"({"Error":"NodeNames: expected an array of strings or null, got number"})"},
      {"pod array", "POST", "/prioritize", R"({"Pod": []})", 400,
       R"({"Error":"Pod: expected an object or null, got array"})"},
      {"bad quantity", "POST", "/filter",
       R"({"Pod":{"spec":{"containers":[{"resources":{"requests":{"memory":"12 Gi"}}}]}}})", 400,
       R"({"Error":"Pod: field spec.containers[0].resources.requests.memory: )"},
      {"empty", "POST", "/bind", "", 400,
       R"({"Error":"empty request body: expected a JSON object"})"},
      {"unknown verb", "POST", "/nope", "{}", 404,
       R"({"Error":"no such path \"/nope\": the extender verbs are POST /filter, /prioritize, /bind, /preempt"})"},
      {"get on verb", "GET", "/filter", "", 405,
       R"({"Error":"method GET is not allowed on /filter: use POST"})"},
      {"put on verb", "PUT", "/bind", "{}", 405,
       R"({"Error":"method PUT is not allowed on /bind: use POST"})"},
      {"get unknown", "GET", "/x", "", 404, R"({"Error":"no such path \"/x\")"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    httplib::Result res =
        std::string(c.method) == "POST"  ? client_->Post(c.path, c.body, "application/json")
        : std::string(c.method) == "PUT" ? client_->Put(c.path, c.body, "application/json")
                                         : client_->Get(c.path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, c.status);
    EXPECT_THAT(res->body, StartsWith(c.message));
    EXPECT_THAT(res->get_header_value("Content-Type"), StartsWith("application/json"));
    if (c.status == 405) {
      EXPECT_EQ(res->get_header_value("Allow"), "POST");
    }
  }
  EXPECT_EQ(fake_.calls(), 0);
  EXPECT_EQ(Post(*client_, "/filter", kFilterArgs).status, 200);
  EXPECT_EQ(fake_.calls(), 1);
}

TEST_F(ShimHttpTest, ProbesAllowGetAndHeadOnly) {
  httplib::Result res = client_->Post("/healthz", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(res->get_header_value("Allow"), "GET, HEAD");
  EXPECT_THAT(res->body, HasSubstr("method POST is not allowed on /healthz: use GET"));
  res = client_->Head("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(Get(*client_, "/healthz").status, 200);
}

TEST_F(ShimHttpTest, OversizedBodyIs413AndTheNextRequestWorks) {
  config::ShimConfig config;
  config.webhook.max_body_bytes = 4096;
  Shim small(server_->target(), config);
  ASSERT_TRUE(small.status().ok()) << small.status();
  auto client = small.Client();
  const std::string big = absl::StrCat(R"({"NodeNames":[")", std::string(5000, 'x'), R"("]})");
  HttpReply reply = Post(*client, "/filter", big);
  EXPECT_EQ(reply.status, 413);
  EXPECT_EQ(reply.body, R"x({"Error":"request body over 4096 bytes (maxBodyBytes)"})x");
  EXPECT_EQ(Post(*client, "/filter", kFilterArgs).status, 200);
}

// `curl --data-binary` without -H sends application/x-www-form-urlencoded; the webhook reads
// any body as JSON, at any size up to maxBodyBytes (cpp-httplib, used before, refused such
// bodies over 8 KiB).
TEST_F(ShimHttpTest, AFormEncodedBodyIsReadAsJson) {
  std::string names;
  for (int i = 0; i < 1000; ++i) absl::StrAppend(&names, ",\"extra-node-", i, "\"");
  std::string body = kFilterArgs;
  body.insert(body.rfind(']'), names);
  ASSERT_GT(body.size(), 16000u);
  auto res = client_->Post("/filter", body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(fake_.calls(), 1);
  // Over maxBodyBytes, the reply names the limit.
  config::ShimConfig config;
  config.webhook.max_body_bytes = 4096;
  Shim small(server_->target(), config);
  ASSERT_TRUE(small.status().ok()) << small.status();
  auto res_small = small.Client()->Post("/filter", body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(res_small) << httplib::to_string(res_small.error());
  EXPECT_EQ(res_small->status, 413);
  EXPECT_THAT(res_small->body, HasSubstr("maxBodyBytes"));
  EXPECT_EQ(fake_.calls(), 1);
}

TEST_F(ShimHttpTest, KeepAliveServesManyRequestsOnOneConnection) {
  client_->set_keep_alive(true);
  for (int i = 0; i < 20; ++i) {
    HttpReply reply = Post(*client_, "/filter", kFilterArgs);
    ASSERT_EQ(reply.status, 200) << reply.body;
  }
  EXPECT_EQ(fake_.calls(), 20);
}

// One keep-alive connection reuses its buffers and its scratch from request to request: nothing of
// one request may leak into the next.
TEST_F(ShimHttpTest, ReusedMessagesCarryNothingFromOneRequestToTheNext) {
  client_->set_keep_alive(true);
  // Every candidate fails with the pod's name as the reason: an answer shows which request it
  // belongs to.
  fake_.set_filter([](const v1::ExtenderArgs& args, v1::ExtenderFilterResult* result) {
    for (const std::string& name : args.node_names()) {
      (*result->mutable_failed_nodes())[name] = absl::StrCat("seen-", args.pod().metadata().name());
    }
    return grpc::Status::OK;
  });
  fake_.set_prioritize([](const v1::ExtenderArgs& args, v1::HostPriorityList* result) {
    for (const std::string& name : args.node_names()) {
      v1::HostPriority* host = result->add_items();
      host->set_host(name);
      host->set_score(1);
    }
    return grpc::Status::OK;
  });
  const std::string full =
      R"({"Pod":{"metadata":{"name":"full"}},"Nodes":{"items":[{"metadata":{"name":"n1"}}]}})";
  const std::string names = R"({"Pod":{"metadata":{"name":"names","uid":"u"}},"NodeNames":["w9"]})";
  for (int round = 0; round < 3; ++round) {
    HttpReply reply = Post(*client_, "/filter", full);
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, R"({"Nodes":{"metadata":{},"items":[]},)"
                          R"("FailedNodes":{"n1":"seen-full"},"FailedAndUnresolvableNodes":{},)"
                          R"("Error":""})");
    reply = Post(*client_, "/filter", names);
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, R"({"NodeNames":[],"FailedNodes":{"w9":"seen-names"},)"
                          R"("FailedAndUnresolvableNodes":{},"Error":""})");
    EXPECT_FALSE(fake_.last_filter().has_nodes());
    EXPECT_FALSE(fake_.last_filter().pod().metadata().uid().empty());
    reply = Post(*client_, "/filter", R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":[1]})");
    EXPECT_EQ(reply.status, 400);
    reply = Post(*client_, "/prioritize", names);
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, "[]");  // the only candidate is the lowest (webhook::ShiftPriorities)
    reply = Post(*client_, "/filter", R"({"Pod":{"metadata":{"name":"bare"}},"NodeNames":[]})");
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, R"({"NodeNames":[],"FailedNodes":{},)"
                          R"("FailedAndUnresolvableNodes":{},"Error":""})");
    EXPECT_TRUE(fake_.last_filter().pod().metadata().uid().empty());
  }
}

TEST_F(ShimHttpTest, PrefixMovesTheVerbs) {
  config::ShimConfig config;
  config.webhook.prefix = "/fitledger";
  Shim prefixed(server_->target(), config);
  ASSERT_TRUE(prefixed.status().ok());
  auto client = prefixed.Client();
  EXPECT_EQ(Post(*client, "/fitledger/filter", kFilterArgs).status, 200);
  EXPECT_EQ(Post(*client, "/fitledger/bind", ReadFixture("bind.json")).status, 200);
  EXPECT_EQ(Post(*client, "/filter", kFilterArgs).status, 404);
  EXPECT_EQ(Get(*client, "/healthz").status, 200);
}

TEST_F(ShimHttpTest, ProbesAndMetrics) {
  EXPECT_EQ(Get(*client_, "/healthz").body, "ok\n");
  EXPECT_EQ(Get(*client_, "/readyz").status, 200);
  auto monitor = shim_->Monitor();
  EXPECT_EQ(Get(*monitor, "/healthz").status, 200);
  EXPECT_EQ(Get(*monitor, "/readyz").status, 200);
  server_->SetServing(false);
  HttpReply not_ready = Get(*monitor, "/readyz");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_EQ(not_ready.body, absl::StrCat("not ready: fitledger-server at ", server_->target(),
                                         " is NOT_SERVING\n"));
  EXPECT_EQ(Get(*client_, "/readyz").status, 503);
  server_->SetServing(true);

  ASSERT_EQ(Post(*client_, "/filter", kFilterArgs).status, 200);
  ASSERT_EQ(Post(*client_, "/filter", kFilterArgs).status, 200);
  ASSERT_EQ(Post(*client_, "/filter", "[").status, 400);
  fake_.set_prioritize([](const v1::ExtenderArgs&, v1::HostPriorityList*) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "boom");
  });
  ASSERT_EQ(Post(*client_, "/prioritize", kFilterArgs).status, 503);
  // A request is counted just after its reply is written, by whichever worker wrote it: the
  // next request can be counted first. Wait until every one of them is.
  HttpReply metrics;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  auto all_counted = [&] {
    return metrics.body.find("verb=\"prioritize\",code=\"503\"} 1") != std::string::npos &&
           metrics.body.find("verb=\"filter\",code=\"400\"} 1") != std::string::npos &&
           metrics.body.find("verb=\"filter\",code=\"200\"} 2") != std::string::npos;
  };
  do {
    metrics = Get(*monitor, "/metrics");
  } while (!all_counted() && absl::Now() < deadline &&
           (absl::SleepFor(absl::Milliseconds(20)), true));
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.content_type, StartsWith("text/plain; version=0.0.4"));
  EXPECT_THAT(metrics.body,
              HasSubstr("fitledger_webhook_requests_total{verb=\"filter\",code=\"200\"} 2\n"));
  EXPECT_THAT(metrics.body,
              HasSubstr("fitledger_webhook_requests_total{verb=\"filter\",code=\"400\"} 1\n"));
  EXPECT_THAT(metrics.body,
              HasSubstr("fitledger_webhook_requests_total{verb=\"prioritize\",code=\"503\"} 1\n"));
  EXPECT_THAT(
      metrics.body,
      HasSubstr(
          "fitledger_webhook_request_duration_seconds_bucket{verb=\"filter\",le=\"5e-05\"} "));
  EXPECT_THAT(
      metrics.body,
      HasSubstr(
          "fitledger_webhook_request_duration_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(metrics.body,
              HasSubstr("fitledger_webhook_request_duration_seconds_count{verb=\"filter\"} 3\n"));
  EXPECT_THAT(metrics.body,
              HasSubstr("fitledger_webhook_handling_duration_seconds_count{verb=\"filter\"} 3\n"));
  EXPECT_THAT(
      metrics.body,
      HasSubstr(
          "fitledger_webhook_backend_errors_total{verb=\"prioritize\",code=\"INTERNAL\"} 1\n"));
  EXPECT_EQ(Get(*monitor, "/nope").status, 404);
}

// Clients at once, each with candidates of its own (some spelled with escapes, which the decoder
// unescapes into its own buffer): every answer lists exactly the asker's candidates, as sent.
TEST_F(ShimHttpTest, ConcurrentFiltersEachGetTheirOwnCandidates) {
  constexpr int kClients = 6;
  constexpr int kRequests = 40;
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = shim_->Client();
      for (int r = 0; r < kRequests; ++r) {
        std::string names;
        std::string expected;
        for (int i = 0; i < 20 + (c * kRequests + r) % 30; ++i) {
          const std::string name = absl::StrCat("n", c, "-", r, "-", i);
          // Every third name with its first letter escaped: \u006e is "n".
          absl::StrAppend(&names, i == 0 ? "" : ",", "\"",
                          i % 3 == 0 ? absl::StrCat("\\u006e", name.substr(1)) : name, "\"");
          absl::StrAppend(&expected, i == 0 ? "" : ",", "\"", name, "\"");
        }
        const std::string body = absl::StrCat(
            R"({"Pod":{"metadata":{"name":"p)", c, "-", r,
            R"(","namespace":"ns","uid":"u"},"spec":{"containers":[{"name":"c"}]}},"NodeNames":[)",
            names, "]}");
        HttpReply reply = Post(*client, "/filter", body);
        if (reply.status == 200 &&
            absl::StartsWith(reply.body, absl::StrCat(R"({"NodeNames":[)", expected, "]"))) {
          ++good;
        } else {
          ADD_FAILURE() << reply.status << " " << reply.body.substr(0, 300);
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(good.load(), kClients * kRequests);
  EXPECT_EQ(fake_.calls(), kClients * kRequests);
}

TEST(ShimOutageTest, ServerDownThenBack) {
  const ::fitledger::testing::TempDir dir("shim-outage");
  const std::string address = absl::StrCat("unix://", dir.path(), "/server.sock");
  Shim shim(address);
  ASSERT_TRUE(shim.status().ok());
  auto client = shim.Client();
  auto monitor = shim.Monitor();

  HttpReply filter = Post(*client, "/filter", kFilterArgs);
  EXPECT_EQ(filter.status, 200);
  EXPECT_THAT(filter.body, StartsWith(absl::StrCat(
                               R"({"Error":"fitledger filter: UNAVAILABLE: fitledger-server at )",
                               address, " unreachable: ")));
  HttpReply bind = Post(*client, "/bind", ReadFixture("bind.json"));
  EXPECT_EQ(bind.status, 200);
  EXPECT_THAT(bind.body, StartsWith(absl::StrCat(
                             R"({"Error":"fitledger bind: UNAVAILABLE: fitledger-server at )",
                             address, " unreachable: ")));
  HttpReply prioritize = Post(*client, "/prioritize", kFilterArgs);
  EXPECT_EQ(prioritize.status, 503);
  EXPECT_THAT(prioritize.body, StartsWith(R"({"Error":"fitledger prioritize: UNAVAILABLE: )"));
  EXPECT_EQ(Post(*client, "/preempt", ReadFixture("preempt_meta_victims.json")).status, 503);
  EXPECT_EQ(Get(*monitor, "/readyz").status, 503);
  EXPECT_EQ(Get(*client, "/readyz").status, 503);
  EXPECT_EQ(Get(*monitor, "/healthz").status, 200);
  EXPECT_THAT(
      Get(*monitor, "/metrics").body,
      HasSubstr("fitledger_webhook_backend_errors_total{verb=\"filter\",code=\"UNAVAILABLE\"} "));

  FakeExtender fake;
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, address);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(WaitFor([&] {
    HttpReply r = Post(*client, "/filter", kFilterArgs);
    return r.status == 200 && absl::EndsWith(r.body, R"("Error":""})");
  }));
  EXPECT_EQ(Get(*monitor, "/readyz").status, 200);

  // Down again, then back again.
  server->Shutdown();
  EXPECT_TRUE(WaitFor([&] { return Get(*monitor, "/readyz").status == 503; }));
  server = FakeServer::Start(&fake, address);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(WaitFor(
      [&] { return Post(*client, "/bind", ReadFixture("bind.json")).body == R"({"Error":""})"; }));
  server.reset();
}

// Slow clients (a request whose body never finishes) hold no thread: with one I/O thread and a
// dozen of them open, a normal request is answered at once, and each slow one is closed after
// readTimeout.
TEST(ShimSlowClientTest, SlowClientsHoldNoThread) {
  constexpr int kSlowClients = 12;
  FakeExtender fake;
  fake.set_filter([](const v1::ExtenderArgs&, v1::ExtenderFilterResult* result) {
    result->add_node_names("w1");
    return grpc::Status::OK;
  });
  std::unique_ptr<FakeServer> server = FakeServer::Start(&fake, "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  config::ShimConfig config;
  config.webhook.io_threads = 1;
  config.webhook.read_timeout = absl::Seconds(1);
  Shim shim(server->target(), config);
  ASSERT_TRUE(shim.status().ok()) << shim.status();
  std::vector<int> slow;
  for (int i = 0; i < kSlowClients; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(shim.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string partial =
        "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n{\"Pod\":";
    ASSERT_EQ(send(fd, partial.data(), partial.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(partial.size()));
    slow.push_back(fd);
  }
  auto client = shim.Client();
  HttpReply reply = Post(*client, "/filter", kFilterArgs);
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(reply.body.find("\"NodeNames\":[\"w1\"]"), std::string::npos) << reply.body;
  // Each slow connection is closed by the server (read returns 0) after readTimeout.
  for (int fd : slow) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 20000), 0);
    char byte;
    EXPECT_LE(recv(fd, &byte, 1, 0), 0);
    close(fd);
  }
}

}  // namespace
}  // namespace fitledger::shim
