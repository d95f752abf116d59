// The simulated cluster's state: pods and nodes as compact JSON plus the few indexed fields, one
// global resourceVersion, the watch event history, paged-list snapshots, and the kubelet's
// admission accounting.
//
// Pod life cycle in the sim:
//   CreatePod -> Pending (unbound) --Bind--> Pending (spec.nodeName set)
//     --AdmitPod, fits--> Running        --SetPodPhase--> Succeeded / Failed
//     --AdmitPod, refused--> Failed (the kubelet's reason and message: OutOf<resource>,
//                                    UnexpectedAdmissionError; sim/kubelet.h)
//   DeletePod removes a pod in any state (DELETED event) and frees its kubelet capacity.
//
// Errors use these codes, which the HTTP layer maps to Kubernetes Status objects:
//   InvalidArgument -> 400 BadRequest, FailedPrecondition -> 422 Invalid, NotFound -> 404,
//   AlreadyExists -> 409 AlreadyExists, Aborted -> 409 Conflict, OutOfRange -> 410 Expired.
#ifndef FITLEDGER_SIM_STORE_H_
#define FITLEDGER_SIM_STORE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "nlohmann/json.hpp"
#include "sim/change_signal.h"
#include "sim/config.h"
#include "sim/kubelet.h"
#include "sim/objects.h"
#include "sim/protobuf.h"
#include "sim/selectors.h"

namespace fitledger::sim {

// One version of an object. Immutable once published; shared by the store, list snapshots and
// the event history.
struct StoredObject {
  Kind kind = Kind::kPod;
  uint64_t resource_version = 0;
  std::string uid;
  std::string json;  // compact JSON; its metadata.resourceVersion is `resource_version`
  ObjectFields fields;
  // Pods: what the simulated kubelet reads of the spec (sim/pod_requests.h), which never changes;
  // shared by every version of the pod. Null for other kinds.
  std::shared_ptr<const KubeletPod> kubelet_pod;
  // Pods: spec.containers' (name, image), which never change; the kubelet's container statuses
  // are built from them. Shared by every version of the pod; null for nodes.
  std::shared_ptr<const ContainerImages> containers;
  // Pods and nodes: the protobuf envelope of `json`, encoded when a protobuf watch first sends
  // this version (sim/protobuf.h); a copy starts empty.
  EnvelopeCache protobuf;
};
using ObjectPtr = std::shared_ptr<const StoredObject>;

// One of DeleteOptions.preconditions (uid, resourceVersion): unset (absent or null), or the value
// given, "" included: the API server compares any value it is given (its fields are pointers;
// TestDifferentialSimAgainstAPIServer: "DELETE a Lease with an empty UID precondition", "DELETE a
// pod with an empty resourceVersion precondition").
using Precondition = std::optional<std::string>;
struct DeletePreconditions {
  Precondition uid;
  Precondition resource_version;

  // Only a UID precondition: this very object, not one recreated under its name.
  static DeletePreconditions SameUid(std::string uid) {
    DeletePreconditions p;
    p.uid = std::move(uid);
    return p;
  }
};
// The preconditions of a DELETE's DeleteOptions body (`options`, an object): InvalidArgument when
// preconditions is not an object or null, or one of its values not a string or null.
absl::StatusOr<DeletePreconditions> ParseDeletePreconditions(const nlohmann::json& options);

// A delete's preconditions against `object`, the stored version of `name`: Aborted (409) worded as
// rest.BeforeDelete words it (apiserver pkg/registry/rest/delete.go), which checks them before any
// finalizer or orphaning.
absl::Status CheckDeletePreconditions(Kind kind, absl::string_view name, const StoredObject& object,
                                      const Precondition& uid,
                                      const Precondition& resource_version);

enum class EventType { kAdded, kModified, kDeleted };
absl::string_view EventTypeName(EventType type);

// Which objects a LIST or WATCH sees.
struct ObjectFilter {
  Kind kind = Kind::kPod;
  std::string namespace_name;  // empty: all namespaces
  FieldSelector fields;
  LabelSelector labels;

