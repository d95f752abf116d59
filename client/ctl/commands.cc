#include "client/ctl/commands.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "fitledger/v1/introspection.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "server/kube/api_client.h"
#include "server/kube/connection.h"
#include "yaml-cpp/yaml.h"

namespace fitledger::ctl {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(const ServerTarget& t) {
  // A Unix socket that is not there: say so, rather than gRPC's connect error after the
  // deadline (the default /run/fitledger/server.sock does not exist on a fresh machine).
  if (absl::StartsWith(t.address, "unix:")) {
    std::string path = t.address.substr(5);
    if (absl::StartsWith(path, "//")) path = path.substr(2);
    struct stat st;
    if (!path.empty() && stat(path.c_str(), &st) != 0) {
      return absl::UnavailableError(absl::StrCat(
          "no fitledger-server socket at ", path,
          " (is the server running? give its address with --server or $FITLEDGER_SERVER; "
          "after scripts/demo: source .run/env)"));
    }
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  if (!t.tls_ca_file.empty() || !t.tls_cert_file.empty() || !t.tls_server_name.empty()) {
    grpc::SslCredentialsOptions o;  // no CA file: the system's roots
    if (!t.tls_ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadFile(t.tls_ca_file);
      if (!ca.ok()) return ca.status();
      o.pem_root_certs = *ca;
    }
    if (t.tls_cert_file.empty() != t.tls_key_file.empty()) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
    }
    if (!t.tls_cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadFile(t.tls_cert_file);
      absl::StatusOr<std::string> key = ReadFile(t.tls_key_file);
      if (!cert.ok()) return cert.status();
      if (!key.ok()) return key.status();
      o.pem_cert_chain = *cert;
      o.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(o);
    if (!t.tls_server_name.empty()) args.SetSslTargetNameOverride(t.tls_server_name);
  }
  return grpc::CreateCustomChannel(t.address, creds, args);
}

std::unique_ptr<grpc::ClientContext> Context(const ServerTarget& t) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(t.timeout));
  return ctx;
}

absl::Status FromGrpc(const grpc::Status& s, const ServerTarget& t) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(t.address, ": ", s.error_message()));
}

std::string Cpu(int64_t milli) { return absl::StrCat(milli, "m"); }
std::string Mem(int64_t bytes) {
  if (bytes != 0 && bytes % (1 << 30) == 0) return absl::StrCat(bytes >> 30, "Gi");
  if (bytes != 0 && bytes % (1 << 20) == 0) return absl::StrCat(bytes >> 20, "Mi");
  return absl::StrCat(bytes);
}
int64_t Get(const v1::ResourceAmounts& r, const std::string& name) {
  auto it = r.amounts().find(name);
  return it == r.amounts().end() ? 0 : it->second;
}
std::string Amount(const std::string& resource, int64_t v) {
  if (resource == "cpu") return Cpu(v);
  if (resource == "memory" || resource == "ephemeral-storage") return Mem(v);
  return absl::StrCat(v);
}

nlohmann::json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json obj = nlohmann::json::object();
      for (const auto& kv : node) obj[kv.first.Scalar()] = ToJson(kv.second);
      return obj;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& item : node) arr.push_back(ToJson(item));
      return arr;
    }
    case YAML::NodeType::Scalar:
      return node.Scalar();
    default:
      return nullptr;
  }
}

}  // namespace

absl::StatusOr<std::string> YamlToJson(const std::string& yaml) {
  try {
    return ToJson(YAML::Load(yaml)).dump();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid YAML: ", e.what()));
  }
}

