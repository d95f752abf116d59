#include "model/pod.h"

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
    s.has_resources = true;
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

ContainerStatus S(std::string name, std::vector<std::pair<std::string, std::string>> requests,
                  std::vector<std::pair<std::string, std::string>> allocated = {}) {
  ContainerStatus s;
  s.name = std::move(name);
  s.has_resources = true;
  s.status_requests = Q(std::move(requests));
  s.allocated_resources = Q(std::move(allocated));
  return s;
}

// In-place resize, as k8s.io/component-helpers/resource/helpers.go counts a pod on a node
// (UseStatusResources, with InPlacePodLevelResourcesVerticalScalingEnabled as kube-scheduler 1.37
// sets it). Names are the upstream cases of helpers_test.go (TestPodResourceRequests,
// TestAggregateContainerRequestsAndLimits, TestPodRequestsAndLimitsVerticalScalingWrappers) at
// v0.37.2; "don't use status" is RequestBasis::kSpec.
TEST(PodRequestsTest, InPlaceResizeAsComponentHelpers) {
  struct ResizeCase {
    std::string name;
    Pod pod;
    RequestBasis basis;
    int64_t milli_cpu;
    int64_t memory_bytes = 0;
    int64_t ephemeral_storage_bytes = 0;
  };
  std::vector<ResizeCase> cases;
  auto infeasible_1_33 = [](Pod& p) { p.resize_pending_reason = "Infeasible"; };
  {
    ResizeCase c{"resized, infeasible", {}, RequestBasis::kSpecAndStatus, 2000};
    c.pod.containers = {C("container-1", {{"cpu", "4"}})};
    c.pod.container_statuses = {S("container-1", {{"cpu", "2"}})};
    infeasible_1_33(c.pod);
    cases.push_back(c);
  }
  {
    ResizeCase c{"resized, infeasible & in-progress", {}, RequestBasis::kSpecAndStatus, 4000};
    c.pod.containers = {C("container-1", {{"cpu", "6"}})};
    c.pod.container_statuses = {S("container-1", {{"cpu", "2"}}, {{"cpu", "4"}})};
    infeasible_1_33(c.pod);
    cases.push_back(c);
  }
  {
    // Kubernetes 1.32 marks it in status.resize instead of a PodResizePending condition.
    ResizeCase c{
        "resized, infeasible (1.32 status.resize)", {}, RequestBasis::kSpecAndStatus, 2000};
    c.pod.containers = {C("container-1", {{"cpu", "4"}})};
    c.pod.container_statuses = {S("container-1", {{"cpu", "2"}})};
    c.pod.resize = "Infeasible";
    cases.push_back(c);
  }
  {
    ResizeCase c{"resized, deferred counts the spec", {}, RequestBasis::kSpecAndStatus, 4000};
    c.pod.containers = {C("container-1", {{"cpu", "4"}})};
    c.pod.container_statuses = {S("container-1", {{"cpu", "2"}})};
    c.pod.resize_pending_reason = "Deferred";
    cases.push_back(c);
  }
  {
    ResizeCase c{"resized, no resize status", {}, RequestBasis::kSpecAndStatus, 4000};
    c.pod.containers = {C("container-1", {{"cpu", "4"}})};
    c.pod.container_statuses = {S("container-1", {{"cpu", "2"}})};
    cases.push_back(c);
  }
  {
    ResizeCase c{"resized: per-resource 3-way maximum",
                 {},
                 RequestBasis::kSpecAndStatus,
                 30,
                 30'000'000,
                 30'000'000'000};
    c.pod.containers = {
        C("container-1", {{"cpu", "30m"}, {"memory", "20M"}, {"ephemeral-storage", "10G"}})};
    c.pod.container_statuses = {
        S("container-1", {{"cpu", "10m"}, {"memory", "30M"}, {"ephemeral-storage", "20G"}},
          {{"cpu", "20m"}, {"memory", "10M"}, {"ephemeral-storage", "30G"}})};
    cases.push_back(c);
  }
  {
    ResizeCase c{"resized, infeasible, but don't use status", {}, RequestBasis::kSpec, 4000};
    c.pod.containers = {C("container-1", {{"cpu", "4"}})};
    c.pod.container_statuses = {S("container-1", {{"cpu", "2"}})};
    infeasible_1_33(c.pod);
    cases.push_back(c);
  }
  {
    ResizeCase c{
        "resized, restartable init container, infeasible", {}, RequestBasis::kSpecAndStatus, 2000};
    c.pod.init_containers = {C("restartable-init-1", {{"cpu", "4"}}, true)};
    c.pod.init_container_statuses = {S("restartable-init-1", {{"cpu", "2"}})};
    infeasible_1_33(c.pod);
    cases.push_back(c);
  }
  {
    ResizeCase c{"resized, restartable init container, no resize status",
                 {},
                 RequestBasis::kSpecAndStatus,
                 4000};
    c.pod.init_containers = {C("restartable-init-1", {{"cpu", "4"}}, true)};
    c.pod.init_container_statuses = {S("restartable-init-1", {{"cpu", "2"}})};
    cases.push_back(c);
  }
  {
    ResizeCase c{"resized, restartable init container, infeasible, but don't use status",
                 {},
                 RequestBasis::kSpec,
                 4000};
    c.pod.init_containers = {C("restartable-init-1", {{"cpu", "4"}}, true)};
    c.pod.init_container_statuses = {S("restartable-init-1", {{"cpu", "2"}})};
    infeasible_1_33(c.pod);
    cases.push_back(c);
  }
  {
    ResizeCase c{"regularcontainers with empty requests, but status with non-empty requests",
                 {},
                 RequestBasis::kSpecAndStatus,
                 2000};
    c.pod.containers = {C("container-1", {})};
    c.pod.container_statuses = {S("container-1", {{"cpu", "2"}})};
    cases.push_back(c);
  }
  {
    ResizeCase c{
        "always-restart init containers with empty requests, but status with non-empty requests",
        {},
        RequestBasis::kSpecAndStatus,
        2000};
    c.pod.init_containers = {C("container-1", {}, true)};
    c.pod.init_container_statuses = {S("container-1", {{"cpu", "2"}})};
    cases.push_back(c);
  }
  {
    // 1.37 (unlike 1.33-1.34, which needed `cs.Resources != nil`): allocatedResources counts
    // without status resources.
    ResizeCase c{
        "status without resources counts its allocation", {}, RequestBasis::kSpecAndStatus, 700};
    c.pod.containers = {C("container-1", {{"cpu", "500m"}})};
    ContainerStatus s;
    s.name = "container-1";
    s.allocated_resources = Q({{"cpu", "700m"}});
    c.pod.container_statuses = {s};
    cases.push_back(c);
  }
  {
    // 1.37 reads every container's status, a regular init container's too (1.33-1.34 read only
    // restartable ones').
    ResizeCase c{"regular init container status is used", {}, RequestBasis::kSpecAndStatus, 3000};
    c.pod.init_containers = {C("init-1", {{"cpu", "1"}})};
    c.pod.init_container_statuses = {S("init-1", {{"cpu", "3"}})};
    cases.push_back(c);
  }
  {
    ResizeCase c{"aggregate request resolves max of sums instead of sum of maxes",
                 {},
                 RequestBasis::kSpecAndStatus,
                 3000};
    c.pod.containers = {C("c1", {{"cpu", "1"}}), C("c2", {{"cpu", "2"}})};
    ContainerStatus s1, s2;
    s1.name = "c1";
    s1.allocated_resources = Q({{"cpu", "2"}});
    s2.name = "c2";
    s2.allocated_resources = Q({{"cpu", "1"}});
    c.pod.container_statuses = {s1, s2};
    cases.push_back(c);
  }
  {
    ResizeCase c{
        "aggregate container request/limit resolves directly from pod status when PLR vertical "
        "scaling enabled",
        {},
        RequestBasis::kSpecAndStatus,
        4000};
    c.pod.containers = {C("c1", {{"cpu", "1"}})};
    c.pod.status_allocated_resources = Q({{"cpu", "4"}});
    c.pod.has_status_resources = true;
    c.pod.status_pod_requests = Q({{"cpu", "3"}});
    cases.push_back(c);
  }
  {
    ResizeCase c{
        "falls back to container status aggregation when PLR vertical scaling enabled but "
        "podAllocatedResources is nil",
        {},
        RequestBasis::kSpecAndStatus,
        6000};
    c.pod.containers = {C("c1", {{"cpu", "1"}})};
    c.pod.container_statuses = {S("c1", {{"cpu", "5"}}, {{"cpu", "6"}})};
    c.pod.has_status_resources = true;
    c.pod.status_pod_requests = Q({{"cpu", "3"}});
    cases.push_back(c);
  }
  {
    ResizeCase c{
        "falls back to container status aggregation when PLR vertical scaling enabled but "
        "podResources is nil",
        {},
        RequestBasis::kSpecAndStatus,
        6000};
    c.pod.containers = {C("c1", {{"cpu", "1"}})};
    c.pod.container_statuses = {S("c1", {{"cpu", "5"}}, {{"cpu", "6"}})};
    c.pod.status_allocated_resources = Q({{"cpu", "6"}});
    cases.push_back(c);
  }
  {
    ResizeCase c{"pod level requests/limits with PLR vertical scaling enabled and status populated",
                 {},
                 RequestBasis::kSpecAndStatus,
                 3500};
    c.pod.pod_requests = Q({{"cpu", "2"}});
    c.pod.pod_limits = Q({{"cpu", "4"}});
    c.pod.containers = {C("c1", {{"cpu", "1"}})};
    c.pod.status_allocated_resources = Q({{"cpu", "3"}});
    c.pod.has_status_resources = true;
    c.pod.status_pod_requests = Q({{"cpu", "3.5"}});
    cases.push_back(c);
  }
  {
    ResizeCase c{
        "pod level requests/limits with PLR vertical scaling enabled and infeasible resize",
        {},
        RequestBasis::kSpecAndStatus,
        4000};
    c.pod.pod_requests = Q({{"cpu", "10"}});
    c.pod.pod_limits = Q({{"cpu", "20"}});
    c.pod.containers = {C("c1", {{"cpu", "1"}})};
    c.pod.status_allocated_resources = Q({{"cpu", "3"}});
    c.pod.has_status_resources = true;
    c.pod.status_pod_requests = Q({{"cpu", "4"}});
    infeasible_1_33(c.pod);
    cases.push_back(c);
  }
  {
    // The same pod as it is scheduled: the spec's pod-level request.
    ResizeCase c{"pod level requests, status not used", {}, RequestBasis::kSpec, 10000};
    c.pod.pod_requests = Q({{"cpu", "10"}});
    c.pod.containers = {C("c1", {{"cpu", "1"}})};
    c.pod.status_allocated_resources = Q({{"cpu", "3"}});
    c.pod.has_status_resources = true;
    c.pod.status_pod_requests = Q({{"cpu", "4"}});
    cases.push_back(c);
  }
  for (const ResizeCase& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Resources> r = PodRequests(c.pod, c.basis);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->milli_cpu, c.milli_cpu);
    EXPECT_EQ(r->memory_bytes, c.memory_bytes);
    EXPECT_EQ(r->ephemeral_storage_bytes, c.ephemeral_storage_bytes);
  }
}

