// coordination.k8s.io/v1 Leases in the real fitledger-sim: create, get, update (optimistic
// concurrency, create on update), list and watch by name (as fitledger-server's LeaseWatcher
// asks), the watch lag, discovery, and kubectl.
#include <sys/stat.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sim/sim_process.h"

namespace fitledger::testing {
namespace {

using nlohmann::json;
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

constexpr char kKubectl[] = "/usr/bin/kubectl";
constexpr char kLeases[] = "/apis/coordination.k8s.io/v1/namespaces/fitledger/leases";

constexpr char kConfig[] = R"(
nodes:
  - name: worker-1
    allocatable: {cpu: "4", memory: 8Gi, pods: 110}
watchLag: 0s
bookmarkInterval: 200ms
)";

// Polls `f` every 20 ms for up to 10 s.
bool WaitFor(const std::function<bool()>& f) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!f()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

json LeaseBody(const std::string& name, const std::string& holder, int transitions = 0) {
  return json{{"apiVersion", "coordination.k8s.io/v1"},
              {"kind", "Lease"},
              {"metadata", {{"name", name}}},
              {"spec",
               {{"holderIdentity", holder},
                {"leaseDurationSeconds", 15},
                {"acquireTime", "2026-05-01T10:00:00.000000Z"},
                {"renewTime", "2026-05-01T10:00:02.000000Z"},
                {"leaseTransitions", transitions}}}};
}

class SimLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = SimProcess::Start(kConfig);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    client_ = sim_->Client();
  }
  HttpResult Create(const json& body) { return Call(*client_, "POST", kLeases, body.dump()); }
  HttpResult Put(const std::string& name, const json& body) {
    return Call(*client_, "PUT", absl::StrCat(kLeases, "/", name), body.dump());
  }
  HttpResult Get(const std::string& name) {
    return Call(*client_, "GET", absl::StrCat(kLeases, "/", name));
  }

  std::unique_ptr<SimProcess> sim_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(SimLeaseTest, CreateGetAndUpdateWithOptimisticConcurrency) {
  HttpResult created = Create(LeaseBody("sched", "pod-a_1"));
  ASSERT_EQ(created.status, 201) << created.raw;
  EXPECT_EQ(created.body["kind"], "Lease");
  EXPECT_EQ(created.body["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(created.body["metadata"]["namespace"], "fitledger");
  EXPECT_FALSE(created.body["metadata"].value("uid", "").empty());
  EXPECT_FALSE(created.body["metadata"].value("creationTimestamp", "").empty());
  const std::string rv = created.body["metadata"]["resourceVersion"];
  EXPECT_EQ(Get("sched").body, created.body);

  EXPECT_EQ(Create(LeaseBody("sched", "pod-b_2")).status, 409);
  // An update needs the resourceVersion it read, and it must be the latest.
  json update = LeaseBody("sched", "pod-b_2", 1);
  HttpResult no_rv = Put("sched", update);
  EXPECT_EQ(no_rv.status, 422) << no_rv.raw;
  EXPECT_THAT(
      no_rv.body.value("message", ""),
      HasSubstr("leases.coordination.k8s.io \"sched\" is invalid: metadata.resourceVersion: "
                "Invalid value: 0: must be specified for an update"));
  update["metadata"]["resourceVersion"] = "1";
  HttpResult stale = Put("sched", update);
  EXPECT_EQ(stale.status, 409) << stale.raw;
  EXPECT_EQ(stale.body.value("reason", ""), "Conflict");
  EXPECT_THAT(stale.body.value("message", ""), HasSubstr("the object has been modified"));
  update["metadata"]["resourceVersion"] = rv;
  HttpResult updated = Put("sched", update);
  ASSERT_EQ(updated.status, 200) << updated.raw;
  EXPECT_EQ(updated.body["spec"]["holderIdentity"], "pod-b_2");
  EXPECT_EQ(updated.body["metadata"]["uid"], created.body["metadata"]["uid"]);
  EXPECT_GT(std::stoull(updated.body["metadata"]["resourceVersion"].get<std::string>()),
            std::stoull(rv));
  // The same content again writes nothing: the resourceVersion stays.
  update["metadata"]["resourceVersion"] = updated.body["metadata"]["resourceVersion"];
  EXPECT_EQ(Put("sched", update).body["metadata"]["resourceVersion"],
            updated.body["metadata"]["resourceVersion"]);

  // A PUT of a Lease that does not exist creates it (the strategy's AllowCreateOnUpdate).
  EXPECT_EQ(Put("other", LeaseBody("other", "x")).status, 201);
  EXPECT_EQ(Get("nope").status, 404);
  EXPECT_THAT(Get("nope").body.value("message", ""),
              HasSubstr("leases.coordination.k8s.io \"nope\" not found"));
}

TEST_F(SimLeaseTest, ValidationAsTheApiServer) {
  json bad = LeaseBody("sched", "a");
  bad["spec"]["leaseDurationSeconds"] = 0;
  HttpResult r = Create(bad);
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("message", ""),
            "Lease.coordination.k8s.io \"sched\" is invalid: spec.leaseDurationSeconds: Invalid "
            "value: 0: must be greater than 0");
  EXPECT_EQ(Create(LeaseBody("Not_A_Name", "a")).status, 422);
  json nameless = LeaseBody("", "a");
  EXPECT_THAT(Create(nameless).body.value("message", ""),
              HasSubstr("metadata.name: Required value: name or generateName is required"));
  json typed = LeaseBody("sched", "a");
  typed["spec"]["leaseDurationSeconds"] = "15";
  EXPECT_EQ(Create(typed).status, 400);
  json other_ns = LeaseBody("sched", "a");
  other_ns["metadata"]["namespace"] = "elsewhere";
  EXPECT_EQ(Create(other_ns).status, 400);
  EXPECT_EQ(Put("sched", LeaseBody("other-name", "a")).status, 400);
}

// A Lease named by generateName is validated with its generated name (rest.BeforeCreate names it
// before ValidateLease), and generateName as a prefix too.
TEST_F(SimLeaseTest, ALeaseNamedByGenerateNameIsValidated) {
  json generated = LeaseBody("", "a");
  generated["metadata"] = {{"generateName", "gen-"}};
  generated["spec"]["leaseDurationSeconds"] = 0;
  HttpResult r = Create(generated);
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_THAT(
      r.body.value("message", ""),
      ContainsRegex("^Lease.coordination.k8s.io \"gen-[b-z2-9]{5}\" is invalid: "
                    "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0$"));
  generated["metadata"] = {{"generateName", "Bad_"}};
  generated["spec"]["leaseDurationSeconds"] = 15;
  r = Create(generated);
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_THAT(r.body.value("message", ""),
              ContainsRegex("is invalid: \\[metadata.generateName: Invalid value: \"Bad_\": .*, "
                            "metadata.name: Invalid value: \"Bad_[b-z2-9]{5}\": "));
  // A trailing dash is masked, not an error; the stored Lease has the generated name.
  generated["metadata"] = {{"generateName", "ok-"}};
  r = Create(generated);
  ASSERT_EQ(r.status, 201) << r.raw;
  EXPECT_THAT(r.body["metadata"]["name"].get<std::string>(), ContainsRegex("^ok-[b-z2-9]{5}$"));
  EXPECT_EQ(r.body["metadata"]["generateName"], "ok-");
}

// A PUT: the namespace in the body must be the request's (400); a metadata that is no object is a
// 400, not a crash; the body's uid is a precondition checked before anything else (409), so a
// client's cached copy of a deleted Lease does not create it again.
TEST_F(SimLeaseTest, APutChecksTheNamespaceAndTheUidAsTheApiServer) {
  HttpResult created = Create(LeaseBody("sched", "a"));
  ASSERT_EQ(created.status, 201) << created.raw;
  const std::string uid = created.body["metadata"]["uid"];
  json other_ns = created.body;
  other_ns["metadata"]["namespace"] = "elsewhere";
  HttpResult r = Put("sched", other_ns);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body.value("message", ""),
            "the namespace of the provided object does not match the namespace sent on the "
            "request");
  json no_metadata = LeaseBody("x", "a");
  no_metadata["metadata"] = "not an object";
  EXPECT_EQ(Put("missing", no_metadata).status, 400);
  EXPECT_EQ(Put("sched", no_metadata).status, 400);

  // Decoding comes first: a wrong type is a 400 even with a stale resourceVersion.
  json typed = created.body;
  typed["metadata"]["resourceVersion"] = "1";
  typed["spec"]["leaseDurationSeconds"] = "15";
  r = Put("sched", typed);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_THAT(r.body.value("message", ""), HasSubstr("cannot be handled as a Lease"));

  json wrong_uid = created.body;
  wrong_uid["metadata"]["uid"] = "not-the-uid";
  r = Put("sched", wrong_uid);
  EXPECT_EQ(r.status, 409) << r.raw;
  EXPECT_EQ(r.body.value("reason", ""), "Conflict");
  EXPECT_EQ(
      r.body.value("message", ""),
      absl::StrCat("Operation cannot be fulfilled on leases.coordination.k8s.io \"sched\": "
                   "StorageError: invalid object, Code: 4, Key: "
                   "/registry/leases/fitledger/sched, ResourceVersion: 0, AdditionalErrorMsg: "
                   "Precondition failed: UID in precondition: not-the-uid, UID in object "
                   "meta: ",
                   uid));

  ASSERT_EQ(Call(*client_, "DELETE", absl::StrCat(kLeases, "/sched")).status, 200);
  r = Put("sched", created.body);
  EXPECT_EQ(r.status, 409) << r.raw;
  EXPECT_THAT(r.body.value("message", ""),
              HasSubstr(absl::StrCat("UID in precondition: ", uid, ", UID in object meta: ")));
  EXPECT_EQ(Get("sched").status, 404);
}

