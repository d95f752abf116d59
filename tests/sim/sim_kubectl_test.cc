// kubectl against the real fitledger-sim, with the kubeconfig the sim writes. HOME and
// KUBECONFIG point into a fresh temp dir so the discovery cache never leaks between runs.
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sim/sim_process.h"

namespace fitledger::testing {
namespace {

using nlohmann::json;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kKubectl[] = "/usr/bin/kubectl";

constexpr char kPair[] = R"(
nodes:
  - name: worker-1
    allocatable: {cpu: "4", memory: 8Gi, pods: 110}
  - name: worker-2
    allocatable: {cpu: "2", memory: 4Gi, pods: 110}
watchLag: 0s
)";

class SimKubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st;
    ASSERT_EQ(stat(kKubectl, &st), 0) << "kubectl is required at " << kKubectl;
    auto sim = SimProcess::Start(kPair);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    client_ = sim_->Client();
    home_ = TempDir("kubectl-home");
  }

  std::vector<std::string> Env() const {
    return {"HOME=" + home_.path(), "KUBECONFIG=" + sim_->kubeconfig_path()};
  }

  CommandResult Kubectl(std::vector<std::string> args) {
    args.insert(args.begin(), kKubectl);
    auto result = RunCommand(args, Env(), absl::Seconds(30));
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : CommandResult{};
  }

  void CreateAndBind(const std::string& name, const std::string& node, const std::string& cpu) {
    json pod = {{"metadata", {{"name", name}}},
                {"spec",
                 {{"containers", json::array({{{"name", "c"},
                                               {"image", "nginx"},
                                               {"resources", {{"requests", {{"cpu", cpu}}}}}}})}}}};
    ASSERT_EQ(Call(*client_, "POST", "/api/v1/namespaces/default/pods", pod.dump()).status, 201);
    json binding = {{"metadata", {{"name", name}}}, {"target", {{"kind", "Node"}, {"name", node}}}};
    ASSERT_EQ(
        Call(*client_, "POST", absl::StrCat("/api/v1/namespaces/default/pods/", name, "/binding"),
             binding.dump())
            .status,
        201);
  }

  std::unique_ptr<SimProcess> sim_;
  std::unique_ptr<httplib::Client> client_;
  TempDir home_;
};

