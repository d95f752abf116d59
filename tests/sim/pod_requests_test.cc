#include "sim/pod_requests.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/status_matchers.h"

namespace fitledger::sim {
namespace {

using ::fitledger::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

KubeletPod PodOf(const std::string& text) {
  absl::StatusOr<KubeletPod> pod = ParseKubeletPod(json::parse(text));
  EXPECT_TRUE(pod.ok()) << pod.status();
  return pod.ok() ? *pod : KubeletPod{};
}

// PodRequests' cpu and memory, rounded as the kubelet rounds them.
std::string CpuMemory(const KubeletPod& pod) {
  ResourceAmounts amounts;
  amounts.SetMax(PodRequests(pod));
  return std::to_string(amounts.milli_cpu) + "m " + std::to_string(amounts.memory_bytes);
}

// k8s.io/component-helpers resource/helpers.go PodRequests, and the KEP-753 example of sidecars
// ("Resources calculation for scheduling and pod admission").
TEST(PodRequestsTest, SumsAppContainersAndSidecarsAndTakesTheInitContainersPeak) {
  struct Case {
    const char* name;
    const char* pod;
    const char* want;
  };
  const Case cases[] = {
      {"app containers are summed",
       R"({"spec":{"containers":[{"resources":{"requests":{"cpu":"1","memory":"1Mi"}}},
                                 {"resources":{"requests":{"cpu":"500m"}}}]}})",
       "1500m 1048576"},
      {"an init container larger than the app containers wins",
       R"({"spec":{"initContainers":[{"resources":{"requests":{"cpu":"3"}}}],
                   "containers":[{"resources":{"requests":{"cpu":"100m","memory":"10"}}}]}})",
       "3000m 10"},
      {"a sidecar runs beside the app containers",
       R"({"spec":{"initContainers":[{"restartPolicy":"Always","resources":{"requests":{"cpu":"200m"}}}],
                   "containers":[{"resources":{"requests":{"cpu":"200m"}}}]}})",
       "400m 0"},
      {"an init container after a sidecar needs both",
       R"({"spec":{"initContainers":[
             {"restartPolicy":"Always","resources":{"requests":{"cpu":"500m"}}},
             {"resources":{"requests":{"cpu":"2"}}}],
           "containers":[{"resources":{"requests":{"cpu":"1"}}}]}})",
       "2500m 0"},
      {"an init container before a sidecar does not",
       R"({"spec":{"initContainers":[
             {"resources":{"requests":{"cpu":"2"}}},
             {"restartPolicy":"Always","resources":{"requests":{"cpu":"500m"}}}],
           "containers":[{"resources":{"requests":{"cpu":"1"}}}]}})",
       "2000m 0"},
      {"KEP-753's example",
       R"({"spec":{"initContainers":[
             {"restartPolicy":"Always","resources":{"requests":{"cpu":"100m"}}},
             {"resources":{"requests":{"cpu":"200m"}}},
             {"restartPolicy":"Always","resources":{"requests":{"cpu":"300m"}}},
             {"resources":{"requests":{"cpu":"50m"}}}],
           "containers":[{"resources":{"requests":{"cpu":"1"}}}]}})",
       "1400m 0"},
      {"restartPolicy Always on an app container means nothing",
       R"({"spec":{"containers":[{"restartPolicy":"Always","resources":{"requests":{"cpu":"1"}}}]}})",
       "1000m 0"},
      {"overhead is added",
       R"({"spec":{"overhead":{"cpu":"50m"},"containers":[{"resources":{"requests":{"cpu":"1"}}}]}})",
       "1050m 0"},
      {"pod-level requests replace the containers' for cpu and memory, then overhead",
       R"({"spec":{"resources":{"requests":{"cpu":"2"}},"overhead":{"cpu":"10m"},
                   "containers":[{"resources":{"requests":{"cpu":"1","memory":"5"}}}]}})",
       "2010m 5"},
      {"pod-level requests of only unsupported resources are not pod-level resources",
       R"({"spec":{"resources":{"requests":{"example.com/foo":"1"}},
                   "containers":[{"resources":{"requests":{"cpu":"1"}}}]}})",
       "1000m 0"},
      {"limits are not requests (the API server defaults them before the kubelet reads them)",
       R"({"spec":{"containers":[{"resources":{"limits":{"cpu":"1"}}}]}})", "0m 0"},
      {"the total is rounded, not each container",
       R"({"spec":{"containers":[{"resources":{"requests":{"cpu":"500u"}}},
                                 {"resources":{"requests":{"cpu":"500u"}}}]}})",
       "1m 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(CpuMemory(PodOf(c.pod)), c.want);
  }
}