TEST_F(SimLeaseTest, ListAndWatchByNameSeeOnlyThatLease) {
  ASSERT_EQ(Create(LeaseBody("sched", "pod-a_1")).status, 201);
  ASSERT_EQ(Create(LeaseBody("unrelated", "x")).status, 201);
  const std::string by_name = absl::StrCat(kLeases, "?fieldSelector=metadata.name%3Dsched");
  HttpResult list = Call(*client_, "GET", by_name);
  ASSERT_EQ(list.status, 200) << list.raw;
  EXPECT_EQ(list.body["kind"], "LeaseList");
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(list.body["items"][0]["spec"]["holderIdentity"], "pod-a_1");
  const std::string rv = list.body["metadata"]["resourceVersion"];
  EXPECT_EQ(
      Call(*client_, "GET", absl::StrCat(kLeases, "?fieldSelector=spec.holderIdentity%3Dx")).status,
      400);

  WatchStream watch(sim_->port(), absl::StrCat(by_name,
                                               "&watch=true&allowWatchBookmarks=true&"
                                               "timeoutSeconds=10&resourceVersion=",
                                               rv));
  json update = LeaseBody("unrelated", "y");
  update["metadata"]["resourceVersion"] = Get("unrelated").body["metadata"]["resourceVersion"];
  ASSERT_EQ(Put("unrelated", update).status, 200);
  update = LeaseBody("sched", "pod-b_2", 1);
  update["metadata"]["resourceVersion"] = Get("sched").body["metadata"]["resourceVersion"];
  ASSERT_EQ(Put("sched", update).status, 200);
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& line : watch.lines()) {
      if (line.event["type"] == "MODIFIED") return true;
    }
    return false;
  }));
  for (const auto& line : watch.lines()) {
    if (line.event["type"] == "BOOKMARK") continue;
    EXPECT_EQ(line.event["type"], "MODIFIED");
    EXPECT_EQ(line.event["object"]["metadata"]["name"], "sched");  // never "unrelated"
    EXPECT_EQ(line.event["object"]["spec"]["holderIdentity"], "pod-b_2");
  }
}

