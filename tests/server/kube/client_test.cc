// The Kubernetes client against fitledger-sim as a real process: kubeconfig variants over TLS,
// list + watch into the ledger, reconnect, 410 relist, bookmarks.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/kube/api_client.h"
#include "server/kube/binder.h"
#include "server/kube/lease_watcher.h"
#include "server/kube/objects.h"
#include "server/kube/watcher.h"
#include "tests/sim/sim_process.h"

namespace fitledger::kube {
namespace {

using ::fitledger::testing::ReadFileOrEmpty;
using ::fitledger::testing::SimProcess;
using ::fitledger::testing::TempDir;
using ::testing::HasSubstr;

// A deadline for one Bind or GetPod: generous, so the binder's own timeout governs.
absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

bool WaitUntil(const std::function<bool()>& f, absl::Duration timeout = absl::Seconds(20)) {
  absl::Time deadline = absl::Now() + timeout;
  while (!f()) {
    if (absl::Now() > deadline) return false;
    usleep(20 * 1000);
  }
  return true;
}

TempDir MakeCerts() {
  absl::StatusOr<TempDir> dir = ::fitledger::testing::MakeTestCertificates();
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? *std::move(dir) : TempDir();
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
  const TempDir certs_dir = MakeCerts();
  const std::string& certs = certs_dir.path();
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
  const TempDir certs_dir = MakeCerts();
  const std::string& certs = certs_dir.path();
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
    absl::StatusOr<std::unique_ptr<SimProcess>> sim =
        SimProcess::Start(absl::StrCat(kNodes, sim_config_));
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    absl::StatusOr<Connection> c = LoadKubeconfig(sim_->kubeconfig_path());
    ASSERT_TRUE(c.ok());
    client_ = std::make_unique<ApiClient>(*c);
    WatcherOptions options;
    options.protobuf = protobuf_;
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
    BindResult b = binder_->Bind("default", name, pod->uid, "n1", Deadline());
    ASSERT_EQ(b.outcome, BindOutcome::kBound) << b.message;
  }
  // Creates pod `name` unbound; returns its UID.
  std::string CreateUnbound(const std::string& name) {
    std::string body = absl::StrCat(R"({"metadata":{"name":")", name,
                                    R"("},"spec":{"containers":[{"name":"c"}]}})");
    absl::StatusOr<HttpResponse> r =
        client_->Request("POST", "/api/v1/namespaces/default/pods", body, absl::Seconds(5));
    EXPECT_TRUE(r.ok() && r->code == 201) << (r.ok() ? r->body : r.status().ToString());
    if (!r.ok()) return "";
    absl::StatusOr<Pod> pod = ParsePod(r->body);
    return pod.ok() ? pod->uid : "";
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

  // A round every encoding must pass: a state of 3 pods, a pod added and one deleted after it,
  // new states (a 410 on every stream), a pod added after those; no decode error. `on_first`
  // runs once the first state and its changes are counted, on the first streams.
  void RunStatesAndChanges(const std::function<void()>& on_first) {
    for (int i = 0; i < 3; ++i) CreateBound("pre-" + std::to_string(i), "100m");
    watcher_->Start();
    ASSERT_TRUE(WaitUntil([&] { return watcher_->synced(); }));
    EXPECT_EQ(ConfirmedCpu(), 300);
    CreateBound("live", "250m");
    EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 550; }));
    Delete("pre-0");
    EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 450; }));
    on_first();
    ForceNewStates();
    EXPECT_TRUE(WaitUntil([&] { return watcher_->stats().watch_lists >= 6; }));
    CreateBound("after", "50m");
    EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 500; }));
    EXPECT_EQ(watcher_->stats().decode_errors, 0u);
  }

  bool protobuf_ = true;    // WatcherOptions::protobuf, the default
  std::string sim_config_;  // appended to the sim's config
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

// The streams ask for protobuf, which fitledger-sim speaks for pods and nodes as the API server
// does: every test of this suite runs the watcher on it.
TEST_F(WatcherTest, StreamsComeInProtobufWhereTheServerSpeaksIt) {
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->synced(); }));
  EXPECT_TRUE(WaitUntil([&] { return watcher_->stats().streams_protobuf == 3; }));
  EXPECT_EQ(watcher_->stats().streams_json, 0u);
  EXPECT_EQ(watcher_->stats().decode_errors, 0u);
}

// kubernetes.contentType: application/json: the same watcher on JSON streams.
class WatcherJsonTest : public WatcherTest {
 protected:
  WatcherJsonTest() { protobuf_ = false; }
};

// The sim compressing WatchLists as kube-apiserver 1.37 does (gzip members, see
// SimApiTest.WatchListCompressionAnswersGzipMembersToClientsThatAskForGzip): states, events
// after them, and new states after a 410 arrive, and no stream restarts.
class WatcherGzipTest : public WatcherTest {
 protected:
  WatcherGzipTest() { sim_config_ = "watchListCompression: true\n"; }
};

TEST_F(WatcherGzipTest, WatchListsOfGzipMembersCarryTheStateAndTheChanges) {
  RunStatesAndChanges([&] {
    EXPECT_EQ(watcher_->stats().watch_lists, 3u);
    EXPECT_EQ(watcher_->stats().watch_restarts, 0u);
  });
}