absl::Status Health(const ServerTarget& t) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(t);
  if (!channel.ok()) return channel.status();
  auto stub = grpc::health::v1::Health::NewStub(*channel);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = stub->Check(Context(t).get(), request, &response);
  if (!s.ok()) return FromGrpc(s, t);
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(
        absl::StrCat(t.address, ": ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()),
                     " (not synced with the cluster yet?)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NodesTable(const ServerTarget& t) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(t);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Introspection::NewStub(*channel);
  v1::ListNodesRequest request;
  v1::ListNodesResponse response;
  grpc::Status s = stub->ListNodes(Context(t).get(), request, &response);
  if (!s.ok()) return FromGrpc(s, t);
  std::vector<std::string> resources = {"cpu", "memory"};
  if (!response.managed_resources().empty()) {
    resources.assign(response.managed_resources().begin(), response.managed_resources().end());
  }
  std::string out = absl::StrFormat("synced: %s   ledger: %s\n", response.synced() ? "yes" : "NO",
                                    response.ledger_enabled() ? "on" : "OFF (--no-ledger)");
  absl::StrAppendFormat(&out, "%-16s", "NODE");
  for (const std::string& r : resources) {
    absl::StrAppendFormat(&out, " %-40s", absl::StrCat(r, " (allocatable/confirmed/assumed/free)"));
  }
  absl::StrAppend(&out, " PODS (confirmed+assumed/allocatable)\n");
  for (const v1::NodeView& n : response.nodes()) {
    absl::StrAppendFormat(&out, "%-16s", n.known() ? n.name() : n.name() + " (unknown)");
    for (const std::string& r : resources) {
      absl::StrAppendFormat(
          &out, " %-40s",
          absl::StrCat(Amount(r, Get(n.allocatable(), r)), " / ", Amount(r, Get(n.confirmed(), r)),
                       " / ", Amount(r, Get(n.assumed(), r)), " / ", Amount(r, Get(n.free(), r))));
    }
    absl::StrAppendFormat(&out, " %d+%d/%d\n", n.confirmed_pods(), n.assumed_pods(),
                          Get(n.allocatable(), "pods"));
  }
  return out;
}

absl::StatusOr<std::string> AssumedTable(const ServerTarget& t) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(t);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Introspection::NewStub(*channel);
  v1::ListAssumedRequest request;
  v1::ListAssumedResponse response;
  grpc::Status s = stub->ListAssumed(Context(t).get(), request, &response);
  if (!s.ok()) return FromGrpc(s, t);
  std::string out = absl::StrFormat("%-40s %-16s %-10s %-10s %-8s %s\n", "POD", "NODE", "CPU",
                                    "MEMORY", "AGE", "BIND IN FLIGHT");
  for (const v1::AssumedEntry& e : response.assumed()) {
    absl::StrAppendFormat(
        &out, "%-40s %-16s %-10s %-10s %-8s %s\n", absl::StrCat(e.namespace_(), "/", e.name()),
        e.node(), Cpu(Get(e.requests(), "cpu")), Mem(Get(e.requests(), "memory")),
        absl::StrFormat("%.1fs", e.age_seconds()), e.bind_in_flight() ? "yes" : "no");
  }
  absl::StrAppendFormat(&out, "%d assumed\n", response.assumed_size());
  return out;
}

