// fitledgerctl against the real server: `explain` (issue 25 part 3: Pods and workloads' pod
// templates, several documents, standard input, and its exit statuses 0 fits, 1 does not fit,
// 2 error), and `burst`'s error when the webhook does not answer (part 4).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/harness.h"

namespace fitledger::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string PairYaml() { return ReadFileOrEmpty(FITLEDGER_SOURCE_DIR "/config/sim/pair.yaml"); }

constexpr char kPod[] = R"(apiVersion: v1
kind: Pod
metadata:
  name: small
spec:
  containers:
  - name: app
    image: nginx
    resources:
      requests: {cpu: 500m}
)";

constexpr char kDeployment[] = R"(apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
        resources:
          requests: {cpu: "5"}
)";

constexpr char kCronJob[] = R"(apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: job
            image: busybox
            resources:
              requests: {cpu: 250m}
)";

TEST(ExplainSubjectsTest, PodsAndEveryWorkloadsPodTemplate) {
  absl::StatusOr<std::vector<ctl::ExplainSubject>> subjects = ctl::ExplainSubjects(
      absl::StrCat(kPod, "---\n", kDeployment, "---\n", kCronJob, "---\n"), "all.yaml");
  ASSERT_TRUE(subjects.ok()) << subjects.status();
  ASSERT_EQ(subjects->size(), 3u);  // the trailing empty document is skipped
  EXPECT_EQ((*subjects)[0].label, "pod small");
  EXPECT_EQ((*subjects)[1].label, "deployment web (its pod template)");
  nlohmann::json pod = nlohmann::json::parse((*subjects)[1].pod_json);
  EXPECT_EQ(pod["kind"], "Pod");
  EXPECT_EQ(pod["metadata"]["name"], "web");
  EXPECT_EQ(pod["metadata"]["namespace"], "shop");
  EXPECT_EQ(pod["metadata"]["labels"]["app"], "web");
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"], "5");
  EXPECT_EQ((*subjects)[2].label, "cronjob nightly (its pod template)");
  pod = nlohmann::json::parse((*subjects)[2].pod_json);
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"], "250m");
  for (const char* kind :
       {"StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"}) {
    std::string manifest = kDeployment;
    manifest.replace(manifest.find("Deployment"), 10, kind);
    absl::StatusOr<std::vector<ctl::ExplainSubject>> one = ctl::ExplainSubjects(manifest, "w.yaml");
    ASSERT_TRUE(one.ok()) << kind << ": " << one.status();
    nlohmann::json template_pod = nlohmann::json::parse((*one)[0].pod_json);
    EXPECT_EQ(template_pod["spec"]["containers"][0]["resources"]["requests"]["cpu"], "5") << kind;
  }
}

TEST(ExplainSubjectsTest, AnythingElseIsAClearError) {
  auto error = [](const std::string& text) {
    absl::StatusOr<std::vector<ctl::ExplainSubject>> s = ctl::ExplainSubjects(text, "x.yaml");
    EXPECT_FALSE(s.ok()) << text;
    return s.ok() ? std::string() : std::string(s.status().message());
  };
  EXPECT_THAT(error("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"),
              HasSubstr("x.yaml: kind Service has no pod to explain (fitledgerctl explain reads "
                        "Pod, Deployment"));
  EXPECT_THAT(error(absl::StrCat(kPod, "---\nkind: ConfigMap\n")),
              HasSubstr("x.yaml (document 2): kind ConfigMap has no pod to explain"));
  EXPECT_THAT(error("metadata: {name: x}\n"), HasSubstr("x.yaml: no kind"));
  EXPECT_THAT(error("kind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n"),
              HasSubstr("Deployment d has no spec.template.spec (the pod template)"));
  EXPECT_THAT(error("- a\n- b\n"), HasSubstr("not a Kubernetes object"));
  EXPECT_THAT(error(""), HasSubstr("x.yaml: no object to explain"));
  EXPECT_THAT(error("kind: [unclosed\n"), HasSubstr("x.yaml: invalid YAML"));
}

