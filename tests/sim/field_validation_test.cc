#include "sim/field_validation.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fitledger::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A Pod naming every part the sim reads or writes: metadata, spec (containers with resources,
// probes, env, volume mounts; volumes, affinity, tolerations, topology spread), and status.
constexpr char kFullPod[] = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "web", "namespace": "default", "generateName": "web-", "uid": "u",
    "resourceVersion": "1", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z",
    "deletionTimestamp": null, "deletionGracePeriodSeconds": 30,
    "labels": {"app": "web"}, "annotations": {"a": "b"}, "finalizers": ["x/y"],
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "v",
      "controller": true, "blockOwnerDeletion": true}],
    "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
      "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
      "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]},
  "spec": {
    "nodeName": "worker-1", "schedulerName": "default-scheduler", "priority": 0,
    "priorityClassName": "p", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "hostNetwork": false,
    "nodeSelector": {"k": "v"}, "overhead": {"cpu": "10m"},
    "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
    "securityContext": {"runAsUser": 1000, "fsGroup": 2000},
    "imagePullSecrets": [{"name": "s"}], "schedulingGates": [{"name": "g"}],
    "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule",
      "tolerationSeconds": 5}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
      "nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "In",
        "values": ["a"]}]}]}},
      "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
        "podAffinityTerm": {"topologyKey": "h", "labelSelector": {"matchLabels": {"a": "b"}}}}]}},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "z",
      "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"a": "b"}}}],
    "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}},
      {"name": "c", "configMap": {"name": "cm", "items": [{"key": "k", "path": "p"}]}}],
    "initContainers": [{"name": "init", "image": "busybox", "restartPolicy": "Always"}],
    "containers": [{"name": "main", "image": "nginx", "imagePullPolicy": "IfNotPresent",
      "command": ["a"], "args": ["b"], "workingDir": "/",
      "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
      "env": [{"name": "A", "value": "1"},
        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
      "envFrom": [{"configMapRef": {"name": "cm"}}],
      "resources": {"requests": {"cpu": "500m", "memory": "128Mi", "example.com/gpu": "1"},
        "limits": {"cpu": "1"}, "claims": [{"name": "c"}]},
      "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
      "volumeMounts": [{"name": "v", "mountPath": "/v", "readOnly": true}],
      "livenessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 10},
      "readinessProbe": {"tcpSocket": {"port": "http"}},
      "startupProbe": {"exec": {"command": ["true"]}},
      "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
      "securityContext": {"privileged": false, "capabilities": {"add": ["NET_ADMIN"]}},
      "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
      "stdin": false, "tty": false}]},
  "status": {"phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1",
    "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.1.0.1", "podIPs": [{"ip": "10.1.0.1"}],
    "startTime": "2026-01-01T00:00:00Z", "reason": "r", "message": "m",
    "nominatedNodeName": "n",
    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": null,
      "lastProbeTime": null, "reason": "r", "message": "m"}],
    "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "image": "nginx",
      "imageID": "", "containerID": "c", "started": true,
      "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
      "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
      "resources": {"requests": {"cpu": "1"}}, "allocatedResources": {"cpu": "1"}}]}
})";

TEST(FieldValidationTest, AValidPodHasNoUnknownField) {
  EXPECT_THAT(StrictDecodingErrors(Kind::kPod, kFullPod), IsEmpty());
}

TEST(FieldValidationTest, ValidNodesDeploymentsReplicaSetsAndLeasesHaveNone) {
  EXPECT_THAT(StrictDecodingErrors(Kind::kNode, R"({"apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "n", "labels": {"a": "b"}},
    "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"],
      "providerID": "p", "taints": [{"key": "k", "effect": "NoSchedule", "value": "v"}]},
    "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4", "pods": "110"},
      "phase": "Running",
      "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": null,
        "lastTransitionTime": null, "reason": "KubeletReady", "message": "ok"}],
      "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
      "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
      "nodeInfo": {"kubeletVersion": "v1.30.0", "osImage": "o", "kernelVersion": "k",
        "containerRuntimeVersion": "c", "architecture": "amd64", "operatingSystem": "linux",
        "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""},
      "images": [{"names": ["a"], "sizeBytes": 1}]}})"),
              IsEmpty());
  constexpr char kWorkload[] = R"({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
      "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%",
        "maxUnavailable": 1}},
      "minReadySeconds": 0, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
      "paused": false,
      "template": {"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx",
          "resources": {"requests": {"cpu": "100m"}}}]}}},
    "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2,
      "updatedReplicas": 2, "observedGeneration": 1, "unavailableReplicas": 0,
      "terminatingReplicas": 0, "collisionCount": 0,
      "conditions": [{"type": "Available", "status": "True", "lastUpdateTime": null,
        "lastTransitionTime": null, "reason": "r", "message": "m"}]}})";
  EXPECT_THAT(StrictDecodingErrors(Kind::kDeployment, kWorkload), IsEmpty());
  EXPECT_THAT(StrictDecodingErrors(Kind::kReplicaSet, R"({"apiVersion": "apps/v1",
    "kind": "ReplicaSet", "metadata": {"name": "web-1"},
    "spec": {"replicas": 1, "minReadySeconds": 0, "selector": {"matchLabels": {"a": "b"}},
      "template": {"metadata": {"labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}},
    "status": {"replicas": 1, "fullyLabeledReplicas": 1, "readyReplicas": 1,
      "availableReplicas": 1, "observedGeneration": 1,
      "conditions": [{"type": "ReplicaFailure", "status": "False"}]}})"),
              IsEmpty());
  EXPECT_THAT(StrictDecodingErrors(Kind::kLease, R"({"apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease", "metadata": {"name": "l"},
    "spec": {"holderIdentity": "h", "leaseDurationSeconds": 15,
      "acquireTime": "2026-05-01T10:00:00.000000Z", "renewTime": "2026-05-01T10:00:02.000000Z",
      "leaseTransitions": 0, "strategy": "OldestEmulationVersion",
      "preferredHolder": "p"}})"),
              IsEmpty());
}

