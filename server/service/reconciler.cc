#include "server/service/reconciler.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace fitledger {

Reconciler::Reconciler(Extender* extender, absl::Duration period, absl::Duration age,
                       const Clock* clock)
    : extender_(extender), period_(period), age_(age), clock_(clock) {}

Reconciler::~Reconciler() { Stop(); }

void Reconciler::Start() {
  thread_ = std::thread([this] {
    for (;;) {
      {
        MutexLock lock(&mu_);
        const absl::Time wake = absl::Now() + period_;  // real time: the period between passes
        while (!stop_ && absl::Now() < wake) {
          cv_.WaitFor(&mu_, absl::ToChronoNanoseconds(wake - absl::Now()));
        }
        if (stop_) return;
      }
      RunOnce(clock_->Now());
    }
  });
}

void Reconciler::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

int Reconciler::RunOnce(absl::Time now) {
  int changed = 0;
  for (const AssumedPod& assumed : extender_->ledger().AssumedOlderThan(now - age_)) {
    if (extender_->SettleWithApi(assumed, now)) {
      ++changed;
      LogInfo("reconciled an old assumption",
              {{"pod", absl::StrCat(assumed.namespace_name, "/", assumed.name)},
               {"node", assumed.node_name}});
    }
  }
  return changed;
}

}  // namespace fitledger
