// Webhook benchmarks: the JSON codec on a Filter body with 500 NodeNames and the ~5 KB fixture
// pod, and one keep-alive HTTP client through the real front end (Beast HTTP server, webhook,
// codec) to a backend that passes every candidate: in process (no ledger behind it), or through
// fitledger-shim's gRPC backend to an in-process fake server.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "client/shim/grpc_backend.h"
#include "common/metrics.h"
#include "httplib.h"
#include "server/service/convert.h"
#include "tests/client/shim/fake_extender.h"
#include "webhook/http_server.h"
#include "webhook/json_codec.h"
#include "webhook/metrics.h"
#include "webhook/webhook.h"

namespace fitledger::webhook {
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

// The webhook's way: the pod into the model, the NodeNames as views (plain names read in place
// from the body, whose capacity holds simdjson's padding as the HTTP server leaves it).
void BM_DecodeFilter500NodeNames(benchmark::State& state) {
  std::string body = FilterBody();
  body.reserve(body.size() + 64);
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  for (auto _ : state) {
    if (!decoder.DecodeExtenderArgs(body, &pod, &names).ok()) state.SkipWithError("decode");
    benchmark::DoNotOptimize(pod);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_DecodeFilter500NodeNames);

void BM_EncodeFilterResult500Names(benchmark::State& state) {
  JsonDecoder decoder;
  Pod pod;
  FilterResultView result;
  if (!decoder.DecodeExtenderArgs(FilterBody(), &pod, &result.node_names).ok()) std::abort();
  for (auto _ : state) {
    std::string out;
    EncodeFilterResult(result, &out);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_EncodeFilterResult500Names);

// The reply the server writes on issue 24's realistic body: 500 GKE-style names
// (gke-<cluster>-<pool>-<8 hex>-<4 chars>, 45-48 characters; as on GKE, the 8 hex name the
// pool's instance group in one zone, so all the nodes of a group share everything but the last 4
// characters: 3 pools in 3 zones here), a third failing with one of three reasons, the names
// known plain (read in place from the request).
void BM_EncodeFilterResultGkeNamesAThirdFailing(benchmark::State& state) {
  std::vector<std::string> names;
  const char* const pools[] = {"default-pool", "highmem-pool", "spot-pool"};
  const char* const reasons[] = {"Insufficient cpu", "Insufficient memory",
                                 "Insufficient cpu, Insufficient memory"};
  uint32_t x = 2463534242;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
  };
  std::vector<std::string> groups;
  for (const char* pool : pools) {
    for (int zone = 0; zone < 3; ++zone) {
      groups.push_back(absl::StrCat("gke-prod-europe-west1-", pool, "-",
                                    absl::Hex(next(), absl::kZeroPad8), "-"));
    }
  }
  constexpr absl::string_view kSuffixChars = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (int i = 0; i < kCandidates; ++i) {
    std::string name = groups[next() % groups.size()];
    for (int c = 0; c < 4; ++c) name.push_back(kSuffixChars[next() % kSuffixChars.size()]);
    names.push_back(std::move(name));
  }
  FilterResultView view;
  for (int i = 0; i < kCandidates; ++i) {
    if (i % 3 == 2) {
      view.failed_nodes.emplace_back(names[i], reasons[next() % 3]);
    } else {
      view.node_names.push_back(names[i]);
    }
  }
  std::string out;
  for (auto _ : state) {
    out.clear();
    EncodeFilterResult(view, &out, /*names_plain=*/true);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()));
}
BENCHMARK(BM_EncodeFilterResultGkeNamesAThirdFailing);

// What gRPC adds on the two ends: the shim's model pod into the message, serialized; parsed on
// the other side, and its pod back into the model.
void BM_ProtoSerializeParseExtenderArgs(benchmark::State& state) {
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  if (!decoder.DecodeExtenderArgs(FilterBody(), &pod, &names).ok()) std::abort();
  for (auto _ : state) {
    v1::ExtenderArgs args;
    PodToProto(pod, args.mutable_pod());
    for (absl::string_view name : names) args.add_node_names(name.data(), name.size());
    std::string wire;
    args.SerializeToString(&wire);
    v1::ExtenderArgs parsed;
    parsed.ParseFromString(wire);
    absl::StatusOr<Pod> back = PodFromProto(parsed.pod());
    benchmark::DoNotOptimize(back);
  }
}
BENCHMARK(BM_ProtoSerializeParseExtenderArgs);

// The same with the messages kept and Clear()ed between calls, as the shim's ReusePool and the
// server's message allocator keep them, timed a step at a time (counters: ns per call).
void BM_ProtoSerializeParseExtenderArgsPooled(benchmark::State& state) {
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  if (!decoder.DecodeExtenderArgs(FilterBody(), &pod, &names).ok()) std::abort();
  v1::ExtenderArgs args;
  v1::ExtenderArgs parsed;
  std::string wire;
  absl::Duration fill, serialize, parse, back;
  for (auto _ : state) {
    args.Clear();
    parsed.Clear();
    wire.clear();
    absl::Time t0 = absl::Now();
    PodToProto(pod, args.mutable_pod());
    for (absl::string_view name : names) args.add_node_names(name.data(), name.size());
    absl::Time t1 = absl::Now();
    args.SerializeToString(&wire);
    absl::Time t2 = absl::Now();
    parsed.ParseFromString(wire);
    absl::Time t3 = absl::Now();
    absl::StatusOr<Pod> out = PodFromProto(parsed.pod());
    absl::Time t4 = absl::Now();
    benchmark::DoNotOptimize(out);
    fill += t1 - t0;
    serialize += t2 - t1;
    parse += t3 - t2;
    back += t4 - t3;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["fill_ns"] = absl::ToDoubleNanoseconds(fill) / n;
  state.counters["serialize_ns"] = absl::ToDoubleNanoseconds(serialize) / n;
  state.counters["parse_ns"] = absl::ToDoubleNanoseconds(parse) / n;
  state.counters["from_proto_ns"] = absl::ToDoubleNanoseconds(back) / n;
}
BENCHMARK(BM_ProtoSerializeParseExtenderArgsPooled);

// The reply's way back, pooled the same way: the server's ExtenderFilterResult with every one of
// the 500 candidates passing (argument 0), or every third failing with the ledger's reason as the
// benchmark's 5,000-node cluster answers (argument 1: FailedNodes of 167 entries), the names
// copied from the request as grpc_services.cc does, serialized, and parsed on the shim's side.
void BM_ProtoSerializeParseFilterResultPooled(benchmark::State& state) {
  const bool failures = state.range(0) == 1;
  JsonDecoder decoder;
  Pod pod;
  std::vector<absl::string_view> names;
  if (!decoder.DecodeExtenderArgs(FilterBody(), &pod, &names).ok()) std::abort();
  v1::ExtenderFilterResult result;
  v1::ExtenderFilterResult parsed;
  std::string wire;
  absl::Duration fill, serialize, parse;
  for (auto _ : state) {
    result.Clear();
    parsed.Clear();
    wire.clear();
    absl::Time t0 = absl::Now();
    result.mutable_node_names()->Reserve(static_cast<int>(names.size()));
    for (size_t i = 0; i < names.size(); ++i) {
      if (failures && i % 3 == 0) {
        (*result.mutable_failed_nodes())[std::string(names[i])] = "Insufficient cpu";
      } else {
        result.add_node_names(names[i].data(), names[i].size());
      }
    }
    absl::Time t1 = absl::Now();
    result.SerializeToString(&wire);
    absl::Time t2 = absl::Now();
    parsed.ParseFromString(wire);
    absl::Time t3 = absl::Now();
    benchmark::DoNotOptimize(parsed);
    fill += t1 - t0;
    serialize += t2 - t1;
    parse += t3 - t2;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["fill_ns"] = absl::ToDoubleNanoseconds(fill) / n;
  state.counters["serialize_ns"] = absl::ToDoubleNanoseconds(serialize) / n;
  state.counters["parse_ns"] = absl::ToDoubleNanoseconds(parse) / n;
}
BENCHMARK(BM_ProtoSerializeParseFilterResultPooled)->Arg(0)->Arg(1);

// Every candidate passes, on the calling thread.
class PassingBackend final : public Backend {
 public:
  void Filter(const Pod&, absl::Span<const absl::string_view> candidates,
              FilterDone done) override {
    FilterResult answer;
    answer.fits.reserve(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) answer.fits.push_back(i);
    done(std::move(answer));
  }
  void Prioritize(const Pod&, absl::Span<const absl::string_view>, PrioritizeDone done) override {
    done(PrioritizeAnswer());
  }
  void Bind(const BindArgs&, StatusDone done) override { done(absl::OkStatus()); }
  void Preempt(const PreemptArgs&, PreemptDone done) override { done(NodeVictims()); }
  void CheckReady(StatusDone done) override { done(absl::OkStatus()); }
};

// One keep-alive client, one request at a time, through the front end. Argument 0: a backend in
// process (fitledger-server's layout, minus the ledger); 1: fitledger-shim's gRPC backend to a
// fake server that passes every candidate.
void BM_WebhookFilter500NodeNames(benchmark::State& state) {
  shim::testing::FakeExtender fake;
  std::unique_ptr<shim::testing::FakeServer> server;
  std::unique_ptr<Backend> backend;
  if (state.range(0) == 1) {
    server = shim::testing::FakeServer::Start(&fake, "127.0.0.1:0");
    if (server == nullptr) return state.SkipWithError("fake server");
    backend = std::make_unique<shim::GrpcBackend>(
        server->target(), shim::DialServer(server->target()), shim::GrpcBackend::Options{});
    state.SetLabel("gRPC backend (the shim)");
  } else {
    backend = std::make_unique<PassingBackend>();
    state.SetLabel("in-process backend");
  }
  MetricsRegistry registry;
  Metrics metrics(&registry);
  Webhook webhook("/", backend.get(), &metrics, nullptr);
  HttpServer http(
      HttpServerOptions{}, [&webhook](HttpCall call) { webhook.Serve(std::move(call)); },
      &Webhook::FormatError,
      [&webhook](const HttpRequest& request, const HttpReply& reply, absl::Duration elapsed) {
        webhook.Observe(request, reply, elapsed);
      });
  absl::StatusOr<int> port = http.Start("127.0.0.1", 0);
  if (!port.ok()) return state.SkipWithError("http server");
  httplib::Client client("127.0.0.1", *port);
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
  http.Stop();
}
BENCHMARK(BM_WebhookFilter500NodeNames)
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fitledger::webhook

BENCHMARK_MAIN();
