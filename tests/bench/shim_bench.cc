// Shim benchmarks (they replace speed probes that were once disabled tests): the JSON codec on a
// Filter body with 500 NodeNames and the ~5 KB fixture pod, and one keep-alive HTTP client
// through the real shim (its HTTP server, webhook, gRPC client) to an in-process fake server
// that passes every candidate — the shim's own cost, with no ledger behind it.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "client/shim/grpc_h2.h"
#include "client/shim/http_server.h"
#include "client/shim/json_codec.h"
#include "client/shim/logger.h"
#include "client/shim/metrics.h"
#include "client/shim/webhook.h"
#include "google/protobuf/arena.h"
#include "httplib.h"
#include "tests/client/shim/fake_extender.h"

namespace fitledger::shim {
namespace {

constexpr int kCandidates = 500;

// The fixture's pod with 500 NodeNames, as in the tests this file replaces.
const std::string& FilterBody() {
  static const std::string* body = [] {
    std::ifstream in(absl::StrCat(FITLEDGER_SHIM_TESTDATA, "/pod_4k.json"));
    std::stringstream buffer;
    buffer << in.rdbuf();
    auto* b = new std::string(buffer.str());
    const size_t names = b->find("\"NodeNames\":[");
    if (names == std::string::npos) std::abort();
    b->resize(names);
    *b += "\"NodeNames\":[";
    for (int i = 0; i < kCandidates; ++i)
      absl::StrAppend(b, i ? "," : "", "\"node-", 10000 + i, "\"");
    *b += "]}";
    return b;
  }();
  return *body;
}

// Argument 0: NodeNames decoded into the message's strings; 1: as views, fitledger-shim's way
// (plain names read in place from the body, whose capacity holds simdjson's padding as the HTTP
// server leaves it).
void BM_DecodeFilter500NodeNames(benchmark::State& state) {
  std::string body = FilterBody();
  body.reserve(body.size() + 64);
  const bool as_views = state.range(0) == 1;
  state.SetLabel(as_views ? "names as views" : "names as strings");
  JsonDecoder decoder;
  std::vector<absl::string_view> names;
  std::vector<char> block(256 << 10);
  for (auto _ : state) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block.data();
    options.initial_block_size = block.size();
    google::protobuf::Arena arena(options);
    auto* args = google::protobuf::Arena::CreateMessage<v1::ExtenderArgs>(&arena);
    if (!decoder.DecodeExtenderArgs(body, args, nullptr, as_views ? &names : nullptr).ok()) {
      state.SkipWithError("decode");
    }
    benchmark::DoNotOptimize(args);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_DecodeFilter500NodeNames)->Arg(0)->Arg(1);

void BM_EncodeFilterResult500Names(benchmark::State& state) {
  JsonDecoder decoder;
  v1::ExtenderArgs args;
  if (!decoder.DecodeExtenderArgs(FilterBody(), &args, nullptr).ok()) std::abort();
  v1::ExtenderFilterResult result;
  *result.mutable_node_names() = args.node_names();
  for (auto _ : state) {
    std::string out;
    EncodeFilterResult(result, &out);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_EncodeFilterResult500Names);

// What gRPC adds on the two ends: serialize the request, parse it on the other side.
void BM_ProtoSerializeParseExtenderArgs(benchmark::State& state) {
  JsonDecoder decoder;
  v1::ExtenderArgs args;
  if (!decoder.DecodeExtenderArgs(FilterBody(), &args, nullptr).ok()) std::abort();
  for (auto _ : state) {
    std::string wire;
    args.SerializeToString(&wire);
    v1::ExtenderArgs parsed;
    parsed.ParseFromString(wire);
    benchmark::DoNotOptimize(parsed);
  }
}
BENCHMARK(BM_ProtoSerializeParseExtenderArgs);

// One keep-alive client, one request at a time: the shim's round trip with a fake server.
// Argument 1: the shim's own gRPC client (grpc_h2.h, what fitledger-shim uses); 0: gRPC's C++
// client, for comparison.
void BM_ShimFilter500NodeNamesFakeServer(benchmark::State& state) {
  testing::FakeExtender fake;
  std::unique_ptr<testing::FakeServer> server = testing::FakeServer::Start(&fake, "127.0.0.1:0");
  if (server == nullptr) return state.SkipWithError("fake server");
  Metrics metrics;
  Logger logger(LogLevel::kError);
  std::unique_ptr<v1::Extender::StubInterface> stub;
  if (state.range(0) == 1) {
    stub = std::make_unique<H2ExtenderStub>(std::make_shared<GrpcH2Client>(server->target()));
    state.SetLabel("own gRPC client");
  } else {
    stub = v1::Extender::NewStub(DialServer(server->target()));
    state.SetLabel("gRPC C++ client");
  }
  Webhook webhook(std::move(stub), grpc::health::v1::Health::NewStub(DialServer(server->target())),
                  Webhook::Options{.server_timeout = absl::Seconds(3)}, &metrics, &logger);
  config::ShimConfig config;
  config.listen = "127.0.0.1:0";
  config.server = server->target();
  ShimServer shim(config, &webhook, &metrics, &logger);
  if (!shim.Start().ok()) return state.SkipWithError("shim");
  httplib::Client client("127.0.0.1", shim.port());
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  const std::string& body = FilterBody();
  for (int i = 0; i < 200; ++i) client.Post("/filter", body, "application/json");  // warm up
  for (auto _ : state) {
    httplib::Result res = client.Post("/filter", body, "application/json");
    if (!res || res->status != 200) {
      state.SkipWithError("filter failed");
      break;
    }
  }
  shim.Stop();
}
BENCHMARK(BM_ShimFilter500NodeNamesFakeServer)
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fitledger::shim

BENCHMARK_MAIN();