  bool Matches(const StoredObject& object) const;
};

// One LIST read. The HTTP layer maps resourceVersion / resourceVersionMatch / limit to it (see
// sim/README.md for the upstream rules).
struct ListRequest {
  ObjectFilter filter;
  int64_t limit = 0;           // 0: every matching object in one page
  std::string continue_token;  // from the previous page; empty for the first
  // Read the state at exactly this resourceVersion (resourceVersionMatch=Exact, or a legacy
  // resourceVersion=N with a limit). Unset: the latest state.
  std::optional<uint64_t> exact;
};

struct ListResult {
  std::vector<ObjectPtr> items;
  uint64_t resource_version = 0;  // the state's resourceVersion (same on every page)
  std::string continue_token;     // empty on the last page
  // Objects after this page, set only when the filter has no selector (as etcd3/store.go does).
  std::optional<int64_t> remaining_items;
  // The continue token's resourceVersion is no longer available (older than the history): the
  // caller must answer 410 Expired with `continue_token`, which continues the list at the
  // latest state (an inconsistent continuation, etcd3/store.go handleCompactedErrorForPaging).
  bool continue_expired = false;
};

struct WatchEvent {
  EventType type;
  ObjectPtr object;
};

// What one Poll of a watch returns.
struct WatchBatch {
  std::vector<WatchEvent> events;  // visible events for this filter, in order
  uint64_t cursor = 0;             // every event up to here has been considered
  // When the next not-yet-visible event becomes visible (mutation time + lag); unset if none.
  std::optional<absl::Time> next_visible;
  // The cursor fell out of the history window: the watcher must get 410 Gone.
  bool expired = false;
};

struct StoreStats {
  std::map<std::string, int64_t> pods_by_phase;
  std::map<std::string, int64_t> rejections_by_reason;
  int64_t bindings = 0;
  int64_t nodes = 0;
  uint64_t resource_version = 0;
};

// One pod shape of ClusterStore::Generate: its JSON with placeholders (objects.h
// GeneratedPodTemplate, realistic.h RealisticPodTemplate), parsed once.
struct GeneratedPodShape {
  std::string generate_name;  // realistic shapes: a pod's name is this + 5 characters
  int containers = 0;         // @CID<k>@ placeholders
  std::string json;
  std::shared_ptr<const KubeletPod> kubelet_pod;
  std::shared_ptr<const ContainerImages> images;
  ObjectFields fields;  // of a filled-in sample; namespace, name, node and pod IP set per pod
};

// Every kind the sim serves, Leases too, with one resourceVersion and one event history: one
// watch machinery serves them all (SimServer::HandleListOrWatch).
//
// Thread-safe: every public method takes mu_ (shared for reads) and never calls out while holding
// it, except ChangeSignal::Notify after releasing it.
class ClusterStore {
 public:
  struct Options {
    int64_t event_window = 10000;
    std::function<absl::Time()> clock = [] { return absl::Now(); };
    // core/v1 Events older than this are deleted by ExpireEvents (kube-apiserver's --event-ttl,
    // default 1h: pkg/registry/core/event/storage stores each Event under an etcd lease of that
    // TTL, so it vanishes, with a DELETED event for watches, when the lease expires).
    absl::Duration event_ttl = absl::Hours(1);
  };
  explicit ClusterStore(Options options);

  // Adds a node built from `spec` (an ADDED event). AlreadyExists for a duplicate name;
  // InvalidArgument for a malformed quantity.
  absl::Status AddNode(const NodeSpec& spec);
  // Adds generated nodes and bound, Running pods (see GenerateSpec) without history events; a
  // watch can resume from any resourceVersion at or after the end of generation.
  absl::Status Generate(const GenerateSpec& spec);

