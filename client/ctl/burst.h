// `fitledgerctl burst`: the seed experiment, driven exactly as kube-scheduler drives an extender.
#ifndef FITLEDGER_CLIENT_CTL_BURST_H_
#define FITLEDGER_CLIENT_CTL_BURST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fitledger::ctl {

struct BurstOptions {
  std::string kubeconfig;   // the cluster (fitledger-sim) to create pods in
  std::string webhook_url;  // e.g. http://127.0.0.1:8888 (plus the extender prefix, if any)
  std::string namespace_name = "default";
  std::string app = "burst";  // pods are named <app>-NN and labelled app=<app>
  int replicas = 12;
  std::string cpu = "400m";
  std::string memory = "128Mi";
  std::string scheduler_name = "fitledger-scheduler";
  int bind_workers = 16;  // concurrent binding cycles
  int max_attempts = 5;   // scheduling attempts per pod (failed binds are retried)
  absl::Duration verdict_timeout = absl::Seconds(60);
  bool progress = false;  // a progress line on stderr while it runs
  // Before the burst (after deleting the previous burst's pods): waits until the server's
  // lagging view has caught up with the API, so two bursts cannot mix. Unset: no wait.
  std::function<absl::Status()> await_view;
};

struct BurstPod {
  std::string name;
  std::string node;            // where the scheduler bound it; empty if never bound
  std::string phase;           // after the kubelet's verdict
  std::string reason;          // e.g. OutOfcpu
  std::string message;         // the kubelet's message
  std::string pending_reason;  // why it was never bound (FailedNodes summary or last error)
  int attempts = 0;
};

struct BurstNode {
  std::string name;
  int64_t allocatable_milli_cpu = 0;
  int64_t allocatable_memory_bytes = 0;
  int bound = 0;
  int running = 0;
  int failed = 0;
  int64_t running_milli_cpu = 0;  // requests of the pods the kubelet admitted
};

struct BurstReport {
  std::vector<BurstPod> pods;
  std::vector<BurstNode> nodes;
  int bound = 0;
  int running = 0;
  int rejected = 0;  // Failed with reason OutOf*
  int pending = 0;   // never bound
  int bind_errors = 0;
  absl::Duration elapsed;
};

// Deletes the previous burst's pods, creates `replicas` pods, schedules them through the webhook
// (serial filter -> prioritize -> choose; concurrent binds; failed binds retried), waits for the
// kubelet's verdict on every bound pod, and reports.
absl::StatusOr<BurstReport> RunBurst(const BurstOptions& options);

// The human report: placement per node, every pod the kubelet rejected, pending pods.
std::string FormatReport(const BurstReport& report, const BurstOptions& options,
                         bool ledger_enabled);
// The same as one JSON object (for scripts and tests).
std::string ReportJson(const BurstReport& report);

}  // namespace fitledger::ctl

#endif  // FITLEDGER_CLIENT_CTL_BURST_H_