TEST_F(WatcherJsonTest, ReadsTheStateThenWatchesInJson) {
  RunStatesAndChanges([&] {
    EXPECT_EQ(watcher_->stats().streams_json, 3u);
    EXPECT_EQ(watcher_->stats().streams_protobuf, 0u);
  });
  // The new states after the 410 came in JSON too.
  EXPECT_EQ(watcher_->stats().streams_protobuf, 0u);
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

// A new leader's resync (RequestConsistentPodList): a consistent LIST counts the binds the watch
// has not shown, keeps this server's own assumption, releases one it knew bound that is gone, and
// the watch goes on from the LIST: an event it held is not applied again, a new one once.
TEST_F(WatcherTest, AConsistentPodListCountsWhatTheWatchHasNotShownAndKeepsAssumptions) {
  watcher_->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher_->synced(); }));
  Admin("/sim/faults/bookmarks-only", R"({"on":true})");  // the watch delivers nothing from now
  CreateBound("theirs", "300m");                          // bound by the previous leader
  Resources requests;
  requests.milli_cpu = 200;
  const std::string mine = CreateUnbound("mine");  // this server's bind, not posted yet
  ASSERT_TRUE(ledger_.TryAssume(mine, "default", "mine", "n1", requests, absl::Now()).ok());
  requests.milli_cpu = 100;
  const std::string gone = CreateUnbound("gone");  // bound by this server, then deleted
  ASSERT_TRUE(ledger_.TryAssume(gone, "default", "gone", "n1", requests, absl::Now()).ok());
  ASSERT_EQ(binder_->Bind("default", "gone", gone, "n1", Deadline()).outcome, BindOutcome::kBound);
  ledger_.MarkBound(gone, "n1");
  Delete("gone");
  ASSERT_TRUE(WaitUntil([&] {
    absl::StatusOr<HttpResponse> r =
        client_->Request("GET", "/api/v1/namespaces/default/pods/gone", "", absl::Seconds(5));
    return r.ok() && r->code == 404;
  }));
  ASSERT_EQ(ConfirmedCpu(), 0);  // the watch showed none of it

  const std::map<std::string, int64_t> before = Requests();
  std::atomic<bool> done{false};
  ConsistentPodList listed;
  const absl::Time asked = absl::Now();
  watcher_->RequestConsistentPodList([&](const ConsistentPodList& l) {
    listed = l;
    done = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return done.load(); }));
  std::cerr << "consistent pod LIST applied " << absl::FormatDuration(absl::Now() - asked)
            << " after the request\n";
  EXPECT_EQ(listed.pods, 2u);  // theirs (bound) and mine (unbound); gone is gone
  EXPECT_FALSE(listed.resource_version.empty());
  EXPECT_EQ(ConfirmedCpu(), 300);
  std::optional<AssumedPod> kept = ledger_.AssumedEntry(mine);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->node_name, "n1");
  EXPECT_FALSE(ledger_.AssumedEntry(gone).has_value());
  EXPECT_EQ(ledger_.counters().released_at_relist, 1u);
  const std::string consistent =
      "LIST pods fieldSelector=status.phase!=Succeeded,status.phase!=Failed resourceVersion=\"\"";
  const std::map<std::string, int64_t> after = Requests();
  EXPECT_GE(after.count(consistent) ? after.at(consistent) : 0,
            (before.count(consistent) ? before.at(consistent) : 0) + 1);

  Admin("/sim/faults/bookmarks-only", R"({"on":false})");
  CreateBound("later", "100m");
  EXPECT_TRUE(WaitUntil([&] { return ConfirmedCpu() == 400; }));
  EXPECT_EQ(ledger_.pod_count(), 3u);  // theirs, later (confirmed), mine (assumed)
  for (const NodeSummary& n : ledger_.Nodes()) {
    if (n.name == "n1") {
      EXPECT_EQ(n.assumed.milli_cpu, 200);
    }
  }
}

// The leader fence's view of the scheduler's Lease: one Lease by name (list and watch with
// fieldSelector metadata.name, which RBAC's resourceNames can grant), and Refresh reads it again
// at once when the watch lags.
// InterruptStreams cuts only the connections of Streams running with the flag. A GetStreamed
// (the watcher's paged LISTs) runs with a flag too but returns its handle, and so its
// connection, to the pool: a later Request on that connection must not be cut by an interrupt
// of the flag. The sim holds the binding POST 3 s on the pooled connection while the flag is
// interrupted over and over.
TEST_F(WatcherTest, InterruptingAFlagNeverCutsAPooledConnectionAnotherRequestUses) {
  const std::string uid = CreateUnbound("held");
  ASSERT_FALSE(uid.empty());
  // A client of its own, with nothing pooled: GetStreamed opens the connection itself.
  absl::StatusOr<Connection> connection = LoadKubeconfig(sim_->kubeconfig_path());
  ASSERT_TRUE(connection.ok());
  ApiClient client(*connection);
  std::atomic<bool> cancel{false};
  std::string error_body;
  absl::StatusOr<long> listed = client.GetStreamed(
      "/api/v1/nodes", [](absl::string_view) { return true; }, &cancel, absl::Seconds(10),
      &error_body);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(*listed, 200);
  // Both requests below take the handle GetStreamed returned, and its connection.
  absl::StatusOr<HttpResponse> fault = client.Request(
      "POST", "/sim/faults/binding",
      R"({"names":["default/held"],"mode":"hang","seconds":3,"thenBind":true})", absl::Seconds(5));
  ASSERT_TRUE(fault.ok() && fault->code == 200);
  std::atomic<bool> done{false};
  std::thread interrupter([&] {
    while (!done.load()) {
      client.InterruptStreams(&cancel);
      usleep(20 * 1000);
    }
  });
  absl::StatusOr<HttpResponse> bound =
      client.Request("POST", "/api/v1/namespaces/default/pods/held/binding",
                     absl::StrCat(R"({"metadata":{"name":"held","uid":")", uid,
                                  R"("},"target":{"kind":"Node","name":"n1"}})"),
                     absl::Seconds(20));
  done = true;
  interrupter.join();
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(bound->code, 201) << bound->body;
  // Sent once: a cut connection would have made libcurl send the POST again on a new one.
  int64_t binds = 0;
  for (const auto& [key, n] : Requests()) {
    if (absl::StartsWith(key, "BIND")) binds += n;
  }
  EXPECT_EQ(binds, 1);
}

TEST_F(WatcherTest, TheLeaseWatcherFollowsOneLeaseAndRefreshReadsPastTheWatchLag) {
  Admin("/sim/watch-lag", R"({"lag":"30s"})");
  auto lease_body = [](const std::string& name, const std::string& holder, const std::string& rv) {
    return absl::StrCat(R"({"metadata":{"name":")", name, R"(")",
                        rv.empty() ? "" : absl::StrCat(R"(,"resourceVersion":")", rv, R"(")"),
                        R"(},"spec":{"holderIdentity":")", holder,
                        R"(","leaseDurationSeconds":15}})");
  };
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/fitledger/leases";
  absl::StatusOr<HttpResponse> r =
      client_->Request("POST", leases, lease_body("sched", "pod-a_1", ""), absl::Seconds(5));
  ASSERT_TRUE(r.ok() && r->code == 201) << (r.ok() ? r->body : r.status().ToString());
  ASSERT_TRUE(
      client_->Request("POST", leases, lease_body("other", "x_1", ""), absl::Seconds(5))->code ==
      201);
  const std::string rv = nlohmann::json::parse(r->body)["metadata"]["resourceVersion"];

  Mutex mu;
  std::vector<std::string> holders;  // one per state handed over; "-" for absent
  LeaseWatcherOptions options;
  options.namespace_name = "fitledger";
  options.name = "sched";
  LeaseWatcher leases_watcher(client_.get(), options, [&](const std::optional<LeaseRecord>& l) {
    MutexLock lock(&mu);
    holders.push_back(l.has_value() ? l->holder_identity : "-");
  });
  auto last = [&] {
    MutexLock lock(&mu);
    return holders.empty() ? std::string() : holders.back();
  };
  leases_watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return leases_watcher.synced(); }));
  EXPECT_EQ(last(), "pod-a_1");  // a LIST is not delayed by the watch lag

  r = client_->Request("PUT", leases + "/sched", lease_body("sched", "pod-b_2", rv),
                       absl::Seconds(5));
  ASSERT_TRUE(r.ok() && r->code == 200) << (r.ok() ? r->body : r.status().ToString());
  leases_watcher.Refresh();  // the watch would show it 30 s from now
  EXPECT_TRUE(WaitUntil([&] { return last() == "pod-b_2"; }, absl::Seconds(10)));
  leases_watcher.Stop();
  {
    MutexLock lock(&mu);
    for (const std::string& h : holders) EXPECT_NE(h, "x_1");  // never the other Lease
  }
  const std::map<std::string, int64_t> requests = Requests();
  EXPECT_GE(requests.count("LIST leases fieldSelector=metadata.name=sched resourceVersion=\"\"")
                ? requests.at("LIST leases fieldSelector=metadata.name=sched resourceVersion=\"\"")
                : 0,
            2);
  EXPECT_GE(requests.count("WATCH leases fieldSelector=metadata.name=sched"), 1u);
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
  absl::StatusOr<Pod> a = binder_->GetPod("default", "a", Deadline());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->node_name, "n1");
  EXPECT_EQ(binder_->Bind("default", "a", a->uid, "n1", Deadline()).outcome,
            BindOutcome::kAlreadyBound);
  EXPECT_EQ(binder_->Bind("default", "a", a->uid, "n2", Deadline()).outcome,
            BindOutcome::kBoundElsewhere);
  EXPECT_EQ(binder_->Bind("default", "a", "other-uid", "n1", Deadline()).outcome,
            BindOutcome::kPodGone);
  EXPECT_EQ(binder_->Bind("default", "nope", "u", "n1", Deadline()).outcome, BindOutcome::kPodGone);
  EXPECT_TRUE(absl::IsNotFound(binder_->GetPod("default", "nope", Deadline()).status()));
}

