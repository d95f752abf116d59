// The demo's scheduler (`fitledgerctl scheduler`, client/ctl/scheduler.h) end to end:
// fitledger-sim, fitledger-server serving the webhook, and the scheduler as real processes; pods
// created through the API and kubectl, as a user of scripts/demo would.
#include "client/ctl/scheduler.h"

#include <algorithm>
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using nlohmann::json;

constexpr absl::Duration kDeadline = absl::Seconds(60);

std::string PairYaml() { return ReadFileOrEmpty(FITLEDGER_SOURCE_DIR "/config/sim/pair.yaml"); }

// FitError.Error's wording (pkg/scheduler/framework/types.go): reasons counted over the nodes,
// "count reason" sorted as strings.
// fitledger's webhook leaves out the nodes at the lowest score; a feasible node not listed
// scores 0, so the demo's scheduler still picks the node kube-scheduler's totals put first.
TEST(BestScoredTest, AnUnlistedNodeScoresZeroAndTiesGoToTheFirstName) {
  using nlohmann::json;
  EXPECT_EQ(ctl::BestScored({"c", "a", "b"}, json::array()), "a");
  EXPECT_EQ(ctl::BestScored({"c", "a", "b"}, json()), "a");  // prioritize failed
  EXPECT_EQ(ctl::BestScored({"c", "a", "b"}, json::parse(R"([{"Host":"c","Score":2}])")), "c");
  EXPECT_EQ(ctl::BestScored({"c", "a", "b"},
                            json::parse(R"([{"Host":"c","Score":2},{"Host":"b","Score":2}])")),
            "b");
  EXPECT_EQ(ctl::BestScored({"c", "a", "b"}, json::parse(R"([{"Host":"c","Score":2},)"
                                                         R"({"Host":"b","Score":3},)"
                                                         R"({"Host":"c","Score":2}])")),
            "c");  // listed twice: 4
  // A node not among the feasible ones, or a score that is not an integer, does not count.
  EXPECT_EQ(ctl::BestScored({"c", "b"}, json::parse(R"([{"Host":"z","Score":9},)"
                                                    R"({"Host":"c","Score":"9"},1])")),
            "b");
}

TEST(FitErrorMessageTest, CountsAndSortsTheReasonsAsKubeSchedulerDoes) {
  EXPECT_EQ(ctl::FitErrorMessage(2, {{"a", {"Insufficient cpu"}}, {"b", {"Insufficient cpu"}}}),
            "0/2 nodes are available: 2 Insufficient cpu.");
  EXPECT_EQ(ctl::FitErrorMessage(3, {{"a", {"node(s) were unschedulable"}},
                                     {"b", {"Insufficient memory", "Insufficient cpu"}},
                                     {"c", {"Insufficient cpu"}}}),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, 2 "
            "Insufficient cpu.");
  EXPECT_EQ(ctl::FitErrorMessage(0, {}), "0/0 nodes are available.");
}

json Pod(const std::string& name, const std::string& cpu, const std::string& scheduler) {
  json pod = PodManifest(name, cpu);
  pod["spec"]["schedulerName"] = scheduler;
  return pod;
}

class SchedulerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start({PairYaml(), ""});
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = *std::move(c);
  }

  void TearDown() override {
    for (auto& [name, process] : schedulers_) {
      process->Signal(SIGTERM);
      absl::StatusOr<int> code = process->Wait(absl::Seconds(20));
      EXPECT_TRUE(code.ok() && *code == 0)
          << name << " did not stop cleanly: " << ReadFileOrEmpty(process->output_path());
    }
  }

  // Starts `fitledgerctl scheduler` for `name` against `webhook` (the server's by default).
  void StartScheduler(const std::string& name, std::string webhook = "") {
    if (webhook.empty()) {
      webhook = absl::StrCat("http://127.0.0.1:", cluster_->extender().shim_port);
    }
    const std::string log = absl::StrCat(cluster_->dir(), "/scheduler-", name, ".log");
    absl::StatusOr<std::unique_ptr<ChildProcess>> p = ChildProcess::Start(
        {FITLEDGER_CTL_PATH, "scheduler", "--kubeconfig", cluster_->sim().kubeconfig_path(),
         "--scheduler_name", name, "--webhook", webhook},
        log);
    ASSERT_TRUE(p.ok()) << p.status();
    schedulers_[name] = *std::move(p);
  }

  json GetPod(const std::string& name) {
    return cluster_->Api("GET", "/api/v1/namespaces/default/pods/" + name).body;
  }

  // The pod's PodScheduled condition, or null.
  json PodScheduled(const std::string& name) {
    json pod = GetPod(name);
    if (!pod.is_object() || !pod["status"].contains("conditions")) return nullptr;
    for (const json& c : pod["status"]["conditions"]) {
      if (c.value("type", "") == "PodScheduled") return c;
    }
    return nullptr;
  }

  bool WaitForCondition(const std::string& pod, const std::string& status,
                        const std::string& reason, const std::string& message) {
    return E2eCluster::WaitFor(
        [&] {
          json c = PodScheduled(pod);
          return c.is_object() && c.value("status", "") == status &&
                 c.value("reason", "") == reason && c.value("message", "") == message;
        },
        kDeadline);
  }

  bool WaitForNode(const std::string& pod, const std::string& node) {
    return E2eCluster::WaitFor(
        [&] {
          json p = GetPod(pod);
          return p.is_object() && p["spec"].value("nodeName", "") == node &&
                 p["status"].value("phase", "") == "Running";
        },
        kDeadline);
  }

  // The events about `pod` (kubectl describe's query) as "type reason component: message".
  std::vector<std::string> Events(const std::string& pod) {
    json list = cluster_
                    ->Api("GET",
                          "/api/v1/namespaces/default/events?fieldSelector="
                          "involvedObject.kind%3DPod,involvedObject.name%3D" +
                              pod)
                    .body;
    std::vector<std::string> out;
    for (const json& e : list["items"]) {
      out.push_back(absl::StrCat(e.value("type", ""), " ", e.value("reason", ""), " ",
                                 e["source"].value("component", ""), ": ", e.value("message", "")));
    }
    return out;
  }

  CommandResult Kubectl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"kubectl", "--kubeconfig", cluster_->sim().kubeconfig_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<CommandResult> r = RunCommand(argv, {}, absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  }

  std::unique_ptr<E2eCluster> cluster_;
  std::map<std::string, std::unique_ptr<ChildProcess>> schedulers_;
};