  // Creates a pod from the JSON `body` POSTed to namespace `path_namespace`: assigns uid,
  // resourceVersion, creationTimestamp, metadata.namespace, spec.schedulerName (default-scheduler
  // if empty) and status.phase Pending. InvalidArgument for malformed JSON or a namespace
  // mismatch; FailedPrecondition (422) for a missing name or malformed resources; AlreadyExists.
  absl::StatusOr<ObjectPtr> CreatePod(absl::string_view body, absl::string_view path_namespace);

  // NotFound if absent. `namespace_name` is empty for nodes.
  absl::StatusOr<ObjectPtr> Get(Kind kind, absl::string_view namespace_name,
                                absl::string_view name) const;

  // DELETE's options (DeleteOptions): preconditions and the grace period.
  struct DeleteRequest {
    Precondition uid;                             // preconditions.uid
    Precondition resource_version;                // preconditions.resourceVersion
    std::optional<int64_t> grace_period_seconds;  // unset: spec.terminationGracePeriodSeconds
  };
  struct DeleteResult {
    ObjectPtr object;      // the deleted object, or the pod with its deletion pending
    bool deleted = false;  // gone now (a DELETED event); else a graceful deletion is pending
  };
  // A pod's deletion as the API server does it (generic registry store.go Delete, rest/delete.go
  // BeforeDelete, the pod strategy's CheckGracefulDelete): the grace period is the request's, or
  // spec.terminationGracePeriodSeconds, or 0 when unset; 0 for an unbound or terminal pod. 0
  // deletes now (DELETED, the last content at the deletion's resourceVersion); more sets
  // metadata.deletionTimestamp (now + period) and deletionGracePeriodSeconds (a MODIFIED event)
  // and the pod stays until the kubelet (TerminatePod) or a later delete with a shorter period
  // finishes it. A pending deletion is only shortened, never lengthened. NotFound; Aborted
  // (409) for a failed precondition.
  absl::StatusOr<DeleteResult> DeletePod(absl::string_view namespace_name, absl::string_view name,
                                         const DeleteRequest& request);
  // DeletePod with grace period 0 (a force delete) and a UID precondition (empty: none).
  absl::StatusOr<ObjectPtr> DeletePod(absl::string_view namespace_name, absl::string_view name,
                                      absl::string_view uid_precondition);
  // The end of a graceful deletion: the kubelet of the pod's node stops its containers (they
  // exit 0: phase Succeeded) and deletes it with grace period 0 and its UID as precondition
  // (kubelet status_manager). A pod whose node the sim does not have is deleted at once, as the
  // pod garbage collector deletes orphans (pkg/controller/podgc, without its 40 s quarantine);
  // so is every pod when `kubelet_enabled` is false and its node is unknown. Nothing if the pod
  // is gone or not being deleted; a pod on a known node without a kubelet stays terminating.
  void TerminatePod(absl::string_view namespace_name, absl::string_view name, bool kubelet_enabled);