// Issue 22, part 3: a 500, 503 or 504 to the binding POST may still be applied by the API
// server. With the pod unbound for now, the outcome is unknown (the ledger keeps the
// assumption), not a definite failure. A 409 or 429 after which the pod is unbound was not
// applied.
TEST_F(WatcherTest, ServerErrorsOnTheBindingPostAreOutcomesUnknown) {
  struct Case {
    int code;
    BindOutcome outcome;
  };
  for (const Case& c : std::vector<Case>{{500, BindOutcome::kUnknown},
                                         {503, BindOutcome::kUnknown},
                                         {504, BindOutcome::kUnknown},
                                         {409, BindOutcome::kRejected},
                                         {429, BindOutcome::kRejected}}) {
    SCOPED_TRACE(c.code);
    const std::string name = absl::StrCat("e", c.code);
    const std::string uid = CreateUnbound(name);
    Admin("/sim/faults/binding",
          absl::StrCat(R"({"names":["default/)", name, R"("],"mode":"error","code":)", c.code,
                       R"(,"times":1})"));
    BindResult r = binder_->Bind("default", name, uid, "n1", Deadline());
    EXPECT_EQ(r.outcome, c.outcome) << r.message;
    EXPECT_THAT(r.message, HasSubstr(absl::StrCat("binding POST answered ", c.code)));
    absl::StatusOr<Pod> pod = binder_->GetPod("default", name, Deadline());
    ASSERT_TRUE(pod.ok());
    EXPECT_EQ(pod->node_name, "");
  }
  // The GET that follows a 500 shows the pod bound (the write did happen): success.
  const std::string uid = CreateUnbound("landed");
  Admin("/sim/faults/binding",
        R"({"names":["default/landed"],"mode":"hang","seconds":0,"thenBind":true,"times":1})");
  EXPECT_EQ(binder_->Bind("default", "landed", uid, "n1", Deadline()).outcome, BindOutcome::kBound);
  Admin("/sim/faults/binding",
        R"({"names":["default/landed"],"mode":"error","code":500,"times":1})");
  EXPECT_EQ(binder_->Bind("default", "landed", uid, "n1", Deadline()).outcome,
            BindOutcome::kAlreadyBound);
}

// Issue 22, part 5: the caller's deadline bounds the POST (a hung one is abandoned: outcome
// unknown), and nothing is sent once it has passed.
TEST_F(WatcherTest, TheDeadlineBoundsTheBindingPost) {
  const std::string uid = CreateUnbound("slow");
  Admin("/sim/faults/binding",
        R"({"names":["default/slow"],"mode":"hang","seconds":3,"thenBind":false,"times":1})");
  const absl::Time start = absl::Now();
  BindResult hung = binder_->Bind("default", "slow", uid, "n1", start + absl::Milliseconds(300));
  EXPECT_EQ(hung.outcome, BindOutcome::kUnknown) << hung.message;
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(2500));  // not the sim's 3 s hang
  BindResult late = binder_->Bind("default", "slow", uid, "n1", absl::Now() - absl::Seconds(1));
  EXPECT_EQ(late.outcome, BindOutcome::kUnreachable);
  EXPECT_THAT(late.message, HasSubstr("not sent"));
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      binder_->GetPod("default", "slow", absl::Now() - absl::Seconds(1)).status()));
}

// A forward proxy on 127.0.0.1 for the proxy-url tests: HTTP CONNECT and SOCKS5 (no auth,
// CONNECT), told apart by the first byte. Records each target as the client asked for it.
class TestProxy {
 public:
  TestProxy() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_fd_, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~TestProxy() {
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    acceptor_.join();
    {
      MutexLock lock(&mu_);
      for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& t : workers_) t.join();
  }
  int port() const { return port_; }
  std::vector<std::string> targets() {
    MutexLock lock(&mu_);
    return targets_;
  }

