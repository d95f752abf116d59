#include "sim/kubelet.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fitledger::sim {
namespace {

Resources Node(int64_t milli_cpu, int64_t memory, int64_t pods) {
  Resources r;
  r.milli_cpu = milli_cpu;
  r.memory_bytes = memory;
  r.pods = pods;
  return r;
}

Resources Request(int64_t milli_cpu, int64_t memory) {
  Resources r;
  r.milli_cpu = milli_cpu;
  r.memory_bytes = memory;
  r.pods = 1;
  return r;
}

TEST(KubeletTest, RejectsCpuWithTheKubeletsExactMessage) {
  KubeletAccounting kubelet;
  kubelet.SetNode("worker-1", Node(4000, 8LL << 30, 110));
  ASSERT_TRUE(kubelet.Admit("worker-1", "a", Request(3800, 0)).admitted);
  Admission a = kubelet.Admit("worker-1", "b", Request(400, 0));
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.reason, "OutOfcpu");
  EXPECT_EQ(a.message,
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 400, used: 3800, "
            "capacity: 4000");
}

TEST(KubeletTest, RejectsMemoryInBytes) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node(4000, 1000, 110));
  ASSERT_TRUE(kubelet.Admit("n", "a", Request(100, 600)).admitted);
  Admission a = kubelet.Admit("n", "b", Request(100, 500));
  EXPECT_EQ(a.reason, "OutOfmemory");
  EXPECT_EQ(a.message,
            "Pod was rejected: Node didn't have enough resource: memory, requested: 500, used: "
            "600, capacity: 1000");
}

TEST(KubeletTest, PodsAreCheckedFirstAndOnlyTheFirstFailureIsReported) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node(1000, 1000, 1));
  ASSERT_TRUE(kubelet.Admit("n", "a", Request(1000, 1000)).admitted);
  Admission a = kubelet.Admit("n", "b", Request(1000, 1000));
  EXPECT_EQ(a.reason, "OutOfpods");
  EXPECT_EQ(a.message,
            "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, "
            "capacity: 1");
}

TEST(KubeletTest, CpuIsReportedBeforeMemory) {
  Admission a = CheckAdmission(Node(1000, 1000, 10), Resources{}, Request(2000, 2000));
  EXPECT_EQ(a.reason, "OutOfcpu");
}

TEST(KubeletTest, EphemeralStorageAndExtendedResources) {
  Resources node = Node(1000, 1000, 10);
  node.ephemeral_storage_bytes = 100;
  node.Set("example.com/gpu", 2);
  Resources req = Request(0, 0);
  req.ephemeral_storage_bytes = 200;
  Admission a = CheckAdmission(node, Resources{}, req);
  EXPECT_EQ(a.reason, "OutOfephemeral-storage");
  EXPECT_EQ(a.message,
            "Pod was rejected: Node didn't have enough resource: ephemeral-storage, requested: "
            "200, used: 0, capacity: 100");

  Resources gpu = Request(0, 0);
  gpu.Set("example.com/gpu", 3);
  a = CheckAdmission(node, Resources{}, gpu);
  EXPECT_EQ(a.reason, "OutOfexample.com/gpu");
  EXPECT_EQ(a.message,
            "Pod was rejected: Node didn't have enough resource: example.com/gpu, requested: 3, "
            "used: 0, capacity: 2");
}

TEST(KubeletTest, ExtendedResourcesTheNodeDoesNotAdvertiseAreIgnored) {
  Resources req = Request(100, 0);
  req.Set("example.com/fpga", 1);
  EXPECT_TRUE(CheckAdmission(Node(1000, 1000, 10), Resources{}, req).admitted);
  Resources huge = Request(0, 0);
  huge.Set("hugepages-2Mi", 2097152);
  Admission a = CheckAdmission(Node(1000, 1000, 10), Resources{}, huge);
  EXPECT_EQ(a.reason, "OutOfhugepages-2Mi");
}

TEST(KubeletTest, ZeroRequestPodsOnlyNeedAPodSlot) {
  EXPECT_TRUE(CheckAdmission(Node(0, 0, 1), Resources{}, Request(0, 0)).admitted);
}

TEST(KubeletTest, ReleaseFreesCapacityAndIsIdempotent) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node(1000, 1000, 10));
  ASSERT_TRUE(kubelet.Admit("n", "a", Request(1000, 0)).admitted);
  EXPECT_FALSE(kubelet.Admit("n", "b", Request(1, 0)).admitted);
  kubelet.Release("a");
  kubelet.Release("a");
  EXPECT_EQ(kubelet.Used("n").milli_cpu, 0);
  EXPECT_EQ(kubelet.Used("n").pods, 0);
  EXPECT_TRUE(kubelet.Admit("n", "b", Request(1, 0)).admitted);
}

TEST(KubeletTest, AdmittingTheSameUidTwiceCountsOnce) {
  KubeletAccounting kubelet;
  kubelet.SetNode("n", Node(1000, 1000, 10));
  ASSERT_TRUE(kubelet.Admit("n", "a", Request(600, 0)).admitted);
  EXPECT_TRUE(kubelet.Admit("n", "a", Request(600, 0)).admitted);
  EXPECT_EQ(kubelet.Used("n").milli_cpu, 600);
}

}  // namespace
}  // namespace fitledger::sim
