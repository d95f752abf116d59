// Fit and score against upstream's own cases: the ledger's Filter and NodeScores on the pods and
// nodes of kube-scheduler's table tests, with upstream's expected outcomes.
//
// Sources (kubernetes/kubernetes, pkg/scheduler/framework/plugins/noderesources/):
//   fit_test.go            TestEnoughRequests, TestNotEnoughRequests
//   least_allocated_test.go TestLeastAllocatedScoringStrategy
//   most_allocated_test.go  TestMostAllocatedScoringStrategy
// Each case carries the upstream case name (SCOPED_TRACE). Pods go through PodRequests, so the
// per-container non-zero defaults and init-container rules are the model's, as upstream's pods
// go through component-helpers.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/pod.h"
#include "server/ledger/ledger.h"

namespace fitledger {
namespace {

using ::testing::ElementsAreArray;

using List = std::vector<std::pair<std::string, std::string>>;

QuantityList Q(const List& items) {
  QuantityList out;
  for (const auto& [name, text] : items) {
    absl::StatusOr<Quantity> q = Quantity::Parse(text);
    EXPECT_TRUE(q.ok()) << q.status();
    out.emplace_back(name, q.value_or(Quantity()));
  }
  return out;
}

// st.MakePod(): one container per entry of `containers` (an empty entry is a container that
// requests nothing); no entries is a pod without containers.
Pod MakePod(const std::vector<List>& containers, const std::vector<List>& init = {},
            const List& overhead = {}) {
  Pod pod;
  pod.namespace_name = "ns";
  pod.name = "p";
  for (size_t i = 0; i < containers.size(); ++i) {
    Container c;
    c.name = absl::StrCat("c", i);
    c.requests = Q(containers[i]);
    pod.containers.push_back(c);
  }
  for (size_t i = 0; i < init.size(); ++i) {
    Container c;
    c.name = absl::StrCat("i", i);
    c.requests = Q(init[i]);
    pod.init_containers.push_back(c);
  }
  pod.overhead = Q(overhead);
  return pod;
}

Resources Incoming(const Pod& pod) {
  absl::StatusOr<Resources> r = PodRequests(pod, RequestBasis::kSpec);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.value_or(Resources());
}

PodRecord OnNode(const std::string& uid, const std::string& node, const Pod& pod) {
  PodRecord record;
  record.uid = uid;
  record.node_name = node;
  absl::StatusOr<Resources> r = PodRequests(pod, RequestBasis::kSpecAndStatus);
  EXPECT_TRUE(r.ok()) << r.status();
  record.requests = r.value_or(Resources());
  return record;
}

// A node whose allocatable is `allocatable` (cpu in millicores, the rest in units, as the
// watch decodes nodes).
NodeRecord MakeNode(const std::string& name, const List& allocatable) {
  NodeRecord node;
  node.name = name;
  for (const auto& [resource, q] : Q(allocatable)) {
    absl::StatusOr<int64_t> amount = resource == "cpu" ? q.MilliValue() : q.Value();
    EXPECT_TRUE(amount.ok());
    node.allocatable.Set(resource, amount.value_or(0));
  }
  return node;
}

// fit_test.go: makeAllocatableResources(10, 20, 32, 5, 20, 5).
List FitTestNode(const std::string& pods = "32") {
  return {{"cpu", "10m"},
          {"memory", "20"},
          {"pods", pods},
          {"example.com/aaa", "5"},
          {"ephemeral-storage", "20"},
          {"hugepages-2Mi", "5"}};
}

struct FitCase {
  std::string name;
  Pod pod;
  std::vector<List> existing;  // the node's one existing pod (its containers)
  // "" fits; else the reasons, and whether upstream marks them unresolvable
  // (UnschedulableAndUnresolvable: a request above the node's allocatable).
  std::string reasons = "";
  bool unresolvable = false;
  AccountingPolicy policy = {};
  std::string node_pods = "32";
};

std::vector<FitCase> FitCases() {
  const std::string kIoA = "kubernetes.io/something";
  const std::string kIoB = "subdomain.kubernetes.io/something";
  std::vector<FitCase> cases = {
      {"no resources requested always fits", MakePod({}), {{{"cpu", "10m"}, {"memory", "20"}}}},
      {"too many resources fails",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}}}),
       {{{"cpu", "10m"}, {"memory", "20"}}},
       "Insufficient cpu, Insufficient memory"},
      {"too many resources fails due to init container cpu",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}}}, {{{"cpu", "3m"}, {"memory", "1"}}}),
       {{{"cpu", "8m"}, {"memory", "19"}}},
       "Insufficient cpu"},
      {"too many resources fails due to highest init container cpu",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}}},
               {{{"cpu", "3m"}, {"memory", "1"}}, {{"cpu", "2m"}, {"memory", "1"}}}),
       {{{"cpu", "8m"}, {"memory", "19"}}},
       "Insufficient cpu"},
      {"too many resources fails due to init container memory",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}}}, {{{"cpu", "1m"}, {"memory", "3"}}}),
       {{{"cpu", "9m"}, {"memory", "19"}}},
       "Insufficient memory"},
      {"init container fits because it's the max, not sum, of containers and init containers",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}}}, {{{"cpu", "1m"}, {"memory", "1"}}}),
       {{{"cpu", "9m"}, {"memory", "19"}}}},
      {"both resources fit",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}}}),
       {{{"cpu", "5m"}, {"memory", "5"}}}},
      {"one resource memory fits",
       MakePod({{{"cpu", "2m"}, {"memory", "1"}}}),
       {{{"cpu", "9m"}, {"memory", "5"}}},
       "Insufficient cpu"},
      {"equal edge case",
       MakePod({{{"cpu", "5m"}, {"memory", "1"}}}),
       {{{"cpu", "5m"}, {"memory", "19"}}}},
      {"equal edge case for init container",
       MakePod({{{"cpu", "4m"}, {"memory", "1"}}}, {{{"cpu", "5m"}, {"memory", "1"}}}),
       {{{"cpu", "5m"}, {"memory", "19"}}}},
      {"extended resource fits", MakePod({{{"example.com/aaa", "1"}}}), {{}}},
      {"extended resource fits for init container",
       MakePod({{}}, {{{"example.com/aaa", "1"}}}),
       {{}}},
      {"extended resource capacity enforced",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}, {"example.com/aaa", "10"}}}),
       {{{"example.com/aaa", "0"}}},
       "Insufficient example.com/aaa",
       true},
      {"extended resource capacity enforced for init container",
       MakePod({{}}, {{{"cpu", "1m"}, {"memory", "1"}, {"example.com/aaa", "10"}}}),
       {{{"example.com/aaa", "0"}}},
       "Insufficient example.com/aaa",
       true},
      {"extended resource allocatable enforced",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}, {"example.com/aaa", "1"}}}),
       {{{"example.com/aaa", "5"}}},
       "Insufficient example.com/aaa"},
      {"extended resource allocatable enforced for unknown resource",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}, {"example.com/bbb", "1"}}}),
       {{}},
       "Insufficient example.com/bbb",
       true},
      {"kubernetes.io resource capacity enforced",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}, {kIoA, "10"}}}),
       {{}},
       "Insufficient kubernetes.io/something",
       true},
      {"kubernetes.io resource capacity enforced for init container",
       MakePod({{}}, {{{"cpu", "1m"}, {"memory", "1"}, {kIoB, "10"}}}),
       {{}},
       "Insufficient subdomain.kubernetes.io/something",
       true},
      {"hugepages resource capacity enforced",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}, {"hugepages-2Mi", "10"}}}),
       {{}},
       "Insufficient hugepages-2Mi",
       true},
      {"hugepages resource allocatable enforced for multiple containers",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}, {"hugepages-2Mi", "3"}},
                {{"cpu", "1m"}, {"memory", "1"}, {"hugepages-2Mi", "3"}}}),
       {{{"hugepages-2Mi", "2"}}},
       "Insufficient hugepages-2Mi",
       true},
      {"resources + pod overhead fits",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}}}, {}, {{"cpu", "3m"}, {"memory", "13"}}),
       {{{"cpu", "5m"}, {"memory", "5"}}}},
      {"requests + overhead does not fit for memory",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}}}, {}, {{"cpu", "1m"}, {"memory", "15"}}),
       {{{"cpu", "5m"}, {"memory", "5"}}},
       "Insufficient memory"},
      {"skip checking extended resource request with quantity zero via resource groups",
       MakePod({{{"cpu", "1m"}, {"memory", "1"}, {"example.com/aaa", "0"}}}),
       {{{"example.com/aaa", "6"}}}},
  };
  {
    FitCase c{"skip checking ignored extended resource",
              MakePod({{{"cpu", "1m"}, {"memory", "1"}, {"example.com/bbb", "1"}}}),
              {{}}};
    c.policy.ignored_resources = {"example.com/bbb"};
    cases.push_back(c);
  }
  {
    // Groups only ignore extended resources: kubernetes.io/ names are still checked.
    FitCase c{"skip checking ignored extended resource via resource groups",
              MakePod({{{"cpu", "1m"},
                        {"memory", "1"},
                        {"example.com/bbb", "1"},
                        {"kubernetes.io/something", "1"}}}),
              {{}},
              "Insufficient kubernetes.io/something",
              true};
    c.policy.ignored_resource_groups = {"example.com"};
    cases.push_back(c);
  }
  {
    // makeResources(10, 20, 1, 0, 0, 0): one pod allowed, one there. Unschedulable only.
    FitCase c{
        "even without specified resources, predicate fails when there's no space for "
        "additional pod",
        MakePod({}),
        {{{"cpu", "10m"}, {"memory", "20"}}},
        "Too many pods"};
    c.node_pods = "1";
    cases.push_back(c);
  }
  {
    FitCase c{
        "even if both resources fit, predicate fails when there's no space for "
        "additional pod",
        MakePod({{{"cpu", "1m"}, {"memory", "1"}}}),
        {{{"cpu", "5m"}, {"memory", "5"}}},
        "Too many pods"};
    c.node_pods = "1";
    cases.push_back(c);
  }
  {
    FitCase c{"even for equal edge case, predicate fails when there's no space for additional pod",
              MakePod({{{"cpu", "5m"}, {"memory", "1"}}}),
              {{{"cpu", "5m"}, {"memory", "19"}}},
              "Too many pods"};
    c.node_pods = "1";
    cases.push_back(c);
  }
  return cases;
}

