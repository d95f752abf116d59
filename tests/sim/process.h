// Test helpers for tests that start real processes: spawn with captured output, kill on
// destruction, wait for a file with a deadline, run a command to completion.
#ifndef FITLEDGER_TESTS_SIM_PROCESS_H_
#define FITLEDGER_TESTS_SIM_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/common/temp_dir.h"

namespace fitledger::testing {

// A child process (posix_spawn) whose stdout and stderr go to one file. Killed with SIGKILL and
// reaped on destruction if still running. Thread-compatible.
class ChildProcess {
 public:
  // Starts argv[0] (a path, or a name looked up in PATH) with the current environment plus
  // `env` ("KEY=VALUE", overriding). Internal if it cannot be spawned.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& argv, const std::string& output_path,
      const std::vector<std::string>& env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& output_path() const { return output_path_; }
  // Sends `sig` if the process has not been reaped.
  void Signal(int sig);
  // Waits up to `timeout` for the exit: the exit code, or 128 + signal number if killed.
  // DeadlineExceeded if still running.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // True once the process has exited (reaps it).
  bool Exited();

 private:
  ChildProcess(pid_t pid, std::string output_path)
      : pid_(pid), output_path_(std::move(output_path)) {}
  pid_t pid_;
  std::string output_path_;
  bool reaped_ = false;
  int exit_code_ = -1;
};

// The output of a command run to completion (stdout and stderr interleaved).
struct CommandResult {
  int exit_code = -1;
  std::string output;
};

// Runs `argv` with extra `env` and waits up to `timeout`; DeadlineExceeded (and the process is
// killed) if it takes longer. The output goes through a TempDir, removed before returning.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env,
                                         absl::Duration timeout);

// Polls until `path` exists; DeadlineExceeded after `timeout`.
absl::Status WaitForFile(const std::string& path, absl::Duration timeout);

// The whole file, or "" if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);
// Writes `contents` to `path` (truncating). Internal on failure.
absl::Status WriteFile(const std::string& path, const std::string& contents);

// A throwaway PKI made with the openssl command line, in a fresh TempDir (returned; removed,
// private keys and all, when it is destroyed): ca.pem,
// server.pem / server-key.pem (for 127.0.0.1 and localhost), client.pem / client-key.pem
// (signed by the CA), and other-ca.pem / other-client.pem / other-client-key.pem (a client
// certificate from an unrelated CA).
absl::StatusOr<TempDir> MakeTestCertificates();

}  // namespace fitledger::testing

#endif  // FITLEDGER_TESTS_SIM_PROCESS_H_
