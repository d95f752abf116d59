// fitledgerctl: look into fitledger-server, and replay the burst experiment.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/burst.h"
#include "client/ctl/commands.h"
#include "client/ctl/scheduler.h"
#include "common/flags.h"

namespace {
std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop = true; }
}  // namespace

ABSL_FLAG(std::string, server, Env("FITLEDGER_SERVER", "unix:///run/fitledger/server.sock"),
          "fitledger-server gRPC address (unix:///path or host:port; env FITLEDGER_SERVER)");
ABSL_FLAG(std::string, tls_ca, "", "CA file to verify the server's TLS certificate");
ABSL_FLAG(std::string, tls_server_name, "", "TLS server name to verify");
ABSL_FLAG(std::string, tls_cert, "", "client certificate for mTLS");
ABSL_FLAG(std::string, tls_key, "", "client key for mTLS");
ABSL_FLAG(int, timeout_seconds, 5, "gRPC call deadline in seconds");
ABSL_FLAG(bool, watch, false, "nodes: refresh the table until interrupted");
ABSL_FLAG(int, interval_ms, 1000, "nodes --watch: refresh period in milliseconds");
ABSL_FLAG(std::string, kubeconfig, "",
          "burst, await-view, scheduler: the cluster's kubeconfig (default $KUBECONFIG)");
ABSL_FLAG(std::string, webhook, Env("FITLEDGER_WEBHOOK", "http://127.0.0.1:8888"),
          "burst, scheduler: the extender webhook's URL prefix, fitledger-server's own or "
          "fitledger-shim's "
          "(env FITLEDGER_WEBHOOK)");
ABSL_FLAG(std::string, namespace, "default", "burst: namespace of the pods");
ABSL_FLAG(int, replicas, 12, "burst: number of pods");
ABSL_FLAG(std::string, cpu, "400m", "burst: cpu request per pod");
ABSL_FLAG(std::string, memory, "128Mi", "burst: memory request per pod");
ABSL_FLAG(bool, no_ledger, false,
          "burst: use the server started with --no-ledger (env FITLEDGER_SERVER_NO_LEDGER / "
          "FITLEDGER_WEBHOOK_NO_LEDGER) to show the overcommit");
ABSL_FLAG(bool, json, false, "burst: print the report as JSON");
ABSL_FLAG(int, wait_seconds, 60, "await-view: give up after this many seconds");
ABSL_FLAG(std::string, scheduler_name, "fitledger",
          "scheduler: schedule the pods whose spec.schedulerName is this");
ABSL_FLAG(int, bind_workers, 16, "scheduler: concurrent binding cycles");