TEST(UpstreamFitTest, FilterAgreesWithNodeResourcesFit) {
  for (const FitCase& c : FitCases()) {
    SCOPED_TRACE(c.name);
    Ledger ledger(c.policy, ScoringStrategy::kLeastAllocated);
    ledger.UpsertNode(MakeNode("n", FitTestNode(c.node_pods)));
    ledger.UpsertPod(OnNode("existing", "n", MakePod(c.existing)));
    FilterResult r = ledger.Filter(Incoming(c.pod), {"n"});
    if (c.reasons.empty()) {
      EXPECT_THAT(r.fits, ElementsAreArray({0u}));
      EXPECT_TRUE(r.failed.empty() && r.unresolvable.empty());
      continue;
    }
    EXPECT_TRUE(r.fits.empty());
    const auto& got = c.unresolvable ? r.unresolvable : r.failed;
    ASSERT_EQ(got.size(), 1u) << "failed " << r.failed.size() << ", unresolvable "
                              << r.unresolvable.size();
    EXPECT_EQ(got[0].second, c.reasons);
  }
}

struct ScoreCase {
  std::string name;
  Pod requested;
  std::vector<std::pair<std::string, List>> nodes;    // name, allocatable
  std::vector<std::pair<std::string, Pod>> existing;  // node, pod
  std::vector<ResourceWeight> resources;              // empty: cpu and memory, weight 1
  std::vector<int64_t> expected;                      // 0..100, per node
};

