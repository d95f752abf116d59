// A fixed set of threads that run queued work in submission order: for calls that wait (a
// binding POST to the Kubernetes API), so that they never hold an I/O or gRPC thread.
#ifndef FITLEDGER_COMMON_WORKER_POOL_H_
#define FITLEDGER_COMMON_WORKER_POOL_H_

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "common/mutex.h"

namespace fitledger {

// Thread-safe. Start() spawns the threads, Stop() (or the destructor) runs what is queued and
// joins them.
class WorkerPool {
 public:
  // `name` appears in thread names (for top, perf and gdb).
  WorkerPool(std::string name, int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Start();
  // Queues `work`. False once Stop has begun: `work` is then destroyed unrun.
  bool Submit(absl::AnyInvocable<void()> work);
  // Refuses new work, runs the queued work, joins the threads. Idempotent.
  void Stop();

  // Work queued or running now.
  int pending() const;

 private:
  void Run();

  // Constant after construction.
  const std::string name_;
  const int thread_count_;

  mutable Mutex mu_;
  CondVar cv_;  // signalled when work is queued or Stop begins
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_WORKER_POOL_H_
