#include "sim/controllers.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/json_access.h"
#include "sim/api_objects.h"
#include "sim/objects.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

constexpr size_t kBatch = 10000;
// How long the thread waits for a change before looking again (it watches two signals).
constexpr absl::Duration kIdleWait = absl::Milliseconds(20);

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const size_t slash = key.find('/');
  return {key.substr(0, slash), key.substr(slash + 1)};
}

// The UID of the object's controller (the ownerReference with controller: true), or "".
std::string ControllerUid(const json& object) {
  for (const json& ref : JsonMember(JsonMember(object, "metadata"), "ownerReferences")) {
    if (JsonMember(ref, "controller") == json(true)) return JsonStr(ref, "uid");
  }
  return "";
}

json ControllerRef(const json& owner) {
  const json& metadata = JsonMember(owner, "metadata");
  return json{{"apiVersion", JsonStr(owner, "apiVersion")},
              {"kind", JsonStr(owner, "kind")},
              {"name", JsonStr(metadata, "name")},
              {"uid", JsonStr(metadata, "uid")},
              {"controller", true},
              {"blockOwnerDeletion", true}};
}

// pkg/controller/controller_utils.go ComputeHash: FNV-32a of the template, its decimal digits
// through apimachinery's rand.SafeEncodeString. (Upstream hashes the Go-printed template; the sim
// hashes its JSON, so the names differ from a real cluster's but follow the same pattern.)
std::string PodTemplateHash(const json& template_) {
  uint32_t h = 2166136261u;
  for (unsigned char c : template_.dump()) {
    h ^= c;
    h *= 16777619u;
  }
  static constexpr char kAlphanums[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (char c : absl::StrCat(h)) out.push_back(kAlphanums[static_cast<unsigned char>(c) % 27]);
  return out;
}

// controller_utils.go GetPodFromTemplate: the template's labels, annotations and spec, named
// <replicaset>-<suffix>, owned by the replica set.
json PodFromTemplate(const json& rs) {
  const json& template_ = JsonMember(JsonMember(rs, "spec"), "template");
  const json& template_metadata = JsonMember(template_, "metadata");
  json metadata = {{"generateName", absl::StrCat(JsonStr(JsonMember(rs, "metadata"), "name"), "-")},
                   {"ownerReferences", json::array({ControllerRef(rs)})}};
  if (JsonMember(template_metadata, "labels").is_object()) {
    metadata["labels"] = template_metadata["labels"];
  }
  if (JsonMember(template_metadata, "annotations").is_object()) {
    metadata["annotations"] = template_metadata["annotations"];
  }
  return json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", metadata},
              {"spec", JsonMember(template_, "spec")}};
}

bool Active(const StoredObject& pod) {
  return pod.fields.phase != "Succeeded" && pod.fields.phase != "Failed" && !pod.fields.deleting;
}

// The condition of `type` in `conditions`, with its transition time kept when nothing changed.
json Condition(const json& old_conditions, const std::string& type, const std::string& status,
               const std::string& reason, const std::string& message, const std::string& now) {
  json c = {{"type", type},       {"status", status},      {"reason", reason},
            {"message", message}, {"lastUpdateTime", now}, {"lastTransitionTime", now}};
  for (const json& old : old_conditions) {
    if (JsonStr(old, "type") != type) continue;
    if (JsonStr(old, "status") == status)
      c["lastTransitionTime"] = JsonMember(old, "lastTransitionTime");
    if (JsonStr(old, "status") == status && JsonStr(old, "reason") == reason &&
        JsonStr(old, "message") == message) {
      c["lastUpdateTime"] = JsonMember(old, "lastUpdateTime");
    }
  }
  return c;
}

}  // namespace

Controllers::Controllers(
    ClusterStore* store,
    std::function<void(const std::string&, const std::string&)> pod_terminating)
    : store_(store), pod_terminating_(std::move(pod_terminating)) {
  const uint64_t now = store_->resource_version();
  pod_cursor_ = deployment_cursor_ = replica_set_cursor_ = now;
}

