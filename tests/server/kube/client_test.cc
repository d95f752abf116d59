// The Kubernetes client against fitledger-sim as a real process: kubeconfig variants over TLS,
// list + watch into the ledger, reconnect, 410 relist, bookmarks.
#include <unistd.h>

#include <map>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/kube/api_client.h"
#include "server/kube/binder.h"
#include "server/kube/objects.h"
#include "server/kube/watcher.h"
#include "tests/sim/sim_process.h"

namespace fitledger::kube {
namespace {

using ::fitledger::testing::MakeTempDir;
using ::fitledger::testing::ReadFileOrEmpty;
using ::fitledger::testing::SimProcess;
using ::testing::HasSubstr;

bool WaitUntil(const std::function<bool()>& f, absl::Duration timeout = absl::Seconds(20)) {
  absl::Time deadline = absl::Now() + timeout;
  while (!f()) {
    if (absl::Now() > deadline) return false;
    usleep(20 * 1000);
  }
  return true;
}

std::string MakeCerts() {
  absl::StatusOr<std::string> dir = ::fitledger::testing::MakeTestCertificates();
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.value_or("");
}

Connection Tls(int port, const std::string& certs) {
  Connection c;
  c.server = absl::StrCat("https://127.0.0.1:", port);
  c.ca_pem = ReadFileOrEmpty(certs + "/ca.pem");
  return c;
}

constexpr char kNodes[] = R"(
nodes:
  - name: n1
    allocatable: {cpu: "2", memory: 4Gi, pods: 110}
watchLag: 0s
kubelet: {enabled: true}
)";

TEST(ClientTest, TokenAndClientCertificateOverTls) {
  std::string certs = MakeCerts();
  std::string yaml =
      absl::StrCat(kNodes, "tls: {certFile: ", certs, "/server.pem, keyFile: ", certs,
                   "/server-key.pem, clientCAFile: ", certs, "/ca.pem}\ntoken: s3cret\n");
  absl::StatusOr<std::unique_ptr<SimProcess>> sim = SimProcess::Start(yaml);
  ASSERT_TRUE(sim.ok()) << sim.status();
  Connection good = Tls((*sim)->port(), certs);
  good.token = "s3cret";
  good.client_cert_file = certs + "/client.pem";
  good.client_key_file = certs + "/client-key.pem";
  ApiClient client(good);
  absl::StatusOr<HttpResponse> r = client.Request("GET", "/api/v1/nodes", "", absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_THAT(r->body, HasSubstr("\"n1\""));

  Connection pem = good;  // the same from PEM data (kubeconfig *-data fields)
  pem.client_cert_file.clear();
  pem.client_key_file.clear();
  pem.client_cert_pem = ReadFileOrEmpty(certs + "/client.pem");
  pem.client_key_pem = ReadFileOrEmpty(certs + "/client-key.pem");
  r = ApiClient(pem).Request("GET", "/api/v1/nodes", "", absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);

  Connection wrong_token = good;
  wrong_token.token = "nope";
  r = ApiClient(wrong_token).Request("GET", "/api/v1/nodes", "", absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 401);

  Connection no_cert = good;
  no_cert.client_cert_file.clear();
  no_cert.client_key_file.clear();
  r = ApiClient(no_cert).Request("GET", "/api/v1/nodes", "", absl::Seconds(10));
  EXPECT_FALSE(r.ok() && r->code == 200);

  Connection untrusted = good;  // the server's certificate is not trusted without the CA
  untrusted.ca_pem.clear();
  r = ApiClient(untrusted).Request("GET", "/api/v1/nodes", "", absl::Seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

TEST(ClientTest, InsecureSkipTlsVerify) {
  std::string certs = MakeCerts();
  std::string yaml = absl::StrCat(kNodes, "tls: {certFile: ", certs,
                                  "/server.pem, keyFile: ", certs, "/server-key.pem}\n");
  absl::StatusOr<std::unique_ptr<SimProcess>> sim = SimProcess::Start(yaml);
  ASSERT_TRUE(sim.ok()) << sim.status();
  Connection c;
  c.server = absl::StrCat("https://127.0.0.1:", (*sim)->port());
  c.insecure_skip_tls_verify = true;
  absl::StatusOr<HttpResponse> r =
      ApiClient(c).Request("GET", "/api/v1/nodes", "", absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
}

TEST(ClientTest, TheKubeconfigTheSimWritesWorks) {
  absl::StatusOr<std::unique_ptr<SimProcess>> sim = SimProcess::Start(kNodes);
  ASSERT_TRUE(sim.ok()) << sim.status();
  absl::StatusOr<Connection> c = LoadKubeconfig((*sim)->kubeconfig_path());
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<HttpResponse> r = ApiClient(*c).Request("GET", "/version", "", absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
}

class WatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SimProcess>> sim = SimProcess::Start(kNodes);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    absl::StatusOr<Connection> c = LoadKubeconfig(sim_->kubeconfig_path());
    ASSERT_TRUE(c.ok());
    client_ = std::make_unique<ApiClient>(*c);
    WatcherOptions options;
    options.page_size = 2;  // several pages even for a handful of pods
    options.initial_backoff = absl::Milliseconds(20);
    watcher_ = std::make_unique<Watcher>(client_.get(), &ledger_, options);
    binder_ = std::make_unique<ApiBinder>(client_.get(), absl::Seconds(5));
  }
  void TearDown() override { watcher_->Stop(); }

  // Creates pod `name` (cpu request) and binds it to n1 through the API.
  void CreateBound(const std::string& name, const std::string& cpu) {
    std::string body =
        absl::StrCat(R"({"metadata":{"name":")", name,
                     R"("},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":")",
                     cpu, R"("}}}]}})");
    absl::StatusOr<HttpResponse> r =
        client_->Request("POST", "/api/v1/namespaces/default/pods", body, absl::Seconds(5));
    ASSERT_TRUE(r.ok() && r->code == 201) << (r.ok() ? r->body : r.status().ToString());
    absl::StatusOr<Pod> pod = ParsePod(r->body);
    ASSERT_TRUE(pod.ok());
    BindResult b = binder_->Bind("default", name, pod->uid, "n1");
    ASSERT_EQ(b.outcome, BindOutcome::kBound) << b.message;
  }
  void Delete(const std::string& name) {
    absl::StatusOr<HttpResponse> r =
        client_->Request("DELETE", "/api/v1/namespaces/default/pods/" + name, "", absl::Seconds(5));
    ASSERT_TRUE(r.ok() && r->code == 200);
  }
  void Admin(const std::string& path, const std::string& body = "{}") {
    absl::StatusOr<HttpResponse> r = client_->Request("POST", path, body, absl::Seconds(5));
    ASSERT_TRUE(r.ok() && r->code == 200) << path;
  }
  void AdminOk(const std::string& path, const std::string& body) { Admin(path, body); }
  // The sim's request counts by kind (GET /sim/requests), e.g. counts["LIST pods ..."].
  std::map<std::string, int64_t> Requests() {
    std::map<std::string, int64_t> out;
    absl::StatusOr<HttpResponse> r = client_->Request("GET", "/sim/requests", "", absl::Seconds(5));
    if (!r.ok() || r->code != 200) return out;
    nlohmann::json body = nlohmann::json::parse(r->body, nullptr, false);
    for (const auto& [key, count] : body["byRequest"].items()) out[key] = count["requests"];
    return out;
  }
  // Forces every stream to read a new state: their resourceVersions fall out of the history.
  void ForceNewStates() {
    Admin("/sim/faults/bookmarks-only", R"({"on":true})");
    absl::StatusOr<HttpResponse> r = client_->Request(
        "POST", "/api/v1/namespaces/default/pods",
        absl::StrCat(
            R"({"metadata":{"generateName":"churn-"},"spec":{"containers":[{"name":"c"}]}})"),
        absl::Seconds(5));
    ASSERT_TRUE(r.ok() && r->code == 201);
    Admin("/sim/faults/expire");
    Admin("/sim/faults/drop-watches");
    Admin("/sim/faults/bookmarks-only", R"({"on":false})");
  }
  int64_t ConfirmedCpu() {
    for (const NodeSummary& n : ledger_.Nodes()) {
      if (n.name == "n1") return n.confirmed.milli_cpu;
    }
    return -1;
  }

  std::unique_ptr<SimProcess> sim_;
  std::unique_ptr<ApiClient> client_;
  Ledger ledger_{AccountingPolicy{}, ScoringStrategy::kLeastAllocated};
  std::unique_ptr<Watcher> watcher_;
  std::unique_ptr<ApiBinder> binder_;
};

