#include "model/resources.h"

#include "gtest/gtest.h"

namespace fitledger {
namespace {

TEST(ResourcesTest, ClassifiesResourceNames) {
  EXPECT_TRUE(IsExtendedResourceName("example.com/gpu-mem"));
  EXPECT_TRUE(IsExtendedResourceName("nvidia.com/gpu"));
  EXPECT_FALSE(IsExtendedResourceName("cpu"));
  EXPECT_FALSE(IsExtendedResourceName("kubernetes.io/foo"));
  EXPECT_FALSE(IsExtendedResourceName("node.kubernetes.io/foo"));
  EXPECT_FALSE(IsExtendedResourceName("requests.example.com/gpu"));
  EXPECT_FALSE(IsExtendedResourceName("/gpu"));
  EXPECT_TRUE(IsHugePagesResourceName("hugepages-1Gi"));
  EXPECT_TRUE(IsScalarResourceName("hugepages-2Mi"));
  EXPECT_FALSE(IsScalarResourceName("memory"));
  // pkg/scheduler/util IsScalarResourceName: prefixed native resources are scalar too, so
  // NodeResourcesFit checks them (fit_test "kubernetes.io resource capacity enforced").
  EXPECT_TRUE(IsPrefixedNativeResource("kubernetes.io/something"));
  EXPECT_TRUE(IsPrefixedNativeResource("subdomain.kubernetes.io/something"));
  EXPECT_FALSE(IsPrefixedNativeResource("example.com/gpu"));
  EXPECT_TRUE(IsScalarResourceName("kubernetes.io/something"));
  EXPECT_TRUE(IsScalarResourceName("subdomain.kubernetes.io/something"));
  EXPECT_FALSE(IsExtendedResourceName("subdomain.kubernetes.io/something"));
  // IsExtendedResourceName: "requests." + name must be a qualified name.
  EXPECT_FALSE(IsExtendedResourceName("example.com/a/b"));
  EXPECT_FALSE(IsExtendedResourceName("Example.com/gpu"));
  EXPECT_FALSE(IsExtendedResourceName("example.com/-gpu"));
  EXPECT_TRUE(IsExtendedResourceName("example.com/GPU_1.x"));
  EXPECT_FALSE(IsScalarResourceName("example"));
  Resources r;
  EXPECT_TRUE(r.Set("kubernetes.io/something", 5));
  EXPECT_EQ(r.Get("kubernetes.io/something"), 5);
}

TEST(ResourcesTest, AddAndSubtractMergeScalarsByName) {
  Resources a;
  a.milli_cpu = 100;
  a.Set("example.com/b", 2);
  a.Set("example.com/a", 1);
  Resources b;
  b.milli_cpu = 50;
  b.Set("example.com/a", 4);
  a.Add(b);
  EXPECT_EQ(a.milli_cpu, 150);
  EXPECT_EQ(a.Get("example.com/a"), 5);
  EXPECT_EQ(a.Get("example.com/b"), 2);
  ASSERT_EQ(a.scalars.size(), 2u);
  EXPECT_EQ(a.scalars[0].first, "example.com/a");
  a.Subtract(b);
  a.Subtract(b);
  EXPECT_EQ(a.Get("example.com/a"), -3);
  Resources c;
  c.Set("example.com/a", 1);
  Resources copy = c;
  c.Subtract(copy);
  EXPECT_TRUE(c.IsZero());
  EXPECT_FALSE(c.Set("bogus", 1));
}

}  // namespace
}  // namespace fitledger
