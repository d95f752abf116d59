#include "tests/sim/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace fitledger::testing {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& output_path,
    const std::vector<std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : vars) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (std::string& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0].c_str(), &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot spawn ", args[0], ": errno ", rc));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, output_path));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

void ChildProcess::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

bool ChildProcess::Exited() {
  if (reaped_) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return reaped_;
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Exited()) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " still running"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return exit_code_;
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env,
                                         absl::Duration timeout) {
  const TempDir dir("cmd");
  const std::string out = dir.File("output");
  auto child = ChildProcess::Start(argv, out, env);
  if (!child.ok()) return child.status();
  auto code = (*child)->Wait(timeout);
  if (!code.ok()) {
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " did not finish; output so far: ", ReadFileOrEmpty(out)));
  }
  return CommandResult{*code, ReadFileOrEmpty(out)};
}

absl::Status WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  struct stat st;
  while (stat(path.c_str(), &st) != 0) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(path, " did not appear"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::OkStatus();
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<TempDir> MakeTestCertificates() {
  TempDir dir("certs");
  const std::string key = "-newkey rsa:2048 -nodes";
  std::string script = absl::StrCat(
      "set -e; cd ", dir.path(), ";", "openssl req -x509 ", key,
      " -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca;", "openssl req ", key,
      " -keyout server-key.pem -out server.csr -subj /CN=127.0.0.1;",
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > ext.cnf;",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 ",
      "-extfile ext.cnf -out server.pem;", "openssl req ", key,
      " -keyout client-key.pem -out client.csr -subj /CN=test-client;",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 ",
      "-out client.pem;", "openssl req -x509 ", key,
      " -keyout other-ca.key -out other-ca.pem -days 1 -subj /CN=other;", "openssl req ", key,
      " -keyout other-client-key.pem -out other.csr -subj /CN=other-client;",
      "openssl x509 -req -in other.csr -CA other-ca.pem -CAkey other-ca.key -CAcreateserial ",
      "-days 1 -out other-client.pem;");
  absl::StatusOr<CommandResult> r = RunCommand({"bash", "-c", script}, {}, absl::Seconds(120));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::InternalError(absl::StrCat("openssl failed: ", r->output));
  return dir;
}

}  // namespace fitledger::testing