  // The binding subresource's request: metadata.uid / resourceVersion preconditions, the
  // target node, metadata.annotations to merge into the pod's.
  struct BindRequest {
    std::string uid;
    std::string resource_version;
    std::string node;
    std::string target_kind;  // the Binding's target.kind as sent ("" or "Node")
    std::vector<std::pair<std::string, std::string>> annotations;
    std::vector<std::pair<std::string, std::string>> labels;
  };
  // The binding subresource (pkg/registry/core/pod/storage/storage.go BindingREST
  // setPodNodeAndMetadata): sets spec.nodeName (the node need not exist), merges the annotations,
  // copies the Binding's labels over the pod's (PodTopologyLabelsAdmission, on by default since
  // 1.35), with the node's topology.kubernetes.io/zone and /region first added to them when
  // target.kind is "Node" (plugin/pkg/admission/podtopologylabels admitBinding), clears
  // status.nominatedNodeName (ClearingNominatedNodeNameAfterBinding, on since 1.35) and sets the
  // PodScheduled condition True in place, keeping the others (pkg/api/pod/util.go
  // UpdatePodCondition). NotFound; Aborted (409) with the API server's wording for a failed
  // precondition, a pod being deleted, a pod already assigned, or a pod with scheduling gates.
  // Checked by TestDifferentialSimAgainstAPIServer ("POST binding ...").
  absl::StatusOr<ObjectPtr> Bind(absl::string_view namespace_name, absl::string_view name,
                                 const BindRequest& request);
  // Bind with only a UID precondition (empty: none) and the node.
  absl::StatusOr<ObjectPtr> Bind(absl::string_view namespace_name, absl::string_view name,
                                 absl::string_view uid_precondition, absl::string_view node);
  // The kubelet's admission of a bound pod (sim/kubelet.h): Running (podIP, hostIP, Ready) when
  // admitted on `spec.nodeName`, else Failed with the kubelet's reason and message. Returns the
  // verdict, or nullopt (and changes nothing) when the pod is gone, unbound, terminal, already
  // admitted, or its node does not exist.
  std::optional<Admission> AdmitPod(absl::string_view namespace_name, absl::string_view name);

  // Objects of the other kinds (events, deployments, replica sets, leases), and updates of pods and
  // nodes (PATCH, PUT; the HTTP layer computes the new object and applies the API server's update
  // rules first, sim/api_objects.h).
  //
  // Stores `object` (validated and defaulted by the caller) as a new object of `kind`, which is
  // not kPod (CreatePod) nor kNode (AddNode): sets metadata.namespace, uid, resourceVersion,
  // creationTimestamp, and the name from metadata.generateName when metadata.name is empty.
  // AlreadyExists; FailedPrecondition (422) if there is no name nor generateName.
  absl::StatusOr<ObjectPtr> CreateObject(Kind kind, absl::string_view namespace_name,
                                         nlohmann::json object);
  // Replaces the object with `object` if its resourceVersion is still `expected_rv` (Aborted,
  // 409 Conflict "the object has been modified", otherwise: the caller reads it again and
  // retries, as the API server's GuaranteedUpdate does). Sets metadata.resourceVersion and keeps
  // the stored uid, name, namespace and creationTimestamp. Pods keep their requests (the update
  // rules forbid resource changes); a pod whose phase becomes Succeeded or Failed frees its
  // kubelet capacity. Nodes keep their allocatable. NotFound.
  absl::StatusOr<ObjectPtr> UpdateObject(Kind kind, absl::string_view namespace_name,
                                         absl::string_view name, uint64_t expected_rv,
                                         nlohmann::json object);
  // Deletes the core/v1 Events created at least options.event_ttl before now (a DELETED event
  // each). Returns how many. The controllers' loop calls it.
  int ExpireEvents();

  // A name for metadata.generateName `prefix`, as CreateObject would make one (the prefix and 5
  // random characters: apiserver's names.SimpleNameGenerator), for a create that validates the
  // name before it stores the object.
  std::string GenerateName(absl::string_view prefix);

  // Deletes an object of `kind` (not kPod: DeletePod; not kNode) at once (a DELETED event).
  // NotFound; Aborted (409) when a precondition (DeleteOptions.preconditions: uid,
  // resourceVersion) is set and differs (CheckDeletePreconditions).
  absl::StatusOr<ObjectPtr> DeleteObject(Kind kind, absl::string_view namespace_name,
                                         absl::string_view name,
                                         const DeletePreconditions& preconditions);

  // Sets status.phase (e.g. Succeeded); a terminal phase frees kubelet capacity. NotFound;
  // InvalidArgument for an unknown phase.
  absl::StatusOr<ObjectPtr> SetPodPhase(absl::string_view namespace_name, absl::string_view name,
                                        absl::string_view phase);