absl::StatusOr<std::vector<ExplainSubject>> ExplainSubjects(const std::string& text,
                                                            const std::string& source) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid YAML: ", e.what()));
  }
  // The workloads with a pod template, and where it is (k8s.io/api apps/v1, core/v1, batch/v1).
  struct Workload {
    const char* kind;
    std::vector<const char*> template_path;
  };
  static const std::vector<Workload>* const kWorkloads = new std::vector<Workload>{
      {"Deployment", {"spec", "template"}},
      {"StatefulSet", {"spec", "template"}},
      {"DaemonSet", {"spec", "template"}},
      {"ReplicaSet", {"spec", "template"}},
      {"ReplicationController", {"spec", "template"}},
      {"Job", {"spec", "template"}},
      {"CronJob", {"spec", "jobTemplate", "spec", "template"}},
  };
  constexpr char kSupported[] =
      "Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob";
  std::vector<ExplainSubject> out;
  for (size_t i = 0; i < documents.size(); ++i) {
    const nlohmann::json doc = ToJson(documents[i]);
    if (doc.is_null()) continue;  // an empty document (e.g. a trailing ---)
    const std::string where =
        documents.size() > 1 ? absl::StrCat(source, " (document ", i + 1, ")") : source;
    if (!doc.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not a Kubernetes object"));
    }
    const std::string kind = doc.value("kind", "");
    if (kind.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": no kind (fitledgerctl explain reads ", kSupported, ")"));
    }
    const nlohmann::json metadata = doc.contains("metadata") && doc["metadata"].is_object()
                                        ? doc["metadata"]
                                        : nlohmann::json::object();
    const std::string name = metadata.value("name", "");
    if (kind == "Pod") {
      out.push_back({absl::StrCat("pod ", name.empty() ? "(unnamed)" : name), doc.dump()});
      continue;
    }
    const Workload* workload = nullptr;
    for (const Workload& w : *kWorkloads) {
      if (kind == w.kind) workload = &w;
    }
    if (workload == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": kind ", kind,
                                                     " has no pod to explain (fitledgerctl "
                                                     "explain reads ",
                                                     kSupported, ")"));
    }
    const nlohmann::json* node = &doc;
    for (const char* key : workload->template_path) {
      if (!node->is_object() || !node->contains(key)) {
        node = nullptr;
        break;
      }
      node = &(*node)[key];
    }
    if (node == nullptr || !node->is_object() || !node->contains("spec")) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", kind, " ", name, " has no ",
                                                     absl::StrJoin(workload->template_path, "."),
                                                     ".spec (the pod template)"));
    }
    nlohmann::json pod_metadata = node->contains("metadata") && (*node)["metadata"].is_object()
                                      ? (*node)["metadata"]
                                      : nlohmann::json::object();
    pod_metadata["name"] = name;
    if (metadata.contains("namespace")) pod_metadata["namespace"] = metadata["namespace"];
    nlohmann::json pod = {{"apiVersion", "v1"},
                          {"kind", "Pod"},
                          {"metadata", pod_metadata},
                          {"spec", (*node)["spec"]}};
    out.push_back({absl::StrCat(absl::AsciiStrToLower(kind), " ", name.empty() ? "(unnamed)" : name,
                                " (its pod template)"),
                   pod.dump()});
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no object to explain"));
  }
  return out;
}

absl::StatusOr<ExplainResult> Explain(const ServerTarget& t, const std::string& file,
                                      const std::string& node) {
  std::string text;
  std::string source = file;
  if (file == "-") {
    std::stringstream buffer;
    buffer << std::cin.rdbuf();
    text = buffer.str();
    source = "standard input";
  } else {
    absl::StatusOr<std::string> read = ReadFile(file);
    if (!read.ok()) return absl::InvalidArgumentError(read.status().message());
    text = *std::move(read);
  }
  absl::StatusOr<std::vector<ExplainSubject>> subjects = ExplainSubjects(text, source);
  if (!subjects.ok()) return subjects.status();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(t);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Introspection::NewStub(*channel);
  ExplainResult result;
  for (const ExplainSubject& subject : *subjects) {
    v1::ExplainRequest request;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    auto parsed = google::protobuf::util::JsonStringToMessage(subject.pod_json,
                                                              request.mutable_pod(), options);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", subject.label, ": not a valid pod: ", parsed.ToString()));
    }
    request.set_node(node);
    v1::ExplainResponse response;
    grpc::Status s = stub->Explain(Context(t).get(), request, &response);
    if (!s.ok()) return FromGrpc(s, t);
    std::string& out = result.text;
    if (!out.empty()) absl::StrAppend(&out, "\n");
    if (response.fits()) {
      absl::StrAppend(&out, subject.label, " fits node ", node, "\n");
    } else {
      result.all_fit = false;
      absl::StrAppend(&out, subject.label, " does not fit node ", node, ": ");
      for (int i = 0; i < response.reasons_size(); ++i) {
        absl::StrAppend(&out, i ? ", " : "", response.reasons(i));
      }
      absl::StrAppend(&out,
                      response.unresolvable() ? " (unresolvable: larger than the node)\n" : "\n");
    }
    absl::StrAppendFormat(&out, "%-22s %12s %12s %12s %12s %12s  %s\n", "RESOURCE", "REQUESTED",
                          "ALLOCATABLE", "CONFIRMED", "ASSUMED", "FREE", "VERDICT");
    for (const v1::ResourceExplanation& e : response.resources()) {
      absl::StrAppendFormat(
          &out, "%-22s %12s %12s %12s %12s %12s  %s\n", e.resource(),
          Amount(e.resource(), e.requested()), Amount(e.resource(), e.allocatable()),
          Amount(e.resource(), e.confirmed()), Amount(e.resource(), e.assumed()),
          Amount(e.resource(), e.free()),
          !e.accounted() ? "not accounted" : (e.fits() ? "fits" : "INSUFFICIENT"));
    }
  }
  return result;
}

