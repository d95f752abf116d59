// The cluster view and the assumed-pod ledger: what every node holds, counted once.
#ifndef FITLEDGER_SERVER_LEDGER_LEDGER_H_
#define FITLEDGER_SERVER_LEDGER_LEDGER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "model/filter_result.h"
#include "model/resources.h"

namespace fitledger {

// Which resources the ledger checks. `all`: every resource NodeResourcesFit compares (pods, cpu,
// memory, ephemeral-storage, scalar resources) — the extender is the fit authority. Otherwise
// only the `managed` names (e.g. "example.com/gpu-mem"), and the pod count is left to the
// scheduler.
//
// `ignored_resources` and `ignored_resource_groups` have NodeResourcesFitArgs' semantics
// (noderesources/fit.go fitsRequest): an *extended* resource is not checked when its name is in
// `ignored_resources`, or the part of its name before "/" is in `ignored_resource_groups`.
// Native resources (cpu, hugepages-*, kubernetes.io/...) are never ignored.
struct AccountingPolicy {
  bool all = true;
  std::vector<std::string> managed;
  std::vector<std::string> ignored_resources;
  std::vector<std::string> ignored_resource_groups;

  // True if Filter checks `resource`.
  bool Accounts(absl::string_view resource) const;
  // True if `resource` is an extended resource the scheduler's NodeResourcesFit ignores.
  bool Ignores(absl::string_view resource) const;
};

// One resource scored by Prioritize and its weight (NodeResourcesFitArgs
// scoringStrategy.resources[]: weight 1..100).
struct ResourceWeight {
  std::string name;
  int64_t weight = 1;
};

enum class ScoringStrategy { kLeastAllocated, kMostAllocated };

// NodeResourcesFit's scale (framework.MaxNodeScore) and the extender protocol's
// (extenderv1.MaxExtenderPriority): kube-scheduler multiplies an extender's score by
// MaxNodeScore / MaxExtenderPriority (and the extender's weight).
inline constexpr int64_t kMaxNodeScore = 100;
inline constexpr int64_t kMaxExtenderPriority = 10;

// A node as the watch reports it.
struct NodeRecord {
  std::string name;
  Resources allocatable;
};

// A pod as the watch reports it, reduced to what the ledger needs. `requests` is
// PodRequests(pod, kSpecAndStatus). No namespace or name: the ledger keeps those only for its
// assumptions, from the bind (TryAssume), and a sync holds one record per pod of the cluster.
struct PodRecord {
  std::string uid;
  std::string node_name;  // empty while unbound
  bool terminal = false;  // Succeeded or Failed
  bool deleting = false;  // deletionTimestamp set
  Resources requests;
};

// "Does not fit" is a value. `unresolvable`: the request exceeds the node's allocatable even
// with nothing on it, so preempting pods cannot help.
struct FitResult {
  bool fits = true;
  bool unresolvable = false;  // never for "Too many pods": a pod count can be preempted
  // NodeResourcesFit's reasons, in its order and wording (pkg/scheduler/framework/plugins/
  // noderesources/fit.go: "Too many pods", "Insufficient <resource name>"), joined by ", " into
  // the one string the extender's FailedNodes holds per node (Filter answers hundreds of
  // failing nodes per call: FilterResult keeps each distinct text once). A reason never
  // contains ", ".
  std::string reasons;
};

enum class AssumeOutcome {
  kAssumed,          // newly reserved
  kAlreadyAssumed,   // a repeat for the same node: nothing reserved twice
  kAlreadyConfirmed  // the watch already shows the pod on that node
};

// What the API says about a pod, for settling an old assumption.
enum class ApiPodState { kBound, kUnbound, kGone };

struct NodeSummary {
  std::string name;
  bool known = false;  // false: pods point at a node the watch has not shown (or deleted)
  Resources allocatable;
  Resources confirmed;
  Resources assumed;
  int64_t confirmed_pods = 0;
  int64_t assumed_pods = 0;
};

// Ledger::Explain's answer.
struct Explanation {
  FitResult fit;
  NodeSummary node;  // without the explained pod's own counted requests
};

struct AssumedPod {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::string node_name;
  Resources requests;
  absl::Time assumed_at;
  bool bind_in_flight = false;
  uint64_t epoch = 0;  // changes whenever a bind starts or finishes for this pod
  // A binding POST for this pod had an unknown outcome (timeout, 5xx, budget spent) and the API
  // has not shown the pod bound since: it may still land on the node it was sent for.
  bool outcome_unknown = false;
  // The pod is known to be bound (the POST returned 201, or the API showed it bound); the watch
  // has not confirmed it yet.
  bool bound_known = false;
};

struct LedgerCounters {
  uint64_t assumed = 0;
  uint64_t confirmed = 0;
  uint64_t forgotten = 0;
  uint64_t assume_rejected = 0;  // TryAssume found the node full
  uint64_t reconcile_confirmed = 0;
  uint64_t reconcile_forgotten = 0;
  uint64_t moved = 0;               // an unknown outcome settled "unbound": moved to a new node
  uint64_t released_at_relist = 0;  // bound, then absent from a LIST that started later
};

// The ledger. A pod counts on exactly one node, exactly once:
//
//   (unknown) --TryAssume: fit re-checked under the lock-->  Assumed(node)
//   Assumed   --MarkBound: POST 201, or the API shows it bound to N-->  Assumed(N), bound known
//   Assumed   --MarkBindUnknown: timeout, 5xx, budget spent-->  Assumed(node), outcome unknown
//   Assumed   --MoveAssumption: outcome unknown, the API says unbound, a bind to M-->  Assumed(M)
//   Assumed   --Forget: the binding POST failed definitely, no earlier outcome unknown-->
//                 (forgotten)
//   Assumed   --watch: uid with spec.nodeName = N-->  Confirmed(N)   (N may differ)
//   Assumed   --watch: deleted, terminal, or deleting while unbound-->  (forgotten)
//   Assumed   --ReplacePods: bound known before the LIST started, absent from it-->  (released)
//   Assumed   --Settle (API says bound to N / gone / unbound and no bind in flight)-->
//                 Confirmed(N) / (forgotten) / (forgotten)
//   Confirmed --watch: deleted or terminal; absent from a LIST-->  (removed)
//   (unknown) --watch: bound pod-->  Confirmed(N)
//
// An assumption is never dropped on a timer: only a definite bind failure, the watch, a LIST
// that started after the pod was known bound, or a settlement with the API's answer removes it.
// A pod's own entry never counts against it (Filter, Prioritize, Fit and the bind's re-check
// leave it out on its node). Per-node sums of allocatable, confirmed and assumed are kept
// incrementally, so Filter costs O(candidates).
//
// Thread-safe: every public method takes mu_ (shared for reads) and never calls out while
// holding it.
class Ledger {
 public:
  // `scoring_resources` empty: cpu and memory with weight 1 (NodeResourcesFit's default) when
  // every resource is accounted, else each managed resource with weight 1.
  Ledger(AccountingPolicy policy, ScoringStrategy scoring,
         std::vector<ResourceWeight> scoring_resources = {});
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // --- The watch ---
  void UpsertNode(const NodeRecord& node);
  void DeleteNode(const std::string& name);
  // Replaces the whole node set (after a LIST).
  void ReplaceNodes(const std::vector<NodeRecord>& nodes);
  void UpsertPod(PodRecord pod);
  void DeletePod(const std::string& uid);
  // Call before sending the LIST whose result goes to ReplacePods; pass its answer there.
  uint64_t BeginPodList();
  // Replaces the pod set after a LIST: confirmed pods missing from `pods` are removed; an
  // assumed pod missing from it is released when it was known bound before `list_started`
  // (BeginPodList; a consistent LIST sent after the bind was applied lacks the pod only if it is
  // gone or finished); other assumed pods are left for Settle (the outcome is unknown, or the list
  // may predate the bind). `list_started` 0: keep every assumption.
  // A deque, consumed from the front: its blocks are freed as the ledger's entries are made, so
  // those reuse the memory (a sync of 150,000 pods touches the staged state's size once, not
  // twice: on a VM, fresh pages were a third of a sync's CPU; docs/performance.md).
  void ReplacePods(std::deque<PodRecord> pods, uint64_t list_started = 0);