  // A page of objects (sorted by namespace/name, as etcd keys sort) of one state: the latest, or
  // `request.exact`'s, or the continue token's. Continue tokens are upstream's
  // (storage.EncodeContinue: base64url of {"v":"meta.k8s.io/v1","rv":N,"start":KEY}) and stay
  // valid while their resourceVersion is in the history window. InvalidArgument (400, "invalid
  // continue token: ...") for a malformed token; OutOfRange (410, "The resourceVersion for the
  // provided list is too old.") for an `exact` older than the history; an expired token gives
  // continue_expired. REQUIRES: `exact` <= resource_version().
  absl::StatusOr<ListResult> List(const ListRequest& request);
  // The latest state, or a continuation: List({filter, limit, continue_token}).
  absl::StatusOr<ListResult> List(const ObjectFilter& filter, int64_t limit,
                                  absl::string_view continue_token);
  // Waits up to `timeout` for the resourceVersion to reach `rv`; true if it has.
  bool WaitForResourceVersion(uint64_t rv, absl::Duration timeout);

  // Where a watch from `resource_version` starts: "" and "0" start now (the caller sends the
  // current objects as ADDED first); a number N resumes after N. OutOfRange (410, "too old
  // resource version: N (M)") if N is older than the history keeps; InvalidArgument if malformed.
  absl::StatusOr<uint64_t> WatchStart(absl::string_view resource_version) const;

  // The events after `cursor` that are visible at `now` (mutation time + `lag` <= now), as
  // `filter` sees them, by the watch cache's rule (apiserver cacher/cache_watcher.go,
  // convertToWatchEvent): an object that starts matching arrives as ADDED (its new content), one
  // that matches before and after as MODIFIED, one that stops matching as DELETED carrying its
  // previous content (the last state that matched) with the event's resourceVersion. At most
  // `max_events` events.
  WatchBatch Poll(const ObjectFilter& filter, uint64_t cursor, absl::Time now, absl::Duration lag,
                  size_t max_events) const;

  // Fault: every resourceVersion before now becomes too old to resume a watch from (open
  // watches keep going), and list continue tokens are forgotten.
  void ExpireHistory();
  // A restarted API server: the event history and continue tokens are forgotten; the objects
  // and the resourceVersion counter stay.
  void ForgetHistory();

  uint64_t resource_version() const;
  StoreStats Stats() const;
  // Bumped after every change to objects of `kind` (a pod watch does not wake for node
  // changes, nor the other way round; the other kinds share one signal).
  ChangeSignal& signal(Kind kind) {
    return kind == Kind::kPod ? pod_signal_ : kind == Kind::kNode ? node_signal_ : other_signal_;
  }
  // Wakes every watcher (a fault switch, a history change).
  void NotifyAll() {
    pod_signal_.Notify();
    node_signal_.Notify();
    other_signal_.Notify();
  }

 private:
  struct Event {
    EventType type;
    ObjectPtr object;    // after the event (kDeleted: last state, at the deletion's version)
    ObjectPtr previous;  // before the event; null for kAdded
    absl::Time time;
  };
  // Every object of one kind at one resourceVersion, sorted by key.
  using State = std::vector<std::pair<std::string, ObjectPtr>>;

