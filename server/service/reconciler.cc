#include "server/service/reconciler.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace fitledger {

Reconciler::Reconciler(Extender* extender, absl::Duration period, absl::Duration age)
    : extender_(extender), period_(period), age_(age) {}

Reconciler::~Reconciler() { Stop(); }

void Reconciler::Start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, absl::ToChronoNanoseconds(period_), [this] { return stop_; })) {
      lock.unlock();
      RunOnce(absl::Now());
      lock.lock();
    }
  });
}

void Reconciler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
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