 private:
  void Accept() {
    while (true) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      MutexLock lock(&mu_);
      open_fds_.push_back(fd);
      workers_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  static bool ReadN(int fd, unsigned char* buf, size_t n) {
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(fd, buf + got, n - got);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  static int Dial(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
    freeaddrinfo(res);
    return fd;
  }
  void Serve(int fd) {
    unsigned char first;
    if (!ReadN(fd, &first, 1)) return;
    std::string host;
    int port = 0;
    int upstream = -1;
    if (first == 5) {  // SOCKS5 (RFC 1928)
      unsigned char n;
      unsigned char methods[255];
      if (!ReadN(fd, &n, 1) || !ReadN(fd, methods, n)) return;
      const unsigned char no_auth[2] = {5, 0};
      if (send(fd, no_auth, 2, MSG_NOSIGNAL) != 2) return;
      unsigned char req[4];
      if (!ReadN(fd, req, 4) || req[1] != 1) return;
      std::string kind;
      if (req[3] == 1) {
        unsigned char ip[4];
        if (!ReadN(fd, ip, 4)) return;
        host = absl::StrCat(ip[0], ".", ip[1], ".", ip[2], ".", ip[3]);
        kind = "ipv4";
      } else if (req[3] == 3) {
        unsigned char len;
        char name[256];
        if (!ReadN(fd, &len, 1) || !ReadN(fd, reinterpret_cast<unsigned char*>(name), len)) return;
        host.assign(name, len);
        kind = "name";
      } else {
        return;
      }
      unsigned char p[2];
      if (!ReadN(fd, p, 2)) return;
      port = p[0] * 256 + p[1];
      {
        MutexLock lock(&mu_);
        targets_.push_back(absl::StrCat("socks5 ", kind, " ", host, ":", port));
      }
      upstream = Dial(host, port);
      const unsigned char ok[10] = {5, static_cast<unsigned char>(upstream < 0 ? 4 : 0), 0, 1};
      if (send(fd, ok, 10, MSG_NOSIGNAL) != 10 || upstream < 0) return;
    } else {  // HTTP CONNECT
      std::string head(1, static_cast<char>(first));
      unsigned char c;
      while (head.find("\r\n\r\n") == std::string::npos && ReadN(fd, &c, 1)) head.push_back(c);
      std::string line = head.substr(0, head.find("\r\n"));
      if (!absl::StartsWith(line, "CONNECT ")) return;
      std::string target = line.substr(8, line.find(' ', 8) - 8);
      {
        MutexLock lock(&mu_);
        targets_.push_back("connect " + target);
      }
      size_t colon = target.rfind(':');
      host = target.substr(0, colon);
      port = std::stoi(target.substr(colon + 1));
      upstream = Dial(host, port);
      std::string reply = upstream < 0 ? "HTTP/1.1 502 Bad Gateway\r\n\r\n"
                                       : "HTTP/1.1 200 Connection established\r\n\r\n";
      if (send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) < 0 || upstream < 0) return;
    }
    {
      MutexLock lock(&mu_);
      open_fds_.push_back(upstream);
    }
    pollfd fds[2] = {{fd, POLLIN, 0}, {upstream, POLLIN, 0}};
    char buf[16384];
    while (poll(fds, 2, -1) > 0) {
      bool done = false;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].revents == 0) continue;
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0 || send(fds[1 - i].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n)
          done = true;
      }
      if (done) break;
    }
    shutdown(fd, SHUT_RDWR);
    shutdown(upstream, SHUT_RDWR);
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  Mutex mu_;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> targets_ ABSL_GUARDED_BY(mu_);
};

class TlsSimTest : public ::testing::Test {
 protected:
  void SetUp() override { StartSim("token: s3cret\n"); }
  // The sim over TLS, client certificates required, plus `extra` config.
  void StartSim(const std::string& extra) {
    sim_.reset();
    certs_dir_ = MakeCerts();
    certs_ = certs_dir_.path();
    std::string yaml =
        absl::StrCat(kNodes, "tls: {certFile: ", certs_, "/server.pem, keyFile: ", certs_,
                     "/server-key.pem, clientCAFile: ", certs_, "/ca.pem}\n", extra);
    absl::StatusOr<std::unique_ptr<SimProcess>> sim = SimProcess::Start(yaml);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
  }
  Connection Good() const {
    Connection c = Tls(sim_->port(), certs_);
    c.token = "s3cret";
    c.client_cert_file = certs_ + "/client.pem";
    c.client_key_file = certs_ + "/client-key.pem";
    return c;
  }
  static absl::StatusOr<HttpResponse> Nodes(ApiClient& client) {
    return client.Request("GET", "/api/v1/nodes", "", absl::Seconds(10));
  }
  TempDir certs_dir_;  // removed (private keys too) after the sim is killed
  std::string certs_;  // certs_dir_.path()
  std::unique_ptr<SimProcess> sim_;
};

TEST_F(TlsSimTest, TlsServerNameIsWhatTheCertificateIsCheckedAgainst) {
  Connection c = Good();
  c.tls_server_name = "localhost";  // in the certificate; the URL's host is 127.0.0.1
  ApiClient client(c);
  absl::StatusOr<HttpResponse> r = Nodes(client);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);

  c.tls_server_name = "kubernetes.default.svc";  // not in the certificate
  ApiClient wrong(c);
  r = Nodes(wrong);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("kubernetes.default.svc"));
}

TEST_F(TlsSimTest, ProxyUrlHttpConnectAndSocks5) {
  TestProxy proxy;
  Connection c = Good();
  c.proxy_url = absl::StrCat("http://127.0.0.1:", proxy.port());
  ApiClient http(c);
  absl::StatusOr<HttpResponse> r = Nodes(http);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_THAT(proxy.targets(),
              ::testing::ElementsAre(absl::StrCat("connect 127.0.0.1:", sim_->port())));

  // socks5: the host name goes to the proxy to resolve, as Go's SOCKS5 dialer does.
  TestProxy socks;
  c.proxy_url = absl::StrCat("socks5://127.0.0.1:", socks.port());
  c.tls_server_name = "localhost";
  ApiClient socks_client(c);
  r = Nodes(socks_client);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  ASSERT_EQ(socks.targets().size(), 1u);
  EXPECT_THAT(socks.targets()[0], HasSubstr(absl::StrCat(":", sim_->port())));

  // With tls-server-name through an HTTP proxy, the tunnel still goes to the server's address.
  TestProxy tunnel;
  c.proxy_url = absl::StrCat("http://127.0.0.1:", tunnel.port());
  ApiClient tunnel_client(c);
  r = Nodes(tunnel_client);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_THAT(tunnel.targets(),
              ::testing::ElementsAre(absl::StrCat("connect 127.0.0.1:", sim_->port())));

  // A proxy that is not there: nothing was sent.
  c.proxy_url = "http://127.0.0.1:1";
  r = Nodes(*std::make_unique<ApiClient>(c));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

// Writes an exec plugin that prints an ExecCredential made by `status_script` (shell that prints
// the status object; $n is the run number) and counts its runs in <dir>/count.
std::string WritePlugin(const std::string& dir, const std::string& status_script) {
  std::string path = dir + "/plugin";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "n=$(( $(cat " << dir << "/count 2>/dev/null || echo 0) + 1 ))\n"
                      << "echo $n > " << dir << "/count\n"
                      << "pem() { awk '{printf \"%s\\\\n\", $0}' \"$1\"; }\n"
                      << "printf '{\"kind\":\"ExecCredential\",\"apiVersion\":"
                         "\"client.authentication.k8s.io/v1\",\"status\":'\n"
                      << status_script << "\nprintf '}'\n";
  chmod(path.c_str(), 0755);
  return path;
}

ExecConfig PluginConfig(const std::string& command) {
  ExecConfig exec;
  exec.command = command;
  exec.api_version = "client.authentication.k8s.io/v1";
  exec.interactive_mode = "Never";
  exec.user = "plugin-user";
  return exec;
}

TEST_F(TlsSimTest, ExecTokenIsRefreshedAndTheRequestRetriedAfterA401) {
  const TempDir temp("exec-token");
  const std::string& dir = temp.path();
  // The first run hands out a token the API server no longer accepts.
  std::string plugin = WritePlugin(dir,
                                   "if [ $n = 1 ]; then printf '{\"token\":\"stale\"}'; "
                                   "else printf '{\"token\":\"s3cret\"}'; fi");
  Connection c = Good();
  c.token.clear();
  c.exec = PluginConfig(plugin);
  ApiClient client(c);
  absl::StatusOr<HttpResponse> r = Nodes(client);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(client.exec_credentials()->runs(), 2u);
  r = Nodes(client);  // cached
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(client.exec_credentials()->runs(), 2u);

  // A plugin whose every token is refused: one retry, then the 401 is the answer.
  const TempDir temp2("exec-token-bad");
  const std::string& dir2 = temp2.path();
  c.exec = PluginConfig(WritePlugin(dir2, "printf '{\"token\":\"never-good\"}'"));
  ApiClient refused(c);
  r = Nodes(refused);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 401);
  EXPECT_EQ(refused.exec_credentials()->runs(), 2u);

  // A plugin that fails: no request is sent, and the error names the plugin.
  const TempDir temp3("exec-token-fail");
  const std::string& dir3 = temp3.path();
  c.exec = PluginConfig(WritePlugin(dir3, "echo 'token expired' >&2; exit 1"));
  ApiClient failing(c);
  r = Nodes(failing);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr("kubernetes API credentials: exec plugin \"" + dir3 + "/plugin\""));
}

