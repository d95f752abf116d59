// grpc_filter_load: a closed-loop load client for fitledger-server's Filter rpc, through the
// generated stub (no shim, no JSON on the wire), for measuring by hand.
//
//   grpc_filter_load --target 127.0.0.1:PORT --body filter.json --clients 1 --seconds 10
//
// `--api callback` makes each call through the stub's callback API (the caller waits for the
// callback), as fitledger-shim does, instead of the blocking call: which stock client API makes
// the cheaper hop (issue 49 item 2).
//
// `--write_frame FILE` instead writes the request as one gRPC-framed message, h2load's body for
// the same call, to measure direct gRPC with both clients.
//
// `--body` is an ExtenderArgs JSON document (the very body kube-scheduler POSTs; parsed once
// with protobuf's JSON parser, unknown Kubernetes fields ignored). Each client thread has its own
// channel (its own HTTP/2 connection) and issues one call at a time. Prints the latency
// percentiles and the throughput, then one `GRPC_JSON {...}` line for scripts.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, target, "", "fitledger-server gRPC address: host:port or unix:///path");
ABSL_FLAG(std::string, body, "", "ExtenderArgs JSON file (kube-scheduler's Filter body)");
ABSL_FLAG(int, clients, 1, "concurrent closed-loop clients (one channel each)");
ABSL_FLAG(double, seconds, 10, "measured duration");
ABSL_FLAG(double, warmup_seconds, 1, "unmeasured warm-up before the measurement");
ABSL_FLAG(std::string, api, "sync", "client API: sync (blocking call) or callback (as the shim)");
ABSL_FLAG(std::string, write_frame, "",
          "write the request as one gRPC length-prefixed message to this file and exit (a body "
          "for h2load -d)");

namespace fitledger::bench {
namespace {

struct ClientResult {
  std::vector<int64_t> latencies_ns;
  int64_t errors = 0;
  int64_t passing_nodes = -1;  // of the last reply
  std::string last_error;
};

std::shared_ptr<grpc::Channel> Dial(const std::string& target) {
  grpc::ChannelArguments args;
  // A separate connection per client, as separate kube-scheduler replicas / shims would have.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

int Run() {
  const std::string target = absl::GetFlag(FLAGS_target);
  const std::string body_path = absl::GetFlag(FLAGS_body);
  const int clients = std::max(1, absl::GetFlag(FLAGS_clients));
  if ((target.empty() && absl::GetFlag(FLAGS_write_frame).empty()) || body_path.empty()) {
    std::fprintf(stderr, "usage: grpc_filter_load --target ADDR --body FILE [--clients N]\n");
    return 2;
  }
  std::ifstream in(body_path);
  std::stringstream text;
  text << in.rdbuf();
  v1::ExtenderArgs args;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (auto s = google::protobuf::util::JsonStringToMessage(text.str(), &args, options); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", body_path.c_str(), s.ToString().c_str());
    return 2;
  }

  if (const std::string frame_path = absl::GetFlag(FLAGS_write_frame); !frame_path.empty()) {
    // gRPC's framing: a compressed flag (0) and a 4-byte big-endian length, then the message.
    const std::string message = args.SerializeAsString();
    const uint32_t n = static_cast<uint32_t>(message.size());
    const char prefix[5] = {0, static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                            static_cast<char>(n >> 8), static_cast<char>(n)};
    std::ofstream out(frame_path, std::ios::binary);
    out.write(prefix, sizeof(prefix));
    out.write(message.data(), static_cast<std::streamsize>(message.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", frame_path.c_str());
      return 2;
    }
    return 0;
  }
  const std::string api = absl::GetFlag(FLAGS_api);
  if (api != "sync" && api != "callback") {
    std::fprintf(stderr, "--api is sync or callback\n");
    return 2;
  }
  const bool callback = api == "callback";
  std::atomic<bool> measuring{false};
  std::atomic<bool> stop{false};
  std::vector<ClientResult> results(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = v1::Extender::NewStub(Dial(target));
      ClientResult& r = results[static_cast<size_t>(c)];
      r.latencies_ns.reserve(1 << 20);
      while (!stop.load(std::memory_order_relaxed)) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        v1::ExtenderFilterResult reply;
        const absl::Time start = absl::Now();
        grpc::Status status;
        if (callback) {
          std::mutex mu;
          std::condition_variable cv;
          bool done = false;
          stub->async()->Filter(&context, &args, &reply, [&](grpc::Status s) {
            std::lock_guard<std::mutex> lock(mu);
            status = std::move(s);
            done = true;
            cv.notify_one();
          });
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done; });
        } else {
          status = stub->Filter(&context, args, &reply);
        }
        const int64_t ns = absl::ToInt64Nanoseconds(absl::Now() - start);
        if (!measuring.load(std::memory_order_relaxed)) continue;
        if (!status.ok() || !reply.error().empty()) {
          ++r.errors;
          r.last_error = status.ok() ? reply.error() : status.error_message();
          continue;
        }
        r.passing_nodes = reply.node_names_size();
        r.latencies_ns.push_back(ns);
      }
    });
  }
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds)));
  measuring = true;
  const absl::Time start = absl::Now();
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_seconds)));
  measuring = false;
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  stop = true;
  for (std::thread& t : threads) t.join();

  std::vector<int64_t> all;
  int64_t errors = 0;
  int64_t passing = -1;
  std::string last_error;
  for (const ClientResult& r : results) {
    all.insert(all.end(), r.latencies_ns.begin(), r.latencies_ns.end());
    errors += r.errors;
    if (r.passing_nodes >= 0) passing = r.passing_nodes;
    if (!r.last_error.empty()) last_error = r.last_error;
  }
  std::sort(all.begin(), all.end());
  const double rps = static_cast<double>(all.size()) / elapsed;
  auto us = [&](double p) { return Percentile(all, p) / 1000; };
  std::printf(
      "grpc Filter, %d candidates, %d client(s): %zu calls in %.1fs = %.0f calls/s; "
      "p50 %lld us, p90 %lld us, p99 %lld us, max %lld us; %lld errors; %lld nodes passed\n",
      args.node_names_size(), clients, all.size(), elapsed, rps, (long long)us(50),
      (long long)us(90), (long long)us(99), all.empty() ? 0LL : (long long)(all.back() / 1000),
      (long long)errors, (long long)passing);
  if (!last_error.empty()) std::printf("last error: %s\n", last_error.c_str());
  std::printf(
      "GRPC_JSON "
      "{\"api\":\"%s\",\"clients\":%d,\"requests\":%zu,\"seconds\":%.3f,\"rps\":%.1f,\"errors\":%"
      "lld,"
      "\"p50_us\":%lld,\"p90_us\":%lld,\"p99_us\":%lld,\"max_us\":%lld,\"passing\":%lld}\n",
      api.c_str(), clients, all.size(), elapsed, rps, (long long)errors, (long long)us(50),
      (long long)us(90), (long long)us(99), all.empty() ? 0LL : (long long)(all.back() / 1000),
      (long long)passing);
  return errors > 0 && all.empty() ? 1 : 0;
}

}  // namespace
}  // namespace fitledger::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return fitledger::bench::Run();
}