  // --- Scheduling ---
  // Candidate nodes for a pod with `requests`, counting confirmed + assumed pods. The pod's own
  // entry (`uid`, if counted) is left out, so an assumption whose outcome is unknown never
  // keeps its pod off the node. Unknown node names are reported as failed ("node not found"),
  // not dropped.
  FilterResult Filter(const Resources& requests, absl::Span<const absl::string_view> node_names,
                      absl::string_view uid = {}) const;
  // The fit of `requests` on one node and the node's numbers it rests on, from one snapshot
  // (for Explain): a pod counted there under `uid` (non-empty) is left out of the verdict and of
  // the numbers, so it is not counted twice. NotFound for an unknown node.
  absl::StatusOr<Explanation> Explain(const Resources& requests, const std::string& node_name,
                                      const std::string& uid = "") const;
  // NodeResourcesFit's score (LeastAllocated / MostAllocated over the scoring resources and
  // weights, upstream's integer math) per node, 0..kMaxNodeScore, in the order given; unknown
  // nodes score 0. `requests.non_zero_*` stand for the pod's cpu and memory, as the nodes'
  // non-zero sums do (NonZeroRequested). The pod's own entry (`uid`) is left out.
  std::vector<int64_t> NodeScores(const Resources& requests,
                                  absl::Span<const absl::string_view> node_names,
                                  absl::string_view uid = {}) const;
  // NodeScores scaled to the extender's 0..kMaxExtenderPriority, rounded to the nearest.
  std::vector<int64_t> Prioritize(const Resources& requests,
                                  absl::Span<const absl::string_view> node_names,
                                  absl::string_view uid = {}) const;
  // Of `candidates` (node -> victim pod UIDs), the nodes where the pod fits once the victims
  // are gone, with the same victims. Unknown nodes are dropped.
  std::map<std::string, std::vector<std::string>> Preempt(
      const Resources& requests,
      const std::map<std::string, std::vector<std::string>>& candidates) const;