TEST_F(TlsSimTest, ExecClientCertificateIsUsedAndARotationEndsOpenWatches) {
  StartSim("");  // the client certificate is the only credential
  const TempDir temp("exec-cert");
  const std::string& dir = temp.path();
  // Runs 1 and 2: the CA-signed client certificate; later: one from an unrelated CA.
  std::string plugin = WritePlugin(
      dir, absl::StrCat("if [ $n -le 2 ]; then p=", certs_, "/client; else p=", certs_,
                        "/other-client; fi\n",
                        "printf '{\"clientCertificateData\":\"%s\",\"clientKeyData\":\"%s\"}' "
                        "\"$(pem $p.pem)\" \"$(pem $p-key.pem)\""));
  Connection c = Good();
  c.client_cert_file.clear();
  c.client_key_file.clear();
  c.exec = PluginConfig(plugin);
  ApiClient client(c);
  absl::StatusOr<HttpResponse> r = Nodes(client);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);

  std::atomic<bool> cancel{false};
  std::atomic<int> lines{0};
  absl::StatusOr<long> stream_code = absl::UnknownError("not ended");
  std::atomic<bool> ended{false};
  std::string error_body;
  std::thread watch([&] {
    stream_code = client.Stream(
        "/api/v1/nodes?watch=true&allowWatchBookmarks=true",
        [&](absl::string_view) {
          ++lines;
          return true;
        },
        &cancel, absl::Seconds(60), 1 << 20, &error_body);
    ended = true;
  });
  EXPECT_TRUE(WaitUntil([&] { return lines.load() >= 1; }));
  // The same certificate again: the watch keeps going.
  ExecCredentialSource* source = client.exec_credentials();
  EXPECT_TRUE(source->RefreshAfterUnauthorized(1, absl::Now()).ok());
  EXPECT_EQ(source->cert_generation(), 0u);
  EXPECT_FALSE(ended.load());
  // A new certificate: the watch ends (a normal end, the caller resumes) to reconnect with it.
  EXPECT_TRUE(source->RefreshAfterUnauthorized(2, absl::Now()).ok());
  EXPECT_EQ(source->cert_generation(), 1u);
  EXPECT_TRUE(WaitUntil([&] { return ended.load(); }, absl::Seconds(10)));
  cancel = true;
  watch.join();
  ASSERT_TRUE(stream_code.ok()) << stream_code.status();
  EXPECT_EQ(*stream_code, 200);
  // And later requests present the new certificate (which this API server does not trust).
  r = Nodes(client);
  EXPECT_FALSE(r.ok() && r->code == 200);
}

