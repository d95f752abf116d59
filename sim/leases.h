// coordination.k8s.io/v1 Leases in fitledger-sim: stored objects (create, get, update, list,
// watch), their event history, the discovery documents and the Table kubectl asks for. Enough
// for a leader-election record (kube-scheduler's, which fitledger-server's leader fence reads)
// and for `kubectl get leases`; sim/README.md cites the upstream rule of each behaviour.
#ifndef FITLEDGER_SIM_LEASES_H_
#define FITLEDGER_SIM_LEASES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "nlohmann/json.hpp"
#include "sim/change_signal.h"
#include "sim/selectors.h"
#include "sim/store.h"

namespace fitledger::sim {

// One version of a Lease. Immutable once published.
struct StoredLease {
  ObjectFields fields;  // namespace, name and labels
  uint64_t resource_version = 0;
  std::string json;  // compact; its metadata.resourceVersion is resource_version
};
using LeasePtr = std::shared_ptr<const StoredLease>;

// Which Leases a LIST or WATCH sees: a namespace ("" for all), a fieldSelector on
// metadata.name / metadata.namespace (FieldSelector::Parse with Kind::kLease), a label selector.
struct LeaseFilter {
  std::string namespace_name;
  FieldSelector fields;
  LabelSelector labels;

  bool Matches(const StoredLease& lease) const;
};

enum class LeaseEventType { kAdded, kModified, kDeleted };

struct LeaseEvent {
  LeaseEventType type;
  LeasePtr object;
};

// Thread-safe: every public method takes mu_ (the cluster store's lock inside it, to take a
// resourceVersion, never the other way round), and never calls out while holding it, except
// ChangeSignal::Notify after releasing it.
class LeaseStore {
 public:
  // `store` hands out resourceVersions (the API server's is one etcd revision across kinds) and
  // must outlive this. `event_window`: events kept for watches to resume from.
  LeaseStore(ClusterStore* store, int64_t event_window);

  // POST .../namespaces/NS/leases (apiserver registry/generic/registry/store.go Create with the
  // Lease strategy, pkg/registry/coordination/lease/strategy.go): sets uid, resourceVersion,
  // creationTimestamp, metadata.namespace, kind and apiVersion. InvalidArgument (400) for a body
  // that is not an object or names another namespace; FailedPrecondition (422) for what
  // ValidateLease refuses (pkg/apis/coordination/validation/validation.go: a name, as a DNS
  // subdomain; spec.leaseDurationSeconds > 0, spec.leaseTransitions >= 0); AlreadyExists (409).
  absl::StatusOr<LeasePtr> Create(absl::string_view namespace_name, absl::string_view body);
  // PUT .../leases/NAME: a Lease that does not exist is created (the strategy's
  // AllowCreateOnUpdate); an update needs metadata.resourceVersion (AllowUnconditionalUpdate is
  // false: 422 "must be specified for an update") equal to the stored one (else Aborted: 409
  // Conflict, "the object has been modified"); uid and creationTimestamp are kept. The bool is
  // true when it created the Lease. InvalidArgument for a name or namespace that differs from
  // the URL's.
  absl::StatusOr<std::pair<LeasePtr, bool>> Update(absl::string_view namespace_name,
                                                   absl::string_view name, absl::string_view body);
  // DELETE .../leases/NAME (registry/generic/registry/store.go Delete: a Lease has no graceful
  // deletion and no finalizers the sim keeps, so it goes at once): records a DELETED event with
  // the last state at the deletion's resourceVersion and returns that state. The preconditions
  // of DeleteOptions (empty: none) are checked as storage.Preconditions.Check
  // (apiserver pkg/storage/interfaces.go): Aborted (409 Conflict) on a mismatch. NotFound.
  absl::StatusOr<LeasePtr> Delete(absl::string_view namespace_name, absl::string_view name,
                                  absl::string_view uid_precondition,
                                  absl::string_view resource_version_precondition);
  // NotFound (`leases.coordination.k8s.io "NAME" not found`).
  absl::StatusOr<LeasePtr> Get(absl::string_view namespace_name, absl::string_view name) const;
  // The matching Leases (sorted by namespace, then name) and the state's resourceVersion.
  std::pair<std::vector<LeasePtr>, uint64_t> List(const LeaseFilter& filter) const;

  // Where a watch from `resource_version` starts: "" and "0" now (the caller sends the List
  // state as ADDED first; List and WatchStart("") under one lock: see Snapshot), N after N.
  // OutOfRange ("too old resource version: N (M)") before the history; InvalidArgument if
  // malformed.
  absl::StatusOr<uint64_t> WatchStart(absl::string_view resource_version) const;
  // List and the cursor a watch from "" starts at, from one instant.
  std::pair<std::vector<LeasePtr>, uint64_t> Snapshot(const LeaseFilter& filter) const;

  struct Batch {
    std::vector<LeaseEvent> events;
    uint64_t cursor = 0;  // every event up to here has been considered
    std::optional<absl::Time> next_visible;
    bool expired = false;  // the cursor fell out of the history: 410
  };
  // The events after `cursor` visible at `now` (recorded at or before now - lag), as `filter`
  // sees them by the watch cache's rule (apiserver cacher/cache_watcher.go convertToWatchEvent):
  // ADDED when an object starts matching, MODIFIED when it matches before and after, DELETED
  // with its previous content when it stops matching or is deleted.
  Batch Poll(const LeaseFilter& filter, uint64_t cursor, absl::Time now, absl::Duration lag) const;

  // Faults, as ClusterStore's: every resourceVersion before now becomes too old to watch from
  // (ExpireHistory), or the history is forgotten (ForgetHistory, an API server restart).
  void ExpireHistory();
  void ForgetHistory();

  // Bumped after every change (and by the faults).
  ChangeSignal& signal() { return signal_; }

 private:
  struct Event {
    LeaseEventType type;
    LeasePtr object;
    LeasePtr previous;  // null for kAdded
    absl::Time time;
  };
  // Validates `lease` (the body, with metadata filled in) and publishes it at a new
  // resourceVersion, recording `type` with `previous`.
  absl::StatusOr<LeasePtr> StoreLocked(nlohmann::json lease, LeaseEventType type, LeasePtr previous)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<LeasePtr> MatchingLocked(const LeaseFilter& filter) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  ClusterStore* const store_;
  const int64_t event_window_;

  ChangeSignal signal_;
  mutable SharedMutex mu_;
  std::map<std::string, LeasePtr, std::less<>> leases_ ABSL_GUARDED_BY(mu_);  // "ns/name"
  std::deque<Event> history_ ABSL_GUARDED_BY(mu_);
  uint64_t oldest_ ABSL_GUARDED_BY(mu_) = 0;  // watches may start at or after this
};

// A meta.k8s.io/v1 Table of Leases with the API server's columns (pkg/printers/internalversion
// printers.go: Name, Holder, Age); column definitions left out when `with_columns` is false.
std::string LeaseTableJson(const std::vector<LeasePtr>& items, uint64_t resource_version,
                           bool with_columns, absl::Time now);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_LEASES_H_