  // --- Binding ---
  // Atomically re-checks that `requests` fits `node_name` and records the pod as Assumed with a
  // bind in flight. Idempotent per UID. Errors: NotFound (unknown node), FailedPrecondition (does
  // not fit: the message lists the reasons), AlreadyExists (the pod is assumed or bound on
  // another node: see MoveAssumption). With AlreadyExists, `elsewhere` (if given) receives the
  // pod's assumption on that other node, read under the same lock as the decision, or nullopt
  // when the watch has confirmed the pod there.
  absl::StatusOr<AssumeOutcome> TryAssume(const std::string& uid, const std::string& namespace_name,
                                          const std::string& name, const std::string& node_name,
                                          const Resources& requests, absl::Time now,
                                          std::optional<AssumedPod>* elsewhere = nullptr);
  // The API says the pod is unbound, and it is Assumed elsewhere with no bind in flight (as of
  // `epoch`): atomically re-checks that `requests` fits `node_name` and moves the assumption
  // there with a bind in flight. The outcome-unknown mark stays until the API shows the pod
  // bound. Errors: Aborted (the entry changed since `epoch`, or is no longer Assumed), NotFound
  // (unknown node), FailedPrecondition (does not fit; the assumption stays where it was).
  absl::Status MoveAssumption(const std::string& uid, uint64_t epoch, const std::string& node_name,
                              const Resources& requests, absl::Time now);
  // The binding POST succeeded, or the API reported the pod bound to `node_name`: the pod stays
  // Assumed (on `node_name`), bound known, until the watch confirms it. No-op unless the pod is
  // Assumed.
  void MarkBound(const std::string& uid, const std::string& node_name);
  // The binding POST's outcome is unknown (timeout, 5xx): keep the assumption, no bind in flight.
  void MarkBindUnknown(const std::string& uid);
  // The binding POST failed definitely: drop the assumption, unless an earlier bind of the pod
  // has an unknown outcome (then it stays, no bind in flight, for the API to settle). No-op
  // unless the pod is Assumed. Returns true if an assumption was dropped.
  bool Forget(const std::string& uid);
  // The API says the pod no longer exists: drop the assumption whatever its outcomes.
  bool ForgetGone(const std::string& uid);

  // --- Reconciliation (time is an argument; nothing here sleeps) ---
  // Assumed pods assumed at or before `cutoff` with no bind in flight.
  std::vector<AssumedPod> AssumedOlderThan(absl::Time cutoff) const;
  // Settles one old assumption with what the API said. Ignored if the pod's epoch moved on
  // (a bind started or finished since the snapshot) or the pod is no longer Assumed. For kBound,
  // `pod` carries the API's view (node and requests). Returns true if the state changed.
  bool Settle(const std::string& uid, uint64_t epoch, ApiPodState state, const PodRecord* pod);

  // --- Introspection (read-only) ---
  // Requests of an unbound pod the watch has shown, for Bind. NotFound if unknown.
  absl::StatusOr<Resources> PendingPodRequests(const std::string& uid) const;
  std::vector<NodeSummary> Nodes() const;
  // The pod's assumption, if it is Assumed.
  std::optional<AssumedPod> AssumedEntry(const std::string& uid) const;
  std::vector<AssumedPod> Assumed() const;
  LedgerCounters counters() const;
  size_t pod_count() const;  // counted pods, assumed + confirmed

  const AccountingPolicy& policy() const { return policy_; }

