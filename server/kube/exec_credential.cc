#include "server/kube/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace fitledger::kube {
namespace {

constexpr size_t kStderrTailBytes = 512;

// The outcome of one run of a command.
struct ProcessResult {
  int spawn_errno = 0;  // posix_spawn failed (the command could not be started)
  bool timed_out = false;
  bool output_too_large = false;
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  std::string out;
  std::string err;  // the last kStderrTailBytes
};

void AppendTail(std::string* tail, const char* data, size_t n) {
  tail->append(data, n);
  if (tail->size() > kStderrTailBytes) tail->erase(0, tail->size() - kStderrTailBytes);
}

// Runs argv with `env`, stdin from /dev/null, stdout and stderr captured, in its own process
// group; kills the group at `timeout` or when stdout exceeds `max_out`.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         absl::Duration timeout, size_t max_out) {
  ProcessResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    result.spawn_errno = errno;
    return result;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    result.spawn_errno = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so a timeout kills whatever it started too; default signal
  // dispositions and an empty mask (the server ignores SIGPIPE and its threads may block some).
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (const std::string& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    result.spawn_errno = rc;
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }

  const absl::Time deadline = absl::Now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  bool open[2] = {true, true};
  bool kill_group = false;
  char buf[16384];
  while (open[0] || open[1]) {
    int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      result.timed_out = true;
      kill_group = true;
      break;
    }
    for (int i = 0; i < 2; ++i) fds[i].fd = open[i] ? (i == 0 ? out_pipe[0] : err_pipe[0]) : -1;
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (!open[i] || fds[i].revents == 0) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        if (i == 0) {
          result.out.append(buf, static_cast<size_t>(got));
        } else {
          AppendTail(&result.err, buf, static_cast<size_t>(got));
        }
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        open[i] = false;
      }
    }
    if (result.out.size() > max_out) {
      result.output_too_large = true;
      kill_group = true;
      break;
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);

  int status = 0;
  while (!kill_group) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (absl::Now() >= deadline) {
      result.timed_out = true;
      kill_group = true;
      break;
    }
    poll(nullptr, 0, 10);  // output is closed; the exit follows within moments
  }
  if (kill_group) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return result;
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

// environ, then `extra` in order; a later value of a name replaces an earlier one (Go's
// exec.Cmd dedups Env keeping the last, and exec.go appends the config's env to os.Environ()).
std::vector<std::string> MergeEnv(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::pair<std::string, std::string>> vars;
  auto set = [&](std::string name, std::string value) {
    for (auto& v : vars) {
      if (v.first == name) {
        v.second = std::move(value);
        return;
      }
    }
    vars.emplace_back(std::move(name), std::move(value));
  };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    set(std::string(*e, eq - *e), std::string(eq + 1));
  }
  for (const auto& [name, value] : extra) set(name, value);
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (auto& [name, value] : vars) out.push_back(absl::StrCat(name, "=", value));
  return out;
}

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("decoding stdout: ", message));
}

}  // namespace