TEST_F(SimLeaseTest, WatchEventsComeAfterTheWatchLagAndResumeOrExpire) {
  ASSERT_EQ(Call(*client_, "POST", "/sim/watch-lag", R"({"lag":"1s"})").status, 200);
  HttpResult created = Create(LeaseBody("sched", "pod-a_1"));
  ASSERT_EQ(created.status, 201);
  const std::string rv = created.body["metadata"]["resourceVersion"];
  WatchStream watch(sim_->port(),
                    absl::StrCat(kLeases, "?watch=true&timeoutSeconds=10&resourceVersion=", rv));
  json update = LeaseBody("sched", "pod-b_2", 1);
  update["metadata"]["resourceVersion"] = rv;
  const absl::Time written = absl::Now();
  ASSERT_EQ(Put("sched", update).status, 200);
  // A GET is never delayed; the watch event is, by the lag.
  EXPECT_EQ(Get("sched").body["spec"]["holderIdentity"], "pod-b_2");
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  EXPECT_GE(watch.lines()[0].arrived - written, absl::Milliseconds(900));
  EXPECT_EQ(watch.lines()[0].event["type"], "MODIFIED");

  ASSERT_EQ(Call(*client_, "POST", "/sim/faults/expire", "{}").status, 200);
  WatchStream expired(sim_->port(),
                      absl::StrCat(kLeases, "?watch=true&timeoutSeconds=10&resourceVersion=", rv));
  ASSERT_TRUE(expired.WaitForLines(1, absl::Seconds(10)));
  EXPECT_EQ(expired.lines()[0].event["type"], "ERROR");
  EXPECT_EQ(expired.lines()[0].event["object"]["code"], 410);
}

