// Decoding Node and Lease JSON (server/kube/objects.h): the fields the server reads, and errors
// that name the field.
#include "server/kube/objects.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger::kube {
namespace {

using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

struct BadCase {
  std::string json;
  std::string message;  // the error's start: "field <path>: "
};

TEST(DecodeNodeTest, AllocatableOrElseCapacity) {
  absl::StatusOr<DecodedNode> node = ParseNode(R"({
    "metadata": {"name": "ip-10-0-3-17.eu-west-1.compute.internal", "resourceVersion": "42",
                 "labels": {"kubernetes.io/os": "linux"}},
    "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
               "allocatable": {"cpu": "7910m", "memory": "30Gi", "pods": 110}}
  })");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->node.name, "ip-10-0-3-17.eu-west-1.compute.internal");
  EXPECT_EQ(node->resource_version, "42");
  EXPECT_EQ(node->node.allocatable.Get("cpu"), 7910);
  EXPECT_EQ(node->node.allocatable.Get("memory"), int64_t{30} << 30);
  EXPECT_EQ(node->node.allocatable.Get("pods"), 110);

  node = ParseNode(R"({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2"},
                       "allocatable": null}})");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->node.allocatable.Get("cpu"), 2000);
}

TEST(DecodeNodeTest, AnErrorNamesTheField) {
  const std::vector<BadCase> cases = {
      {R"({"metadata": {"name": 1}})", "field metadata.name: "},
      {R"({"status": {"allocatable": {"cpu": "lots"}}})", "field status.allocatable.cpu: "},
      {R"({"status": {"capacity": {"memory": null}}})",
       "field status.capacity.memory: a quantity must be a string or a number"},
      {R"({"status": []})", "field status: "},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<DecodedNode> node = ParseNode(c.json);
    ASSERT_FALSE(node.ok()) << c.json;
    EXPECT_EQ(node.status().message().substr(0, c.message.size()), c.message)
        << c.json << "\n  got: " << node.status().message();
  }
}

TEST(DecodeNodeTest, NotAnObjectIsAnError) {
  EXPECT_EQ(ParseNode("\"node\"").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseLeaseTest, ReadsTheLeaderElectionRecord) {
  absl::StatusOr<LeaseRecord> lease = ParseLease(R"({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "fitledger-scheduler", "namespace": "fitledger", "resourceVersion": "42"},
    "spec": {"holderIdentity": "pod-a_1234", "leaseDurationSeconds": 15,
             "acquireTime": "2026-05-01T10:00:00.000000Z",
             "renewTime": "2026-05-01T10:00:04.250000Z", "leaseTransitions": 3}})");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->namespace_name, "fitledger");
  EXPECT_EQ(lease->name, "fitledger-scheduler");
  EXPECT_EQ(lease->resource_version, "42");
  EXPECT_EQ(lease->holder_identity, "pod-a_1234");
  EXPECT_EQ(lease->lease_duration_seconds, 15);
  EXPECT_EQ(lease->lease_transitions, 3);
  ASSERT_TRUE(lease->renew_time.has_value());
  EXPECT_EQ(*lease->renew_time - *lease->acquire_time, absl::Milliseconds(4250));
}

TEST(ParseLeaseTest, AbsentFieldsAreZeroAndBadOnesAreNamed) {
  absl::StatusOr<LeaseRecord> lease =
      ParseLease(R"({"metadata":{"name":"l"},"spec":{"holderIdentity":null}})");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->holder_identity, "");
  EXPECT_FALSE(lease->renew_time.has_value());
  EXPECT_THAT(ParseLease(R"({"spec":{"leaseDurationSeconds":"15"}})").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("leaseDurationSeconds")));
  EXPECT_THAT(ParseLease(R"({"spec":{"renewTime":"yesterday"}})").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("spec.renewTime")));
  EXPECT_THAT(ParseLease("{not json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not JSON")));
}


}  // namespace
}  // namespace fitledger::kube
