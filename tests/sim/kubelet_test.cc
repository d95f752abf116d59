#include "sim/kubelet.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fitledger::sim {
namespace {

using nlohmann::json;

ResourceList List(const json& list) {
  absl::StatusOr<ResourceList> parsed = ParseResourceList(list, "test");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : ResourceList{};
}

ResourceList Node(const std::string& cpu, const std::string& memory, const std::string& pods) {
  return List({{"cpu", cpu}, {"memory", memory}, {"pods", pods}});
}

// A pod of one container with `requests` (and `limits`).
KubeletPod Pod(const json& requests, const json& limits = json::object()) {
  json pod = {
      {"metadata", {{"name", "p"}}},
      {"spec",
       {{"containers",
         {{{"name", "main"}, {"resources", {{"requests", requests}, {"limits", limits}}}}}}}}};
  absl::StatusOr<KubeletPod> parsed = ParseKubeletPod(pod);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : KubeletPod{};
}

// A pod whose container asks for `n` example.com/gpu (a device plugin's resource: limits, and
// the request the API server defaults from them).
KubeletPod Gpus(int n) {
  return Pod({{"example.com/gpu", std::to_string(n)}}, {{"example.com/gpu", std::to_string(n)}});
}

// A node of 4 cpu, 8Gi, 110 pods listing `listed` example.com/gpu in its allocatable.
ResourceList GpuAllocatable(int listed) {
  ResourceList allocatable = Node("4", "8Gi", "110");
  allocatable["example.com/gpu"] = ResourceQuantity::FromUnits(listed);
  return allocatable;
}

// A pod whose init container (a sidecar when `sidecar`) and app container each ask for 2 GPUs.
KubeletPod InitAndMainWithTwoGpus(bool sidecar) {
  const json gpu2 = {{"example.com/gpu", "2"}};
  json init = {{"name", "init"}, {"resources", {{"requests", gpu2}, {"limits", gpu2}}}};
  if (sidecar) init["restartPolicy"] = "Always";
  json pod = {{"metadata", {{"name", "p"}}},
              {"spec",
               {{"initContainers", {init}},
                {"containers",
                 {{{"name", "main"}, {"resources", {{"requests", gpu2}, {"limits", gpu2}}}}}}}}};
  absl::StatusOr<KubeletPod> parsed = ParseKubeletPod(pod);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : KubeletPod{};
}

TEST(KubeletTest, RejectsCpuWithTheKubeletsExactMessage) {
  KubeletAccounting kubelet;
  kubelet.SetNode("worker-1", Node("4", "8Gi", "110"));
  ASSERT_TRUE(kubelet.Admit("worker-1", "a", Pod({{"cpu", "3800m"}})).admitted);
  Admission a = kubelet.Admit("worker-1", "b", Pod({{"cpu", "400m"}}));
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.reason, "OutOfcpu");
  EXPECT_EQ(a.message,
            "Node didn't have enough resource: cpu, requested: 400, used: 3800, capacity: 4000");
}

TEST(KubeletTest, RejectsMemoryInBytes) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node("4", "1000", "110"));
  ASSERT_TRUE(kubelet.Admit("n", "a", Pod({{"cpu", "100m"}, {"memory", "600"}})).admitted);
  Admission a = kubelet.Admit("n", "b", Pod({{"cpu", "100m"}, {"memory", "500"}}));
  EXPECT_EQ(a.reason, "OutOfmemory");
  EXPECT_EQ(a.message,
            "Node didn't have enough resource: memory, requested: 500, used: 600, capacity: 1000");
}

TEST(KubeletTest, PodsAreCheckedFirstAndOnlyTheFirstFailureIsReported) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node("1", "1000", "1"));
  ASSERT_TRUE(kubelet.Admit("n", "a", Pod({{"cpu", "1"}, {"memory", "1000"}})).admitted);
  Admission a = kubelet.Admit("n", "b", Pod({{"cpu", "1"}, {"memory", "1000"}}));
  EXPECT_EQ(a.reason, "OutOfpods");
  EXPECT_EQ(a.message,
            "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1");
}