int main(int argc, char** argv) {
  std::vector<char*> args = fitledger::ParseFlags(
      argc, argv,
      "fitledgerctl COMMAND [flags]\n"
      "  health                 exit 0 when the server is SERVING (synced)\n"
      "  nodes [--watch]        allocatable / confirmed / assumed / free per node\n"
      "  assumed                pods bound by fitledger and not yet confirmed by the watch\n"
      "  explain FILE|- NODE    why the pod (or each workload's pod template: Deployment,\n"
      "                         StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job,\n"
      "                         CronJob; each YAML document) does or does not fit the node, with\n"
      "                         the numbers; exit 0 fits, 1 does not fit, 2 error\n"
      "  rejections             pods the kubelet rejected (OutOf*) as the server saw them\n"
      "  await-view             wait until the server's (lagging) view has caught up with the\n"
      "                         API (--kubeconfig; resourceVersions compared as integers)\n"
      "  burst [--replicas N --cpu Q --memory Q --namespace NS] [--no-ledger] [--json]\n"
      "                         create N pods and schedule them through the webhook as\n"
      "                         kube-scheduler does; print placement and kubelet verdicts\n"
      "  scheduler [--scheduler-name NAME] [--webhook URL]\n"
      "                         schedule the pods of spec.schedulerName NAME through the\n"
      "                         webhook until interrupted (scripts/demo runs two: fitledger\n"
      "                         and fitledger-no-ledger; not kube-scheduler, see sim/README.md)\n"
      "  help                   this text (as --help; --helpfull adds Abseil's flags)",
      "ctl/main.cc");
  if (args.size() < 2) {
    fprintf(stderr, "fitledgerctl: a command is required (see --help)\n");
    return 2;
  }
  std::string command = args[1];
  if (command == "help") {
    fitledger::PrintHelp(/*all=*/false);
    return 0;
  }
  fitledger::ctl::ServerTarget target;
  target.address = absl::GetFlag(FLAGS_server);
  target.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  target.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  target.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  target.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  target.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));

  auto print = [](const absl::StatusOr<std::string>& out) {
    if (!out.ok()) {
      fprintf(stderr, "fitledgerctl: %s\n", std::string(out.status().message()).c_str());
      return 1;
    }
    fputs(out->c_str(), stdout);
    fflush(stdout);
    return 0;
  };

  if (command == "health") {
    absl::Status s = fitledger::ctl::Health(target);
    if (!s.ok()) {
      fprintf(stderr, "fitledgerctl: not serving: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    printf("SERVING\n");
    return 0;
  }
  if (command == "nodes") {
    if (!absl::GetFlag(FLAGS_watch)) return print(fitledger::ctl::NodesTable(target));
    bool tty = isatty(STDOUT_FILENO);
    while (true) {
      absl::StatusOr<std::string> table = fitledger::ctl::NodesTable(target);
      if (tty) fputs("\033[H\033[2J", stdout);
      int rc = print(table);
      if (rc != 0) return rc;
      usleep(absl::GetFlag(FLAGS_interval_ms) * 1000);
    }
  }
  if (command == "assumed") return print(fitledger::ctl::AssumedTable(target));
  if (command == "await-view") {
    absl::Status s = fitledger::ctl::AwaitView(target, absl::GetFlag(FLAGS_kubeconfig),
                                               absl::Seconds(absl::GetFlag(FLAGS_wait_seconds)));
    if (!s.ok()) {
      fprintf(stderr, "fitledgerctl: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    printf("the server's view has caught up with the API\n");
    return 0;
  }
  if (command == "rejections") return print(fitledger::ctl::RejectionsTable(target));
  if (command == "explain") {
    // Exit status: 0 every pod fits, 1 some pod does not fit, 2 an error (documented in
    // docs/configuration.md).
    if (args.size() != 4) {
      fprintf(stderr, "fitledgerctl: usage: explain FILE|- NODE\n");
      return 2;
    }
    absl::StatusOr<fitledger::ctl::ExplainResult> result =
        fitledger::ctl::Explain(target, args[2], args[3]);
    if (!result.ok()) {
      fprintf(stderr, "fitledgerctl: explain: %s\n",
              std::string(result.status().message()).c_str());
      return 2;
    }
    fputs(result->text.c_str(), stdout);
    fflush(stdout);
    return result->all_fit ? 0 : 1;
  }
  if (command == "burst") {
    fitledger::ctl::BurstOptions o;
    o.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
    o.webhook_url = absl::GetFlag(FLAGS_webhook);
    if (absl::GetFlag(FLAGS_no_ledger)) {
      o.webhook_url = Env("FITLEDGER_WEBHOOK_NO_LEDGER", o.webhook_url.c_str());
      target.address = Env("FITLEDGER_SERVER_NO_LEDGER", target.address.c_str());
    }
    o.namespace_name = absl::GetFlag(FLAGS_namespace);
    o.replicas = absl::GetFlag(FLAGS_replicas);
    o.cpu = absl::GetFlag(FLAGS_cpu);
    o.memory = absl::GetFlag(FLAGS_memory);
    o.progress = !absl::GetFlag(FLAGS_json) && isatty(STDERR_FILENO);
    o.await_view = [target, kubeconfig = o.kubeconfig] {
      return fitledger::ctl::AwaitView(target, kubeconfig, absl::Seconds(60));
    };
    absl::StatusOr<bool> ledger = fitledger::ctl::LedgerEnabled(target);
    if (!ledger.ok()) {
      fprintf(stderr, "fitledgerctl: cannot ask the server its mode: %s\n",
              std::string(ledger.status().message()).c_str());
      return 1;
    }
    if (*ledger == absl::GetFlag(FLAGS_no_ledger)) {
      fprintf(stderr,
              "fitledgerctl: the server at %s runs with the ledger %s, but burst was asked %s "
              "--no-ledger; point --server/--webhook at the matching pair (scripts/demo starts "
              "both)\n",
              target.address.c_str(), *ledger ? "on" : "off",
              absl::GetFlag(FLAGS_no_ledger) ? "with" : "without");
      return 2;
    }
    absl::StatusOr<fitledger::ctl::BurstReport> report = fitledger::ctl::RunBurst(o);
    if (!report.ok()) {
      fprintf(stderr, "fitledgerctl: burst: %s\n", std::string(report.status().message()).c_str());
      return 1;
    }
    if (absl::GetFlag(FLAGS_json)) {
      printf("%s\n", fitledger::ctl::ReportJson(*report).c_str());
    } else {
      fputs(fitledger::ctl::FormatReport(*report, o, *ledger).c_str(), stdout);
    }
    return 0;
  }
  if (command == "scheduler") {
    fitledger::ctl::SchedulerOptions o;
    o.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
    o.webhook_url = absl::GetFlag(FLAGS_webhook);
    o.scheduler_name = absl::GetFlag(FLAGS_scheduler_name);
    o.bind_workers = absl::GetFlag(FLAGS_bind_workers);
    o.log = [&o](const std::string& line) {
      printf("%s: %s\n", o.scheduler_name.c_str(), line.c_str());
      fflush(stdout);
    };
    signal(SIGINT, OnStopSignal);
    signal(SIGTERM, OnStopSignal);
    printf("%s: scheduling pods with spec.schedulerName=%s through %s\n", o.scheduler_name.c_str(),
           o.scheduler_name.c_str(), o.webhook_url.c_str());
    fflush(stdout);
    absl::Status s = fitledger::ctl::RunScheduler(o, &g_stop);
    if (!s.ok()) {
      fprintf(stderr, "fitledgerctl: scheduler: %s\n", std::string(s.message()).c_str());
      return 2;
    }
    return 0;
  }
  fprintf(stderr, "fitledgerctl: unknown command \"%s\" (see --help)\n", command.c_str());
  return 2;
}