// The default socket (/run/fitledger/server.sock) is missing on a fresh machine: the message says
// so and what to do, at once (not gRPC's error after the deadline).
TEST(CtlNoServerTest, AMissingSocketIsNamed) {
  const TempDir temp("ctl-no-server");
  const std::string& dir = temp.path();
  for (const std::string& address :
       {absl::StrCat("unix://", dir, "/absent.sock"), absl::StrCat("unix:", dir, "/absent.sock")}) {
    absl::StatusOr<CommandResult> r =
        RunCommand({FITLEDGER_CTL_PATH, "--server", address, "health"}, {}, absl::Seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 1) << r->output;
    EXPECT_THAT(r->output, HasSubstr(absl::StrCat("no fitledger-server socket at ", dir,
                                                  "/absent.sock (is the server running?")));
  }
}

class CtlE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<E2eCluster>> c = E2eCluster::Start({PairYaml(), ""});
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = *std::move(c);
    dir_ = cluster_->dir();
  }

  // fitledgerctl explain FILE NODE, with `stdin_file` as standard input when FILE is "-".
  CommandResult Explain(const std::string& file, const std::string& node,
                        const std::string& stdin_file = "") {
    std::vector<std::string> argv = {"/bin/sh",
                                     "-c",
                                     absl::StrCat("exec \"$0\" --server \"$1\" explain \"$2\" "
                                                  "\"$3\"",
                                                  stdin_file.empty() ? "" : " < \"$4\""),
                                     FITLEDGER_CTL_PATH,
                                     cluster_->extender().socket,
                                     file,
                                     node,
                                     stdin_file};
    absl::StatusOr<CommandResult> r = RunCommand(argv, {}, absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(dir_, "/", name);
    EXPECT_TRUE(WriteFile(path, text).ok());
    return path;
  }

  std::unique_ptr<E2eCluster> cluster_;
  std::string dir_;
};

TEST_F(CtlE2eTest, ExitStatusSaysFitsDoesNotFitOrError) {
  CommandResult fits = Explain(Write("pod.yaml", kPod), "worker-1");
  EXPECT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_THAT(fits.output, HasSubstr("pod small fits node worker-1"));

  // The issue's case: a Deployment whose template asks for 5 cpu (worker-1 has 4).
  CommandResult deployment = Explain(Write("deploy.yaml", kDeployment), "worker-1");
  EXPECT_EQ(deployment.exit_code, 1) << deployment.output;
  EXPECT_THAT(deployment.output,
              HasSubstr("deployment web (its pod template) does not fit node worker-1: "
                        "Insufficient cpu (unresolvable: larger than the node)"));
  EXPECT_THAT(deployment.output, HasSubstr("INSUFFICIENT"));

  // Several documents: each explained; one that does not fit makes the status 1.
  const std::string both = Write("both.yaml", absl::StrCat(kPod, "---\n", kDeployment));
  CommandResult two = Explain(both, "worker-1");
  EXPECT_EQ(two.exit_code, 1) << two.output;
  EXPECT_THAT(two.output, HasSubstr("pod small fits node worker-1"));
  EXPECT_THAT(two.output, HasSubstr("deployment web (its pod template) does not fit"));

  // Standard input.
  CommandResult piped = Explain("-", "worker-2", Write("cron.yaml", kCronJob));
  EXPECT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_THAT(piped.output, HasSubstr("cronjob nightly (its pod template) fits node worker-2"));

  // Errors: exit 2, a message, no verdict.
  CommandResult service = Explain(
      Write("svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"), "worker-1");
  EXPECT_EQ(service.exit_code, 2) << service.output;
  EXPECT_THAT(service.output, HasSubstr("kind Service has no pod to explain"));
  EXPECT_THAT(service.output, Not(HasSubstr("fits")));
  CommandResult missing = Explain(absl::StrCat(dir_, "/absent.yaml"), "worker-1");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("cannot read"));
}

TEST_F(CtlE2eTest, BurstNamesTheWebhookWhenItDoesNotAnswer) {
  absl::StatusOr<CommandResult> r = RunCommand(
      {FITLEDGER_CTL_PATH, "burst", "--kubeconfig", cluster_->sim().kubeconfig_path(), "--server",
       cluster_->extender().socket, "--webhook", "http://127.0.0.1:1", "--replicas", "2"},
      {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->output;
  EXPECT_THAT(r->output, HasSubstr("fitledgerctl: burst: the fitledger webhook at "
                                   "http://127.0.0.1:1 does not answer"));
  EXPECT_THAT(r->output, Not(HasSubstr("rejected by the kubelet")));
  EXPECT_THAT(r->output, Not(HasSubstr("kubernetes API")));  // not the API's fault
}

}  // namespace
}  // namespace fitledger::testing
