// Settles old assumptions against the API: never by a timer alone.
#ifndef FITLEDGER_SERVER_SERVICE_RECONCILER_H_
#define FITLEDGER_SERVER_SERVICE_RECONCILER_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "server/service/extender.h"

namespace fitledger {

// Every `period`, each assumption older than `age` with no bind in flight is checked with a GET
// of the pod: bound -> confirmed on the API's node; gone, terminal or another UID -> forgotten;
// unbound -> forgotten (no bind is in flight, so nothing will bind it). If the API cannot
// answer, the assumption stays.
//
// Thread-safe. Start() spawns the thread, Stop() joins it.
class Reconciler {
 public:
  // `extender` and `clock` must outlive this. Each pass judges the assumptions' ages by `clock`;
  // the wait between passes is real time.
  Reconciler(Extender* extender, absl::Duration period, absl::Duration age,
             const Clock* clock = &Clock::Real());
  ~Reconciler();

  void Start();
  void Stop();
  // One pass as of `now`; returns how many assumptions changed. For tests and the thread.
  int RunOnce(absl::Time now);

 private:
  Extender* const extender_;
  const absl::Duration period_;
  const absl::Duration age_;
  const Clock* const clock_;

  Mutex mu_;
  CondVar cv_;  // signalled when stop_ is set
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_RECONCILER_H_
