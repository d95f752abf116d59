#include "server/model/pod.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger {
namespace {

using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

QuantityList Q(std::vector<std::pair<std::string, std::string>> items) {
  QuantityList out;
  for (auto& [name, text] : items) {
    absl::StatusOr<Quantity> q = Quantity::Parse(text);
    EXPECT_TRUE(q.ok()) << q.status();
    out.emplace_back(name, q.value_or(Quantity()));
  }
  return out;
}

Container C(std::string name, std::vector<std::pair<std::string, std::string>> requests,
            bool restartable = false) {
  Container c;
  c.name = std::move(name);
  c.requests = Q(std::move(requests));
  c.restartable = restartable;
  return c;
}

struct Case {
  std::string name;
  Pod pod;
  RequestBasis basis = RequestBasis::kSpec;
  int64_t milli_cpu;
  int64_t memory_bytes;
  std::vector<std::pair<std::string, int64_t>> scalars = {};
  int64_t ephemeral_storage_bytes = 0;
};

constexpr int64_t kMi = 1024 * 1024;

std::vector<Case> Cases() {
  std::vector<Case> cases;
  {
    Case c{"containers are summed", {}, RequestBasis::kSpec, 900, 384 * kMi};
    c.pod.containers = {C("a", {{"cpu", "400m"}, {"memory", "128Mi"}}),
                        C("b", {{"cpu", "500m"}, {"memory", "256Mi"}})};
    cases.push_back(c);
  }
  {
    // Kubernetes docs, "Init containers": the effective init request is the highest init
    // request; the pod's is the higher of that and the sum of app containers.
    Case c{"init container peak wins", {}, RequestBasis::kSpec, 2000, 100 * kMi};
    c.pod.init_containers = {C("init1", {{"cpu", "2"}}), C("init2", {{"memory", "100Mi"}})};
    c.pod.containers = {C("app", {{"cpu", "500m"}, {"memory", "50Mi"}})};
    cases.push_back(c);
  }
  {
    // Sidecar docs (KEP-753): a restartable init container adds to the steady sum and stays
    // running while later init containers run.
    Case c{"sidecar adds to steady sum", {}, RequestBasis::kSpec, 1500, 0};
    c.pod.init_containers = {C("sidecar", {{"cpu", "500m"}}, true), C("init", {{"cpu", "700m"}})};
    c.pod.containers = {C("app", {{"cpu", "1"}})};
    cases.push_back(c);
  }
  {
    Case c{"init after sidecar peaks with it", {}, RequestBasis::kSpec, 4000, 0};
    c.pod.init_containers = {C("sidecar", {{"cpu", "1"}}, true), C("migrate", {{"cpu", "3"}})};
    c.pod.containers = {C("app", {{"cpu", "1"}})};
    cases.push_back(c);
  }
  {
    Case c{"init before sidecar does not include it", {}, RequestBasis::kSpec, 3000, 0};
    c.pod.init_containers = {C("migrate", {{"cpu", "3"}}), C("sidecar", {{"cpu", "1"}}, true)};
    c.pod.containers = {C("app", {{"cpu", "1"}})};
    cases.push_back(c);
  }
  {
    // Kubernetes docs, "Pod Overhead": two containers of 500m/100Mi + overhead 250m/120Mi.
    Case c{"overhead is added", {}, RequestBasis::kSpec, 1250, 320 * kMi};
    c.pod.containers = {C("a", {{"cpu", "500m"}, {"memory", "100Mi"}}),
                        C("b", {{"cpu", "500m"}, {"memory", "100Mi"}})};
    c.pod.overhead = Q({{"cpu", "250m"}, {"memory", "120Mi"}});
    cases.push_back(c);
  }
  {
    Case c{"pod-level resources replace cpu and memory",
           {},
           RequestBasis::kSpec,
           2100,
           64 * kMi,
           {{"example.com/gpu", 2}}};
    c.pod.containers = {C("a", {{"cpu", "500m"}, {"memory", "1Gi"}, {"example.com/gpu", "2"}})};
    c.pod.pod_requests = Q({{"cpu", "2"}, {"memory", "64Mi"}});
    c.pod.overhead = Q({{"cpu", "100m"}});
    cases.push_back(c);
  }
  {
    Case c{"pod-level only sets what it names", {}, RequestBasis::kSpec, 3000, 1024 * kMi};
    c.pod.containers = {C("a", {{"cpu", "500m"}, {"memory", "1Gi"}})};
    c.pod.pod_requests = Q({{"cpu", "3"}});
    cases.push_back(c);
  }
  {
    Case c{"limit without request defaults the request", {}, RequestBasis::kSpec, 700, 256 * kMi};
    Container a = C("a", {{"memory", "256Mi"}});
    a.limits = Q({{"cpu", "700m"}, {"memory", "1Gi"}});
    c.pod.containers = {a};
    cases.push_back(c);
  }
  {
    Case c{"tiny requests are summed exactly and rounded once", {}, RequestBasis::kSpec, 1, 0};
    c.pod.containers = {C("a", {{"cpu", "500u"}}), C("b", {{"cpu", "500u"}})};
    cases.push_back(c);
  }
  {
    Case c{"half a millicore counts as one", {}, RequestBasis::kSpec, 1, 0};
    c.pod.containers = {C("a", {{"cpu", "0.5m"}})};
    cases.push_back(c);
  }
  {
    Case c{
        "extended, hugepages and ephemeral storage",          {},        RequestBasis::kSpec, 0, 0,
        {{"example.com/gpu", 3}, {"hugepages-2Mi", 4 * kMi}}, 1000000000};
    c.pod.containers = {
        C("a", {{"example.com/gpu", "1"}, {"hugepages-2Mi", "4Mi"}, {"ephemeral-storage", "1G"}}),
        C("b", {{"example.com/gpu", "2"}})};
    cases.push_back(c);
  }
  {
    Case c{"resized pod on a node counts the larger allocation",
           {},
           RequestBasis::kSpecAndStatus,
           700,
           256 * kMi};
    c.pod.containers = {C("a", {{"cpu", "500m"}, {"memory", "256Mi"}})};
    ContainerStatus s;
    s.name = "a";
    s.allocated_resources = Q({{"cpu", "700m"}, {"memory", "128Mi"}});
    s.status_requests = Q({{"cpu", "600m"}});
    c.pod.container_statuses = {s};
    cases.push_back(c);
  }
  {
    Case c{"incoming pod counts at its spec", {}, RequestBasis::kSpec, 500, 256 * kMi};
    c.pod.containers = {C("a", {{"cpu", "500m"}, {"memory", "256Mi"}})};
    ContainerStatus s;
    s.name = "a";
    s.allocated_resources = Q({{"cpu", "700m"}});
    c.pod.container_statuses = {s};
    cases.push_back(c);
  }
  {
    Case c{"no containers requests nothing", {}, RequestBasis::kSpec, 0, 0};
    cases.push_back(c);
  }
  {
    Case c{"unknown resource names are ignored", {}, RequestBasis::kSpec, 100, 0};
    c.pod.containers = {C("a", {{"cpu", "100m"}, {"nvidia", "1"}})};
    cases.push_back(c);
  }
  return cases;
}

TEST(PodRequestsTest, FollowsNodeResourcesFitRules) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Resources> r = PodRequests(c.pod, c.basis);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->milli_cpu, c.milli_cpu);
    EXPECT_EQ(r->memory_bytes, c.memory_bytes);
    EXPECT_EQ(r->ephemeral_storage_bytes, c.ephemeral_storage_bytes);
    EXPECT_EQ(r->pods, 1);
    EXPECT_EQ(r->scalars, c.scalars);
  }
}

TEST(PodRequestsTest, NegativeRequestIsInvalid) {
  Pod pod;
  pod.namespace_name = "ns";
  pod.name = "p";
  pod.containers = {C("a", {{"cpu", "-1"}})};
  EXPECT_THAT(
      PodRequests(pod, RequestBasis::kSpec),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ns/p: negative request for cpu")));
}

TEST(PodRequestsTest, OverflowingSumIsInvalid) {
  Pod pod;
  pod.containers = {C("a", {{"memory", "5Ei"}}), C("b", {{"memory", "5Ei"}})};
  EXPECT_THAT(PodRequests(pod, RequestBasis::kSpec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("range")));
}

}  // namespace
}  // namespace fitledger