TEST_F(WatcherTest, ReadsTheStateThenWatches) {
  for (int i = 0; i < 5; ++i) CreateBound("pre-" + std::to_string(i), "100m");
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->synced(); }));
  EXPECT_EQ(ConfirmedCpu(), 500);
  CreateBound("live", "250m");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 750; }));
  Delete("pre-0");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 650; }));
  EXPECT_EQ(ledger_.pod_count(), 5u);
}

TEST_F(WatcherTest, ResumesAfterADroppedWatchWithoutLosingOrRepeatingEvents) {
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->synced(); }));
  uint64_t lists = watcher_->stats().lists;
  Admin("/sim/faults/drop-watches");
  CreateBound("a", "300m");
  Admin("/sim/faults/drop-watches");
  CreateBound("b", "300m");
  Delete("a");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 300 && ledger_.pod_count() == 1; }));
  EXPECT_EQ(watcher_->stats().lists, lists);  // resumed, not relisted
  EXPECT_GE(watcher_->stats().watch_restarts, 1u);
}

TEST_F(WatcherTest, RelistsOn410Gone) {
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->synced(); }));
  CreateBound("a", "300m");
  ASSERT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 300; }));
  Admin("/sim/faults/bookmarks-only", R"({"on":true})");
  Delete("a");
  CreateBound("b", "700m");
  Admin("/sim/faults/expire");
  Admin("/sim/faults/drop-watches");
  Admin("/sim/faults/bookmarks-only", R"({"on":false})");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 700 && ledger_.pod_count() == 1; }));
  EXPECT_GE(watcher_->stats().relists_gone, 1u);
}