Controllers::~Controllers() { Stop(); }

void Controllers::Start() {
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void Controllers::Stop() {
  stopping_ = true;
  store_->NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void Controllers::SyncOnce() { Pass(); }

void Controllers::Loop() {
  uint64_t pods_seen = store_->signal(Kind::kPod).generation();
  uint64_t others_seen = store_->signal(Kind::kDeployment).generation();
  while (!stopping_) {
    Pass();
    while (!stopping_) {
      const uint64_t pods = store_->signal(Kind::kPod).generation();
      const uint64_t others = store_->signal(Kind::kDeployment).generation();
      if (pods != pods_seen || others != others_seen) {
        pods_seen = pods;
        others_seen = others;
        break;
      }
      store_->ExpireEvents();  // also when nothing else changes
      store_->signal(Kind::kDeployment).WaitForChange(others, absl::Now() + kIdleWait);
    }
  }
}

void Controllers::Pass() {
  store_->ExpireEvents();
  ReadChanges();
  // Deployments first: they create and scale replica sets, which then create pods.
  while (!dirty_deployments_.empty() || !dirty_replica_sets_.empty()) {
    std::set<std::string> deployments;
    deployments.swap(dirty_deployments_);
    for (const std::string& key : deployments) ReconcileDeployment(key);
    std::set<std::string> replica_sets;
    replica_sets.swap(dirty_replica_sets_);
    for (const std::string& key : replica_sets) ReconcileReplicaSet(key);
    ReadChanges();
  }
}

void Controllers::ReadChanges() {
  const absl::Time now = absl::Now();
  auto poll = [&](Kind kind, uint64_t& cursor, auto&& on_event) {
    ObjectFilter filter;
    filter.kind = kind;
    while (true) {
      WatchBatch batch = store_->Poll(filter, cursor, now, absl::ZeroDuration(), kBatch);
      if (batch.expired) {
        // Fell out of the history (a fault switch, or more than eventWindow changes since the
        // last pass): look at everything again.
        cursor = store_->resource_version();
        ObjectFilter all;
        all.kind = kind;
        if (auto list = store_->List(all, 0, ""); list.ok()) {
          for (const ObjectPtr& object : list->items) on_event(EventType::kModified, *object);
        }
        if (kind == Kind::kPod) {
          for (const auto& [rs, pods] : pods_of_) dirty_replica_sets_.insert(rs);
        }
        return;
      }
      cursor = batch.cursor;
      for (const WatchEvent& e : batch.events) on_event(e.type, *e.object);
      if (batch.events.size() < kBatch) return;
    }
  };
  poll(Kind::kDeployment, deployment_cursor_, [&](EventType type, const StoredObject& d) {
    const std::string key = StoreKey(d.fields.namespace_name, d.fields.name);
    if (type == EventType::kDeleted) deleted_deployments_[key] = d.uid;
    dirty_deployments_.insert(key);
  });
  poll(Kind::kReplicaSet, replica_set_cursor_, [&](EventType type, const StoredObject& rs) {
    const std::string key = StoreKey(rs.fields.namespace_name, rs.fields.name);
    if (type == EventType::kDeleted) deleted_replica_sets_[key] = rs.uid;
    dirty_replica_sets_.insert(key);
    // Its deployment sums its status.
    json object = json::parse(rs.json, nullptr, false);
    for (const json& ref : JsonMember(JsonMember(object, "metadata"), "ownerReferences")) {
      if (JsonStr(ref, "kind") == "Deployment" && JsonMember(ref, "controller") == json(true)) {
        dirty_deployments_.insert(StoreKey(rs.fields.namespace_name, JsonStr(ref, "name")));
      }
    }
  });
  poll(Kind::kPod, pod_cursor_, [&](EventType type, const StoredObject& pod) {
    const std::string key = StoreKey(pod.fields.namespace_name, pod.fields.name);
    if (auto owner = owner_of_.find(key); owner != owner_of_.end()) {
      dirty_replica_sets_.insert(owner->second);
    }
    if (type == EventType::kDeleted) {
      rejected_.erase(pod.uid);
    } else if (pod.fields.phase == "Failed" && rejected_.count(pod.uid) == 0) {
      RecordRejection(pod);
    }
  });
}

void Controllers::RecordRejection(const StoredObject& pod) {
  json object = json::parse(pod.json, nullptr, false);
  const json& status = JsonMember(object, "status");
  const std::string reason = JsonStr(status, "reason");
  // The kubelet's admission refusals (sim/kubelet.h): the predicate's OutOf<resource>, the device
  // manager's UnexpectedAdmissionError.
  if (!absl::StartsWith(reason, "OutOf") && reason != "UnexpectedAdmissionError") return;
  rejected_.insert(pod.uid);
  std::string message = JsonStr(status, "message");
  // kubelet.go rejectPod records the reason and the predicate's message, without the status
  // message's "Pod was rejected: " prefix.
  constexpr absl::string_view kPrefix = "Pod was rejected: ";
  if (absl::StartsWith(message, kPrefix)) message = message.substr(kPrefix.size());
  RecordEvent(object, "Warning", reason, message, "kubelet", pod.fields.node_name);
}

void Controllers::RecordEvent(const json& object, const std::string& type,
                              const std::string& reason, const std::string& message,
                              const std::string& component, const std::string& host) {
  const json& metadata = JsonMember(object, "metadata");
  const absl::Time now = absl::Now();
  const std::string ts = FormatTimestamp(now);
  std::string ns = JsonStr(metadata, "namespace");
  if (ns.empty()) ns = "default";
  json source = {{"component", component}};
  if (!host.empty()) source["host"] = host;
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata",
       {{"name", absl::StrFormat("%s.%x", JsonStr(metadata, "name"), absl::ToUnixNanos(now))},
        {"namespace", ns}}},
      {"involvedObject",
       {{"apiVersion", JsonStr(object, "apiVersion")},
        {"kind", JsonStr(object, "kind")},
        {"name", JsonStr(metadata, "name")},
        {"namespace", JsonStr(metadata, "namespace")},
        {"uid", JsonStr(metadata, "uid")},
        {"resourceVersion", JsonStr(metadata, "resourceVersion")}}},
      {"reason", reason},
      {"message", message},
      {"source", source},
      {"firstTimestamp", ts},
      {"lastTimestamp", ts},
      {"count", 1},
      {"type", type},
      {"eventTime", nullptr},
      {"reportingComponent", component},
      {"reportingInstance", host}};
  (void)store_->CreateObject(Kind::kEvent, ns, std::move(event));
}

