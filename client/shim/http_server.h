// The shim's HTTP(S) listeners (client/shim/http1.h):
//   main:    POST <prefix>/{filter,prioritize,bind,preempt} -> Webhook; GET /healthz, /readyz.
//            Other paths 404, other methods on a verb 405, bodies over maxBodyBytes 413, all
//            with a JSON body {"Error":"..."}.
//   monitor: GET /healthz, /readyz, /metrics (when monitor.listen is set).
// /healthz is 200 "ok" while the process serves; /readyz is 200 only when the server's gRPC
// health service answers SERVING.
#ifndef FITLEDGER_CLIENT_SHIM_HTTP_SERVER_H_
#define FITLEDGER_CLIENT_SHIM_HTTP_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "config/shim_config.h"

namespace fitledger::shim {

class Webhook;
class Metrics;
class Logger;

// Owns the listener threads: Start() spawns them, Stop() (or the destructor) joins them.
// Thread-compatible for Start/Stop (call them from one thread); requests are served
// concurrently on a pool of `config.threads` threads.
class ShimServer {
 public:
  // `webhook`, `metrics` and `logger` must outlive this. `config` must pass ValidateShimConfig.
  ShimServer(const config::ShimConfig& config, const Webhook* webhook, Metrics* metrics,
             const Logger* logger);
  ~ShimServer();
  ShimServer(const ShimServer&) = delete;
  ShimServer& operator=(const ShimServer&) = delete;

  // Binds the listeners (port 0 picks a free port) and starts serving. InvalidArgument for a
  // bad address or unusable TLS files, Unavailable when a port cannot be bound.
  absl::Status Start();
  // Stops accepting, lets in-flight requests finish, joins the threads. Idle keep-alive
  // connections are closed within idleTimeout. Idempotent.
  void Stop();

  // The bound ports; REQUIRES: Start() succeeded. monitor_port() is -1 without a monitor.
  int port() const;
  int monitor_port() const;
  // "http://HOST:PORT" or "https://HOST:PORT".
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_HTTP_SERVER_H_