  using ObjectMap = std::map<std::string, ObjectPtr, std::less<>>;
  ObjectMap& MapLocked(Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return kind == Kind::kPod    ? pods_
           : kind == Kind::kNode ? nodes_
                                 : others_[static_cast<int>(kind) - kFirstOtherKind];
  }
  const ObjectMap& MapLocked(Kind kind) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return kind == Kind::kPod    ? pods_
           : kind == Kind::kNode ? nodes_
                                 : others_[static_cast<int>(kind) - kFirstOtherKind];
  }
  // Records an event and trims the history to the window.
  void RecordLocked(EventType type, ObjectPtr object, ObjectPtr previous)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts a new pod version in place with the next resourceVersion and records a MODIFIED event.
  ObjectPtr ReplacePodLocked(const ObjectPtr& old, const nlohmann::json& pod)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for a pod already edited as text (resource_version_ already in it), with its indexed
  // fields.
  ObjectPtr ReplacePodTextLocked(const ObjectPtr& old, std::string text, ObjectFields fields)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `decorate`, if set, edits the node's JSON before it is stored (Generate's realistic nodes).
  absl::Status AddNodeLocked(const NodeSpec& spec, bool record,
                             const std::function<void(nlohmann::json*)>& decorate = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a bound, Running pod of `shape` on `node` (already added) without a history event, and
  // admits it in the kubelet's accounting. `container_ids` fills the @CID<k>@ placeholders.
  void AddGeneratedPodLocked(const GeneratedPodShape& shape, const std::string& namespace_name,
                             const std::string& name, const std::string& node,
                             const std::string& timestamp,
                             const std::vector<std::string>& container_ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NextUidLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The state of `kind` at `rv` (<= resource_version_): the latest, a cached one, or the latest
  // with the history after `rv` undone. Null if `rv` is older than the history keeps.
  std::shared_ptr<const State> StateAtLocked(Kind kind, uint64_t rv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The oldest resourceVersion a watch or an exact read may start from.
  uint64_t OldestLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return std::max(compacted_, min_watch_start_);
  }

  // Constant after construction.
  const Options options_;

  ChangeSignal pod_signal_;
  ChangeSignal node_signal_;
  ChangeSignal other_signal_;
  mutable SharedMutex mu_;
  // Guarded by mu_.
  uint64_t resource_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t uid_counter_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generated_names_ ABSL_GUARDED_BY(mu_) = 0;  // GenerateName's
  ObjectMap pods_ ABSL_GUARDED_BY(mu_);
  ObjectMap nodes_ ABSL_GUARDED_BY(mu_);
  // The topology.kubernetes.io/zone and /region labels of node `node_name` (none if it is not
  // known): what the PodTopologyLabels admission plugin copies onto a pod bound to it
  // (plugin/pkg/admission/podtopologylabels, its default Labels).
  std::vector<std::pair<std::string, std::string>> NodeTopologyLabelsLocked(
      absl::string_view node_name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Events, deployments, replica sets, leases (Kind order from kEvent).
  static constexpr int kFirstOtherKind = static_cast<int>(Kind::kEvent);
  static_assert(static_cast<int>(Kind::kReplicaSet) - kFirstOtherKind == 2 &&
                static_cast<int>(Kind::kLease) - kFirstOtherKind == 3);
  ObjectMap others_[4] ABSL_GUARDED_BY(mu_);
  std::map<std::string, int, std::less<>> node_index_ ABSL_GUARDED_BY(mu_);        // for IPs
  std::map<std::string, int64_t, std::less<>> pods_started_ ABSL_GUARDED_BY(mu_);  // per node
  std::deque<Event> history_ ABSL_GUARDED_BY(mu_);
  // Events with resourceVersion <= compacted_ are gone from history_.
  uint64_t compacted_ ABSL_GUARDED_BY(mu_) = 0;
  // A watch may start from N only if N >= min_watch_start_.
  uint64_t min_watch_start_ ABSL_GUARDED_BY(mu_) = 0;
  // States that paged lists read, by (kind, resourceVersion); the oldest are dropped past a
  // bound (they can be rebuilt from the history while it lasts).
  std::map<std::pair<Kind, uint64_t>, std::shared_ptr<const State>> states_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<Kind, uint64_t>> state_order_ ABSL_GUARDED_BY(mu_);
  KubeletAccounting kubelet_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> rejections_ ABSL_GUARDED_BY(mu_);
  // The Events in creation order, for ExpireEvents: (created, namespace, name, uid).
  struct EventExpiry {
    absl::Time created;
    std::string namespace_name;
    std::string name;
    std::string uid;
  };
  std::deque<EventExpiry> event_expiry_ ABSL_GUARDED_BY(mu_);
  int64_t bindings_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_STORE_H_
