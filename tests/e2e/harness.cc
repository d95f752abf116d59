#include "tests/e2e/harness.h"

#include <signal.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace fitledger::testing {

HttpResult Request(int port, const std::string& method, const std::string& path,
                   const std::string& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(20, 0);
  client.set_tcp_nodelay(true);
  return Call(client, method, path, body);
}

int64_t Amount(const v1::ResourceAmounts& amounts, const std::string& name) {
  auto it = amounts.amounts().find(name);
  return it == amounts.amounts().end() ? 0 : it->second;
}

bool E2eCluster::WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (condition()) return true;
    if (absl::Now() > deadline) return false;
    usleep(20 * 1000);
  }
}

std::string LayoutName(const ::testing::TestParamInfo<Layout>& info) {
  return info.param == Layout::kInServer ? "InServer" : "Shim";
}

void PrintTo(Layout layout, std::ostream* out) {
  *out << (layout == Layout::kInServer ? "InServer" : "Shim");
}

absl::StatusOr<std::unique_ptr<E2eCluster>> E2eCluster::Start(const ClusterOptions& options) {
  auto cluster = std::unique_ptr<E2eCluster>(new E2eCluster());
  absl::StatusOr<std::unique_ptr<SimProcess>> sim = SimProcess::Start(options.sim_yaml);
  if (!sim.ok()) return sim.status();
  cluster->sim_ = *std::move(sim);
  cluster->dir_ = TempDir("e2e");
  absl::Status s = cluster->StartExtender(options);
  if (!s.ok()) return s;
  return cluster;
}

absl::Status E2eCluster::StartExtender(const ClusterOptions& options) {
  return Launch(options, &extender_);
}

absl::Status E2eCluster::StartSecondExtender(const ClusterOptions& options) {
  return Launch(options, &second_);
}

absl::Status E2eCluster::Launch(const ClusterOptions& options, Extender* extender) {
  Extender& e = *extender;
  e = Extender();
  ++generation_;
  std::string g = std::to_string(generation_);
  std::string config = absl::StrCat(dir_.path(), "/server-", g, ".yaml");
  absl::Status w = WriteFile(config, options.server_yaml);
  if (!w.ok()) return w;
  e.socket = absl::StrCat("unix://", dir_.path(), "/server-", g, ".sock");
  e.layout = options.layout;
  std::string ready = absl::StrCat(dir_.path(), "/server-", g, ".ready");
  std::vector<std::string> argv = {FITLEDGER_SERVER_PATH,
                                   "--config",
                                   config,
                                   "--kubeconfig",
                                   sim_->kubeconfig_path(),
                                   "--grpc-listen",
                                   e.socket + ",127.0.0.1:0",
                                   "--monitor-listen",
                                   "127.0.0.1:0",
                                   "--ready-file",
                                   ready};
  if (!options.ledger) argv.push_back("--no-ledger");
  argv.insert(argv.end(), options.server_args.begin(), options.server_args.end());
  if (options.layout == Layout::kInServer) {
    argv.insert(argv.end(), {"--webhook-listen", "127.0.0.1:0"});
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> server =
      ChildProcess::Start(argv, absl::StrCat(dir_.path(), "/server-", g, ".log"));
  if (!server.ok()) return server.status();
  e.server = *std::move(server);
  absl::Status waited = WaitForFile(ready, absl::Seconds(30));
  if (!waited.ok()) {
    return absl::UnavailableError(
        absl::StrCat("fitledger-server did not start: ", ReadFileOrEmpty(e.server->output_path())));
  }
  nlohmann::json ports = nlohmann::json::parse(ReadFileOrEmpty(ready));
  e.grpc_port = ports["grpc_ports"][0];
  e.monitor_port = ports["monitor_port"];
  e.channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", e.grpc_port),
                                  grpc::InsecureChannelCredentials());
  e.extender = v1::Extender::NewStub(e.channel);
  e.introspection = v1::Introspection::NewStub(e.channel);
  auto health = grpc::health::v1::Health::NewStub(e.channel);
  bool serving = WaitFor(
      [&] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
        grpc::health::v1::HealthCheckRequest req;
        grpc::health::v1::HealthCheckResponse resp;
        return health->Check(&ctx, req, &resp).ok() &&
               resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
      },
      absl::Seconds(30));
  if (!serving) return absl::UnavailableError("fitledger-server never reported SERVING");
  if (options.layout == Layout::kInServer) {
    e.shim_port = ports["webhook_port"];
    return absl::OkStatus();
  }
  std::string port_file = absl::StrCat(dir_.path(), "/shim-", g, ".port");
  absl::StatusOr<std::unique_ptr<ChildProcess>> shim =
      ChildProcess::Start({FITLEDGER_SHIM_PATH, "--listen", "127.0.0.1:0", "--server", e.socket,
                           "--port-file", port_file, "--monitor-listen", "127.0.0.1:0"},
                          absl::StrCat(dir_.path(), "/shim-", g, ".log"));
  if (!shim.ok()) return shim.status();
  e.shim = *std::move(shim);
  waited = WaitForFile(port_file, absl::Seconds(30));
  if (!waited.ok()) {
    return absl::UnavailableError(
        absl::StrCat("fitledger-shim did not start: ", ReadFileOrEmpty(e.shim->output_path())));
  }
  e.shim_port = std::stoi(ReadFileOrEmpty(port_file));
  // The shim logs its monitor's port: "... \"monitor\":\"127.0.0.1:0 (port N)\"".
  const bool logged = WaitFor(
      [&] {
        const std::string log = ReadFileOrEmpty(e.shim->output_path());
        const size_t at = log.find("(port ");
        if (at == std::string::npos) return false;
        e.shim_monitor_port = std::atoi(log.c_str() + at + 6);
        return e.shim_monitor_port > 0;
      },
      absl::Seconds(30));
  if (!logged) return absl::UnavailableError("fitledger-shim did not log its monitor port");
  return absl::OkStatus();
}