// The scoring amounts: NonMissingContainerRequests of 100m cpu / 200Mi memory per container
// (pkg/scheduler/util DefaultMilliCPURequest, DefaultMemoryRequest), for the incoming pod
// (noderesources/resource_allocation.go calculatePodResourceRequest) and for pods on a node
// (framework/types.go calculateResource, getNonMissingContainerRequests).
TEST(PodRequestsTest, NonZeroScoringAmountsAsTheScheduler) {
  struct NonZeroCase {
    std::string name;
    Pod pod;
    RequestBasis basis;
    int64_t non_zero_milli_cpu;
    int64_t non_zero_memory_bytes;
    int64_t milli_cpu = 0;
    int64_t memory_bytes = 0;
  };
  std::vector<NonZeroCase> cases;
  {
    NonZeroCase c{"no containers: nothing", {}, RequestBasis::kSpec, 0, 0};
    cases.push_back(c);
  }
  {
    NonZeroCase c{"a container without requests counts the defaults",
                  {},
                  RequestBasis::kSpec,
                  100,
                  200 * kMi};
    c.pod.containers = {C("a", {})};
    cases.push_back(c);
  }
  {
    // "If the requests for those resources are explicitly set, even if zero, they will not be
    // modified" (PodResourcesOptions.NonMissingContainerRequests).
    NonZeroCase c{"an explicit zero is kept, per container",
                  {},
                  RequestBasis::kSpecAndStatus,
                  100,
                  400 * kMi};
    c.pod.containers = {C("a", {{"cpu", "0"}}), C("b", {})};
    cases.push_back(c);
  }
  {
    NonZeroCase c{
        "set requests count as they are", {}, RequestBasis::kSpec, 3000, 5 * kMi, 3000, 5 * kMi};
    c.pod.containers = {C("a", {{"cpu", "1"}, {"memory", "2Mi"}}),
                        C("b", {{"cpu", "2"}, {"memory", "3Mi"}})};
    cases.push_back(c);
  }
  {
    NonZeroCase c{"an init container without requests peaks at the defaults",
                  {},
                  RequestBasis::kSpec,
                  100,
                  200 * kMi,
                  50,
                  0};
    c.pod.init_containers = {C("init", {})};
    c.pod.containers = {C("a", {{"cpu", "50m"}, {"memory", "0"}})};
    cases.push_back(c);
  }
  {
    NonZeroCase c{
        "overhead adds to the defaults", {}, RequestBasis::kSpec, 350, 210 * kMi, 250, 10 * kMi};
    c.pod.containers = {C("a", {})};
    c.pod.overhead = Q({{"cpu", "250m"}, {"memory", "10Mi"}});
    cases.push_back(c);
  }
  {
    // Pod-level cpu replaces the containers' (defaults included); memory keeps the per-container
    // defaults for the incoming pod.
    NonZeroCase c{"incoming pod with pod-level cpu",
                  {},
                  RequestBasis::kSpec,
                  2000,
                  300 * kMi,
                  2000,
                  100 * kMi};
    c.pod.containers = {C("a", {{"memory", "100Mi"}}), C("b", {})};
    c.pod.pod_requests = Q({{"cpu", "2"}});
    cases.push_back(c);
  }
  {
    // On a node, with pod-level requests set, defaults apply only to resources the pod's
    // requests lack: memory is requested by one container, so none is added.
    NonZeroCase c{"assigned pod with pod-level cpu",
                  {},
                  RequestBasis::kSpecAndStatus,
                  2000,
                  100 * kMi,
                  2000,
                  100 * kMi};
    c.pod.containers = {C("a", {{"memory", "100Mi"}}), C("b", {})};
    c.pod.pod_requests = Q({{"cpu", "2"}});
    cases.push_back(c);
  }
  {
    NonZeroCase c{"assigned pod with pod-level cpu and no memory anywhere",
                  {},
                  RequestBasis::kSpecAndStatus,
                  2000,
                  400 * kMi,
                  2000,
                  0};
    c.pod.containers = {C("a", {}), C("b", {})};
    c.pod.pod_requests = Q({{"cpu", "2"}});
    cases.push_back(c);
  }
  for (const NonZeroCase& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Resources> r = PodRequests(c.pod, c.basis);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->non_zero_milli_cpu, c.non_zero_milli_cpu);
    EXPECT_EQ(r->non_zero_memory_bytes, c.non_zero_memory_bytes);
    EXPECT_EQ(r->milli_cpu, c.milli_cpu);
    EXPECT_EQ(r->memory_bytes, c.memory_bytes);
  }
}

