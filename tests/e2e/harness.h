// End-to-end harness: fitledger-sim + fitledger-server + fitledger-shim as real processes on
// loopback (ports from 0), with gRPC and HTTP helpers for the tests.
#ifndef FITLEDGER_TESTS_E2E_HARNESS_H_
#define FITLEDGER_TESTS_E2E_HARNESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "fitledger/v1/introspection.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/sim/sim_process.h"

namespace fitledger::testing {

// Where kube-scheduler's webhook is served: by fitledger-server itself (the chart's default
// layout), or by fitledger-shim in front of the server's gRPC (the split layout).
enum class Layout { kInServer, kShim };
// "InServer" / "Shim", for parameterized test names.
std::string LayoutName(const ::testing::TestParamInfo<Layout>& info);
// gtest prints a Layout by its name.
void PrintTo(Layout layout, std::ostream* out);

// One fitledger-server (+ fitledger-shim in the split layout).
struct Extender {
  std::unique_ptr<ChildProcess> server;
  std::unique_ptr<ChildProcess> shim;  // null in Layout::kInServer
  Layout layout = Layout::kInServer;
  std::string socket;         // unix:///... (grpc.listen: gRPC's server)
  int grpc_port = 0;          // loopback TCP
  int monitor_port = 0;       // the server's HTTP /healthz /readyz /metrics
  int shim_port = 0;          // the webhook's port: the server's own, or the shim's
  int shim_monitor_port = 0;  // the shim's /healthz /readyz /metrics (Layout::kShim)
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Extender::Stub> extender;
  std::unique_ptr<v1::Introspection::Stub> introspection;
};

struct ClusterOptions {
  std::string sim_yaml;     // fitledger-sim config
  std::string server_yaml;  // fitledger-server config (kubeconfig and listeners are set)
  bool ledger = true;       // false: --no-ledger
  Layout layout = Layout::kInServer;
  std::vector<std::string> server_args = {};  // more flags for fitledger-server
};

// Not thread-safe. Everything is killed on destruction, then dir() removed.
class E2eCluster {
 public:
  static absl::StatusOr<std::unique_ptr<E2eCluster>> Start(const ClusterOptions& options);

  SimProcess& sim() { return *sim_; }
  Extender& extender() { return extender_; }
  const std::string& dir() const { return dir_.path(); }

  // Starts (or restarts) the server+shim pair with `options`.
  absl::Status StartExtender(const ClusterOptions& options);
  // Starts a second server+shim pair on the same sim (two replicas of the chart's pod).
  absl::Status StartSecondExtender(const ClusterOptions& options);
  Extender& second_extender() { return second_; }
  // Kills the server with SIGTERM and waits for its exit code.
  absl::StatusOr<int> StopServer();

  // Sim API helpers (JSON in, JSON out).
  HttpResult Api(const std::string& method, const std::string& path,
                 const nlohmann::json& body = nullptr);
  // Creates pod `name` in "default" with the given cpu/memory requests; returns the created object.
  absl::StatusOr<nlohmann::json> CreatePod(const std::string& name, const std::string& cpu,
                                           const std::string& memory = "64Mi");
  // POSTs to the shim: verb is filter | prioritize | bind | preempt.
  HttpResult Shim(const std::string& verb, const nlohmann::json& body);
  HttpResult ShimRaw(const std::string& verb, const std::string& body);
  // Filter through the shim on every node, then bind to `node`. The bind's Error ("" = ok).
  absl::StatusOr<std::string> FilterAndBind(const nlohmann::json& pod, const std::string& node);

  // Introspection.
  absl::StatusOr<v1::ListNodesResponse> Nodes();
  absl::StatusOr<v1::NodeView> Node(const std::string& name);
  absl::StatusOr<v1::ListAssumedResponse> Assumed();

  // Polls `condition` every 20 ms until it holds (true) or `timeout` passes (false).
  static bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout);

 private:
  // Starts a server+shim pair with `options` into `*extender`.
  absl::Status Launch(const ClusterOptions& options, Extender* extender);

  TempDir dir_;  // declared first: removed after every process here is killed
  std::unique_ptr<SimProcess> sim_;
  Extender extender_;
  Extender second_;
  int generation_ = 0;
};

// One HTTP request to 127.0.0.1:port on a fresh connection (20 s read timeout).
HttpResult Request(int port, const std::string& method, const std::string& path,
                   const std::string& body);

// A Pod manifest in "default" for fitledger-scheduler with one container requesting `cpu` and
// `memory`; bound to `node` when it is not empty.
nlohmann::json PodManifest(const std::string& name, const std::string& cpu,
                           const std::string& memory = "64Mi", const std::string& node = "");

// amounts[name] or 0.
int64_t Amount(const v1::ResourceAmounts& amounts, const std::string& name);

}  // namespace fitledger::testing

#endif  // FITLEDGER_TESTS_E2E_HARNESS_H_