TEST(KubeletTest, CpuIsReportedBeforeMemory) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node("1", "1000", "10"));
  EXPECT_EQ(kubelet.Admit("n", "a", Pod({{"cpu", "2"}, {"memory", "2000"}})).reason, "OutOfcpu");
}

TEST(KubeletTest, EphemeralStorageAndExtendedResources) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", List({{"cpu", "1"},
                             {"memory", "1000"},
                             {"pods", "10"},
                             {"ephemeral-storage", "100"},
                             {"example.com/foo", "2"}}));
  Admission a = kubelet.Admit("n", "a", Pod({{"ephemeral-storage", "200"}}));
  EXPECT_EQ(a.reason, "OutOfephemeral-storage");
  EXPECT_EQ(a.message,
            "Node didn't have enough resource: ephemeral-storage, requested: 200, used: 0, "
            "capacity: 100");
  a = kubelet.Admit("n", "b", Pod({{"example.com/foo", "3"}}));
  EXPECT_EQ(a.reason, "OutOfexample.com/foo");
  EXPECT_EQ(a.message,
            "Node didn't have enough resource: example.com/foo, requested: 3, used: 0, "
            "capacity: 2");
}

TEST(KubeletTest, ExtendedResourcesTheNodeDoesNotListAreIgnoredHugepagesAreNot) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node("1", "1000", "10"));
  EXPECT_TRUE(kubelet.Admit("n", "a", Pod({{"cpu", "100m"}, {"example.com/fpga", "1"}})).admitted);
  Admission a = kubelet.Admit("n", "b", Pod({{"hugepages-2Mi", "2Mi"}}));
  EXPECT_EQ(a.reason, "OutOfhugepages-2Mi");
  EXPECT_EQ(a.message,
            "Node didn't have enough resource: hugepages-2Mi, requested: 2097152, used: 0, "
            "capacity: 0");
}

TEST(KubeletTest, ZeroRequestPodsOnlyNeedAPodSlot) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node("0", "0", "1"));
  EXPECT_TRUE(kubelet.Admit("n", "a", Pod(json::object())).admitted);
  EXPECT_EQ(kubelet.Admit("n", "b", Pod(json::object())).reason, "OutOfpods");
}

TEST(KubeletTest, ReleaseFreesCapacityAndIsIdempotent) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node("1", "1000", "10"));
  ASSERT_TRUE(kubelet.Admit("n", "a", Pod({{"cpu", "1"}})).admitted);
  EXPECT_FALSE(kubelet.Admit("n", "b", Pod({{"cpu", "1m"}})).admitted);
  kubelet.Release("a");
  kubelet.Release("a");
  EXPECT_EQ(kubelet.Requested("n", "cpu"), 0);
  EXPECT_EQ(kubelet.Requested("n", "pods"), 0);
  EXPECT_TRUE(kubelet.Admit("n", "b", Pod({{"cpu", "1m"}})).admitted);
}

TEST(KubeletTest, AdmittingTheSameUidTwiceCountsOnce) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node("1", "1000", "10"));
  ASSERT_TRUE(kubelet.Admit("n", "a", Pod({{"cpu", "600m"}})).admitted);
  EXPECT_TRUE(kubelet.Admit("n", "a", Pod({{"cpu", "600m"}})).admitted);
  EXPECT_EQ(kubelet.Requested("n", "cpu"), 600);
  EXPECT_EQ(kubelet.Requested("n", "pods"), 1);
}

TEST(KubeletTest, CpuRoundsUpToAMillicore) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node("1", "1000", "10"));
  ASSERT_TRUE(kubelet.Admit("n", "a", Pod({{"cpu", "999500u"}})).admitted);  // 999.5m -> 1000m
  EXPECT_EQ(kubelet.Requested("n", "cpu"), 1000);
  EXPECT_EQ(kubelet.Admit("n", "b", Pod({{"cpu", "1n"}})).reason, "OutOfcpu");
}