TEST(ApiClientTest, ConnectionRefusedIsUnavailable) {
  Connection c;
  c.server = "http://127.0.0.1:1";
  absl::StatusOr<HttpResponse> r = ApiClient(c).Request("GET", "/", "", absl::Seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  ApiClient client(c);
  ApiBinder binder(&client, absl::Seconds(5));
  EXPECT_EQ(binder.Bind("ns", "p", "u", "n", Deadline()).outcome, BindOutcome::kUnreachable);
}

// A TCP socket listening on a loopback port the kernel picks (stored in *port), or -1 after
// reporting a test failure.
int ListenOnLoopback(int backlog, int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ADD_FAILURE() << "cannot listen on loopback";
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

// A keep-alive HTTP server on a loopback port that answers requests in waves: each request
// waits until `wave` requests are waiting, then all of them get `{}`. So a wave needs `wave`
// connections at once, and accepted() says how many the client opened in all.
class WaveHttpServer {
 public:
  explicit WaveHttpServer(int wave) : wave_(wave) {
    fd_ = ListenOnLoopback(256, &port_);
    if (fd_ < 0) return;
    acceptor_ = std::thread([this] {
      for (;;) {
        int client = accept(fd_, nullptr, nullptr);
        if (client < 0) return;
        std::lock_guard<std::mutex> lock(mu_);
        ++accepted_;
        clients_.push_back(client);
        handlers_.emplace_back([this, client] { Serve(client); });
      }
    });
  }
  ~WaveHttpServer() {
    shutdown(fd_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<std::thread> handlers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (int client : clients_) shutdown(client, SHUT_RDWR);
      handlers.swap(handlers_);
    }
    cv_.notify_all();
    for (auto& t : handlers) t.join();
    for (int client : clients_) close(client);
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }
  int accepted() {
    std::lock_guard<std::mutex> lock(mu_);
    return accepted_;
  }

 private:
  void Serve(int client) {
    std::string request;
    char buf[4096];
    for (;;) {
      size_t end;
      while ((end = request.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = read(client, buf, sizeof(buf));
        if (n <= 0) return;
        request.append(buf, n);
      }
      request.erase(0, end + 4);  // GETs: no body
      {
        std::unique_lock<std::mutex> lock(mu_);
        const uint64_t generation = generation_;
        if (++waiting_ == wave_) {
          waiting_ = 0;
          ++generation_;
          cv_.notify_all();
        } else {
          cv_.wait(lock, [&] { return stopping_ || generation_ != generation; });
          if (stopping_) return;
        }
      }
      const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
      if (send(client, response.data(), response.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(response.size())) {
        return;
      }
    }
  }

  const int wave_;
  int fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  int accepted_ = 0;
  int waiting_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::vector<int> clients_;
  std::vector<std::thread> handlers_;
};

// Every bind thread holds a connection while it binds. With as many kept idle as run at once,
// waves of concurrent requests reuse the first wave's connections; with fewer kept, each wave
// closed the surplus and opened it again (a TLS handshake each, against a real API server).
TEST(ApiClientTest, ConcurrentRequestsReuseAsManyConnectionsAsAreKeptIdle) {
  constexpr int kWave = 40;
  auto run_waves = [&](size_t max_idle) {
    WaveHttpServer server(kWave);
    Connection c;
    c.server = absl::StrCat("http://127.0.0.1:", server.port());
    ApiClientOptions options;
    options.max_idle_connections = max_idle;
    ApiClient client(c, options);
    for (int wave = 0; wave < 3; ++wave) {
      std::vector<std::thread> threads;
      std::atomic<int> ok{0};
      for (int i = 0; i < kWave; ++i) {
        threads.emplace_back([&] {
          absl::StatusOr<HttpResponse> r = client.Request("GET", "/x", "", absl::Seconds(30));
          if (r.ok() && r->code == 200 && r->body == "{}") ++ok;
        });
      }
      for (auto& t : threads) t.join();
      EXPECT_EQ(ok.load(), kWave) << "wave " << wave;
    }
    return server.accepted();
  };
  EXPECT_EQ(run_waves(kWave), kWave);
  // Kept to 16: each later wave reopens the 24 closed after the wave before.
  EXPECT_EQ(run_waves(16), kWave + 2 * (kWave - 16));
}

// Answers one request on a loopback port (chosen by the kernel) with `response` as given, byte
// for byte, then closes: for what no real server sends on purpose (lines cut anywhere).
class OneShotHttpServer {
 public:
  explicit OneShotHttpServer(std::string response) : response_(std::move(response)) {
    fd_ = ListenOnLoopback(1, &port_);
    if (fd_ < 0) return;
    thread_ = std::thread([this] {
      int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = read(client, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, n);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        request_ = request;
      }
      size_t sent = 0;
      while (sent < response_.size()) {
        ssize_t n = send(client, response_.data() + sent, response_.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += n;
      }
      shutdown(client, SHUT_WR);
      while (read(client, buf, sizeof(buf)) > 0) {
      }
      close(client);
    });
  }
  ~OneShotHttpServer() {
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }
  // The request's head, once it was read.
  std::string request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return request_;
  }

 private:
  const std::string response_;
  mutable std::mutex mu_;
  std::string request_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

std::string Http200(const std::string& body) {
  return absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ",
                      body.size(), "\r\n\r\n", body);
}

struct Streamed {
  absl::StatusOr<long> code;
  std::vector<std::string> lines;
  uint64_t padding_sum = 0;  // of the kStreamLinePadding bytes after each line
};

Streamed StreamFrom(const OneShotHttpServer& server, size_t max_line_bytes, size_t stop_after) {
  Connection c;
  c.server = absl::StrCat("http://127.0.0.1:", server.port());
  ApiClient client(c);
  Streamed out;
  std::atomic<bool> cancel{false};
  std::string error_body;
  out.code = client.Stream(
      "/api/v1/pods?watch=true",
      [&](absl::string_view line) {
        out.lines.emplace_back(line);
        // The promise to DecodePaddedWatchEvent: these bytes are readable (AddressSanitizer
        // stops the test at a read past the buffer they are in).
        for (size_t i = 0; i < kStreamLinePadding; ++i) {
          out.padding_sum += static_cast<unsigned char>(line.data()[line.size() + i]);
        }
        return out.lines.size() < stop_after;
      },
      &cancel, absl::Seconds(60), max_line_bytes, &error_body);
  return out;
}

TEST(ApiClientTest, StreamLinesCutAnywhereArriveWholeInOrder) {
  // Lines of every size up to several times libcurl's read size (so some are cut by one read's
  // end, some span many reads), CRLF endings, blank lines, and a last line without its newline
  // (an incomplete event: dropped, as a stream cut mid-line). Each is followed by
  // kStreamLinePadding readable bytes (StreamFrom reads them), whether it was handed on in
  // place, as a chunk's last line or completed across reads.
  std::string body;
  std::vector<std::string> expected;
  for (int i = 0; i < 400; ++i) {
    const size_t size = i == 7 ? (600 << 10) : i == 300 ? (300 << 10) : (i * 7919) % 12000 + 1;
    std::string line =
        absl::StrCat("{\"n\":", i, ",\"pad\":\"", std::string(size, 'a' + i % 26), "\"}");
    expected.push_back(line);
    absl::StrAppend(&body, line, i % 5 == 0 ? "\r\n" : "\n", i % 9 == 0 ? "\n\r\n" : "");
  }
  // Then many short lines: some reads are bound to end right after a newline, with no partial
  // line to carry over.
  for (int i = 0; i < 200000; ++i) {
    expected.push_back(absl::StrCat(i % 97));
    absl::StrAppend(&body, expected.back(), "\n");
  }
  absl::StrAppend(&body, "{\"incomplete\":");
  OneShotHttpServer server(Http200(body));
  Streamed out = StreamFrom(server, size_t{8} << 20, SIZE_MAX);
  ASSERT_TRUE(out.code.ok()) << out.code.status();
  EXPECT_EQ(*out.code, 200);
  ASSERT_EQ(out.lines.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(out.lines[i], expected[i]) << "line " << i;
  }
}

// What ApiClient::Stream's padding is for: a watch line decoded in place reads the bytes after
// it (simdjson reads ahead in 64-byte blocks) but decodes only the line, whatever they hold.
TEST(WatchLineTest, APaddedLineDecodesAsItsCopyWhateverFollowsIt) {
  const std::string pod =
      R"({"metadata":{"name":"p","namespace":"default","uid":"u-1","resourceVersion":"17"},)"
      R"("spec":{"nodeName":"worker-1","containers":[{"name":"c","resources":{"requests":)"
      R"({"cpu":"250m","memory":"64Mi"}}}]},"status":{"phase":"Running"}})";
  const std::vector<std::string> lines = {
      absl::StrCat(R"({"type":"ADDED","object":)", pod, "}"),
      absl::StrCat(R"({"type":"DELETED","object":)", pod, "}"),
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"42","annotations":)"
      R"({"k8s.io/initial-events-end":"true"}}}})",
      R"({"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}})",
      // Cut short: what follows must not complete it.
      absl::StrCat(R"({"type":"ADDED","object":)", pod.substr(0, pod.size() / 2)),
      R"({"type":"ADDED","object":{"metadata":{"name":"p","uid":)",
      R"({"type":"ADDED")",
      R"({"type":"NOPE","object":{}})",
      "not json",
      "",
  };
  const std::vector<std::string> afters = {
      std::string(kWatchLinePadding, '\0'),
      std::string(kWatchLinePadding, '"'),
      std::string(kWatchLinePadding, '}'),
      absl::StrCat(R"("u-2"}},"spec":{}}})", std::string(kWatchLinePadding, ' ')),
      absl::StrCat("\n", lines[0]),
  };
  for (const std::string& line : lines) {
    for (ObjectKind kind : {ObjectKind::kPod, ObjectKind::kNode, ObjectKind::kLease}) {
      std::string rv_copy;
      absl::StatusOr<WatchEvent> copy = DecodeWatchEvent(kind, line, &rv_copy);
      for (const std::string& after : afters) {
        ASSERT_GE(after.size(), kWatchLinePadding);
        const std::string buffer = line + after;
        std::string rv_padded;
        absl::StatusOr<WatchEvent> padded =
            DecodePaddedWatchEvent(kind, absl::string_view(buffer.data(), line.size()), &rv_padded);
        SCOPED_TRACE(
            absl::StrCat("line ", line, " kind ", static_cast<int>(kind), " followed by ", after));
        ASSERT_EQ(padded.status(), copy.status());
        EXPECT_EQ(rv_padded, rv_copy);
        if (!copy.ok()) continue;
        EXPECT_EQ(padded->type, copy->type);
        EXPECT_EQ(padded->resource_version, copy->resource_version);
        EXPECT_EQ(padded->initial_events_end, copy->initial_events_end);
        EXPECT_EQ(padded->deleted_key, copy->deleted_key);
        EXPECT_EQ(padded->error_code, copy->error_code);
        EXPECT_EQ(padded->error_message, copy->error_message);
        ASSERT_EQ(padded->pod.has_value(), copy->pod.has_value());
        if (copy->pod.has_value()) {
          EXPECT_EQ(padded->pod->uid, copy->pod->uid);
          EXPECT_EQ(padded->pod->node_name, copy->pod->node_name);
          absl::StatusOr<PodRecord> a = ToPodRecord(*padded->pod), b = ToPodRecord(*copy->pod);
          ASSERT_EQ(a.ok(), b.ok());
          if (a.ok()) {
            EXPECT_EQ(a->requests, b->requests);
          }
        }
        ASSERT_EQ(padded->node.has_value(), copy->node.has_value());
        if (copy->node.has_value()) {
          EXPECT_EQ(padded->node->name, copy->node->name);
        }
        ASSERT_EQ(padded->lease.has_value(), copy->lease.has_value());
        if (copy->lease.has_value()) {
          EXPECT_EQ(padded->lease->name, copy->lease->name);
          EXPECT_EQ(padded->lease->holder_identity, copy->lease->holder_identity);
        }
      }
    }
  }
  // The cases decode as they should (the comparison above is not between two failures only).
  absl::StatusOr<WatchEvent> added = DecodeWatchEvent(ObjectKind::kPod, lines[0]);
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_TRUE(added->pod.has_value());
  EXPECT_EQ(added->pod->uid, "u-1");
  EXPECT_EQ(added->resource_version, "17");
  EXPECT_TRUE(DecodeWatchEvent(ObjectKind::kPod, lines[2]).ok());
  EXPECT_FALSE(DecodeWatchEvent(ObjectKind::kPod, lines[4]).ok());
  EXPECT_FALSE(DecodeWatchEvent(ObjectKind::kPod, lines[8]).ok());
}