TEST(PodRequestsTest, ResourceNameClasses) {
  EXPECT_TRUE(IsExtendedResourceName("example.com/gpu"));
  EXPECT_TRUE(IsExtendedResourceName("nvidia.com/gpu"));
  EXPECT_FALSE(IsExtendedResourceName("cpu"));
  EXPECT_FALSE(IsExtendedResourceName("hugepages-2Mi"));
  EXPECT_FALSE(IsExtendedResourceName("kubernetes.io/batch"));
  EXPECT_FALSE(IsExtendedResourceName("node.kubernetes.io/foo"));
  EXPECT_FALSE(IsExtendedResourceName("requests.example.com/gpu"));
  EXPECT_FALSE(IsExtendedResourceName("Example.com/gpu"));  // the prefix is a DNS subdomain
  EXPECT_FALSE(IsExtendedResourceName("example.com/"));
  EXPECT_FALSE(IsExtendedResourceName("example.com/a/b"));
  EXPECT_FALSE(IsExtendedResourceName("example.com/-gpu"));
  EXPECT_TRUE(IsScalarResourceName("example.com/gpu"));
  EXPECT_TRUE(IsScalarResourceName("hugepages-2Mi"));
  EXPECT_TRUE(IsScalarResourceName("kubernetes.io/batch"));
  EXPECT_TRUE(IsScalarResourceName("attachable-volumes-aws-ebs"));
  EXPECT_FALSE(IsScalarResourceName("pods"));
  EXPECT_FALSE(IsScalarResourceName("storage"));
}

// framework.Resource: Add sums (pods too), SetMax keeps the larger; names that are no scalar
// resource are dropped; a listed scalar is present even at 0.
TEST(PodRequestsTest, ResourceAmountsAddAndSetMaxAsFrameworkResource) {
  absl::StatusOr<ResourceList> list = ParseResourceList(
      json::parse(R"({"cpu":"1500m","memory":"1Ki","pods":110,"ephemeral-storage":"1k",
                      "example.com/foo":0,"storage":"5"})"),
      "allocatable");
  ASSERT_TRUE(list.ok()) << list.status();
  ResourceAmounts amounts;
  amounts.Add(*list);
  EXPECT_EQ(amounts.milli_cpu, 1500);
  EXPECT_EQ(amounts.memory_bytes, 1024);
  EXPECT_EQ(amounts.pods, 110);
  EXPECT_EQ(amounts.ephemeral_storage_bytes, 1000);
  EXPECT_EQ(amounts.scalars.size(), 1u);
  EXPECT_TRUE(amounts.scalars.contains("example.com/foo"));
  EXPECT_EQ(amounts.Get("storage"), 0);
  ResourceAmounts max;
  max.SetMax(*list);
  EXPECT_EQ(max.pods, 0);
  EXPECT_EQ(max.milli_cpu, 1500);
  amounts.Add(max, -1);
  EXPECT_EQ(amounts.milli_cpu, 0);
  EXPECT_EQ(amounts.pods, 110);
}

TEST(PodRequestsTest, ParseErrorsNameTheField) {
  EXPECT_THAT(ParseKubeletPod(json::parse(R"({"spec":{"containers":{}}})")),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.containers: must be a list"));
  EXPECT_THAT(
      ParseKubeletPod(json::parse(R"({"spec":{"initContainers":[3]}})")),
      StatusIs(absl::StatusCode::kInvalidArgument, "spec.initContainers[0]: must be an object"));
  EXPECT_THAT(
      ParseKubeletPod(json::parse(
          R"({"spec":{"containers":[{},{"resources":{"limits":{"example.com/gpu":true}}}]}})")),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("spec.containers[1].resources.limits.example.com/gpu: must be a quantity")));
  EXPECT_THAT(ParseKubeletPod(json::parse(R"({"spec":{"overhead":{"cpu":"-1"}}})")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("spec.overhead.cpu: negative quantity")));
  EXPECT_THAT(ParseKubeletPod(json::parse("[]")),
              StatusIs(absl::StatusCode::kInvalidArgument, "a pod must be a JSON object"));
  // Numbers are read as their text, as Quantity.UnmarshalJSON does; strings are trimmed.
  KubeletPod pod = PodOf(R"({"spec":{"containers":[{"resources":{"requests":{"cpu":0.5,
                                                                   "memory":" 2Ki "}}}]}})");
  EXPECT_EQ(CpuMemory(pod), "500m 2048");
}

TEST(PodRequestsTest, DraBackedResourcesAreReadFromTheStatusPerContainer) {
  KubeletPod pod = PodOf(R"({
    "spec":{"containers":[{"name":"a","resources":{"requests":{"example.com/gpu":"1"}}},
                          {"name":"b","resources":{"requests":{"example.com/gpu":"1"}}}]},
    "status":{"extendedResourceClaimStatus":{"requestMappings":[
      {"containerName":"a","requestName":"r","resourceName":"example.com/gpu"}]}}})");
  ASSERT_EQ(pod.containers.size(), 2u);
  EXPECT_THAT(pod.containers[0].dra_backed, ::testing::ElementsAre("example.com/gpu"));
  EXPECT_TRUE(pod.containers[1].dra_backed.empty());
}

}  // namespace
}  // namespace fitledger::sim