TEST_F(WatcherTest, BookmarksAdvanceTheResourceVersion) {
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->stats().bookmarks >= 1; }));
}

TEST_F(WatcherTest, ServerRestartRelistsAndConverges) {
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->synced(); }));
  CreateBound("a", "100m");
  Admin("/sim/restart");
  CreateBound("b", "200m");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 300; }));
}

// The API server sends a pod that leaves the ledger's watch (status.phase!=Failed) as DELETED with
// its previous content; the ledger must release it, and the detector's own Failed-pods watch must
// count it, once.
TEST_F(WatcherTest, KubeletRejectionReleasesThePodAndIsCountedOnceAcrossRelists) {
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->synced() && watcher_->stats().rejections_synced; }));
  CreateBound("big", "1500m");
  CreateBound("small", "800m");  // 1500m + 800m > 2: the kubelet rejects it
  EXPECT_TRUE(WaitUntil([&] { return watcher_->stats().rejections_total == 1; }));
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 1500 && ledger_.pod_count() == 1; }));
  std::deque<KubeletRejection> seen = watcher_->rejections();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].name, "small");
  EXPECT_EQ(seen[0].node, "n1");
  EXPECT_EQ(seen[0].reason, "OutOfcpu");
  EXPECT_EQ(seen[0].message,
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 800, used: 1500, "
            "capacity: 2000");
  EXPECT_FALSE(seen[0].before_start);
  EXPECT_EQ(watcher_->stats().rejections_by_reason_node.at({"OutOfcpu", "n1"}), 1u);

  // A relist (every stream's resourceVersion too old) finds the same pod: not counted again.
  auto states = [&] { return watcher_->stats().lists + watcher_->stats().watch_lists; };
  const uint64_t before = states();
  Admin("/sim/faults/bookmarks-only", R"({"on":true})");
  absl::StatusOr<HttpResponse> unbound = client_->Request(
      "POST", "/api/v1/namespaces/default/pods",
      R"({"metadata":{"name":"unbound"},"spec":{"containers":[{"name":"c"}]}})", absl::Seconds(5));
  ASSERT_TRUE(unbound.ok() && unbound->code == 201);
  Admin("/sim/faults/expire");
  Admin("/sim/faults/drop-watches");
  Admin("/sim/faults/bookmarks-only", R"({"on":false})");
  ASSERT_TRUE(WaitUntil([&] { return states() >= before + 3; }));
  EXPECT_EQ(watcher_->stats().rejections_total, 1u);

  // A rejection the watch never delivered (held back, then the history expired) is counted by the
  // relist that finds it.
  Admin("/sim/faults/bookmarks-only", R"({"on":true})");
  CreateBound("late", "900m");
  Admin("/sim/faults/expire");
  Admin("/sim/faults/drop-watches");
  Admin("/sim/faults/bookmarks-only", R"({"on":false})");
  EXPECT_TRUE(WaitUntil([&] { return watcher_->stats().rejections_total == 2; }));
  EXPECT_EQ(watcher_->stats().rejected_pods_in_api, 2u);
  EXPECT_EQ(watcher_->rejections().back().name, "late");

  // Deleting a rejected pod forgets it; the counter never goes down.
  Delete("small");
  EXPECT_TRUE(WaitUntil([&] { return watcher_->stats().rejected_pods_in_api == 1; }));
  EXPECT_EQ(watcher_->stats().rejections_total, 2u);
  EXPECT_EQ(ConfirmedCpu(), 1500);
}

