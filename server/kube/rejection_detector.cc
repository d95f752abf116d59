#include "server/kube/rejection_detector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "common/log.h"
#include "server/kube/streamed_state.h"

namespace fitledger::kube {
namespace {

constexpr size_t kMaxRejectionsKept = 1000;

struct UidKey {
  const std::string& operator()(const Pod& pod) const { return pod.uid; }
};

void LogRejection(const Pod& pod) {
  LogWarn("kubelet rejected a pod", {{"pod", pod.namespace_name + "/" + pod.name},
                                     {"node", pod.node_name},
                                     {"reason", pod.status_reason},
                                     {"message", pod.status_message}});
}

}  // namespace

bool IsKubeletRejection(const Pod& pod, const std::vector<std::string>& scheduler_names) {
  if (pod.phase != "Failed") return false;
  if (!absl::StartsWith(pod.status_reason, "OutOf") &&
      pod.status_reason != "UnexpectedAdmissionError") {
    return false;
  }
  return scheduler_names.empty() || std::find(scheduler_names.begin(), scheduler_names.end(),
                                              pod.scheduler_name) != scheduler_names.end();
}

// The kubelet rejections of a state being read.
class RejectionDetector::State final : public ReflectorState {
 public:
  explicit State(RejectionDetector* detector) : detector_(detector) {}
  bool Add(WatchEvent& event) override {
    const bool deleted = event.type == WatchEvent::Type::kDeleted;
    if (!deleted && event.pod.has_value() &&
        IsKubeletRejection(*event.pod, detector_->scheduler_names_)) {
      if (event.type == WatchEvent::Type::kAdded) {
        pods_.Add(*std::move(event.pod));
      } else {
        pods_.Put(*std::move(event.pod));
      }
    } else if (event.type != WatchEvent::Type::kAdded) {
      // No longer a rejection, or gone.
      pods_.Remove(event.pod.has_value() ? event.pod->uid : event.deleted_key);
    }
    return true;
  }
  size_t Commit(uint64_t) override {
    std::vector<Pod> rejected = pods_.Take();
    detector_->Replace(rejected);
    return rejected.size();
  }

 private:
  RejectionDetector* const detector_;
  StreamedState<Pod, UidKey> pods_;
};

RejectionDetector::RejectionDetector(std::vector<std::string> scheduler_names)
    : scheduler_names_(std::move(scheduler_names)) {}

std::unique_ptr<ReflectorState> RejectionDetector::NewState() {
  return std::make_unique<State>(this);
}

bool RejectionDetector::Apply(WatchEvent& event) {
  if (event.type == WatchEvent::Type::kDeleted) {
    Forget(event.pod.has_value() ? event.pod->uid : event.deleted_key);
  } else if (event.pod.has_value() && IsKubeletRejection(*event.pod, scheduler_names_)) {
    Note(*event.pod);
  }
  return true;
}

RejectionStats RejectionDetector::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

std::deque<KubeletRejection> RejectionDetector::rejections() const {
  MutexLock lock(&mu_);
  return rejections_;
}

bool RejectionDetector::AddLocked(const Pod& pod, bool before_start) {
  if (!rejected_uids_.insert(pod.uid).second) return false;
  if (!before_start) {
    ++stats_.total;
    ++stats_.by_reason_node[{pod.status_reason, pod.node_name}];
  }
  rejections_.push_back({pod.uid, pod.namespace_name, pod.name, pod.node_name, pod.status_reason,
                         pod.status_message, absl::Now(), before_start});
  if (rejections_.size() > kMaxRejectionsKept) rejections_.pop_front();
  stats_.in_api = rejected_uids_.size();
  return true;
}

void RejectionDetector::Replace(const std::vector<Pod>& rejected) {
  std::vector<const Pod*> counted;
  size_t before_start = 0;
  {
    MutexLock lock(&mu_);
    // The first state after start holds what happened before it; later ones (after a 410 or a
    // dropped stream) hold what happened while the watch was away: that is counted.
    const bool first = !have_state_;
    have_state_ = true;
    absl::flat_hash_set<std::string> listed;
    for (const Pod& pod : rejected) listed.insert(pod.uid);
    // Rejected pods deleted meanwhile: forget them (a UID is never reused).
    for (auto it = rejected_uids_.begin(); it != rejected_uids_.end();) {
      if (!listed.contains(*it)) {
        rejected_uids_.erase(it++);
      } else {
        ++it;
      }
    }
    for (const Pod& pod : rejected) {
      if (!AddLocked(pod, first)) continue;
      if (first) {
        ++before_start;
      } else {
        counted.push_back(&pod);
      }
    }
    stats_.in_api = rejected_uids_.size();
  }
  if (before_start > 0) {
    LogInfo("kubelet rejections already in the API at start (listed, not counted)",
            {{"count", std::to_string(before_start)}});
  }
  for (const Pod* pod : counted) LogRejection(*pod);
}

void RejectionDetector::Note(const Pod& pod) {
  {
    MutexLock lock(&mu_);
    if (!AddLocked(pod, /*before_start=*/false)) return;
  }
  LogRejection(pod);
}

void RejectionDetector::Forget(const std::string& uid) {
  MutexLock lock(&mu_);
  rejected_uids_.erase(uid);
  stats_.in_api = rejected_uids_.size();
}

}  // namespace fitledger::kube
