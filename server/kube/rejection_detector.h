// The kubelet-rejection detector: fed the Failed pods by a Reflector, it counts the pods the
// kubelet refused at admission, each once.
#ifndef FITLEDGER_SERVER_KUBE_REJECTION_DETECTOR_H_
#define FITLEDGER_SERVER_KUBE_REJECTION_DETECTOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "model/pod.h"
#include "server/kube/reflector.h"

namespace fitledger::kube {

// A pod the kubelet refused at admission: phase Failed with a reason starting "OutOf" (OutOfcpu,
// OutOfmemory, OutOfpods, OutOf<extended resource>; kubelet lifecycle/predicate.go and
// kubelet.go rejectPod), or "UnexpectedAdmissionError", the device manager's refusal of a
// device-plugin resource it has too few devices of (kubelet cm/devicemanager/manager.go,
// cm/admission/errors.go): the scheduler was satisfied and the node said no. Other Failed pods
// (evictions, failed jobs, node affinity or OS mismatches at admission) are not overcommit and
// are not counted.
struct KubeletRejection {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::string node;
  std::string reason;
  std::string message;
  absl::Time seen_at;
  // Already in the API when this server first listed Failed pods: it happened before this process
  // started (a previous process may have counted it), so it is listed but never counted.
  bool before_start = false;
};

// True for a pod the kubelet rejected at admission (see KubeletRejection) whose schedulerName is
// one of scheduler_names (any, when empty).
bool IsKubeletRejection(const Pod& pod, const std::vector<std::string>& scheduler_names = {});

struct RejectionStats {
  // Kubelet rejections that happened while this process ran, each pod once (by UID): the ones
  // an event showed, and the ones a new state held that the last state did not. Rejected pods
  // already in the API at the first state are not counted (before_start).
  uint64_t total = 0;
  // The same by (reason, node): monotonic, for the alerting counter.
  std::map<std::pair<std::string, std::string>, uint64_t> by_reason_node;
  // Rejected pods the API shows now (counted or before_start), as of the last event or state.
  uint64_t in_api = 0;
};

// The sink of the Failed pods' Reflector (its field selector status.phase=Failed). It keeps the
// UIDs of the rejected pods the API shows: a pod is counted the first time it appears, from an
// event or in a new state, and forgotten when it is deleted (a UID is never reused); the first
// state after start records what is already there without counting it. Failed is terminal: a
// pod leaves the selector only by being deleted.
//
// Thread-safe: the reflector's thread feeds it, any thread reads it.
class RejectionDetector final : public ReflectorSink {
 public:
  // Counts only pods whose spec.schedulerName is one of `scheduler_names` (any, when empty).
  explicit RejectionDetector(std::vector<std::string> scheduler_names);

  std::unique_ptr<ReflectorState> NewState() override;
  bool Apply(WatchEvent& event) override;

  RejectionStats stats() const;
  // The most recent rejections (at most 1000), oldest first, including before_start ones.
  std::deque<KubeletRejection> rejections() const;

 private:
  class State;
  // The detector's state after a new state of Failed pods: `rejected` are the kubelet rejections
  // in it.
  void Replace(const std::vector<Pod>& rejected);
  // A kubelet rejection seen by an event (counted if its UID is new).
  void Note(const Pod& pod);
  // A Failed pod deleted from the API.
  void Forget(const std::string& uid);
  // Records `pod` as known and, unless `before_start`, counts it. False if known already.
  bool AddLocked(const Pod& pod, bool before_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::vector<std::string> scheduler_names_;

  mutable Mutex mu_;
  bool have_state_ ABSL_GUARDED_BY(mu_) = false;
  RejectionStats stats_ ABSL_GUARDED_BY(mu_);
  // The last 1000 rejections, for ListRejections.
  std::deque<KubeletRejection> rejections_ ABSL_GUARDED_BY(mu_);
  // UIDs of the rejected pods the API shows (the dedup set; independent of the deque's bound).
  absl::flat_hash_set<std::string> rejected_uids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_REJECTION_DETECTOR_H_