TEST_F(WatcherTest, RejectionsAlreadyInTheApiAtStartAreListedButNotCounted) {
  CreateBound("big", "1500m");
  CreateBound("old", "800m");
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->stats().rejections_synced; }));
  std::deque<KubeletRejection> seen = watcher_->rejections();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].name, "old");
  EXPECT_TRUE(seen[0].before_start);
  EXPECT_EQ(watcher_->stats().rejections_total, 0u);
  EXPECT_TRUE(watcher_->stats().rejections_by_reason_node.empty());
  EXPECT_EQ(watcher_->stats().rejected_pods_in_api, 1u);
  CreateBound("new", "900m");
  EXPECT_TRUE(WaitUntil([&] { return watcher_->stats().rejections_total == 1; }));
  EXPECT_EQ(watcher_->rejections().size(), 2u);
  EXPECT_FALSE(watcher_->rejections().back().before_start);
}

// Kind to the API server (client-go reflector.go): the state of each stream comes as a WatchList
// (served from the watch cache, streamed), and again after a 410, from the last version.
TEST_F(WatcherTest, StatesComeAsWatchListsWhereTheServerSupportsThem) {
  CreateBound("a", "100m");
  ASSERT_EQ(client_->Request("DELETE", "/sim/requests", "", absl::Seconds(5))->code, 200);
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->stats().watch_lists == 3; }));
  EXPECT_EQ(ConfirmedCpu(), 100);
  EXPECT_EQ(watcher_->stats().lists, 0u);
  EXPECT_TRUE(watcher_->stats().watch_list_supported);
  std::map<std::string, int64_t> requests = Requests();
  EXPECT_EQ(requests["WATCHLIST nodes resourceVersion=\"\""], 1);
  EXPECT_EQ(requests["WATCHLIST pods fieldSelector=status.phase!=Succeeded,status.phase!=Failed "
                     "resourceVersion=\"\""],
            1);
  EXPECT_EQ(requests["WATCHLIST pods fieldSelector=status.phase=Failed resourceVersion=\"\""], 1);
  for (const auto& [key, n] : requests) EXPECT_FALSE(absl::StartsWith(key, "LIST")) << key;
  // Events after the state arrive on the same stream.
  CreateBound("b", "200m");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 300; }));
  // After a 410: a WatchList again, not older than the last version.
  ForceNewStates();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->stats().watch_lists == 6; }));
  requests = Requests();
  EXPECT_EQ(requests["WATCHLIST nodes resourceVersion=N"], 1);
  EXPECT_EQ(watcher_->stats().lists, 0u);
  CreateBound("c", "300m");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 600; }));
}

// A server that refuses WatchList (the feature gate off): LIST + WATCH, the first LIST from the
// watch cache (resourceVersion=0), a relist after a 410 at the last version, unpaged.
TEST_F(WatcherTest, WithoutWatchListTheFirstListIsServedFromTheCache) {
  Admin("/sim/features/watch-list", R"({"on":false})");
  for (int i = 0; i < 5; ++i) CreateBound("pre-" + std::to_string(i), "100m");
  ASSERT_EQ(client_->Request("DELETE", "/sim/requests", "", absl::Seconds(5))->code, 200);
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->synced() && watcher_->stats().rejections_synced; }));
  EXPECT_EQ(ConfirmedCpu(), 500);
  EXPECT_FALSE(watcher_->stats().watch_list_supported);
  EXPECT_EQ(watcher_->stats().watch_lists, 0u);
  EXPECT_EQ(watcher_->stats().lists, 3u);
  std::map<std::string, int64_t> requests = Requests();
  // One page although page_size is 2: the cache ignores limit for resourceVersion=0.
  EXPECT_EQ(requests["LIST pods fieldSelector=status.phase!=Succeeded,status.phase!=Failed "
                     "resourceVersion=0"],
            1);
  EXPECT_EQ(requests["LIST nodes resourceVersion=0"], 1);
  // Each stream asked once at most before it knew (the threads start together).
  int64_t refused = 0;
  for (const auto& [key, n] : requests) {
    if (absl::StartsWith(key, "WATCHLIST")) refused += n;
  }
  EXPECT_GE(refused, 1);
  EXPECT_LE(refused, 3);
  ForceNewStates();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->stats().lists == 6; }));
  requests = Requests();
  EXPECT_EQ(requests["LIST nodes resourceVersion=N"], 1);
  EXPECT_EQ(requests["LIST pods fieldSelector=status.phase=Failed resourceVersion=N"], 1);
  CreateBound("live", "250m");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 750; }));
}