 private:
  // What an assumed pod carries beyond a confirmed one: held apart, so that the entry of each
  // of a cluster's confirmed pods (150,000 of them after a sync) is a third smaller.
  struct Assumption {
    std::string namespace_name;
    std::string name;
    absl::Time assumed_at;
    bool bind_in_flight = false;
    bool outcome_unknown = false;
    uint64_t epoch = 0;
    uint64_t bound_at = 0;  // clock_ when the pod was known bound; 0: not known
  };
  struct PodEntry {
    std::string node_name;
    Resources requests;
    std::unique_ptr<Assumption> assumption;  // set while Assumed; null once Confirmed
    bool is_assumed() const { return assumption != nullptr; }
  };
  // A node's name as the node map's key, held in the map's own slot up to kInline characters.
  // Filter looks up hundreds of candidates per call in a map of thousands of nodes; with a
  // std::string key, a cloud node's name (33-45 characters, past its short-string buffer) was
  // a second cache miss per candidate, read apart from the node's slot (perf at 8 connections:
  // the key's memcmp, 12% of the server's samples; 4.6% with the key in the slot).
  class NodeKey {
   public:
    static constexpr size_t kInline = 48;
    NodeKey(absl::string_view name) : chars_(name.begin(), name.end()) {}  // NOLINT: implicit
    operator absl::string_view() const { return {chars_.data(), chars_.size()}; }  // NOLINT
    std::string str() const { return std::string(chars_.data(), chars_.size()); }

   private:
    absl::InlinedVector<char, kInline> chars_;
  };
  // Lookups by any string form of a name (transparent), hashed and compared as views.
  struct NodeKeyHash {
    using is_transparent = void;
    size_t operator()(absl::string_view name) const { return absl::HashOf(name); }
  };
  struct NodeKeyEq {
    using is_transparent = void;
    bool operator()(absl::string_view a, absl::string_view b) const { return a == b; }
  };
  // A node's accounting. The sums change only through the mutators, which keep `room()`
  // current: what Filter's common case reads, placed right after the key in the map's slot so
  // that the check of one candidate touches one or two cache lines, not the slot's ~300 bytes.
  class NodeState {
   public:
    // allocatable - confirmed - assumed, of the four resources every node has.
    struct Room {
      int64_t milli_cpu = 0;
      int64_t memory_bytes = 0;
      int64_t ephemeral_storage_bytes = 0;
      int64_t pods = 0;
    };
    bool known = false;

    const Room& room() const { return room_; }
    const Resources& allocatable() const { return allocatable_; }
    const Resources& confirmed() const { return confirmed_; }  // counted pods' requests summed
    const Resources& assumed() const { return assumed_; }      // (pods = their count)

    void SetAllocatable(const Resources& allocatable);
    void AddConfirmed(const Resources& requests);
    void SubtractConfirmed(const Resources& requests);
    void AddAssumed(const Resources& requests);
    void SubtractAssumed(const Resources& requests);

   private:
    void UpdateRoom();

    Room room_;
    Resources allocatable_;
    Resources confirmed_;
    Resources assumed_;
  };
  struct PendingPod {
    Resources requests;
  };

  // Into `out` (reset first; its reasons' buffer is reused).
  void FitLocked(const NodeState& node, const Resources& requests, const Resources* released,
                 FitResult* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  FitResult FitLocked(const NodeState& node, const Resources& requests,
                      const Resources* released) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The pod's own requests on `node_name`, if `uid` is counted there; else nullptr.
  const Resources* OwnLocked(absl::string_view uid, absl::string_view node_name) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  int64_t ScoreLocked(const NodeState& node, const Resources& requests,
                      const Resources* released) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  AssumedPod ViewLocked(const std::string& uid, const PodEntry& entry) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void AddLocked(std::string uid, PodEntry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ConfirmLocked(PodEntry& entry, const PodRecord& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropNodeIfEmptyLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpsertNodeLocked(const NodeRecord& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the record's strings.
  void UpsertPodLocked(PodRecord&& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const AccountingPolicy policy_;
  const ScoringStrategy scoring_;
  const std::vector<ResourceWeight> scoring_resources_;

  mutable SharedMutex mu_;
  // Guarded by mu_.
  absl::flat_hash_map<NodeKey, NodeState, NodeKeyHash, NodeKeyEq> nodes_ ABSL_GUARDED_BY(mu_);
  // By UID. A node map: each entry is its own allocation and the table holds pointers, so the
  // table's growth steps cost 8 bytes per slot, not a ~225-byte inline PodEntry per slot (the
  // flat map's growth step measured: docs/performance.md, "Earlier findings").
  absl::node_hash_map<std::string, PodEntry> pods_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, PendingPod> pending_ ABSL_GUARDED_BY(mu_);  // by UID
  // The ledger's clock: bind epochs and the order of "known bound" against LIST starts.
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 1;
  LedgerCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_LEDGER_LEDGER_H_