absl::StatusOr<std::string> RejectionsTable(const ServerTarget& t) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(t);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Introspection::NewStub(*channel);
  v1::ListRejectionsRequest request;
  v1::ListRejectionsResponse response;
  grpc::Status s = stub->ListRejections(Context(t).get(), request, &response);
  if (!s.ok()) return FromGrpc(s, t);
  std::string out = absl::StrFormat("kubelet rejections seen: %d\n", response.total());
  int before_start = 0;
  for (const v1::Rejection& r : response.rejections()) {
    if (r.before_start()) ++before_start;
    absl::StrAppendFormat(&out, "  %s/%s  node=%s  reason=%s%s\n    %s\n", r.namespace_(), r.name(),
                          r.node(), r.reason(),
                          r.before_start() ? "  (before the server started; not counted)" : "",
                          r.message());
  }
  if (before_start > 0) {
    absl::StrAppendFormat(
        &out, "%d more already rejected when the server started (listed, not counted)\n",
        before_start);
  }
  return out;
}

absl::Status AwaitView(const ServerTarget& t, const std::string& kubeconfig,
                       absl::Duration timeout) {
  absl::StatusOr<kube::Connection> conn = kube::ResolveConnection(kubeconfig);
  if (!conn.ok()) return conn.status();
  kube::ApiClient api(*conn);
  absl::StatusOr<kube::HttpResponse> list =
      api.Request("GET", "/api/v1/pods?limit=1", "", absl::Seconds(10));
  if (!list.ok()) return list.status();
  nlohmann::json body = nlohmann::json::parse(list->body, nullptr, false);
  std::string target_rv;
  if (list->code == 200 && body.is_object() && body["metadata"].is_object()) {
    target_rv = body["metadata"].value("resourceVersion", "");
  }
  int64_t target = 0;
  if (!absl::SimpleAtoi(target_rv, &target)) {
    return absl::FailedPreconditionError(absl::StrCat("the API's resourceVersion \"", target_rv,
                                                      "\" is not an integer; cannot compare"));
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(t);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Introspection::NewStub(*channel);
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    v1::ListNodesRequest request;
    request.add_names("-");  // no node has this name: keeps the answer small
    v1::ListNodesResponse response;
    grpc::Status s = stub->ListNodes(Context(t).get(), request, &response);
    if (!s.ok()) return FromGrpc(s, t);
    int64_t seen = 0;
    if (absl::SimpleAtoi(response.pods_resource_version(), &seen) && seen >= target) {
      return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("the server's view is at resourceVersion ",
                                                      response.pods_resource_version(),
                                                      ", the API was at ", target_rv));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

absl::StatusOr<bool> LedgerEnabled(const ServerTarget& t) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Channel(t);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Introspection::NewStub(*channel);
  v1::ListNodesRequest request;
  request.add_names("-");  // no node has this name: keeps the answer small
  v1::ListNodesResponse response;
  grpc::Status s = stub->ListNodes(Context(t).get(), request, &response);
  if (!s.ok()) return FromGrpc(s, t);
  return response.ledger_enabled();
}

}  // namespace fitledger::ctl
