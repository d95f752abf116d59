// kubectl against the real fitledger-sim, with the kubeconfig the sim writes. HOME and
// KUBECONFIG point into a fresh temp dir so the discovery cache never leaks between runs.
#include <sys/stat.h>

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
    home_ = MakeTempDir("kubectl-home");
  }

  std::vector<std::string> Env() const {
    return {"HOME=" + home_, "KUBECONFIG=" + sim_->kubeconfig_path()};
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
  std::string home_;
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
  auto watch = ChildProcess::Start({kKubectl, "get", "pods", "-w"}, home_ + "/watch.out", Env());
  ASSERT_TRUE(watch.ok()) << watch.status();
  // Create the pod once kubectl's watch is open (the sim counts open watches).
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Call(*client_, "GET", "/sim/stats").body.value("watchesOpen", 0) < 1 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  CreateAndBind("watched", "worker-2", "100m");
  while (absl::Now() < deadline) {
    std::string out = ReadFileOrEmpty(home_ + "/watch.out");
    if (out.find("Running") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(ReadFileOrEmpty(home_ + "/watch.out"), ContainsRegex("watched +1/1 +Running"));
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

}  // namespace
}  // namespace fitledger::testing