TEST_F(SimLeaseTest, DeleteAnswersASuccessStatusAndTheWatchSeesDeleted) {
  HttpResult created = Create(LeaseBody("sched", "pod-a_1"));
  ASSERT_EQ(created.status, 201) << created.raw;
  const std::string rv = created.body["metadata"]["resourceVersion"];
  const std::string uid = created.body["metadata"]["uid"];
  WatchStream watch(sim_->port(),
                    absl::StrCat(kLeases, "?watch=true&timeoutSeconds=10&resourceVersion=", rv));
  // Preconditions that do not hold: 409 Conflict, nothing deleted (rest/delete.go BeforeDelete).
  HttpResult wrong_uid = Call(*client_, "DELETE", absl::StrCat(kLeases, "/sched"),
                              R"({"preconditions":{"uid":"not-the-uid"}})");
  EXPECT_EQ(wrong_uid.status, 409) << wrong_uid.raw;
  EXPECT_EQ(
      wrong_uid.body.value("message", ""),
      absl::StrCat("Operation cannot be fulfilled on Lease.coordination.k8s.io \"sched\": the "
                   "UID in the precondition (not-the-uid) does not match the UID in record (",
                   uid, "). The object might have been deleted and then recreated"));
  EXPECT_EQ(Call(*client_, "DELETE", absl::StrCat(kLeases, "/sched"),
                 R"({"preconditions":{"resourceVersion":"1"}})")
                .status,
            409);
  ASSERT_EQ(Get("sched").status, 200);

  // A Lease is not ReturnDeletedObject: the answer is a Status with the details
  // (registry/generic/registry/store.go finalizeDelete).
  HttpResult deleted = Call(*client_, "DELETE", absl::StrCat(kLeases, "/sched"));
  ASSERT_EQ(deleted.status, 200) << deleted.raw;
  EXPECT_EQ(deleted.body,
            json::parse(absl::StrCat(R"({"kind":"Status","apiVersion":"v1","metadata":{},)",
                                     R"("status":"Success","details":{"name":"sched",)",
                                     R"("group":"coordination.k8s.io","kind":"leases","uid":")",
                                     uid, R"("}})")));
  EXPECT_EQ(Get("sched").status, 404);
  HttpResult again = Call(*client_, "DELETE", absl::StrCat(kLeases, "/sched"));
  EXPECT_EQ(again.status, 404);
  EXPECT_EQ(again.body.value("message", ""), "leases.coordination.k8s.io \"sched\" not found");
  HttpResult list = Call(*client_, "GET", kLeases);
  EXPECT_TRUE(list.body["items"].empty()) << list.raw;

  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  EXPECT_EQ(watch.lines()[0].event["type"], "DELETED");
  EXPECT_EQ(watch.lines()[0].event["object"]["metadata"]["name"], "sched");
  EXPECT_GT(std::stoull(
                watch.lines()[0].event["object"]["metadata"]["resourceVersion"].get<std::string>()),
            std::stoull(rv));
  HttpResult resources = Call(*client_, "GET", "/apis/coordination.k8s.io/v1");
  EXPECT_THAT(resources.body["resources"][0]["verbs"].get<std::vector<std::string>>(),
              ::testing::Contains("delete"));
}