TEST(PodRequestsTest, APodLevelLimitIsNotARequest) {
  // The API server defaults a pod-level request from a pod-level limit when it stores the pod.
  // fitledger counts the stored pod as kube-scheduler does and does not default it again: a
  // pod-level limit alone is not a request.
  Pod pod;
  pod.containers = {C("a", {{"cpu", "500m"}})};
  pod.pod_limits = Q({{"cpu", "2"}, {"memory", "1Gi"}});
  absl::StatusOr<Resources> r = PodRequests(pod, RequestBasis::kSpec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->milli_cpu, 500);
  EXPECT_EQ(r->memory_bytes, 0);
}

TEST(PodRequestsTest, KubernetesIoResourcesAreCounted) {
  Pod pod;
  pod.containers = {C("a", {{"kubernetes.io/something", "10"}}),
                    C("b", {{"subdomain.kubernetes.io/something", "3"}})};
  absl::StatusOr<Resources> r = PodRequests(pod, RequestBasis::kSpec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Get("kubernetes.io/something"), 10);
  EXPECT_EQ(r->Get("subdomain.kubernetes.io/something"), 3);
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

// The error says which pod, which resource and what it summed to (it said only "quantity out of
// range for int64").
TEST(PodRequestsTest, AnAmountPastInt64NamesThePodTheResourceAndTheSum) {
  Pod pod;
  pod.namespace_name = "ns";
  pod.name = "p";
  pod.containers = {C("a", {{"cpu", "1E"}})};  // 10^18 cores: 10^21 millicores
  EXPECT_THAT(PodRequests(pod, RequestBasis::kSpec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pod ns/p: the request for cpu (1000000000000000000) is out of "
                                 "range: more than 9223372036854775807 millicores")));
  Pod nameless;
  nameless.containers = {C("a", {{"cpu", "-1"}})};
  EXPECT_THAT(PodRequests(nameless, RequestBasis::kSpec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the pod (it has no metadata.name): negative request for cpu")));
}

}  // namespace
}  // namespace fitledger
