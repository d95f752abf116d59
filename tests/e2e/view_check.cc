#include "tests/e2e/view_check.h"

#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "model/pod.h"
#include "server/kube/objects.h"

namespace fitledger::testing {
namespace {

constexpr const char* kCompared[] = {"cpu", "memory", "pods"};

}  // namespace

absl::StatusOr<std::map<std::string, Resources>> RecountFromApi(E2eCluster& cluster) {
  HttpResult list = cluster.Api("GET", "/api/v1/pods");
  if (list.status != 200 || !list.body.is_object()) {
    return absl::UnavailableError(
        absl::StrCat("LIST pods: ", list.status, " ", list.raw.substr(0, 200)));
  }
  std::map<std::string, Resources> out;
  for (const nlohmann::json& item : list.body.value("items", nlohmann::json::array())) {
    absl::StatusOr<Pod> pod = ParsePod(item.dump());
    if (!pod.ok()) return pod.status();
    if (pod->node_name.empty() || pod->IsTerminal()) continue;
    absl::StatusOr<Resources> requests = PodRequests(*pod, RequestBasis::kSpecAndStatus);
    if (!requests.ok()) return requests.status();
    out[pod->node_name].Add(*requests);
  }
  return out;
}

std::string DiffViewWithApi(E2eCluster& cluster, bool require_no_assumed) {
  absl::StatusOr<std::map<std::string, Resources>> truth = RecountFromApi(cluster);
  if (!truth.ok()) return std::string(truth.status().message());
  absl::StatusOr<v1::ListNodesResponse> view = cluster.Nodes();
  if (!view.ok()) return absl::StrCat("ListNodes: ", view.status().message());
  std::string diff;
  std::set<std::string> seen;
  for (const v1::NodeView& node : view->nodes()) {
    seen.insert(node.name());
    Resources want;
    if (auto it = truth->find(node.name()); it != truth->end()) want = it->second;
    for (const char* r : kCompared) {
      int64_t counted = Amount(node.confirmed(), r) + Amount(node.assumed(), r);
      int64_t free = Amount(node.free(), r);
      int64_t expected_free = Amount(node.allocatable(), r) - want.Get(r);
      if (counted != want.Get(r) || free != expected_free) {
        absl::StrAppend(&diff, node.name(), " ", r, ": server counts ", counted, " (confirmed ",
                        Amount(node.confirmed(), r), " + assumed ", Amount(node.assumed(), r),
                        "), free ", free, "; API says ", want.Get(r), ", free ", expected_free,
                        "\n");
      }
    }
    if (require_no_assumed && node.assumed_pods() != 0) {
      absl::StrAppend(&diff, node.name(), ": ", node.assumed_pods(), " pods still assumed\n");
    }
  }
  for (const auto& [name, requests] : *truth) {
    if (seen.count(name) == 0) absl::StrAppend(&diff, name, ": missing from the server's view\n");
  }
  return diff;
}

std::string WaitForViewToMatchApi(E2eCluster& cluster, absl::Duration timeout,
                                  bool require_no_assumed) {
  std::string last;
  E2eCluster::WaitFor(
      [&] {
        last = DiffViewWithApi(cluster, require_no_assumed);
        return last.empty();
      },
      timeout);
  return last;
}

int64_t KubeletRejections(E2eCluster& cluster) {
  HttpResult stats = cluster.Api("GET", "/sim/stats");
  if (stats.status != 200 || !stats.body.is_object()) return -1;
  int64_t total = 0;
  const nlohmann::json rejections = stats.body.value("rejections", nlohmann::json::object());
  for (const auto& [reason, n] : rejections.items()) total += n.get<int64_t>();
  return total;
}

double Metric(int monitor_port, const std::string& series) {
  HttpResult r = Request(monitor_port, "GET", "/metrics", "");
  if (r.status != 200) return -1;
  const std::string prefix = series + " ";
  size_t at = 0;
  while ((at = r.raw.find(prefix, at)) != std::string::npos) {
    if (at == 0 || r.raw[at - 1] == '\n') {
      size_t end = r.raw.find('\n', at);
      double v = 0;
      if (absl::SimpleAtod(r.raw.substr(at + prefix.size(), end - at - prefix.size()), &v))
        return v;
      return -1;
    }
    at += prefix.size();
  }
  return -1;
}

int HttpGetStatus(int port, const std::string& path) {
  return Request(port, "GET", path, "").status;
}

int HealthStatus(const std::shared_ptr<grpc::Channel>& channel) {
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  if (!health->Check(&ctx, req, &resp).ok()) return -1;
  return resp.status();
}

absl::Status SpawnServer(E2eCluster& cluster, const std::string& socket,
                         const std::string& server_yaml, const std::string& tag) {
  const std::string base = absl::StrCat(cluster.dir(), "/server-", tag);
  if (absl::Status w = WriteFile(base + ".yaml", server_yaml); !w.ok()) return w;
  const std::string ready = base + ".ready";
  Extender& e = cluster.extender();
  std::vector<std::string> argv = {FITLEDGER_SERVER_PATH,
                                   "--config",
                                   base + ".yaml",
                                   "--kubeconfig",
                                   cluster.sim().kubeconfig_path(),
                                   "--grpc-listen",
                                   socket + ",127.0.0.1:0",
                                   "--monitor-listen",
                                   "127.0.0.1:0",
                                   "--ready-file",
                                   ready};
  if (e.layout == Layout::kInServer) {
    // The webhook comes back on its port, as a restarted pod keeps its Service's URL.
    argv.insert(argv.end(), {"--webhook-listen", absl::StrCat("127.0.0.1:", e.shim_port)});
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> server = ChildProcess::Start(argv, base + ".log");
  if (!server.ok()) return server.status();
  e.server = *std::move(server);
  if (absl::Status waited = WaitForFile(ready, absl::Seconds(30)); !waited.ok()) {
    return absl::UnavailableError(
        absl::StrCat("fitledger-server did not start: ", ReadFileOrEmpty(e.server->output_path())));
  }
  nlohmann::json ports = nlohmann::json::parse(ReadFileOrEmpty(ready), nullptr, false);
  if (!ports.is_object()) return absl::InternalError("unreadable ready file " + ready);
  e.socket = socket;
  e.grpc_port = ports["grpc_ports"][0];
  e.monitor_port = ports["monitor_port"];
  e.channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", e.grpc_port),
                                  grpc::InsecureChannelCredentials());
  e.extender = v1::Extender::NewStub(e.channel);
  e.introspection = v1::Introspection::NewStub(e.channel);
  return absl::OkStatus();
}

}  // namespace fitledger::testing
