#include "server/service/leader_fence.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace fitledger {
namespace {

// When the Lease stops counting as held: renewTime + leaseDurationSeconds (client-go
// leaderelection.go isLeaseValid measures from when the candidate observed the record; this
// server reads the renewTime its own pod's kube-scheduler wrote). Without both fields, never.
absl::Time Expiry(const kube::LeaseRecord& lease) {
  if (lease.lease_duration_seconds <= 0 || !lease.renew_time.has_value()) {
    return absl::InfiniteFuture();
  }
  return *lease.renew_time + absl::Seconds(lease.lease_duration_seconds);
}

std::string TermKey(const kube::LeaseRecord& lease) {
  return absl::StrCat(
      lease.holder_identity, " ",
      lease.acquire_time.has_value()
          ? absl::FormatTime(absl::RFC3339_full, *lease.acquire_time, absl::UTCTimeZone())
          : "-",
      " ", lease.lease_transitions);
}

std::string Rfc3339Millis(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

}  // namespace

bool HolderIsIdentity(absl::string_view holder, absl::string_view hostname) {
  if (hostname.empty() || !absl::StartsWith(holder, hostname)) return false;
  if (holder.size() == hostname.size()) return true;
  return holder[hostname.size()] == '_' && holder.size() > hostname.size() + 1;
}

LeaderFence::LeaderFence(
    LeaderFenceOptions options,
    std::function<void(std::function<void(const kube::ConsistentPodList&)>)> relist,
    std::function<void()> refresh)
    : options_(std::move(options)), relist_(std::move(relist)), refresh_(std::move(refresh)) {}

std::string LeaderFence::LeaseName() const {
  return absl::StrCat(options_.lease_namespace, "/", options_.lease_name);
}

bool LeaderFence::HoldsLocked(absl::Time now) const {
  return lease_.has_value() && HolderIsIdentity(lease_->holder_identity, options_.identity) &&
         now < Expiry(*lease_);
}

void LeaderFence::PublishLocked() {
  int64_t until = 0;
  if (resync_ == Resync::kDone && lease_.has_value() &&
      HolderIsIdentity(lease_->holder_identity, options_.identity) && TermKey(*lease_) == term_) {
    const absl::Time expiry = Expiry(*lease_);
    until = expiry == absl::InfiniteFuture() ? std::numeric_limits<int64_t>::max()
                                             : absl::ToUnixNanos(expiry);
  }
  serving_until_ns_ = until;
  stats_.serving = until != 0;
}

void LeaderFence::OnLease(const std::optional<kube::LeaseRecord>& lease, absl::Time now) {
  uint64_t generation = 0;
  bool start = false;
  bool waits = false;
  bool lost = false;
  std::string holder;
  {
    MutexLock lock(&mu_);
    lease_ = lease;
    holder = lease.has_value() ? lease->holder_identity : "";
    stats_.holder = holder;
    const bool ours = lease.has_value() && HolderIsIdentity(holder, options_.identity);
    if (HoldsLocked(now)) {
      const std::string term = TermKey(*lease);
      if (term != term_ || resync_ == Resync::kNone) {
        term_ = term;
        resync_ = Resync::kWaiting;
        resync_started_ = now;
        list_after_ = now + options_.handover_wait;
        ++generation_;
        ever_held_ = true;
        waits = options_.handover_wait > absl::ZeroDuration();
      }
      start = ListDueLocked(now, &generation);
    } else if (!ours && !term_.empty()) {
      // Another holder (or none): the term is over; holding again is a new one.
      term_.clear();
      resync_ = Resync::kNone;
      lost = true;
    }
    PublishLocked();
  }
  if (lost) {
    LogWarn("this server's scheduler no longer holds the Lease: refusing new binds",
            {{"lease", LeaseName()}, {"holder", holder}});
  }
  if (waits && !start) {
    LogInfo(
        "this server's scheduler holds the Lease: waiting for the binds the previous "
        "leader had in flight, then re-listing the pods before serving",
        {{"lease", LeaseName()},
         {"holder", holder},
         {"wait", absl::FormatDuration(options_.handover_wait)}});
  }
  if (start) StartList(generation);
}

bool LeaderFence::ListDueLocked(absl::Time now, uint64_t* generation) {
  if (resync_ != Resync::kWaiting || now < list_after_ || !HoldsLocked(now)) return false;
  resync_ = Resync::kListing;
  *generation = generation_;
  return true;
}

void LeaderFence::StartList(uint64_t generation) {
  LogInfo("this server's scheduler holds the Lease: re-listing the pods before serving",
          {{"lease", LeaseName()}, {"holder", stats().holder}});
  relist_([this, generation](const kube::ConsistentPodList& list) {
    OnPodList(generation, list, absl::Now());
  });
}

void LeaderFence::OnPodList(uint64_t generation, const kube::ConsistentPodList& list,
                            absl::Time now) {
  absl::Duration took;
  {
    MutexLock lock(&mu_);
    if (generation != generation_ || resync_ != Resync::kListing) return;
    resync_ = Resync::kDone;
    took = now - resync_started_;
    ++stats_.resyncs;
    stats_.last_resync = took;
    stats_.last_resync_pods = list.pods;
    PublishLocked();
  }
  LogInfo("leader resync done: the pods are re-listed, serving",
          {{"lease", LeaseName()},
           {"pods", absl::StrCat(list.pods)},
           {"resourceVersion", list.resource_version},
           {"seconds", absl::StrCat(absl::ToDoubleSeconds(took))}});
}

absl::Status LeaderFence::RefusalLocked(absl::Time now, bool bind, bool* refresh) const {
  *refresh = false;
  if (HoldsLocked(now)) {
    if (resync_ == Resync::kWaiting) {
      return absl::UnavailableError(absl::StrCat(
          "not synced: this fitledger-server's scheduler became the leader (Lease ", LeaseName(),
          "); waiting ",
          absl::FormatDuration(absl::Trunc(std::max(list_after_ - now, absl::ZeroDuration()),
                                           absl::Milliseconds(1))),
          " more for the binds the previous leader had in flight, then re-listing the pods "
          "from the API before answering; retry shortly"));
    }
    return absl::UnavailableError(absl::StrCat(
        "not synced: this fitledger-server's scheduler became the leader (Lease ", LeaseName(),
        "); re-listing the pods from the API before answering (for ",
        absl::FormatDuration(absl::Trunc(now - resync_started_, absl::Milliseconds(1))),
        "); retry shortly"));
  }
  *refresh = true;
  std::string state;
  if (!lease_.has_value()) {
    state = absl::StrCat("the Lease ", LeaseName(), " (it does not exist)");
  } else if (HolderIsIdentity(lease_->holder_identity, options_.identity)) {
    state = absl::StrCat("the Lease ", LeaseName(), " (it expired at ",
                         Rfc3339Millis(Expiry(*lease_)), ")");
  } else {
    state = absl::StrCat("the Lease ", LeaseName(), " (holder: ",
                         lease_->holder_identity.empty() ? "none" : lease_->holder_identity, ")");
  }
  const std::string who =
      absl::StrCat("this fitledger-server's scheduler (", options_.identity, "_*) ");
  if (bind) {
    return absl::UnavailableError(absl::StrCat(
        who, ever_held_ ? "no longer holds " : "does not hold ", state, "; refusing new binds"));
  }
  return absl::UnavailableError(
      absl::StrCat("not synced: ", who, "does not hold ", state, "; retry shortly"));
}

absl::Status LeaderFence::Check(absl::Time now, bool bind) {
  if (absl::ToUnixNanos(now) < serving_until_ns_.load(std::memory_order_acquire)) {
    return absl::OkStatus();
  }
  bool refresh = false;
  bool waiting = false;
  absl::Status refused;
  {
    ReaderMutexLock lock(&mu_);
    // The fast path may have missed a state published a moment ago.
    if (absl::ToUnixNanos(now) < serving_until_ns_.load()) return absl::OkStatus();
    waiting = resync_ == Resync::kWaiting;
    refused = RefusalLocked(now, bind, &refresh);
  }
  if (waiting) {
    // The handover wait may be over: a refused call starts the LIST if no Lease event did.
    uint64_t generation = 0;
    bool start = false;
    {
      MutexLock lock(&mu_);
      start = ListDueLocked(now, &generation);
    }
    if (start) StartList(generation);
  }
  if (refresh && refresh_) refresh_();
  return refused;
}

absl::Status LeaderFence::CheckServing(absl::Time now) { return Check(now, false); }

absl::Status LeaderFence::CheckBind(absl::Time now) { return Check(now, true); }

LeaderFenceStats LeaderFence::stats() const {
  ReaderMutexLock lock(&mu_);
  return stats_;
}

}  // namespace fitledger