const std::string kExtendedRes = "abc.com/xyz";  // extendedRes in the upstream tests

std::vector<ResourceWeight> ExtendedResourceSet() {
  return {{"cpu", 1}, {"memory", 1}, {kExtendedRes, 1}};
}

// Upstream's Capacity(map{"cpu": "4000"}) is 4000 cores.
List Cap(const std::string& cpu, const std::string& memory, const std::string& extended = "") {
  List out = {{"cpu", cpu}, {"memory", memory}};
  if (!extended.empty()) out.emplace_back(kExtendedRes, extended);
  return out;
}

Pod Req(const std::string& cpu, const std::string& memory) {
  return MakePod({{{"cpu", cpu}, {"memory", memory}}});
}

std::vector<ScoreCase> LeastAllocatedCases() {
  const Pod two_containers =
      MakePod({{{"cpu", "1000"}, {"memory", "2000"}}, {{"cpu", "2000"}, {"memory", "3000"}}});
  return {
      {"nothing scheduled, nothing requested",
       MakePod({}),
       {{"node1", Cap("4000", "10000")}, {"node2", Cap("4000", "10000")}},
       {},
       {},
       {100, 100}},
      {"nothing scheduled, resources requested, differently sized nodes",
       two_containers,
       {{"node1", Cap("4000", "10000")}, {"node2", Cap("6000", "10000")}},
       {},
       {},
       {37, 50}},
      {"no resources requested, pods scheduled",
       MakePod({}),
       {{"node1", Cap("4000", "10000")}, {"node2", Cap("4000", "10000")}},
       {{"node1", MakePod({})},
        {"node1", MakePod({})},
        {"node2", MakePod({})},
        {"node2", MakePod({})}},
       {},
       {100, 100}},
      {"no resources requested, pods scheduled with resources",
       MakePod({}),
       {{"node1", Cap("10000", "20000")}, {"node2", Cap("10000", "20000")}},
       {{"node1", Req("3000", "0")},
        {"node1", Req("3000", "0")},
        {"node2", Req("3000", "0")},
        {"node2", Req("3000", "5000")}},
       {},
       {70, 57}},
      {"resources requested, pods scheduled with resources",
       two_containers,
       {{"node1", Cap("10000", "20000")}, {"node2", Cap("10000", "20000")}},
       {{"node1", Req("3000", "0")}, {"node2", Req("3000", "5000")}},
       {},
       {57, 45}},
      {"resources requested, pods scheduled with resources, differently sized nodes",
       two_containers,
       {{"node1", Cap("10000", "20000")}, {"node2", Cap("10000", "50000")}},
       {{"node1", Req("3000", "0")}, {"node2", Req("3000", "5000")}},
       {},
       {57, 60}},
      {"requested resources exceed node capacity",
       Req("3000", "0"),
       {{"node1", Cap("4000", "10000")}, {"node2", Cap("4000", "10000")}},
       {{"node1", Req("3000", "0")}, {"node2", Req("3000", "5000")}},
       {},
       {50, 25}},
      {"zero node resources, pods scheduled with resources",
       MakePod({}),
       {{"node1", {}}, {"node2", {}}},
       {{"node1", Req("3000", "0")}, {"node2", Req("3000", "5000")}},
       {},
       {0, 0}},
      {"nothing scheduled, resources requested with different weight on CPU and memory, "
       "differently sized nodes",
       two_containers,
       {{"node1", Cap("4000", "10000")}, {"node2", Cap("6000", "10000")}},
       {},
       {{"memory", 2}, {"cpu", 1}},
       {41, 50}},
      {"bypass extended resource if the pod does not request",
       two_containers,
       {{"node1", Cap("6000", "10000")}, {"node2", Cap("6000", "10000", "4")}},
       {},
       ExtendedResourceSet(),
       {50, 50}},
      {"honor extended resource if the pod requests",
       MakePod({{{"cpu", "3000"}, {"memory", "5000"}, {kExtendedRes, "2"}}}),
       {{"node1", Cap("6000", "10000", "4")}, {"node2", Cap("6000", "10000", "10")}},
       {},
       ExtendedResourceSet(),
       {50, 60}},
      {"if the node doesn't have a resource",
       Req("3000", "4000"),
       {{"node1", Cap("6000", "10000")}, {"node2", Cap("6000", "10000", "4")}},
       {},
       {{kExtendedRes, 2}, {"cpu", 1}, {"memory", 1}},
       {55, 55}},
  };
}