TEST_F(SchedulerE2eTest, SchedulesThroughTheWebhookAndSaysWhyAPodFitsNowhere) {
  StartScheduler("fitledger");
  ASSERT_EQ(
      cluster_->Api("POST", "/api/v1/namespaces/default/pods", Pod("fits", "500m", "fitledger"))
          .status,
      201);
  ASSERT_EQ(cluster_
                ->Api("POST", "/api/v1/namespaces/default/pods",
                      Pod("not-ours", "100m", "default-scheduler"))
                .status,
            201);
  ASSERT_EQ(cluster_->Api("POST", "/api/v1/namespaces/default/pods", Pod("huge", "8", "fitledger"))
                .status,
            201);
  // worker-1 has the most room (4 cpu against worker-2's 2): the extender's best score.
  ASSERT_TRUE(WaitForNode("fits", "worker-1")) << GetPod("fits").dump();
  // The event follows the bind (finishBinding), so it may come after the pod runs.
  const std::string scheduled_event =
      "Normal Scheduled fitledger: Successfully assigned default/fits to worker-1";
  EXPECT_TRUE(E2eCluster::WaitFor(
      [&] {
        std::vector<std::string> events = Events("fits");
        return std::find(events.begin(), events.end(), scheduled_event) != events.end();
      },
      kDeadline))
      << ::testing::PrintToString(Events("fits"));
  // Fits nowhere: the condition and the event carry the extender's reasons.
  const std::string why = "0/2 nodes are available: 2 Insufficient cpu.";
  ASSERT_TRUE(WaitForCondition("huge", "False", "Unschedulable", why)) << GetPod("huge").dump();
  ASSERT_TRUE(E2eCluster::WaitFor(
      [&] {
        std::vector<std::string> events = Events("huge");
        return std::find(events.begin(), events.end(),
                         "Warning FailedScheduling fitledger: " + why) != events.end();
      },
      kDeadline));
  CommandResult describe = Kubectl({"describe", "pod", "huge"});
  EXPECT_THAT(describe.output, ::testing::HasSubstr("PodScheduled   False"));
  EXPECT_THAT(describe.output, ::testing::HasSubstr("FailedScheduling"));
  EXPECT_THAT(describe.output, ::testing::HasSubstr(why));

  // Cordoned nodes are skipped (NodeUnschedulable), and say so.
  CommandResult cordon = Kubectl({"cordon", "worker-1", "worker-2"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.output;
  ASSERT_EQ(
      cluster_->Api("POST", "/api/v1/namespaces/default/pods", Pod("small", "100m", "fitledger"))
          .status,
      201);
  ASSERT_TRUE(WaitForCondition("small", "False", "Unschedulable",
                               "0/2 nodes are available: 2 node(s) were unschedulable."))
      << GetPod("small").dump();
  // A node change retries them: uncordoned, the small pod fits; a new big node takes the huge
  // one (once the server's watch has seen the node: retried after the backoff).
  CommandResult uncordon = Kubectl({"uncordon", "worker-2"});
  ASSERT_EQ(uncordon.exit_code, 0) << uncordon.output;
  EXPECT_TRUE(WaitForNode("small", "worker-2")) << GetPod("small").dump();
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", "worker-3"}}},
               {"status",
                {{"allocatable", {{"cpu", "16"}, {"memory", "32Gi"}, {"pods", "110"}}},
                 {"capacity", {{"cpu", "16"}, {"memory", "32Gi"}, {"pods", "110"}}}}}};
  ASSERT_EQ(cluster_->Api("POST", "/api/v1/nodes", node).status, 201);
  EXPECT_TRUE(WaitForNode("huge", "worker-3")) << GetPod("huge").dump();
  json scheduled = PodScheduled("huge");
  EXPECT_EQ(scheduled.value("status", ""), "True") << scheduled.dump();
  // Pods of other schedulers are left alone.
  EXPECT_EQ(GetPod("not-ours")["spec"].value("nodeName", ""), "");
}

TEST_F(SchedulerE2eTest, AnUnreachableWebhookIsASchedulerErrorRetriedWithBackoff) {
  StartScheduler("broken", "http://127.0.0.1:1");
  ASSERT_EQ(cluster_->Api("POST", "/api/v1/namespaces/default/pods", Pod("waits", "100m", "broken"))
                .status,
            201);
  ASSERT_TRUE(E2eCluster::WaitFor(
      [&] {
        json c = PodScheduled("waits");
        return c.is_object() && c.value("reason", "") == "SchedulerError" &&
               c.value("message", "").rfind("extender filter: ", 0) == 0;
      },
      kDeadline))
      << GetPod("waits").dump();
  // Retried: more than one FailedScheduling event, after backoffs of 1 s then 2 s.
  EXPECT_TRUE(E2eCluster::WaitFor([&] { return Events("waits").size() >= 2; }, kDeadline));
  EXPECT_EQ(GetPod("waits")["spec"].value("nodeName", ""), "");
}

TEST_F(SchedulerE2eTest, ADeploymentThroughTheLedgerRunsEveryReplicaWithoutRejection) {
  StartScheduler("fitledger");
  json deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "web"}}},
      {"spec",
       {{"replicas", 12},
        {"selector", {{"matchLabels", {{"app", "web"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "web"}}}}},
          {"spec",
           {{"schedulerName", "fitledger"},
            {"containers",
             json::array({{{"name", "app"},
                           {"image", "nginx"},
                           {"resources", {{"requests", {{"cpu", "400m"}}}}}}})}}}}}}}};
  ASSERT_EQ(
      cluster_->Api("POST", "/apis/apps/v1/namespaces/default/deployments", deployment).status,
      201);
  int running = 0, failed = 0;
  ASSERT_TRUE(E2eCluster::WaitFor(
      [&] {
        json pods =
            cluster_->Api("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb").body;
        running = failed = 0;
        for (const json& p : pods["items"]) {
          const std::string phase = p["status"].value("phase", "");
          running += phase == "Running" ? 1 : 0;
          failed += phase == "Failed" ? 1 : 0;
        }
        return running == 12;
      },
      kDeadline))
      << running << " running";
  EXPECT_EQ(failed, 0);  // the ledger: the kubelet rejected nothing
}

}  // namespace
}  // namespace fitledger::testing