TEST_F(SimKubectlTest, GetNodes) {
  CommandResult r = Kubectl({"get", "nodes"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("NAME +STATUS +ROLES +AGE +VERSION"));
  EXPECT_THAT(r.output, ContainsRegex("worker-1 +Ready +<none> +[0-9]+s +v1\\.30\\.0"));
  EXPECT_THAT(r.output, ContainsRegex("worker-2 +Ready"));
  CommandResult wide = Kubectl({"get", "nodes", "-o", "wide"});
  ASSERT_EQ(wide.exit_code, 0) << wide.output;
  EXPECT_THAT(wide.output, ContainsRegex("INTERNAL-IP +EXTERNAL-IP +OS-IMAGE"));
  EXPECT_THAT(wide.output, ContainsRegex("worker-1 .* 10\\.0\\.0\\.1 +<none>"));
}

TEST_F(SimKubectlTest, GetPodsWide) {
  CreateAndBind("web", "worker-1", "3");
  CreateAndBind("late", "worker-1", "2");
  CommandResult r = Kubectl({"get", "pods", "-o", "wide"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("NAME +READY +STATUS +RESTARTS +AGE +IP +NODE"));
  EXPECT_THAT(r.output, ContainsRegex("web +1/1 +Running +0 +[0-9]+s +10\\.[0-9.]+ +worker-1"));
  EXPECT_THAT(r.output, ContainsRegex("late +0/1 +OutOfcpu +0 +[0-9]+s +<none> +worker-1"));
  CommandResult json_out = Kubectl({"get", "pod", "late", "-o", "jsonpath={.status.message}"});
  EXPECT_EQ(json_out.output,
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: "
            "3000, capacity: 4000");
}

TEST_F(SimKubectlTest, GetPodsWatchPrintsNewPods) {
  auto watch = ChildProcess::Start({kKubectl, "get", "pods", "-w"}, home_.File("watch.out"), Env());
  ASSERT_TRUE(watch.ok()) << watch.status();
  // Create the pod once kubectl's watch is open (the sim counts open watches).
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Call(*client_, "GET", "/sim/stats").body.value("watchesOpen", 0) < 1 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  CreateAndBind("watched", "worker-2", "100m");
  while (absl::Now() < deadline) {
    std::string out = ReadFileOrEmpty(home_.File("watch.out"));
    if (out.find("Running") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(ReadFileOrEmpty(home_.File("watch.out")), ContainsRegex("watched +1/1 +Running"));
}

TEST_F(SimKubectlTest, DescribeNode) {
  CreateAndBind("web", "worker-1", "500m");
  CommandResult r = Kubectl({"describe", "node", "worker-1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("Name: +worker-1"));
  EXPECT_THAT(r.output, ContainsRegex("Ready +True"));
  EXPECT_THAT(r.output, ContainsRegex("Allocatable:\\s+cpu: +4"));
  EXPECT_THAT(r.output, HasSubstr("Non-terminated Pods:          (1 in total)"));
  EXPECT_THAT(r.output, ContainsRegex("default +web +500m \\(12%\\)"));
  EXPECT_THAT(r.output, Not(HasSubstr("Failed to get lease")));
}

TEST_F(SimKubectlTest, DeletePod) {
  CreateAndBind("doomed", "worker-1", "100m");
  CommandResult r = Kubectl({"delete", "pod", "doomed"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("pod \"doomed\" deleted"));
  EXPECT_EQ(Call(*client_, "GET", "/api/v1/namespaces/default/pods/doomed").status, 404);
  CommandResult missing = Kubectl({"delete", "pod", "doomed"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.output, HasSubstr("Error from server (NotFound): pods \"doomed\" not found"));
}

// Writes `text` to a file in the kubectl home and returns its path.
std::string Manifest(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(WriteFile(path, text).ok());
  return path;
}

constexpr char kPodYaml[] = R"(apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: app
    image: nginx
    resources:
      requests: {cpu: 500m, memory: 128Mi}
      limits: {cpu: 500m, memory: 128Mi}
)";

TEST_F(SimKubectlTest, CreateAndApplyValidateOnTheServer) {
  const std::string pod = Manifest(home_.path(), "pod.yaml", kPodYaml);
  // No --validate=false: kubectl reads the OpenAPI v3 documents and lets the server validate.
  CommandResult created = Kubectl({"create", "-f", pod});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_THAT(created.output, HasSubstr("pod/web created"));
  CommandResult qos = Kubectl({"get", "pod", "web", "-o", "jsonpath={.status.qosClass}"});
  EXPECT_EQ(qos.output, "Guaranteed");
  // apply on an object made by create: patched, with the last-applied annotation.
  CommandResult applied = Kubectl({"apply", "-f", pod});
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  EXPECT_THAT(applied.output, HasSubstr("pod/web configured"));
  CommandResult last = Kubectl(
      {"get", "pod", "web", "-o",
       "jsonpath={.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}"});
  EXPECT_THAT(last.output, HasSubstr("\"name\":\"web\""));
  CommandResult again = Kubectl({"apply", "-f", pod});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("pod/web unchanged"));
  // A pod's resources cannot change (ValidatePodUpdate).
  std::string bigger(kPodYaml);
  bigger.replace(bigger.find("cpu: 500m"), 9, "cpu: 900m");
  bigger.replace(bigger.find("cpu: 500m"), 9, "cpu: 900m");
  CommandResult refused = Kubectl({"apply", "-f", Manifest(home_.path(), "bigger.yaml", bigger)});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output,
              HasSubstr("spec: Forbidden: pod updates may not change fields other than"));
  // apply creates what does not exist yet.
  std::string other(kPodYaml);
  other.replace(other.find("name: web"), 9, "name: api");
  CommandResult fresh = Kubectl({"apply", "-f", Manifest(home_.path(), "api.yaml", other)});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_THAT(fresh.output, HasSubstr("pod/api created"));
}

// kubectl sorts by a field of the object only if the rows carry it: it asks for
// includeObject=Object (kubectl get.go), and the API server then puts the whole object in each
// row (apiserver handlers/response.go asTable).
TEST_F(SimKubectlTest, GetPodsSortedByAFieldOfTheSpec) {
  CreateAndBind("k-b", "worker-2", "100m");
  ASSERT_EQ(Call(*client_, "POST", "/api/v1/namespaces/default/pods",
                 R"({"metadata":{"name":"k-a"},"spec":{"containers":[{"name":"c","image":"x"}]}})")
                .status,
            201);
  CreateAndBind("k-c", "worker-1", "100m");
  CommandResult r = Kubectl({"get", "pods", "--sort-by=.spec.nodeName", "-o", "name"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // No nodeName sorts first; then worker-1, worker-2.
  EXPECT_EQ(r.output, "pod/k-a\npod/k-c\npod/k-b\n");
  CommandResult table = Kubectl({"get", "pods", "--sort-by=.spec.nodeName"});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, ContainsRegex("k-a +0/1 +Pending[^\n]*\nk-c +1/1[^\n]*\nk-b +1/1"));

  const httplib::Headers as_table = {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}};
  auto rows = [&](const std::string& query) {
    auto res = client_->Get(absl::StrCat("/api/v1/namespaces/default/pods", query), as_table);
    EXPECT_TRUE(res) << query;
    return res ? json::parse(res->body)["rows"] : json();
  };
  EXPECT_EQ(rows("?includeObject=Object")[0]["object"]["kind"], "Pod");
  EXPECT_EQ(rows("?includeObject=Object")[1]["object"]["spec"]["nodeName"], "worker-2");
  EXPECT_EQ(rows("")[0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(rows("?includeObject=Metadata")[0]["object"].count("spec"), 0u);
  EXPECT_TRUE(rows("?includeObject=None")[0]["object"].is_null());
  auto bad = client_->Get("/api/v1/namespaces/default/pods?includeObject=Everything", as_table);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body).value("message", ""),
            "unrecognized includeObject value: \"Everything\"");
}

// `kubectl get all` expands the "all" category from discovery (cli-runtime's category
// expander); without one it fails with `the server doesn't have a resource type "all"`.
TEST_F(SimKubectlTest, GetAllListsPodsDeploymentsAndReplicaSets) {
  CreateAndBind("k-a", "worker-1", "100m");
  constexpr char kDeployment[] = R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: nginx}]
)";
  ASSERT_EQ(Kubectl({"create", "-f", Manifest(home_.path(), "deploy.yaml", kDeployment)}).exit_code,
            0);
  CommandResult r = Kubectl({"get", "all"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("pod/k-a +1/1 +Running"));
  EXPECT_THAT(r.output, ContainsRegex("deployment.apps/web +"));
  EXPECT_THAT(r.output, ContainsRegex("replicaset.apps/web-[a-z0-9]+ +"));
  HttpResult core = Call(*client_, "GET", "/api/v1");
  for (const json& resource : core.body["resources"]) {
    SCOPED_TRACE(resource["name"].get<std::string>());
    EXPECT_EQ(resource.contains("categories"), resource["name"] == "pods");
  }
}

// kubectl sends fieldValidation=Strict (its --validate default): a misspelt field is refused,
// as the API server's strict decoding refuses it (apiserver handlers/create.go).
TEST_F(SimKubectlTest, CreateRefusesAMisspeltFieldAndWarnsWhenAskedTo) {
  constexpr char kTypo[] = R"(apiVersion: v1
kind: Pod
metadata: {name: typo}
spec:
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    imagePullPolcy: IfNotPresent
    resources: {limit: {cpu: 100m}}
)";
  const std::string typo = Manifest(home_.path(), "typo.yaml", kTypo);
  CommandResult refused = Kubectl({"create", "-f", typo});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr("Error from server (BadRequest): error when creating \"" + typo +
                        "\": Pod in version \"v1\" cannot be handled as a Pod: strict decoding "
                        "error: unknown field \"spec.containers[0].imagePullPolcy\", unknown "
                        "field \"spec.containers[0].resources.limit\""));
  EXPECT_EQ(Call(*client_, "GET", "/api/v1/namespaces/default/pods/typo").status, 404);

  CommandResult warned = Kubectl({"create", "-f", typo, "--validate=warn"});
  ASSERT_EQ(warned.exit_code, 0) << warned.output;
  EXPECT_THAT(warned.output,
              HasSubstr("Warning: unknown field \"spec.containers[0].imagePullPolcy\""));
  EXPECT_THAT(warned.output, HasSubstr("pod/typo created"));
  // The default (no fieldValidation) is Warn: Warning headers, as the API server's.
  auto put = client_->Put("/api/v1/nodes/worker-1?fieldValidation=Strict",
                          R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1"},)"
                          R"("spec":{"unschedulabel":true}})",
                          "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 400);
  EXPECT_EQ(json::parse(put->body).value("message", ""),
            "Node in version \"v1\" cannot be handled as a Node: strict decoding error: unknown "
            "field \"spec.unschedulabel\"");
  auto posted = client_->Post("/api/v1/namespaces/default/pods",
                              R"({"metadata":{"name":"w"},"spec":{"containers":)"
                              R"([{"name":"c","image":"x","imagePullPolcy":"Always"}]},"x":1})",
                              "application/json");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 201);
  EXPECT_EQ(posted->get_header_value_count("Warning"), 2u);
  EXPECT_EQ(posted->get_header_value("Warning", 0),
            R"(299 - "unknown field \"spec.containers[0].imagePullPolcy\"")");
  EXPECT_EQ(posted->get_header_value("Warning", 1), R"(299 - "unknown field \"x\"")");
  auto bad = client_->Post("/api/v1/namespaces/default/pods?fieldValidation=strict", "{}",
                           "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 422);
}

TEST_F(SimKubectlTest, LabelAnnotateAndEveryPatchType) {
  ASSERT_EQ(Kubectl({"create", "-f", Manifest(home_.path(), "pod.yaml", kPodYaml)}).exit_code, 0);
  CommandResult labelled = Kubectl({"label", "pod", "web", "tier=front"});
  ASSERT_EQ(labelled.exit_code, 0) << labelled.output;
  EXPECT_THAT(labelled.output, HasSubstr("pod/web labeled"));
  ASSERT_EQ(Kubectl({"annotate", "pod", "web", "note=hello"}).exit_code, 0);
  ASSERT_EQ(
      Kubectl({"patch", "pod", "web", "-p", R"({"metadata":{"labels":{"s":"1"}}})"}).exit_code, 0);
  ASSERT_EQ(Kubectl({"patch", "pod", "web", "--type=merge", "-p",
                     R"({"metadata":{"labels":{"tier":null,"m":"2"}}})"})
                .exit_code,
            0);
  ASSERT_EQ(Kubectl({"patch", "pod", "web", "--type=json", "-p",
                     R"([{"op":"add","path":"/metadata/labels/j","value":"3"}])"})
                .exit_code,
            0);
  CommandResult labels = Kubectl({"get", "pod", "web", "-o", "jsonpath={.metadata.labels}"});
  EXPECT_EQ(json::parse(labels.output), json({{"app", "web"}, {"s", "1"}, {"m", "2"}, {"j", "3"}}));
  CommandResult note =
      Kubectl({"get", "pod", "web", "-o", "jsonpath={.metadata.annotations.note}"});
  EXPECT_EQ(note.output, "hello");
  // Only selectors on the new labels find it.
  CommandResult selected = Kubectl({"get", "pods", "-l", "j=3", "-o", "name"});
  EXPECT_EQ(selected.output, "pod/web\n");
  CommandResult failed = Kubectl({"patch", "pod", "web", "--type=json", "-p",
                                  R"([{"op":"remove","path":"/metadata/labels/absent"}])"});
  EXPECT_NE(failed.exit_code, 0);
  EXPECT_THAT(failed.output,
              HasSubstr("The request is invalid: json patch: key 'absent' not found"));
}

TEST_F(SimKubectlTest, CordonAndUncordon) {
  CommandResult cordoned = Kubectl({"cordon", "worker-2"});
  ASSERT_EQ(cordoned.exit_code, 0) << cordoned.output;
  EXPECT_THAT(cordoned.output, HasSubstr("node/worker-2 cordoned"));
  EXPECT_THAT(Kubectl({"get", "nodes"}).output,
              ContainsRegex("worker-2 +Ready,SchedulingDisabled"));
  auto unschedulable =
      Call(*client_, "GET", "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue");
  ASSERT_EQ(unschedulable.body["items"].size(), 1u);
  EXPECT_EQ(unschedulable.body["items"][0]["metadata"]["name"], "worker-2");
  ASSERT_EQ(Kubectl({"uncordon", "worker-2"}).exit_code, 0);
  EXPECT_THAT(Kubectl({"get", "nodes"}).output, ContainsRegex("worker-2 +Ready +<none>"));
}

TEST_F(SimKubectlTest, LogsExecAttachSayTheSimRunsNoContainers) {
  CreateAndBind("web", "worker-1", "100m");
  for (std::vector<std::string> args :
       {std::vector<std::string>{"logs", "web"}, {"exec", "web", "--", "ls"}, {"attach", "web"}}) {
    CommandResult r = Kubectl(args);
    EXPECT_NE(r.exit_code, 0) << args[0];
    EXPECT_THAT(r.output, HasSubstr("fitledger-sim runs no containers")) << args[0];
  }
}

TEST_F(SimKubectlTest, DescribePodShowsTheKubeletsRejection) {
  CreateAndBind("web", "worker-1", "3");
  CreateAndBind("late", "worker-1", "2");
  // The event comes from the sim's controller thread: wait for it.
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  CommandResult r;
  do {
    r = Kubectl({"describe", "pod", "late"});
  } while (r.output.find("OutOfcpu") == std::string::npos && absl::Now() < deadline);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("Status: +Failed"));
  EXPECT_THAT(r.output, ContainsRegex("Warning +OutOfcpu +[0-9]+s +kubelet +Node didn't have "
                                      "enough resource: cpu, requested: 2000, used: 3000, "
                                      "capacity: 4000"));
  CommandResult events = Kubectl({"get", "events"});
  EXPECT_THAT(events.output, ContainsRegex("LAST SEEN +TYPE +REASON +OBJECT +MESSAGE"));
  EXPECT_THAT(events.output, ContainsRegex("Warning +OutOfcpu +pod/late +Node didn't have"));
}

TEST_F(SimKubectlTest, DeploymentApplyScaleAndDelete) {
  const std::string deployment = Manifest(home_.path(), "deploy.yaml", R"(apiVersion: apps/v1
kind: Deployment
metadata:
  name: burst
spec:
  replicas: 3
  selector:
    matchLabels: {app: burst}
  template:
    metadata:
      labels: {app: burst}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.9
        resources:
          requests: {cpu: 400m}
)");
  CommandResult applied = Kubectl({"apply", "-f", deployment});
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  EXPECT_THAT(applied.output, HasSubstr("deployment.apps/burst created"));
  auto pods_named = [&]() {
    return Kubectl({"get", "pods", "-l", "app=burst", "-o", "name"}).output;
  };
  auto pod_count = [&]() {
    const std::string names = pods_named();
    return std::count(names.begin(), names.end(), '\n');
  };
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (pod_count() != 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const std::string names = pods_named();
  EXPECT_EQ(std::count(names.begin(), names.end(), '\n'), 3) << names;
  EXPECT_THAT(names, ContainsRegex("pod/burst-[a-z0-9]+-[a-z0-9]{5}"));
  EXPECT_THAT(Kubectl({"get", "rs"}).output, ContainsRegex("burst-[a-z0-9]+ +3 +3 +0"));
  EXPECT_THAT(Kubectl({"get", "deploy"}).output, ContainsRegex("burst +0/3 +3 +0"));
  CommandResult owner = Kubectl({"get", "pods", "-l", "app=burst", "-o",
                                 "jsonpath={.items[0].metadata.ownerReferences[0].kind}"});
  EXPECT_EQ(owner.output, "ReplicaSet");
  EXPECT_THAT(Kubectl({"describe", "deployment", "burst"}).output,
              ContainsRegex("ScalingReplicaSet .*Scaled up replica set burst-[a-z0-9]+ to 3"));

  CommandResult scaled = Kubectl({"scale", "deployment", "burst", "--replicas=1"});
  ASSERT_EQ(scaled.exit_code, 0) << scaled.output;
  deadline = absl::Now() + absl::Seconds(20);
  while (pod_count() != 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(pod_count(), 1);
  CommandResult unchanged = Kubectl({"apply", "-f", deployment});
  ASSERT_EQ(unchanged.exit_code, 0) << unchanged.output;

  CommandResult deleted = Kubectl({"delete", "-f", deployment});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  EXPECT_THAT(deleted.output, HasSubstr("deployment.apps \"burst\" deleted"));
  deadline = absl::Now() + absl::Seconds(20);
  while (!pods_named().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(pods_named(), "");
  EXPECT_THAT(Kubectl({"get", "rs"}).output, HasSubstr("No resources found"));
}

}  // namespace
}  // namespace fitledger::testing