// The device manager (pkg/kubelet/cm/devicemanager/manager.go devicesToAllocate) refuses before
// the predicate handler, with its own reason, when the healthy devices are taken.
TEST(KubeletTest, TheDeviceManagerRefusesWhenItsDevicesAreTaken) {
  KubeletAccounting kubelet;
  const ResourceList allocatable = GpuAllocatable(2);
  kubelet.SetNode("g", allocatable, DeviceCounts{{"example.com/gpu", 2}});
  ASSERT_TRUE(kubelet.Admit("g", "a", Gpus(1)).admitted);
  Admission a = kubelet.Admit("g", "b", Gpus(2));
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.reason, "UnexpectedAdmissionError");
  EXPECT_EQ(a.message,
            "Allocate failed due to requested number of devices unavailable for example.com/gpu. "
            "Requested: 2, Available: 1, which is unexpected");
  EXPECT_TRUE(kubelet.Admit("g", "c", Gpus(1)).admitted);
  EXPECT_EQ(kubelet.Requested("g", "example.com/gpu"), 2);
  kubelet.Release("a");
  EXPECT_TRUE(kubelet.Admit("g", "b", Gpus(1)).admitted);
}

TEST(KubeletTest, ARegisteredResourceWithNoHealthyDeviceIsRefused) {
  KubeletAccounting kubelet;
  kubelet.SetNode("g", Node("4", "8Gi", "110"), DeviceCounts{{"example.com/gpu", 0}});
  Admission a = kubelet.Admit("g", "a", Gpus(1));
  EXPECT_EQ(a.reason, "UnexpectedAdmissionError");
  EXPECT_EQ(a.message,
            "Allocate failed due to no healthy devices present; cannot allocate unhealthy "
            "devices example.com/gpu, which is unexpected");
}

// An init container's devices are reused by the app containers after it (devicesToReuse).
TEST(KubeletTest, AppContainersReuseAnInitContainersDevices) {
  KubeletAccounting kubelet;
  const ResourceList allocatable = GpuAllocatable(2);
  kubelet.SetNode("g", allocatable, DeviceCounts{{"example.com/gpu", 2}});
  const KubeletPod parsed_pod = InitAndMainWithTwoGpus(false);
  EXPECT_TRUE(kubelet.Admit("g", "a", parsed_pod).admitted);
  EXPECT_EQ(kubelet.Admit("g", "b", Gpus(1)).reason, "UnexpectedAdmissionError");
}

// UpdatePluginResources / sanitizeNodeAllocatable: a node whose status.allocatable lags its
// device plugin (1 listed, 2 healthy) admits a pod the device manager gave 2 devices.
TEST(KubeletTest, AllocatableIsRaisedToTheDevicesAllocated) {
  KubeletAccounting kubelet;
  const ResourceList allocatable = GpuAllocatable(1);
  kubelet.SetNode("g", allocatable, DeviceCounts{{"example.com/gpu", 2}});
  EXPECT_TRUE(kubelet.Admit("g", "a", Gpus(2)).admitted);
  // Without devices for the pod, allocatable is not raised: the predicate counts the listed 1.
  KubeletAccounting plain;
  plain.SetNode("n", allocatable);
  EXPECT_EQ(plain.Admit("n", "a", Gpus(2)).reason, "OutOfexample.com/gpu");
}

// A sidecar's devices stay its own (removeContainerAllocatedResources): the app container after
// it needs devices of its own.
TEST(KubeletTest, ASidecarsDevicesAreNotReused) {
  KubeletAccounting kubelet;
  const ResourceList allocatable = GpuAllocatable(2);
  kubelet.SetNode("g", allocatable, DeviceCounts{{"example.com/gpu", 2}});
  const KubeletPod parsed_pod = InitAndMainWithTwoGpus(true);
  Admission a = kubelet.Admit("g", "a", parsed_pod);
  EXPECT_EQ(a.reason, "UnexpectedAdmissionError");
  EXPECT_EQ(a.message,
            "Allocate failed due to requested number of devices unavailable for example.com/gpu. "
            "Requested: 2, Available: 0, which is unexpected");
}

}  // namespace
}  // namespace fitledger::sim
