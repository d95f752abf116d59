// The controllers fitledger-sim runs in its own process, in place of kube-controller-manager's,
// for the kinds it serves. Minimal by design (sim/README.md lists what they do not do):
//
// - Deployment controller (pkg/controller/deployment): one ReplicaSet per pod template, named
//   <deployment>-<pod-template-hash>, owned by the deployment (ownerReferences, controller), with
//   the deployment's replicas; a ReplicaSet of an older template is scaled to 0 at once (no
//   rolling update: maxSurge / maxUnavailable are not honoured). The deployment's status
//   (replicas, updated, ready, available, unavailable, observedGeneration, the Available and
//   Progressing conditions) sums its ReplicaSets'. Event ScalingReplicaSet.
// - ReplicaSet controller (pkg/controller/replicaset replica_set.go manageReplicas): keeps
//   spec.replicas active pods (not Succeeded / Failed, not being deleted), creating them from the
//   template (generateName <replicaset>-, ownerReferences) and deleting the surplus in the order
//   of controller_utils.go ActivePods (unbound first, then Pending, then not ready, then newest).
//   A pod the kubelet rejected (Failed, OutOfcpu) is no longer active and is replaced, as
//   upstream. Only pods it created count (it adopts no orphan). Status: replicas,
//   fullyLabeledReplicas, readyReplicas, availableReplicas (Running = ready in the sim, and
//   minReadySeconds is not honoured), observedGeneration. Events SuccessfulCreate,
//   SuccessfulDelete.
// - Garbage collector (pkg/controller/garbagecollector), background cascading deletion only:
//   when a deployment is deleted its ReplicaSets are, and when a ReplicaSet is deleted its pods
//   are (gracefully; the kubelet finishes them). Orphaning is done by the DELETE handler
//   (sim/object_api.h). Pods whose owner never existed (the generated benchmark pods) are left
//   alone, unlike upstream.
// - The kubelet's Warning event when it rejects a pod (reason OutOf<resource>, message "Node
//   didn't have enough resource: ..."; pkg/kubelet/kubelet.go rejectPod).
//
// They read the store directly, without the watch lag (as if their informers were current), so
// they need no expectations.
//
// Thread-safe: Start() spawns the one controller thread, Stop() joins it; the state below is
// owned by that thread.
#ifndef FITLEDGER_SIM_CONTROLLERS_H_
#define FITLEDGER_SIM_CONTROLLERS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "nlohmann/json.hpp"
#include "sim/store.h"

namespace fitledger::sim {

class Controllers {
 public:
  // `pod_terminating(namespace, name)` is called after the controllers start a pod's graceful
  // deletion, so the simulated kubelet finishes it (SimServer's hook). `store` must outlive this.
  Controllers(ClusterStore* store,
              std::function<void(const std::string&, const std::string&)> pod_terminating);
  ~Controllers();
  Controllers(const Controllers&) = delete;
  Controllers& operator=(const Controllers&) = delete;

  void Start();
  // Idempotent.
  void Stop();

  // Processes every change up to now and reconciles what it touched (the thread's one pass; for
  // tests without the thread). REQUIRES: not started.
  void SyncOnce();

 private:
  void Loop();
  void Pass();
  // Reads the changes since the cursors; marks deployments and replica sets to reconcile.
  void ReadChanges();
  void ReconcileDeployment(const std::string& key);
  void ReconcileReplicaSet(const std::string& key);
  // The kubelet's event for a pod it rejected.
  void RecordRejection(const StoredObject& pod);
  // Records a core/v1 Event about `object` (client-go tools/record's fields and name).
  void RecordEvent(const nlohmann::json& object, const std::string& type, const std::string& reason,
                   const std::string& message, const std::string& component,
                   const std::string& host);
  void DeletePod(const std::string& namespace_name, const std::string& name);

  ClusterStore* const store_;
  const std::function<void(const std::string&, const std::string&)> pod_terminating_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;

  // Owned by the controller thread (or SyncOnce's caller).
  uint64_t pod_cursor_ = 0;
  uint64_t deployment_cursor_ = 0;
  uint64_t replica_set_cursor_ = 0;
  std::set<std::string> dirty_deployments_;   // "namespace/name"
  std::set<std::string> dirty_replica_sets_;  // "namespace/name"
  // The UIDs of deleted owners, by key, until their dependents are gone.
  std::map<std::string, std::string> deleted_deployments_;
  std::map<std::string, std::string> deleted_replica_sets_;
  // The pods the ReplicaSet controller created: replica set key -> pod keys, and back.
  std::map<std::string, std::set<std::string>> pods_of_;
  std::map<std::string, std::string> owner_of_;
  // Pods whose rejection event was recorded (UIDs), until they are deleted.
  std::set<std::string> rejected_;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_CONTROLLERS_H_