TEST(ApiClientTest, StreamStopsWhenTheCallerSaysSo) {
  std::string body;
  for (int i = 0; i < 1000; ++i) absl::StrAppend(&body, "{\"n\":", i, "}\n");
  OneShotHttpServer server(Http200(body));
  Streamed out = StreamFrom(server, size_t{8} << 20, 3);
  EXPECT_THAT(out.lines, ::testing::ElementsAre("{\"n\":0}", "{\"n\":1}", "{\"n\":2}"));
}

std::string Framed(absl::string_view bytes) {
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  const char length[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                          static_cast<char>(n >> 8), static_cast<char>(n)};
  return absl::StrCat(absl::string_view(length, 4), bytes);
}

std::string Http200Protobuf(const std::string& body) {
  return absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.kubernetes.protobuf;stream=watch\r\n"
      "Transfer-Encoding: chunked\r\n\r\n",
      // One HTTP chunk per 997 bytes: frames and even their 4-byte lengths are cut by chunks
      // and by reads.
      [&] {
        std::string chunked;
        for (size_t at = 0; at < body.size(); at += 997) {
          const absl::string_view piece = absl::string_view(body).substr(at, 997);
          absl::StrAppend(&chunked, absl::Hex(piece.size()), "\r\n", piece, "\r\n");
        }
        return absl::StrCat(chunked, "0\r\n\r\n");
      }());
}

// A protobuf watch (Content-Type application/vnd.kubernetes.protobuf;stream=watch) is split into
// its length-prefixed frames, whatever cuts them; the caller learns the format.
TEST(ApiClientTest, ProtobufFramesCutAnywhereArriveWholeInOrder) {
  std::string body;
  std::vector<std::string> expected;
  for (int i = 0; i < 3000; ++i) {
    const size_t size = i == 11 ? (700 << 10) : i == 2000 ? (300 << 10) : (i * 7919) % 5000;
    std::string frame(size, static_cast<char>(i % 251));  // any bytes, '\n' and '\0' too
    if (!frame.empty()) frame[0] = static_cast<char>(i & 0xff);
    absl::StrAppend(&body, Framed(frame));
    if (!frame.empty()) expected.push_back(frame);  // an empty frame is not handed on
  }
  absl::StrAppend(&body, absl::string_view("\0\0\1", 3));  // a cut length: dropped
  OneShotHttpServer server(Http200Protobuf(body));
  Connection c;
  c.server = absl::StrCat("http://127.0.0.1:", server.port());
  ApiClient client(c);
  std::vector<std::string> frames;
  std::string error_body;
  StreamFormat format = StreamFormat::kJsonLines;
  absl::StatusOr<long> code = client.Stream(
      "/api/v1/pods?watch=true",
      [&](absl::string_view frame) {
        EXPECT_EQ(format, StreamFormat::kProtobufFrames);
        frames.emplace_back(frame);
        return true;
      },
      nullptr, absl::Seconds(60), size_t{1} << 20, &error_body,
      "application/vnd.kubernetes.protobuf, application/json", &format);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 200);
  EXPECT_EQ(format, StreamFormat::kProtobufFrames);
  ASSERT_EQ(frames.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(frames[i], expected[i]) << "frame " << i;
}

TEST(ApiClientTest, AProtobufFrameLongerThanTheLimitIsResourceExhausted) {
  const std::string body = absl::StrCat(Framed("first"), Framed(std::string(2 << 20, 'x')));
  OneShotHttpServer server(Http200Protobuf(body));
  Connection c;
  c.server = absl::StrCat("http://127.0.0.1:", server.port());
  ApiClient client(c);
  std::vector<std::string> frames;
  std::string error_body;
  absl::StatusOr<long> code = client.Stream(
      "/api/v1/pods?watch=true",
      [&](absl::string_view frame) {
        frames.emplace_back(frame);
        return true;
      },
      nullptr, absl::Seconds(60), size_t{1} << 20, &error_body,
      "application/vnd.kubernetes.protobuf");
  EXPECT_TRUE(absl::IsResourceExhausted(code.status())) << code.status();
  EXPECT_THAT(frames, ::testing::ElementsAre("first"));
}

TEST(ApiClientTest, AStreamLineLongerThanTheLimitIsResourceExhausted) {
  std::string body = absl::StrCat("{\"n\":0}\n{\"big\":\"", std::string(2 << 20, 'x'), "\"}\n");
  OneShotHttpServer server(Http200(body));
  Streamed out = StreamFrom(server, size_t{1} << 20, SIZE_MAX);
  EXPECT_TRUE(absl::IsResourceExhausted(out.code.status())) << out.code.status();
  EXPECT_THAT(out.lines, ::testing::ElementsAre("{\"n\":0}"));
}