TEST(FieldValidationTest, UnknownFieldsAreNamedByTheirPathInTheBodysOrder) {
  EXPECT_THAT(
      StrictDecodingErrors(Kind::kPod, R"({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "typo", "lables": {"a": "b"}},
        "spec": {"containers": [{"name": "a", "image": "x"},
          {"name": "main", "image": "x", "imagePullPolcy": "IfNotPresent",
           "resources": {"request": {"cpu": "1"}}, "Image": "y"}],
          "nodename": "n"},
        "zzz": 1, "aaa": 2})"),
      ElementsAre("unknown field \"metadata.lables\"",
                  "unknown field \"spec.containers[1].imagePullPolcy\"",
                  "unknown field \"spec.containers[1].resources.request\"",
                  "unknown field \"spec.containers[1].Image\"",  // names are case-sensitive
                  "unknown field \"spec.nodename\"", "unknown field \"zzz\"",
                  "unknown field \"aaa\""));
  // Inside a Deployment's pod template, and in a map of objects' values.
  EXPECT_THAT(StrictDecodingErrors(Kind::kDeployment, R"({"spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "x", "imagePullPolcy": "Always"}]}}}})"),
              ElementsAre("unknown field \"spec.template.spec.containers[0].imagePullPolcy\""));
  // Labels and resource maps take any key; Events are not checked; a body that is not an object
  // has no strict errors (it fails decoding instead).
  EXPECT_THAT(StrictDecodingErrors(Kind::kEvent, R"({"whatever": 1})"), IsEmpty());
  EXPECT_THAT(StrictDecodingErrors(Kind::kPod, "[1]"), IsEmpty());
  EXPECT_THAT(StrictDecodingErrors(Kind::kPod, "{"), IsEmpty());
}

TEST(FieldValidationTest, StrictRefusesWarnWarnsIgnoreSaysNothing) {
  const std::vector<std::string> errors = {"unknown field \"a\"", "unknown field \"b.c\""};
  std::vector<std::string> warnings;
  absl::Status strict =
      ApplyFieldValidation(FieldValidation::kStrict, "Pod", "v1", errors, &warnings);
  EXPECT_EQ(strict.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(strict.message(),
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown "
            "field \"a\", unknown field \"b.c\"");
  EXPECT_THAT(warnings, IsEmpty());
  EXPECT_TRUE(ApplyFieldValidation(FieldValidation::kIgnore, "Pod", "v1", errors, &warnings).ok());
  EXPECT_THAT(warnings, IsEmpty());
  EXPECT_TRUE(ApplyFieldValidation(FieldValidation::kWarn, "Pod", "v1", errors, &warnings).ok());
  EXPECT_EQ(warnings, errors);
  EXPECT_EQ(WarningHeader("unknown field \"a\\b\""), R"(299 - "unknown field \"a\\b\"")");

  EXPECT_EQ(*ParseFieldValidation("", "CreateOptions"), FieldValidation::kWarn);
  EXPECT_EQ(*ParseFieldValidation("Strict", "CreateOptions"), FieldValidation::kStrict);
  EXPECT_EQ(*ParseFieldValidation("Ignore", "UpdateOptions"), FieldValidation::kIgnore);
  absl::StatusOr<FieldValidation> bad = ParseFieldValidation("strict", "UpdateOptions");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bad.status().message(),
            "UpdateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: "
            "\"strict\": supported values: \"Ignore\", \"Strict\", \"Warn\"");
}

}  // namespace
}  // namespace fitledger::sim
