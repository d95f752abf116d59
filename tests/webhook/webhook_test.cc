// The webhook's verbs over a fake Backend (no gRPC): answers by candidate position, the status
// codes of failures per verb, answers that come later from other threads, and probes.
#include "webhook/webhook.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "webhook/http_server.h"

namespace fitledger::webhook {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Answers as told; with `later`, from its own thread (in the order the calls came).
class FakeBackend final : public Backend {
 public:
  ~FakeBackend() override { StopLater(); }

  void Filter(const Pod& pod, absl::Span<const absl::string_view> candidates,
              FilterDone done) override {
    absl::StatusOr<FilterResult> answer = FilterResult();
    if (!filter_status.ok()) {
      answer = filter_status;
    } else {
      answer->fits = filter_fits;
      answer->failed = filter_failed;
      answer->unresolvable = filter_unresolvable;
    }
    if (echo_pod_in_failures && answer.ok()) {
      // Every candidate fails with the pod's name: which request an answer belongs to is visible.
      const std::string& name = answer->texts.emplace_back(pod.name);
      for (size_t i = 0; i < candidates.size(); ++i) answer->failed.emplace_back(i, name);
    }
    Run([answer = std::move(answer), done = std::move(done)]() mutable {
      done(std::move(answer));
    });
  }
  void Prioritize(const Pod&, absl::Span<const absl::string_view>, PrioritizeDone done) override {
    Run([answer = prioritize_answer, done = std::move(done)]() mutable {
      done(std::move(answer));
    });
  }
  void Bind(const BindArgs& args, StatusDone done) override {
    last_bind = args;
    Run([status = bind_status, done = std::move(done)]() mutable { done(status); });
  }
  void Preempt(const PreemptArgs&, PreemptDone done) override {
    Run([status = preempt_status, done = std::move(done)]() mutable {
      if (!status.ok()) return done(status);
      done(NodeVictims());
    });
  }
  void CheckReady(StatusDone done) override {
    Run([status = ready, done = std::move(done)]() mutable { done(status); });
  }

  void StartLater() {
    later_ = true;
    thread_ = std::thread([this] {
      for (;;) {
        absl::AnyInvocable<void()> work;
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
          if (queue_.empty()) return;
          work = std::move(queue_.front());
          queue_.pop_front();
        }
        work();
      }
    });
  }
  void StopLater() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Filter's answer: filter_status if not OK, else these (views into static text).
  absl::Status filter_status;
  std::vector<size_t> filter_fits;
  std::vector<std::pair<size_t, absl::string_view>> filter_failed;
  std::vector<std::pair<size_t, absl::string_view>> filter_unresolvable;
  bool echo_pod_in_failures = false;
  PrioritizeAnswer prioritize_answer;
  absl::Status bind_status;
  absl::Status preempt_status;
  absl::Status ready;
  BindArgs last_bind;

 private:
  void Run(absl::AnyInvocable<void()> work) {
    if (!later_) return work();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_all();
  }

  bool later_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

class WebhookTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) backend_.StartLater();
    server_ = std::make_unique<HttpServer>(
        HttpServerOptions{}, [this](HttpCall call) { webhook_.Serve(std::move(call)); },
        &Webhook::FormatError);
    absl::StatusOr<int> port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    client_->set_read_timeout(20);
  }
  void TearDown() override {
    server_->Stop();
    backend_.StopLater();
  }

  httplib::Result Post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }

  FakeBackend backend_;
  MetricsRegistry registry_;
  Metrics metrics_{&registry_};
  Webhook webhook_{"/", &backend_, &metrics_, [this] { return registry_.Render(); }};
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

constexpr char kArgs[] =
    R"({"Pod":{"metadata":{"name":"p","namespace":"ns"}},"NodeNames":["w0","w1","w\u0032","w3"]})";

TEST_P(WebhookTest, FilterAnswersByPositionAndDropsPositionsOutOfRange) {
  backend_.filter_fits = {1, 2, 7};
  backend_.filter_failed = {{0, "Insufficient cpu"}, {9, "nowhere"}};
  backend_.filter_unresolvable = {{3, "Insufficient example.com/gpu"}};
  httplib::Result r = Post("/filter", kArgs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"({"NodeNames":["w1","w2"],"FailedNodes":{"w0":"Insufficient cpu"},)"
                     R"("FailedAndUnresolvableNodes":{"w3":"Insufficient example.com/gpu"},)"
                     R"("Error":""})");
}

// kube-scheduler adds an extender's score to the nodes it lists and nothing to the others, so
// the webhook sends every score less the lowest candidate's and leaves out the candidates at it.
TEST_P(WebhookTest, PrioritizeSendsTheScoresAboveTheLowest) {
  backend_.prioritize_answer.scores = {{0, 7}, {1, 3}, {2, 9}, {3, 3}, {8, 1}};
  httplib::Result r = Post("/prioritize", kArgs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"([{"Host":"w0","Score":4},{"Host":"w2","Score":6}])");

  // A candidate the backend leaves out scores 0: nothing to take off the others.
  backend_.prioritize_answer.scores = {{0, 7}, {2, 0}, {3, 1}};
  r = Post("/prioritize", kArgs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"([{"Host":"w0","Score":7},{"Host":"w3","Score":1}])");

  // Every candidate at the same score: an empty list, as a score of 0 for each.
  backend_.prioritize_answer.scores = {{0, 10}, {1, 10}, {2, 10}, {3, 10}};
  r = Post("/prioritize", kArgs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "[]");
}