absl::StatusOr<ExecCredential> ParseExecCredential(absl::string_view output,
                                                   absl::string_view api_version) {
  nlohmann::json doc = nlohmann::json::parse(output.begin(), output.end(), nullptr,
                                             /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Invalid("not JSON (a plugin must print one ExecCredential)");
  if (!doc.is_object()) return Invalid("not a JSON object (an ExecCredential)");
  auto str = [&](const nlohmann::json& obj, const char* key, std::string* out) -> absl::Status {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) return Invalid(absl::StrCat(key, " is not a string"));
    *out = it->get<std::string>();
    return absl::OkStatus();
  };
  std::string kind, version;
  absl::Status s = str(doc, "kind", &kind);
  if (s.ok()) s = str(doc, "apiVersion", &version);
  if (!s.ok()) return s;
  if (kind.empty() || version.empty()) {
    return Invalid("the object has no kind or apiVersion (want kind ExecCredential)");
  }
  if (kind != "ExecCredential") {
    return Invalid(absl::StrCat("kind is \"", kind, "\", want ExecCredential"));
  }
  if (version != api_version) {
    return Invalid(absl::StrCat("exec plugin is configured to use API version ", api_version,
                                ", plugin returned version ", version));
  }
  auto status = doc.find("status");
  if (status == doc.end() || status->is_null()) {
    return Invalid("exec plugin didn't return a status field");
  }
  if (!status->is_object()) return Invalid("status is not an object");
  ExecCredential cred;
  std::string expiry;
  s = str(*status, "token", &cred.token);
  if (s.ok()) s = str(*status, "clientCertificateData", &cred.client_cert_pem);
  if (s.ok()) s = str(*status, "clientKeyData", &cred.client_key_pem);
  if (s.ok()) s = str(*status, "expirationTimestamp", &expiry);
  if (!s.ok()) return s;
  if (cred.token.empty() && cred.client_cert_pem.empty() && cred.client_key_pem.empty()) {
    return Invalid("exec plugin didn't return a token or cert/key pair");
  }
  if (cred.client_cert_pem.empty() != cred.client_key_pem.empty()) {
    return Invalid("exec plugin returned only certificate or key, not both");
  }
  if (!cred.client_cert_pem.empty() && (!absl::StrContains(cred.client_cert_pem, "-----BEGIN ") ||
                                        !absl::StrContains(cred.client_key_pem, "-----BEGIN "))) {
    return Invalid("clientCertificateData and clientKeyData must be PEM");
  }
  if (!expiry.empty()) {
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, expiry, &cred.expiry, &err)) {
      return Invalid(
          absl::StrCat("status.expirationTimestamp \"", expiry, "\" is not an RFC 3339 time"));
    }
  }
  return cred;
}

std::string ExecInfoJson(const ExecConfig& config) {
  nlohmann::ordered_json spec = nlohmann::ordered_json::object();
  if (config.provide_cluster_info) {
    const ExecClusterInfo& c = config.cluster;
    nlohmann::ordered_json cluster = {{"server", c.server}};
    if (!c.tls_server_name.empty()) cluster["tls-server-name"] = c.tls_server_name;
    if (c.insecure_skip_tls_verify) cluster["insecure-skip-tls-verify"] = true;
    if (!c.ca_pem.empty()) cluster["certificate-authority-data"] = absl::Base64Escape(c.ca_pem);
    if (!c.proxy_url.empty()) cluster["proxy-url"] = c.proxy_url;
    if (c.disable_compression) cluster["disable-compression"] = true;
    if (!c.config_json.empty()) {
      cluster["config"] = nlohmann::ordered_json::parse(c.config_json, nullptr, false);
    }
    spec["cluster"] = std::move(cluster);
  }
  spec["interactive"] = false;
  nlohmann::ordered_json info = {
      {"kind", "ExecCredential"}, {"apiVersion", config.api_version}, {"spec", std::move(spec)}};
  return info.dump();
}

ExecCredentialSource::ExecCredentialSource(ExecConfig config, ExecOptions options)
    : config_(std::move(config)), options_(options), exec_info_(ExecInfoJson(config_)) {
  MutexLock lock(&mu_);
  backoff_ = options_.initial_backoff;
}

absl::StatusOr<ExecCredential> ExecCredentialSource::Get(absl::Time now) {
  {
    MutexLock lock(&mu_);
    if (has_credential_ && now < credential_.expiry) return credential_;
  }
  MutexLock run(&run_mu_);
  {
    MutexLock lock(&mu_);
    if (has_credential_ && now < credential_.expiry) return credential_;  // refreshed meanwhile
    if (now < retry_at_) {
      return absl::UnavailableError(absl::StrCat(last_error_.message(), " (next attempt in ",
                                                 absl::FormatDuration(retry_at_ - now), ")"));
    }
  }
  return RunAndRecord(now);
}

absl::StatusOr<ExecCredential> ExecCredentialSource::RefreshAfterUnauthorized(uint64_t generation,
                                                                              absl::Time now) {
  MutexLock run(&run_mu_);
  {
    MutexLock lock(&mu_);
    // exec.go maybeRefreshCreds: "credentials already rotated".
    if (has_credential_ && credential_.generation != generation) return credential_;
    if (now < retry_at_) {
      return absl::UnavailableError(absl::StrCat(last_error_.message(), " (next attempt in ",
                                                 absl::FormatDuration(retry_at_ - now), ")"));
    }
  }
  return RunAndRecord(now);
}

