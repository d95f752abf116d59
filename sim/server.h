// fitledger-sim's HTTP front: the core/v1 REST API subset (discovery, pods, nodes, binding,
// events, namespaces; LIST with paging, WATCH with lag and bookmarks, Tables for kubectl; updates,
// apps/v1 and OpenAPI through sim/object_api.h), the
// simulated kubelet's admission trigger, and the /sim/ admin API with the fault switches
// (sim/README.md documents it).
#ifndef FITLEDGER_SIM_SERVER_H_
#define FITLEDGER_SIM_SERVER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "sim/change_signal.h"
#include "sim/config.h"
#include "sim/controllers.h"
#include "sim/object_api.h"
#include "sim/store.h"

namespace httplib {
class Server;
struct Request;
struct Response;
class DataSink;
}  // namespace httplib

namespace fitledger::sim {

struct WatchGate;

// Thread-safe. Start() spawns the listener, the delayed-kubelet thread and the controllers'
// thread; Stop() (also run by the destructor) closes every watch and joins them. No lock is held
// across I/O.
class SimServer {
 public:
  // `store` must outlive the server.
  SimServer(SimConfig config, ClusterStore* store);
  ~SimServer();
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  // Binds `host`:`port` (0 picks a free port) and starts serving. FailedPrecondition for bad TLS
  // files; Unavailable if the address cannot be bound.
  absl::Status Start(const std::string& host, int port);
  // Closes watches and held requests, stops serving, joins threads. Idempotent.
  void Stop();

  int port() const { return port_; }
  // "http://127.0.0.1:PORT" (https with TLS).
  std::string url() const;

 private:
  struct WatchState;
  struct BindingFault {
    bool all = false;
    std::set<std::string> names;  // "namespace/name"
    bool hang = false;
    int code = 500;
    absl::Duration hang_for;
    bool then_bind = false;
    int64_t times = -1;  // how many more requests it applies to; -1: unlimited
  };
  // The simulated kubelet's delayed work: an admission, or the end of a graceful deletion.
  struct DelayedAdmission {
    absl::Time due;
    std::string namespace_name;
    std::string name;
    bool terminate = false;
  };

  void Handle(const httplib::Request& req, httplib::Response& res);
  void HandleApi(const httplib::Request& req, httplib::Response& res);
  void HandleAdmin(const httplib::Request& req, httplib::Response& res);
  void HandleListOrWatch(const httplib::Request& req, httplib::Response& res, Kind kind,
                         const std::string& namespace_name);
  void HandleCreatePod(const httplib::Request& req, httplib::Response& res,
                       const std::string& namespace_name);
  void HandleBinding(const httplib::Request& req, httplib::Response& res,
                     const std::string& namespace_name, const std::string& name);
  void HandleDeletePod(const httplib::Request& req, httplib::Response& res,
                       const std::string& namespace_name, const std::string& name);
  void ServeWatch(const httplib::Request& req, httplib::Response& res,
                  std::shared_ptr<WatchState> state);
  // One step of a watch stream: writes what is visible, or waits a little. False: abort.
  bool WatchStep(WatchState& state, httplib::DataSink& sink);
  // What a watch step reads of the sim (sim/watch_stream.h) for a stream begun at `epoch`.
  WatchGate Gate(uint64_t epoch) const;
  void Discovery(const std::string& path, httplib::Response& res);

  // Runs (or schedules, with kubelet.admitDelay) the kubelet's admission of a bound pod.
  void OnPodBound(const std::string& namespace_name, const std::string& name);
  // Runs (or schedules, with kubelet.admitDelay) the end of a pod's graceful deletion.
  void OnPodTerminating(const std::string& namespace_name, const std::string& name);
  void KubeletLoop();

  // The line of /sim/requests a request counts in: verb (LIST, WATCH, WATCHLIST, GET, CREATE,
  // DELETE, BIND, or the HTTP method), resource, and for collections the selectors and the kind
  // of read (resourceVersion "" is consistent, "0" from the cache, N not older than N).
  static std::string RequestKey(const httplib::Request& req);
  void CountRequest(const std::string& key, size_t bytes);
  void CountBytes(const std::string& key, size_t bytes);

  // Consumes one use of the too-large fault; true if it applies to this request.
  bool TakeTooLarge();

  bool IsDown() const;
  // Closes every open watch stream.
  void DropWatches();
  // Sleeps until `deadline` or Stop().
  void SleepUntil(absl::Time deadline);

  // Constant after construction.
  const SimConfig config_;
  ClusterStore* const store_;
  ObjectApi objects_;

  // The deployment, replica set and garbage-collection controllers (started with the server).
  std::unique_ptr<Controllers> controllers_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::thread kubelet_thread_;
  int port_ = 0;
  int listen_fd_ = -1;  // httplib's listening socket (set while binding)
  std::string host_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> watch_list_;  // WatchList (sendInitialEvents) served
  // State reads at a resourceVersion N still to answer "too large resource version" (a fault).
  std::atomic<int64_t> too_large_times_{0};
  std::atomic<uint64_t> watch_epoch_{0};  // bumped to close every watch
  std::atomic<int64_t> watches_open_{0};
  std::atomic<int64_t> bindings_held_{0};  // binding requests a hang fault holds now
  ChangeSignal stop_signal_;               // wakes held (hanging) requests on Stop()
  ChangeSignal kubelet_signal_;            // wakes the delayed kubelet

  mutable Mutex mu_;
  // Guarded by mu_.
  absl::Duration watch_lag_ ABSL_GUARDED_BY(mu_);
  bool bookmarks_only_ ABSL_GUARDED_BY(mu_) = false;
  bool down_ ABSL_GUARDED_BY(mu_) = false;
  // The bearer token API requests must carry (empty: none); config_.token, replaced by
  // POST /sim/auth/token (a rotated credential: watches already open keep going).
  std::string token_ ABSL_GUARDED_BY(mu_);
  absl::Time down_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::vector<BindingFault> binding_faults_ ABSL_GUARDED_BY(mu_);
  std::vector<DelayedAdmission> delayed_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  struct RequestCount {
    int64_t requests = 0;
    int64_t bytes = 0;  // response bodies (watch streams as they are written)
  };
  mutable Mutex stats_mu_;
  std::map<std::string, RequestCount> request_counts_ ABSL_GUARDED_BY(stats_mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_SERVER_H_