std::vector<ScoreCase> MostAllocatedCases() {
  const Pod two_containers =
      MakePod({{{"cpu", "1000"}, {"memory", "2000"}}, {{"cpu", "2000"}, {"memory", "3000"}}});
  return {
      {"nothing scheduled, nothing requested",
       MakePod({}),
       {{"node1", Cap("4000", "10000")}, {"node2", Cap("4000", "10000")}},
       {},
       {},
       {0, 0}},
      {"nothing scheduled, resources requested, differently sized nodes",
       two_containers,
       {{"node1", Cap("4000", "10000")}, {"node2", Cap("6000", "10000")}},
       {},
       {},
       {62, 50}},
      {"no resources requested, pods scheduled with resources",
       MakePod({}),
       {{"node1", Cap("10000", "20000")}, {"node2", Cap("10000", "20000")}},
       {{"node1", Req("3000", "0")},
        {"node1", Req("3000", "0")},
        {"node2", Req("3000", "0")},
        {"node2", Req("3000", "5000")}},
       {},
       {30, 42}},
      {"resources requested, pods scheduled with resources",
       two_containers,
       {{"node1", Cap("10000", "20000")}, {"node2", Cap("10000", "20000")}},
       {{"node1", Req("3000", "0")}, {"node2", Req("3000", "5000")}},
       {},
       {42, 55}},
      {"resources requested equal node capacity",
       MakePod({{{"cpu", "2000"}, {"memory", "4000"}}, {{"cpu", "3000"}, {"memory", "5000"}}}),
       {{"node1", Cap("5000", "10000")}, {"node2", Cap("10000", "9000")}},
       {},
       {},
       {95, 75}},
      {"nothing scheduled, resources requested, differently sized nodes (memory weight 2)",
       two_containers,
       {{"node1", Cap("4000", "10000")}, {"node2", Cap("6000", "10000")}},
       {},
       {{"memory", 2}, {"cpu", 1}},
       {58, 50}},
      // The per-container defaults: 100m / 200Mi for each container that requests nothing.
      {"no resources requested, pods scheduled, nonzero request for resource",
       MakePod({{}}),
       {{"node1", Cap("250m", "1000Mi")}, {"node2", Cap("250m", "1000Mi")}},
       {{"node1", MakePod({{}})}, {"node1", MakePod({{}})}},
       {},
       {80, 30}},
      {"bypass extended resource if the pod does not request",
       two_containers,
       {{"node1", Cap("6000", "10000")}, {"node2", Cap("6000", "10000", "4")}},
       {},
       ExtendedResourceSet(),
       {50, 50}},
      {"honor extended resource if the pod request",
       MakePod({{{"cpu", "3000"}, {"memory", "5000"}, {kExtendedRes, "2"}}}),
       {{"node1", Cap("6000", "10000", "4")}, {"node2", Cap("6000", "10000", "10")}},
       {},
       ExtendedResourceSet(),
       {50, 40}},
      {"if the node doesn't have a resource",
       Req("3000", "4000"),
       {{"node1", Cap("6000", "10000")}, {"node2", Cap("6000", "10000", "4")}},
       {},
       {{kExtendedRes, 2}, {"cpu", 1}, {"memory", 1}},
       {45, 45}},
  };
}