TEST(ShiftPrioritiesTest, KeepsEveryDifferenceBetweenCandidates) {
  const std::vector<absl::string_view> names = {"a", "b", "c", "d", "e"};
  std::vector<int64_t> totals;
  for (const std::vector<std::pair<size_t, int64_t>>& scores :
       std::vector<std::vector<std::pair<size_t, int64_t>>>{
           {{0, 5}, {1, 2}, {2, 8}, {3, 2}, {4, 10}},
           {{4, 0}, {3, 0}, {2, 0}, {1, 0}, {0, 0}},
           {{1, 6}, {3, 4}},  // a, c, e unlisted: 0
           {{0, -3}, {1, 2}, {2, 2}, {3, 2}, {4, 2}},
           {{0, -3}, {1, 2}},                                 // c, d, e unlisted: above a
           {{0, 2}, {0, 2}, {1, 3}, {2, 3}, {3, 3}, {4, 3}},  // a listed twice: 4, the most
           {{0, 4}, {1, 4}, {2, 4}, {3, 4}, {4, 9}, {7, 1}},  // position 7: no such candidate
       }) {
    std::vector<std::pair<absl::string_view, int64_t>> out;
    ShiftPriorities(scores, names, &totals, &out);
    // What kube-scheduler adds to each candidate, before and after: the same up to one offset.
    std::vector<int64_t> before(names.size(), 0), after(names.size(), 0);
    for (const auto& [i, score] : scores) {
      if (i < names.size()) before[i] += score;
    }
    std::vector<absl::string_view> listed;
    for (const auto& [host, score] : out) {
      EXPECT_GT(score, 0) << host;
      after[host[0] - 'a'] += score;
      listed.push_back(host);
    }
    for (size_t i = 1; i < names.size(); ++i) {
      EXPECT_EQ(before[i] - before[0], after[i] - after[0]) << names[i];
    }
    EXPECT_EQ(*std::min_element(after.begin(), after.end()), 0);
    EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));  // once each, in order
    EXPECT_EQ(std::adjacent_find(listed.begin(), listed.end()), listed.end());
  }
}

TEST(ShiftPrioritiesTest, SumsPastInt64Saturate) {
  const std::vector<absl::string_view> names = {"a", "b"};
  std::vector<int64_t> totals;
  std::vector<std::pair<absl::string_view, int64_t>> out;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  ShiftPriorities({{0, kMax}, {0, kMax}, {1, kMin}, {1, kMin}}, names, &totals, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, "a");
  EXPECT_EQ(out[0].second, kMax);
}

TEST_P(WebhookTest, FailuresHaveEachVerbsStatusCode) {
  backend_.filter_status = absl::UnavailableError("not synced");
  httplib::Result r = Post("/filter", kArgs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);  // ExtenderFilterResult carries the Error
  EXPECT_EQ(r->body, R"({"Error":"fitledger filter: UNAVAILABLE: not synced"})");

  backend_.bind_status = absl::FailedPreconditionError("no longer fits");
  r = Post("/bind", R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"w1"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"({"Error":"fitledger bind: FAILED_PRECONDITION: no longer fits"})");
  EXPECT_EQ(backend_.last_bind.pod_uid, "u");
  EXPECT_EQ(backend_.last_bind.node, "w1");

  backend_.prioritize_answer.status = absl::UnavailableError("down");
  r = Post("/prioritize", kArgs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);  // HostPriorityList has no Error field
  backend_.prioritize_answer.status = absl::InvalidArgumentError("Pod: bad");
  r = Post("/prioritize", kArgs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, R"({"Error":"fitledger prioritize: INVALID_ARGUMENT: Pod: bad"})");

  backend_.preempt_status = absl::UnavailableError("down");
  r = Post("/preempt", R"({"Pod":{"metadata":{"name":"p"}}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(registry_.Render(), HasSubstr("fitledger_webhook_backend_errors_total{verb=\"bind\","
                                            "code=\"FAILED_PRECONDITION\"} 1\n"));
}

TEST_P(WebhookTest, ReadyzAsksTheBackendAndHealthzDoesNot) {
  httplib::Result r = client_->Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  backend_.ready = absl::UnavailableError("fitledger-server is shutting down");
  r = client_->Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "not ready: fitledger-server is shutting down\n");
  r = client_->Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok\n");
}

// Clients at once, each with its own candidates (some escaped, which the decoder unescapes into
// a buffer the next request on that thread reuses): every answer names the asker's candidates.
TEST_P(WebhookTest, ConcurrentRequestsEachGetTheirOwnAnswer) {
  backend_.echo_pod_in_failures = true;
  constexpr int kClients = 6;
  constexpr int kRequests = 30;
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", server_->port());
      client.set_read_timeout(20);
      for (int r = 0; r < kRequests; ++r) {
        const std::string pod = absl::StrCat("p", c, "-", r);
        const std::string name = absl::StrCat("n", c, "-", r);
        const std::string body =
            absl::StrCat(R"({"Pod":{"metadata":{"name":")", pod, R"("}},"NodeNames":["\u006e)",
                         name.substr(1), R"(",")", name, "-b\"]}");
        httplib::Result res = client.Post("/filter", body, "application/json");
        const std::string want =
            absl::StrCat(R"({"NodeNames":[],"FailedNodes":{")", name, R"(":")", pod, R"(",")", name,
                         R"(-b":")", pod, R"("},"FailedAndUnresolvableNodes":{},"Error":""})");
        if (res && res->status == 200 && res->body == want) {
          ++good;
        } else {
          ADD_FAILURE() << (res ? res->body : "no reply") << " want " << want;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(good.load(), kClients * kRequests);
}

INSTANTIATE_TEST_SUITE_P(AnswerNowOrLater, WebhookTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Later" : "Now";
                         });

}  // namespace
}  // namespace fitledger::webhook
