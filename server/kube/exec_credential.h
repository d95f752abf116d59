// Credentials from a kubeconfig `exec` plugin (client.authentication.k8s.io v1 / v1beta1
// ExecCredential), as client-go's plugin/pkg/client/auth/exec/exec.go obtains and caches them.
#ifndef FITLEDGER_SERVER_KUBE_EXEC_CREDENTIAL_H_
#define FITLEDGER_SERVER_KUBE_EXEC_CREDENTIAL_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "server/kube/connection.h"

namespace fitledger::kube {

// What a plugin returned (ExecCredential status). Plain value; holds secrets: never log it.
struct ExecCredential {
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
  // status.expirationTimestamp; InfiniteFuture when the plugin gave none (valid until a 401).
  absl::Time expiry = absl::InfiniteFuture();
  // Which run of the plugin produced it (1, 2, ...), to tell a stale credential from a fresh one.
  uint64_t generation = 0;
};

// Decodes a plugin's stdout as exec.go refreshCredsLocked does: an ExecCredential of exactly
// `api_version` with a status holding a token and/or a client certificate and key (both or
// neither), and an RFC 3339 expirationTimestamp if any. InvalidArgument saying what is wrong;
// the message never quotes the output (it holds secrets).
absl::StatusOr<ExecCredential> ParseExecCredential(absl::string_view output,
                                                   absl::string_view api_version);

// The KUBERNETES_EXEC_INFO value for `config`: an ExecCredential of its apiVersion whose spec
// says interactive: false (fitledger never passes stdin) and, with provideClusterInfo, carries
// the cluster (server, tls-server-name, insecure-skip-tls-verify, certificate-authority-data in
// base64, proxy-url, disable-compression, config).
std::string ExecInfoJson(const ExecConfig& config);

struct ExecOptions {
  // A run that has not exited by then is killed (with its process group) and counts as failed.
  absl::Duration timeout = absl::Seconds(30);
  // After a failed run the plugin is not run again before this long, doubling up to max_backoff;
  // meanwhile callers get the last error at once. A success resets it.
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(30);
  // More stdout than this is garbage: the run is killed and fails.
  size_t max_output_bytes = 1 << 20;
};

// Runs the plugin when a credential is needed and caches the result until its
// expirationTimestamp, or until the API server answers 401 to it. The plugin gets our
// environment plus its `env`, `args`, KUBERNETES_EXEC_INFO, stdin from /dev/null, and its own
// process group; its stderr is kept only for the error message of a failed run.
//
// Thread-safe. At most one run at a time: callers that need a new credential while one runs wait
// for it (run_mu_ is held for the run, as exec.go's Authenticator holds its mutex; mu_ is never
// held across a run).
class ExecCredentialSource {
 public:
  ExecCredentialSource(ExecConfig config, ExecOptions options);
  ExecCredentialSource(const ExecCredentialSource&) = delete;
  ExecCredentialSource& operator=(const ExecCredentialSource&) = delete;

  // The cached credential if it has not expired at `now`; else runs the plugin. Unavailable with
  // a message naming the plugin and what went wrong (not found: with the installHint; non-zero
  // exit: the code and the end of its stderr; killed after the timeout; output that is not a
  // valid ExecCredential), also while the backoff after a failure lasts.
  absl::StatusOr<ExecCredential> Get(absl::Time now);

  // After the API server answered 401 to the credential of `generation`: runs the plugin again,
  // unless the credential has changed since (another caller refreshed it). Errors as Get.
  absl::StatusOr<ExecCredential> RefreshAfterUnauthorized(uint64_t generation, absl::Time now);

  // Increases each time a run returns a client certificate different from the previous one:
  // connections made with the old one must be closed (exec.go closes them all on rotation).
  uint64_t cert_generation() const { return cert_generation_.load(); }
  // Completed runs, successful or not.
  uint64_t runs() const { return runs_.load(); }

  const ExecConfig& config() const { return config_; }

 private:
  // Runs the plugin and records the outcome.
  absl::StatusOr<ExecCredential> RunAndRecord(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(run_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The plugin's credential, or why there is none.
  absl::StatusOr<ExecCredential> Run();

  // Constant after construction.
  const ExecConfig config_;
  const ExecOptions options_;
  const std::string exec_info_;

  Mutex run_mu_;  // held for a whole run, so runs never overlap
  mutable Mutex mu_;
  bool has_credential_ ABSL_GUARDED_BY(mu_) = false;
  ExecCredential credential_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  std::atomic<uint64_t> cert_generation_{0};
  std::atomic<uint64_t> runs_{0};
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_EXEC_CREDENTIAL_H_