absl::StatusOr<ExecCredential> ExecCredentialSource::RunAndRecord(absl::Time now) {
  const absl::Time started = absl::Now();
  absl::StatusOr<ExecCredential> result = Run();
  const absl::Duration took = absl::Now() - started;
  runs_.fetch_add(1);
  if (result.ok()) {
    LogInfo("exec credential plugin ran",
            {{"user", config_.user},
             {"command", config_.command},
             {"took", absl::FormatDuration(took)},
             {"kind", result->token.empty() ? "client certificate" : "token"},
             {"expires",
              result->expiry == absl::InfiniteFuture()
                  ? std::string("never (until refused)")
                  : absl::FormatTime(absl::RFC3339_sec, result->expiry, absl::UTCTimeZone())}});
  }
  MutexLock lock(&mu_);
  if (!result.ok()) {
    last_error_ = result.status();
    retry_at_ = now + took + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.max_backoff);
    return result.status();
  }
  // exec.go refreshCredsLocked closes every connection when the certificate changes.
  if (has_credential_ && credential_.client_cert_pem != result->client_cert_pem) {
    cert_generation_.fetch_add(1);
  }
  result->generation = next_generation_++;
  credential_ = *result;
  has_credential_ = true;
  last_error_ = absl::OkStatus();
  retry_at_ = absl::InfinitePast();
  backoff_ = options_.initial_backoff;
  return result;
}

absl::StatusOr<ExecCredential> ExecCredentialSource::Run() {
  const std::string who =
      absl::StrCat("exec plugin \"", config_.command, "\" (users[", config_.user, "])");
  std::vector<std::string> argv = {config_.command};
  argv.insert(argv.end(), config_.args.begin(), config_.args.end());
  std::vector<std::pair<std::string, std::string>> extra = config_.env;
  extra.emplace_back("KUBERNETES_EXEC_INFO", exec_info_);
  ProcessResult r = RunProcess(argv, MergeEnv(extra), options_.timeout, options_.max_output_bytes);
  std::string err = std::string(absl::StripAsciiWhitespace(r.err));
  std::string stderr_note = err.empty() ? "" : absl::StrCat("; stderr: ", err);
  if (r.spawn_errno == ENOENT) {
    // exec.go wrapCmdRunErrorLocked: the executable is not installed.
    std::string message = absl::StrCat(
        who, ": executable ", config_.command,
        " not found (it looks like a client-go credential plugin that is not installed, or not "
        "in fitledger-server's PATH)");
    if (!config_.install_hint.empty()) absl::StrAppend(&message, ". ", config_.install_hint);
    return absl::UnavailableError(message);
  }
  if (r.spawn_errno != 0) {
    return absl::UnavailableError(
        absl::StrCat(who, ": cannot run it: ", std::strerror(r.spawn_errno)));
  }
  if (r.timed_out) {
    return absl::UnavailableError(
        absl::StrCat(who, ": did not finish within ", absl::FormatDuration(options_.timeout),
                     "; killed it (a plugin must not prompt)", stderr_note));
  }
  if (r.output_too_large) {
    return absl::UnavailableError(absl::StrCat(who, ": printed more than ",
                                               options_.max_output_bytes,
                                               " bytes; killed it (not an ExecCredential)"));
  }
  if (!r.exited) {
    return absl::UnavailableError(absl::StrCat(who, ": killed by signal ", r.signal, stderr_note));
  }
  if (r.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat(who, ": executable ", config_.command,
                                               " failed with exit code ", r.exit_code,
                                               stderr_note));
  }
  absl::StatusOr<ExecCredential> cred = ParseExecCredential(r.out, config_.api_version);
  if (!cred.ok()) return absl::UnavailableError(absl::StrCat(who, ": ", cred.status().message()));
  return cred;
}

}  // namespace fitledger::kube