void Controllers::DeletePod(const std::string& namespace_name, const std::string& name) {
  auto deleted = store_->DeletePod(namespace_name, name, ClusterStore::DeleteRequest{});
  if (deleted.ok() && !deleted->deleted && pod_terminating_) pod_terminating_(namespace_name, name);
}

void Controllers::ReconcileDeployment(const std::string& key) {
  const std::pair<std::string, std::string> ns_name = SplitKey(key);
  const std::string& ns = ns_name.first;
  const std::string& name = ns_name.second;
  ObjectFilter rs_filter;
  rs_filter.kind = Kind::kReplicaSet;
  rs_filter.namespace_name = ns;
  auto stored = store_->Get(Kind::kDeployment, ns, name);
  if (!stored.ok()) {
    // Gone: its replica sets go too (background cascading deletion).
    auto uid = deleted_deployments_.find(key);
    if (uid == deleted_deployments_.end()) return;
    if (auto list = store_->List(rs_filter, 0, ""); list.ok()) {
      for (const ObjectPtr& rs : list->items) {
        if (ControllerUid(json::parse(rs->json)) == uid->second) {
          (void)store_->DeleteObject(Kind::kReplicaSet, ns, rs->fields.name,
                                     DeletePreconditions::SameUid(rs->uid));
        }
      }
    }
    deleted_deployments_.erase(uid);
    return;
  }
  deleted_deployments_.erase(key);
  const json deployment = json::parse((*stored)->json);
  const json& spec = JsonMember(deployment, "spec");
  const int64_t replicas = JsonInt(spec, "replicas");
  json template_ = JsonMember(spec, "template");
  const std::string hash = PodTemplateHash(template_);
  const std::string new_name = absl::StrCat(name, "-", hash);
  // Its replica sets.
  std::vector<json> owned;
  if (auto list = store_->List(rs_filter, 0, ""); list.ok()) {
    for (const ObjectPtr& rs : list->items) {
      json object = json::parse(rs->json);
      if (ControllerUid(object) == (*stored)->uid) owned.push_back(std::move(object));
    }
  }
  auto scale = [&](const json& rs, int64_t to) {
    const std::string rs_name = JsonStr(JsonMember(rs, "metadata"), "name");
    const int64_t from = JsonInt(JsonMember(rs, "spec"), "replicas");
    if (from == to) return;
    json updated = rs;
    updated["spec"]["replicas"] = to;
    auto current = store_->Get(Kind::kReplicaSet, ns, rs_name);
    if (!current.ok()) return;
    absl::StatusOr<json> prepared = PrepareUpdate(Kind::kReplicaSet, Subresource::kMain,
                                                  json::parse((*current)->json), updated, rs_name);
    if (!prepared.ok()) return;
    if (store_
            ->UpdateObject(Kind::kReplicaSet, ns, rs_name, (*current)->resource_version,
                           *std::move(prepared))
            .ok()) {
      RecordEvent(
          deployment, "Normal", "ScalingReplicaSet",
          absl::StrCat("Scaled ", to > from ? "up" : "down", " replica set ", rs_name, " to ", to),
          "deployment-controller", "");
    }
  };
  bool have_new = false;
  for (const json& rs : owned) {
    if (JsonStr(JsonMember(rs, "metadata"), "name") == new_name) {
      have_new = true;
      scale(rs, replicas);
    } else {
      scale(rs, 0);  // an older template: replaced at once
    }
  }
  if (!have_new) {
    json labels = JsonMember(JsonMember(template_, "metadata"), "labels");
    if (!labels.is_object()) labels = json::object();
    labels["pod-template-hash"] = hash;
    template_["metadata"]["labels"] = labels;
    json selector = JsonMember(spec, "selector");
    selector["matchLabels"]["pod-template-hash"] = hash;
    json rs = {{"apiVersion", "apps/v1"},
               {"kind", "ReplicaSet"},
               {"metadata",
                {{"name", new_name},
                 {"namespace", ns},
                 {"labels", labels},
                 {"annotations",
                  {{"deployment.kubernetes.io/desired-replicas", absl::StrCat(replicas)},
                   {"deployment.kubernetes.io/revision", absl::StrCat(owned.size() + 1)}}},
                 {"ownerReferences", json::array({ControllerRef(deployment)})}}},
               {"spec", {{"replicas", replicas}, {"selector", selector}, {"template", template_}}}};
    absl::StatusOr<json> prepared = PrepareCreate(Kind::kReplicaSet, ns, std::move(rs));
    if (prepared.ok() && store_->CreateObject(Kind::kReplicaSet, ns, *std::move(prepared)).ok()) {
      RecordEvent(deployment, "Normal", "ScalingReplicaSet",
                  absl::StrCat("Scaled up replica set ", new_name, " to ", replicas),
                  "deployment-controller", "");
    }
  }
  // Status (pkg/controller/deployment/sync.go calculateStatus), from the replica sets as they are
  // now.
  int64_t total = 0, updated = 0, ready = 0, available = 0;
  if (auto list = store_->List(rs_filter, 0, ""); list.ok()) {
    for (const ObjectPtr& rs : list->items) {
      json object = json::parse(rs->json);
      if (ControllerUid(object) != (*stored)->uid) continue;
      const json& status = JsonMember(object, "status");
      total += JsonInt(status, "replicas");
      ready += JsonInt(status, "readyReplicas");
      available += JsonInt(status, "availableReplicas");
      if (rs->fields.name == new_name) updated = JsonInt(status, "replicas");
    }
  }
  const json& old_status = JsonMember(deployment, "status");
  const json& old_conditions = JsonMember(old_status, "conditions");
  const std::string now = FormatTimestamp(absl::Now());
  // deploymentutil.MaxUnavailable with the default 25%, rounded down.
  const int64_t min_available = replicas - replicas / 4;
  json conditions = json::array();
  conditions.push_back(
      available >= min_available
          ? Condition(old_conditions, "Available", "True", "MinimumReplicasAvailable",
                      "Deployment has minimum availability.", now)
          : Condition(old_conditions, "Available", "False", "MinimumReplicasUnavailable",
                      "Deployment does not have minimum availability.", now));
  conditions.push_back(
      updated == replicas && available == replicas && total == replicas
          ? Condition(old_conditions, "Progressing", "True", "NewReplicaSetAvailable",
                      absl::StrCat("ReplicaSet \"", new_name, "\" has successfully progressed."),
                      now)
          : Condition(old_conditions, "Progressing", "True", "ReplicaSetUpdated",
                      absl::StrCat("ReplicaSet \"", new_name, "\" is progressing."), now));
  json status = {{"observedGeneration", JsonInt(JsonMember(deployment, "metadata"), "generation")},
                 {"replicas", total},
                 {"updatedReplicas", updated},
                 {"readyReplicas", ready},
                 {"availableReplicas", available},
                 {"unavailableReplicas", std::max<int64_t>(0, replicas - available)},
                 {"conditions", conditions}};
  if (status == old_status) return;
  json with_status = deployment;
  with_status["status"] = status;
  absl::StatusOr<json> prepared =
      PrepareUpdate(Kind::kDeployment, Subresource::kStatus, deployment, with_status, name);
  if (!prepared.ok()) return;
  auto result = store_->UpdateObject(Kind::kDeployment, ns, name, (*stored)->resource_version,
                                     *std::move(prepared));
  if (!result.ok()) dirty_deployments_.insert(key);  // changed meanwhile: again
}

