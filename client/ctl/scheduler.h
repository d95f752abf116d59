// `fitledgerctl scheduler`: the small scheduler scripts/demo runs against fitledger-sim, so that
// pods a user creates with kubectl (`spec.schedulerName: fitledger` or `fitledger-no-ledger`) are
// scheduled through fitledger's extender webhook the way kube-scheduler drives an extender.
//
// It is not kube-scheduler. What it does (each step cites the upstream code it follows,
// pkg/scheduler/schedule_one.go unless said otherwise):
// - Pods: not bound (`spec.nodeName` empty), `spec.schedulerName` its name, not being deleted,
//   not Succeeded / Failed (the scheduler's informer filter, pkg/scheduler/eventhandlers.go).
//   Queued oldest first (creationTimestamp, then name; activeQ orders by priority, then by
//   timestamp; there is no priority here).
// - Nodes: every node without `spec.unschedulable` (the NodeUnschedulable plugin; a cordoned node
//   is reported "node(s) were unschedulable"). No other plugin runs: no taints / tolerations,
//   affinity, topology spreading, ports, volumes, and no resource check of its own: resources are
//   decided by the extender alone.
// - Scheduling cycles run one at a time (scheduleOne): filter through the extender (POST
//   <webhook>/filter with the pod and the node names, nodeCacheCapable), prioritize (POST
//   <webhook>/prioritize; an error there is ignored, as prioritizeNodes does), pick the best score
//   (ties: the first node by name; selectHost picks one of the ties at random).
// - Binding cycles run concurrently (up to `bind_workers`): POST <webhook>/bind (the extender is
//   the binder). Success: a Normal `Scheduled` event "Successfully assigned NS/NAME to NODE"
//   (the API server's binding sets PodScheduled=True).
// - Failure (handleSchedulingFailure): a pod that fits no node gets the condition
//   PodScheduled=False, reason `Unschedulable`, message "0/N nodes are available: <count>
//   <reason>, ...." built from the extender's FailedNodes / FailedAndUnresolvableNodes as
//   framework/types.go FitError.Error builds it, and a Warning `FailedScheduling` event with the
//   same message. It waits until the nodes change (added, updated, cordoned / uncordoned) or a
//   bound pod is deleted or finishes (the events noderesources/fit.go and nodeunschedulable
//   register for), or at most `max_unschedulable`
//   (podMaxInUnschedulablePodsDuration, 5 minutes), then is retried. An error (the webhook
//   unreachable, a bind refused) gives reason `SchedulerError` and a retry after a backoff that
//   doubles from `initial_backoff` to `max_backoff` (podInitialBackoffSeconds 1,
//   podMaxBackoffSeconds 10).
// - Unlike kube-scheduler, an unschedulable pod that failed within `settle_window` of a cluster
//   change is retried after its backoff even without a further change: the extender (not this
//   scheduler) holds the cluster's state, and its watch may not have seen the change yet.
// - No preemption, no nominated nodes, no gated pods, no scheduling of pods of other names.
//
// It watches nothing: it lists pods and nodes every `poll_interval` (the demo's clusters are
// small).
#ifndef FITLEDGER_CLIENT_CTL_SCHEDULER_H_
#define FITLEDGER_CLIENT_CTL_SCHEDULER_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "nlohmann/json_fwd.hpp"

namespace fitledger::ctl {

struct SchedulerOptions {
  std::string kubeconfig;   // the cluster (default $KUBECONFIG)
  std::string webhook_url;  // the extender webhook's URL prefix
  std::string scheduler_name = "fitledger";
  int bind_workers = 16;
  absl::Duration poll_interval = absl::Milliseconds(200);
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(10);
  absl::Duration max_unschedulable = absl::Minutes(5);
  // An unschedulable pod that failed within this long after a cluster change is retried (after
  // its backoff) without waiting for another change: the extender's view of the change may have
  // lagged (fitledger-server watches the API; the demo's sim delays watches by 2 s).
  absl::Duration settle_window = absl::Seconds(5);
  absl::Duration request_timeout = absl::Seconds(10);
  // One line per decision (bound, unschedulable, error). Unset: nothing is logged.
  std::function<void(const std::string&)> log;
};

// The message of a pod that fits no node, as FitError.Error words it: "0/<all> nodes are
// available: <count> <reason>, ...." with the reasons counted over the nodes and sorted as
// strings. `failed` maps a node to its reasons.
std::string FitErrorMessage(int all_nodes,
                            const std::map<std::string, std::vector<std::string>>& failed);

// The node a HostPriorityList (the webhook's /prioritize answer, or null when it failed) puts
// first among `feasible` (not empty): the highest score, a feasible node it does not list
// scoring 0 (as kube-scheduler adds nothing to it; fitledger's webhook leaves out the nodes at
// the lowest score) and one listed twice the sum, ties to the first by name. Entries naming other
// nodes are ignored.
std::string BestScored(const std::vector<std::string>& feasible, const nlohmann::json& scores);

// Schedules until `*stop` becomes true (then waits for the binds in flight and returns OK).
// An error only for bad options or an unreadable kubeconfig; API and webhook errors are logged
// and retried.
absl::Status RunScheduler(const SchedulerOptions& options, const std::atomic<bool>* stop);

}  // namespace fitledger::ctl

#endif  // FITLEDGER_CLIENT_CTL_SCHEDULER_H_