absl::StatusOr<int> E2eCluster::StopServer() {
  extender_.server->Signal(SIGTERM);
  return extender_.server->Wait(absl::Seconds(30));
}

HttpResult E2eCluster::Api(const std::string& method, const std::string& path,
                           const nlohmann::json& body) {
  return Request(sim_->port(), method, path, body.is_null() ? "" : body.dump());
}

nlohmann::json PodManifest(const std::string& name, const std::string& cpu,
                           const std::string& memory, const std::string& node) {
  nlohmann::json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"schedulerName", "fitledger-scheduler"},
        {"containers",
         nlohmann::json::array(
             {{{"name", "c"},
               {"image", "pause"},
               {"resources", {{"requests", {{"cpu", cpu}, {"memory", memory}}}}}}})}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

absl::StatusOr<nlohmann::json> E2eCluster::CreatePod(const std::string& name,
                                                     const std::string& cpu,
                                                     const std::string& memory) {
  nlohmann::json pod = PodManifest(name, cpu, memory);
  HttpResult r = Api("POST", "/api/v1/namespaces/default/pods", pod);
  if (r.status != 201) {
    return absl::InternalError(absl::StrCat("create pod ", name, ": ", r.status, " ", r.raw));
  }
  return r.body;
}

HttpResult E2eCluster::ShimRaw(const std::string& verb, const std::string& body) {
  return Request(extender_.shim_port, "POST", "/" + verb, body);
}

HttpResult E2eCluster::Shim(const std::string& verb, const nlohmann::json& body) {
  return ShimRaw(verb, body.dump());
}

absl::StatusOr<std::string> E2eCluster::FilterAndBind(const nlohmann::json& pod,
                                                      const std::string& node) {
  HttpResult f = Shim("filter", {{"Pod", pod}, {"NodeNames", {node}}});
  if (f.status != 200) return absl::InternalError(absl::StrCat("filter: ", f.status, " ", f.raw));
  if (!f.body.value("Error", "").empty()) return f.body["Error"].get<std::string>();
  bool fits = false;
  for (const auto& n : f.body.value("NodeNames", nlohmann::json::array())) fits |= n == node;
  if (!fits)
    return absl::FailedPreconditionError(absl::StrCat("filter rejected ", node, ": ", f.raw));
  HttpResult b = Shim("bind", {{"PodName", pod["metadata"]["name"]},
                               {"PodNamespace", pod["metadata"]["namespace"]},
                               {"PodUID", pod["metadata"]["uid"]},
                               {"Node", node}});
  if (b.status != 200) return absl::InternalError(absl::StrCat("bind: ", b.status, " ", b.raw));
  return b.body.value("Error", "");
}

absl::StatusOr<v1::ListNodesResponse> E2eCluster::Nodes() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListNodesRequest req;
  v1::ListNodesResponse resp;
  grpc::Status s = extender_.introspection->ListNodes(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return resp;
}

absl::StatusOr<v1::NodeView> E2eCluster::Node(const std::string& name) {
  absl::StatusOr<v1::ListNodesResponse> nodes = Nodes();
  if (!nodes.ok()) return nodes.status();
  for (const v1::NodeView& n : nodes->nodes()) {
    if (n.name() == name) return n;
  }
  return absl::NotFoundError(name);
}

absl::StatusOr<v1::ListAssumedResponse> E2eCluster::Assumed() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListAssumedRequest req;
  v1::ListAssumedResponse resp;
  grpc::Status s = extender_.introspection->ListAssumed(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return resp;
}

}  // namespace fitledger::testing