// A version the server cannot serve yet ("too large resource version", 504: its cache is
// behind, e.g. just restarted) falls back to a consistent read (resourceVersion ""), as the
// reflector's isTooLargeResourceVersionError handling does; paged again.
TEST_F(WatcherTest, AVersionTheServerCannotServeFallsBackToAConsistentRead) {
  for (bool watch_list : {true, false}) {
    SCOPED_TRACE(watch_list ? "WatchList" : "LIST");
    Admin("/sim/features/watch-list", watch_list ? R"({"on":true})" : R"({"on":false})");
    WatcherOptions options;
    options.page_size = 2;
    options.initial_backoff = absl::Milliseconds(20);
    watcher_ = std::make_unique<Watcher>(client_.get(), &ledger_, options);
    watcher_->Start();
    ASSERT_TRUE(
        WaitUntil([&] { return watcher_->synced() && watcher_->stats().rejections_synced; }));
    const uint64_t states = watcher_->stats().lists + watcher_->stats().watch_lists;
    Admin("/sim/faults/too-large", R"({"times":3})");
    ASSERT_EQ(client_->Request("DELETE", "/sim/requests", "", absl::Seconds(5))->code, 200);
    ForceNewStates();
    ASSERT_TRUE(WaitUntil(
        [&] { return watcher_->stats().lists + watcher_->stats().watch_lists == states + 3; }));
    std::map<std::string, int64_t> requests = Requests();
    const std::string verb = watch_list ? "WATCHLIST" : "LIST";
    EXPECT_EQ(requests[verb + " nodes resourceVersion=N"], 1);
    EXPECT_EQ(requests[verb + " nodes resourceVersion=\"\""], 1);
    if (!watch_list) {
      // The consistent read is paged (page_size 2; three pods: x and two churn pods).
      EXPECT_GE(requests["LIST pods fieldSelector=status.phase!=Succeeded,status.phase!=Failed "
                         "resourceVersion=(continue)"],
                1);
    }
    CreateBound(watch_list ? "x" : "y", "100m");
    EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == (watch_list ? 100 : 200); }));
    watcher_->Stop();
  }
}

TEST_F(WatcherTest, BindingOutcomesAreClassified) {
  watcher_->Start();
  CreateBound("a", "100m");
  absl::StatusOr<Pod> a = binder_->GetPod("default", "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->node_name, "n1");
  EXPECT_EQ(binder_->Bind("default", "a", a->uid, "n1").outcome, BindOutcome::kAlreadyBound);
  EXPECT_EQ(binder_->Bind("default", "a", a->uid, "n2").outcome, BindOutcome::kBoundElsewhere);
  EXPECT_EQ(binder_->Bind("default", "a", "other-uid", "n1").outcome, BindOutcome::kPodGone);
  EXPECT_EQ(binder_->Bind("default", "nope", "u", "n1").outcome, BindOutcome::kPodGone);
  EXPECT_TRUE(absl::IsNotFound(binder_->GetPod("default", "nope").status()));
}

TEST(ApiClientTest, ConnectionRefusedIsUnavailable) {
  Connection c;
  c.server = "http://127.0.0.1:1";
  absl::StatusOr<HttpResponse> r = ApiClient(c).Request("GET", "/", "", absl::Seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  ApiClient client(c);
  ApiBinder binder(&client, absl::Seconds(5));
  EXPECT_EQ(binder.Bind("ns", "p", "u", "n").outcome, BindOutcome::kUnreachable);
}

}  // namespace
}  // namespace fitledger::kube
