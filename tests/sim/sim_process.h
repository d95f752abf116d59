// Starts the real fitledger-sim binary for process-level tests, and reads watch streams from it.
#ifndef FITLEDGER_TESTS_SIM_SIM_PROCESS_H_
#define FITLEDGER_TESTS_SIM_SIM_PROCESS_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/sim/process.h"

namespace fitledger::testing {

// fitledger-sim listening on 127.0.0.1:<free port>, configured from YAML text. The binary path
// comes from FITLEDGER_SIM_PATH (set by CMake). Killed on destruction, then its directory
// (config, kubeconfig, output) removed.
class SimProcess {
 public:
  // Writes `config_yaml` to a temp dir, starts the sim with --listen 127.0.0.1:0
  // --kubeconfig-out, waits (up to 30 s) for the kubeconfig, and reads the port from the
  // "listening on" line. Sets SIGPIPE to SIG_IGN in the test process.
  static absl::StatusOr<std::unique_ptr<SimProcess>> Start(
      const std::string& config_yaml, const std::vector<std::string>& extra_args = {});

  int port() const { return port_; }
  const std::string& dir() const { return dir_.path(); }
  std::string kubeconfig_path() const { return dir_.File("kubeconfig"); }
  std::string output() const { return ReadFileOrEmpty(process_->output_path()); }
  ChildProcess& process() { return *process_; }
  // A fresh client for http://127.0.0.1:port (keep-alive, TCP_NODELAY, 10 s read timeout).
  std::unique_ptr<httplib::Client> Client() const;

 private:
  TempDir dir_;  // declared first: removed after the process is killed
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

// A WATCH request read on a background thread: every line (one JSON event) with its arrival
// time. Stops (closing the connection) on destruction.
class WatchStream {
 public:
  struct Line {
    absl::Time arrived;
    nlohmann::json event;
  };
  // GETs `path_and_query` (add watch=true yourself) from 127.0.0.1:`port`.
  WatchStream(int port, std::string path_and_query, httplib::Headers headers = {});
  ~WatchStream();

  // Blocks until at least `n` lines arrived (true) or `timeout` passes (false).
  bool WaitForLines(size_t n, absl::Duration timeout);
  // Blocks until the server ended the stream (true) or `timeout` passes (false).
  bool WaitForEnd(absl::Duration timeout);
  std::vector<Line> lines() const;
  int status() const { return status_.load(); }

 private:
  httplib::Client client_;
  std::thread thread_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> status_{0};
  mutable Mutex mu_;
  std::string partial_ ABSL_GUARDED_BY(mu_);
  std::vector<Line> lines_ ABSL_GUARDED_BY(mu_);
};

// Sends a request and parses the JSON response body (null if it is not JSON).
struct HttpResult {
  int status = 0;
  nlohmann::json body;
  std::string raw;
};
HttpResult Call(httplib::Client& client, const std::string& method, const std::string& path,
                const std::string& body = "");

}  // namespace fitledger::testing

#endif  // FITLEDGER_TESTS_SIM_SIM_PROCESS_H_