void Controllers::ReconcileReplicaSet(const std::string& key) {
  const std::pair<std::string, std::string> ns_name = SplitKey(key);
  const std::string& ns = ns_name.first;
  const std::string& name = ns_name.second;
  std::set<std::string>& pods = pods_of_[key];
  auto stored = store_->Get(Kind::kReplicaSet, ns, name);
  if (!stored.ok()) {
    // Gone: its pods go too (background cascading deletion: the garbage collector deletes a
    // dependent whose owner by that uid is absent, pkg/controller/garbagecollector/
    // garbagecollector.go attemptToDeleteItem), those that still name it.
    auto uid = deleted_replica_sets_.find(key);
    // Deleted in this pass (by its deployment's cascade) and its DELETED event, which says whose
    // pods are its, not read yet: that event brings it back here. Its pods are kept till then.
    if (uid == deleted_replica_sets_.end()) return;
    for (const std::string& pod_key : pods) {
      const std::pair<std::string, std::string> pod_ns_pod_name = SplitKey(pod_key);
      const std::string& pod_ns = pod_ns_pod_name.first;
      const std::string& pod_name = pod_ns_pod_name.second;
      auto pod = store_->Get(Kind::kPod, pod_ns, pod_name);
      if (pod.ok() && ControllerUid(json::parse((*pod)->json)) == uid->second) {
        DeletePod(pod_ns, pod_name);
      }
      owner_of_.erase(pod_key);
    }
    deleted_replica_sets_.erase(uid);
    pods_of_.erase(key);
    return;
  }
  deleted_replica_sets_.erase(key);
  const json rs = json::parse((*stored)->json);
  const int64_t replicas = JsonInt(JsonMember(rs, "spec"), "replicas");
  std::vector<ObjectPtr> active;
  for (auto it = pods.begin(); it != pods.end();) {
    const std::pair<std::string, std::string> pod_ns_pod_name = SplitKey(*it);
    const std::string& pod_ns = pod_ns_pod_name.first;
    const std::string& pod_name = pod_ns_pod_name.second;
    auto pod = store_->Get(Kind::kPod, pod_ns, pod_name);
    if (!pod.ok() || ControllerUid(json::parse((*pod)->json)) != (*stored)->uid) {
      owner_of_.erase(*it);  // gone, or orphaned
      it = pods.erase(it);
      continue;
    }
    if (Active(**pod)) active.push_back(*pod);
    ++it;
  }
  const int64_t diff = static_cast<int64_t>(active.size()) - replicas;
  if (diff < 0) {
    // manageReplicas creates in slow-start batches; in process, all at once.
    const std::string body = Dump(PodFromTemplate(rs));
    for (int64_t i = 0; i < -diff; ++i) {
      auto pod = store_->CreatePod(body, ns);
      if (!pod.ok()) {
        RecordEvent(rs, "Warning", "FailedCreate",
                    absl::StrCat("Error creating: ", pod.status().message()),
                    "replicaset-controller", "");
        break;
      }
      const std::string pod_key = StoreKey(ns, (*pod)->fields.name);
      pods.insert(pod_key);
      owner_of_[pod_key] = key;
      RecordEvent(rs, "Normal", "SuccessfulCreate",
                  absl::StrCat("Created pod: ", (*pod)->fields.name), "replicaset-controller", "");
    }
  } else if (diff > 0) {
    // controller_utils.go ActivePods: unassigned < assigned, Pending < Running, not ready < ready,
    // newer < older; the first ones are deleted.
    auto rank = [](const ObjectPtr& p) {
      const int phase = p->fields.phase == "Pending" ? 0 : p->fields.phase == "Unknown" ? 1 : 2;
      return std::make_tuple(p->fields.node_name.empty() ? 0 : 1, phase,
                             -static_cast<int64_t>(p->resource_version));
    };
    std::sort(active.begin(), active.end(),
              [&](const ObjectPtr& a, const ObjectPtr& b) { return rank(a) < rank(b); });
    for (int64_t i = 0; i < diff; ++i) {
      DeletePod(ns, active[i]->fields.name);
      RecordEvent(rs, "Normal", "SuccessfulDelete",
                  absl::StrCat("Deleted pod: ", active[i]->fields.name), "replicaset-controller",
                  "");
    }
  }
  // Status (replica_set_utils.go calculateStatus) from the pods read above; the pods just created
  // or deleted change it in the next pass.
  int64_t ready = 0;
  for (const ObjectPtr& p : active) ready += p->fields.phase == "Running" ? 1 : 0;
  const json& old_status = JsonMember(rs, "status");
  json status = {{"replicas", static_cast<int64_t>(active.size())},
                 {"fullyLabeledReplicas", static_cast<int64_t>(active.size())},
                 {"readyReplicas", ready},
                 {"availableReplicas", ready},
                 {"observedGeneration", JsonInt(JsonMember(rs, "metadata"), "generation")}};
  if (status == old_status) return;
  json with_status = rs;
  with_status["status"] = status;
  absl::StatusOr<json> prepared =
      PrepareUpdate(Kind::kReplicaSet, Subresource::kStatus, rs, with_status, name);
  if (!prepared.ok()) return;
  auto result = store_->UpdateObject(Kind::kReplicaSet, ns, name, (*stored)->resource_version,
                                     *std::move(prepared));
  if (!result.ok()) dirty_replica_sets_.insert(key);
}

}  // namespace fitledger::sim