// One gzip member (RFC 1952) of `bytes`.
std::string GzipMember(absl::string_view bytes) {
  z_stream z{};
  EXPECT_EQ(
      deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
      Z_OK);
  std::string out(deflateBound(&z, bytes.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

// A chunked 200 with a Content-Encoding, one HTTP chunk per 997 bytes.
std::string Http200Encoded(absl::string_view encoding, absl::string_view body) {
  std::string chunked;
  for (size_t at = 0; at < body.size(); at += 997) {
    const absl::string_view piece = body.substr(at, 997);
    absl::StrAppend(&chunked, absl::Hex(piece.size()), "\r\n", piece, "\r\n");
  }
  return absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: ",
                      encoding, "\r\nTransfer-Encoding: chunked\r\n\r\n", chunked, "0\r\n\r\n");
}

// kube-apiserver's WatchList answer when gzip is accepted: one gzip member per flush
// (apiserver/pkg/endpoints/handlers/watch.go, perFlushGzipWriter). Every member is read, lines
// cut by members and by chunks arrive whole, and the stream asks for gzip only. (libcurl's
// own decoder stopped at the second member: upstream_TestWatchListStreamsReadEveryGzipMember.)
TEST(ApiClientTest, AGzipBodyOfManyMembersArrivesWholeInOrder) {
  std::string plain;
  std::vector<std::string> expected;
  for (int i = 0; i < 3000; ++i) {
    expected.push_back(absl::StrCat("{\"n\":", i, ",\"pad\":\"",
                                    std::string((i * 7919) % 3000, 'a' + i % 26), "\"}"));
    absl::StrAppend(&plain, expected.back(), "\n");
  }
  // Members of every size: one line, many lines, cut mid-line, and one larger than the
  // decoder's 256 KiB output buffer.
  std::string body;
  size_t at = 0;
  for (size_t k = 0; at < plain.size(); ++k) {
    const size_t size = k == 3 ? (700 << 10) : (k * 104729) % 20000 + 1;
    absl::StrAppend(&body, GzipMember(absl::string_view(plain).substr(at, size)));
    at += size;
  }
  OneShotHttpServer server(Http200Encoded("gzip", body));
  Streamed out = StreamFrom(server, size_t{8} << 20, SIZE_MAX);
  ASSERT_TRUE(out.code.ok()) << out.code.status();
  EXPECT_EQ(*out.code, 200);
  ASSERT_EQ(out.lines.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(out.lines[i], expected[i]) << i;
  EXPECT_THAT(absl::AsciiStrToLower(server.request()),
              ::testing::HasSubstr("\r\naccept-encoding: gzip\r\n"));
}

TEST(ApiClientTest, ADamagedGzipBodyIsUnavailableAfterTheLinesBeforeIt) {
  std::string body = GzipMember("{\"n\":0}\n");
  // A gzip header (magic, deflate, no flags, mtime, xfl, os), then bytes that are no deflate
  // block (a stored block whose length and its complement disagree).
  const char header[] = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, 3};
  absl::StrAppend(&body, absl::string_view(header, sizeof(header)),
                  absl::string_view("\x01\x05\x00\x05\x00hello", 10));
  OneShotHttpServer server(Http200Encoded("gzip", body));
  Streamed out = StreamFrom(server, size_t{8} << 20, SIZE_MAX);
  EXPECT_TRUE(absl::IsUnavailable(out.code.status())) << out.code.status();
  EXPECT_THAT(std::string(out.code.status().message()), ::testing::HasSubstr("gzip"));
  EXPECT_THAT(out.lines, ::testing::ElementsAre("{\"n\":0}"));
}

TEST(ApiClientTest, AnEncodingNotAskedForIsUnavailable) {
  OneShotHttpServer server(Http200Encoded("br", "{\"n\":0}\n"));
  Streamed out = StreamFrom(server, size_t{8} << 20, SIZE_MAX);
  EXPECT_TRUE(absl::IsUnavailable(out.code.status())) << out.code.status();
  EXPECT_THAT(std::string(out.code.status().message()),
              ::testing::HasSubstr("unsupported Content-Encoding \"br\""));
  EXPECT_TRUE(out.lines.empty());
}

// kubeconfig disable-compression: no gzip asked for, so none to decode.
TEST(ApiClientTest, DisableCompressionAsksForNoEncoding) {
  OneShotHttpServer server(Http200("{\"n\":0}\n"));
  Connection c;
  c.server = absl::StrCat("http://127.0.0.1:", server.port());
  c.disable_compression = true;
  ApiClient client(c);
  std::atomic<bool> cancel{false};
  std::string error_body;
  std::vector<std::string> lines;
  absl::StatusOr<long> code = client.Stream(
      "/api/v1/pods?watch=true",
      [&](absl::string_view line) {
        lines.emplace_back(line);
        return true;
      },
      &cancel, absl::Seconds(60), size_t{1} << 20, &error_body);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(lines, ::testing::ElementsAre("{\"n\":0}"));
  EXPECT_THAT(absl::AsciiStrToLower(server.request()),
              ::testing::Not(::testing::HasSubstr("accept-encoding")));
}

// The detector's rule: admission rejections (OutOf*, and the device manager's
// UnexpectedAdmissionError) of the named schedulers' pods; any scheduler's when none is named.
TEST(IsKubeletRejectionTest, AdmissionRejectionsOfFitledgersSchedulersOnly) {
  auto pod = [](std::string phase, std::string reason, std::string scheduler) {
    Pod p;
    p.phase = std::move(phase);
    p.status_reason = std::move(reason);
    p.scheduler_name = std::move(scheduler);
    return p;
  };
  const std::vector<std::string> ours = {"fitledger-scheduler", "gpu-scheduler"};
  EXPECT_TRUE(IsKubeletRejection(pod("Failed", "OutOfcpu", "fitledger-scheduler"), ours));
  EXPECT_TRUE(IsKubeletRejection(pod("Failed", "OutOfexample.com/gpu", "gpu-scheduler"), ours));
  EXPECT_TRUE(IsKubeletRejection(pod("Failed", "UnexpectedAdmissionError", "gpu-scheduler"), ours));
  EXPECT_FALSE(IsKubeletRejection(pod("Failed", "OutOfcpu", "default-scheduler"), ours));
  EXPECT_FALSE(IsKubeletRejection(pod("Failed", "Evicted", "fitledger-scheduler"), ours));
  EXPECT_FALSE(IsKubeletRejection(pod("Running", "", "fitledger-scheduler"), ours));
  EXPECT_TRUE(IsKubeletRejection(pod("Failed", "OutOfcpu", "default-scheduler"), {}));
  EXPECT_TRUE(IsKubeletRejection(pod("Failed", "UnexpectedAdmissionError", "x"), {}));
}

}  // namespace
}  // namespace fitledger::kube