TEST_F(SimLeaseTest, DiscoveryAndKubectl) {
  HttpResult groups = Call(*client_, "GET", "/apis");
  ASSERT_EQ(groups.status, 200);
  // Both named groups the sim serves: apps (sim/object_api.h) and coordination.k8s.io.
  std::vector<std::string> names;
  for (const auto& g : groups.body["groups"]) names.push_back(g["name"].get<std::string>());
  EXPECT_THAT(names, ElementsAre("apps", "coordination.k8s.io"));
  HttpResult root = Call(*client_, "GET", "/");
  ASSERT_EQ(root.status, 200);
  std::vector<std::string> paths;
  for (const auto& p : root.body["paths"]) paths.push_back(p.get<std::string>());
  EXPECT_THAT(paths, IsSupersetOf({"/api/v1", "/apis", "/apis/apps/v1", "/apis/coordination.k8s.io",
                                   "/apis/coordination.k8s.io/v1", "/openapi/v3", "/version"}));
  HttpResult group = Call(*client_, "GET", "/apis/coordination.k8s.io");
  EXPECT_EQ(group.body["kind"], "APIGroup");
  EXPECT_EQ(group.body["preferredVersion"]["groupVersion"], "coordination.k8s.io/v1");
  HttpResult resources = Call(*client_, "GET", "/apis/coordination.k8s.io/v1");
  EXPECT_EQ(resources.body["resources"][0]["name"], "leases");
  EXPECT_EQ(resources.body["resources"][0]["namespaced"], true);

  struct stat st;
  ASSERT_EQ(stat(kKubectl, &st), 0) << "kubectl is required at " << kKubectl;
  ASSERT_EQ(Create(LeaseBody("fitledger-scheduler", "pod-a_0c3e9f0a")).status, 201);
  const TempDir home("kubectl-home");
  const std::vector<std::string> env = {"HOME=" + home.path(),
                                        "KUBECONFIG=" + sim_->kubeconfig_path()};
  absl::StatusOr<CommandResult> all =
      RunCommand({kKubectl, "get", "leases", "-A"}, env, absl::Seconds(30));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->exit_code, 0) << all->output;
  EXPECT_THAT(all->output, ContainsRegex("NAMESPACE +NAME +HOLDER +AGE"));
  EXPECT_THAT(all->output,
              ContainsRegex("fitledger +fitledger-scheduler +pod-a_0c3e9f0a +[0-9]+s"));
  absl::StatusOr<CommandResult> yaml =
      RunCommand({kKubectl, "-n", "fitledger", "get", "lease", "fitledger-scheduler", "-o", "yaml"},
                 env, absl::Seconds(30));
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ASSERT_EQ(yaml->exit_code, 0) << yaml->output;
  EXPECT_THAT(yaml->output, HasSubstr("kind: Lease"));
  EXPECT_THAT(yaml->output, HasSubstr("holderIdentity: pod-a_0c3e9f0a"));
  EXPECT_THAT(yaml->output, HasSubstr("leaseDurationSeconds: 15"));
  // Core resources still resolve with the coordination group in discovery.
  absl::StatusOr<CommandResult> nodes =
      RunCommand({kKubectl, "get", "nodes"}, env, absl::Seconds(30));
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(nodes->exit_code, 0) << nodes->output;
  // Node heartbeats (kubectl describe node) still answer for every node.
  EXPECT_EQ(Call(*client_, "GET",
                 "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/worker-1")
                .body["spec"]["holderIdentity"],
            "worker-1");
}

}  // namespace
}  // namespace fitledger::testing