void CheckScores(ScoringStrategy strategy, const std::vector<ScoreCase>& cases) {
  for (const ScoreCase& c : cases) {
    SCOPED_TRACE(c.name);
    Ledger ledger(AccountingPolicy{}, strategy, c.resources);
    std::vector<std::string> names;
    for (const auto& [name, allocatable] : c.nodes) {
      ledger.UpsertNode(MakeNode(name, allocatable));
      names.push_back(name);
    }
    int uid = 0;
    for (const auto& [node, pod] : c.existing) {
      ledger.UpsertPod(OnNode(absl::StrCat("existing-", uid++), node, pod));
    }
    std::vector<absl::string_view> views(names.begin(), names.end());
    const Resources requested = Incoming(c.requested);
    EXPECT_EQ(ledger.NodeScores(requested, views), c.expected);
    // The extender's answer: the same, scaled once to 0..10 and rounded.
    std::vector<int64_t> scaled;
    for (int64_t score : c.expected) scaled.push_back((score + 5) / 10);
    EXPECT_EQ(ledger.Prioritize(requested, views), scaled);
  }
}

TEST(UpstreamScoreTest, LeastAllocatedAgreesWithNodeResourcesFit) {
  CheckScores(ScoringStrategy::kLeastAllocated, LeastAllocatedCases());
}

TEST(UpstreamScoreTest, MostAllocatedAgreesWithNodeResourcesFit) {
  CheckScores(ScoringStrategy::kMostAllocated, MostAllocatedCases());
}

}  // namespace
}  // namespace fitledger
