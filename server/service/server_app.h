// fitledger-server wired together: API client, watcher, ledger, extender, reconciler, the bind
// pool, gRPC's server (Extender, Introspection, health, reflection), and the HTTP listeners of the
// webhook library: kube-scheduler's webhook (in process) and the monitor.
#ifndef FITLEDGER_SERVER_SERVICE_SERVER_APP_H_
#define FITLEDGER_SERVER_SERVICE_SERVER_APP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/server_config.h"

namespace fitledger {

// Not thread-safe: one owner calls Start, then Shutdown.
class ServerApp {
 public:
  static absl::StatusOr<std::unique_ptr<ServerApp>> Create(const config::ServerConfig& config);
  virtual ~ServerApp() = default;

  // Starts listening and watching. Returns once the listeners are bound (the view may still be
  // syncing: health reports NOT_SERVING until the first full list).
  virtual absl::Status Start() = 0;
  // Graceful: stop accepting, finish in-flight binds, stop the threads.
  virtual void Shutdown() = 0;
  // The TCP ports the gRPC server listens on (in listen order; Unix sockets excluded), and the
  // monitor's port (0 if off).
  virtual std::vector<int> grpc_ports() const = 0;
  virtual int monitor_port() const = 0;
  // The extender webhook's port when the server serves it (webhook.listen), else 0.
  virtual int webhook_port() const = 0;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_SERVER_APP_H_
