package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fitledger.test/upstream/suite/fl"
)

// The real kube-scheduler calls fitledger, in both layouts (the webhook served by
// fitledger-server; fitledger-shim in front of it): pods are filtered, prioritized and bound
// through fitledger and go Running; a pod that fits only by kube-scheduler's count (its profile
// ignores example.com/gpu, which fitledger counts) gets kube-scheduler's FailedScheduling event carrying
// fitledger's reason; and preemption goes through the extender's preempt verb.
func TestKubeSchedulerCallsFitledger(t *testing.T) {
	tc := startCluster(t, standardNodes(3, "2", 2))
	low := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10}
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	for _, pc := range []*schedulingv1.PriorityClass{low, high} {
		if _, err := tc.Client.SchedulingV1().PriorityClasses().Create(tc.ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, layout := range []string{"webhook", "shim"} {
		t.Run(layout, func(t *testing.T) {
			srv := fl.StartServer(t, tc.Cluster, fl.ServerOptions{Name: "fitledger-server-" + layout,
				Kubeconfig: tc.Kubeconfig, NoWebhook: layout == "shim"})
			url := srv.WebhookURL
			if layout == "shim" {
				url = fl.StartShim(t, tc.Cluster, srv)
			}
			config := fl.SchedulerConfig([]string{schedulerName}, &fl.Extender{URL: url, Bind: true, Preempt: true,
				ProfileIgnores: []string{"example.com/gpu"}})
			sched := fl.StartScheduler(t, tc.Cluster, "kube-scheduler-"+layout, config, tc.Kubeconfig)
			defer func() { sched.Stop(); srv.Proc.Stop() }()

			// 1. Six pods, each 500m cpu and one GPU: all Running, each bound by fitledger.
			var pods []*corev1.Pod
			for i := 0; i < 6; i++ {
				pods = append(pods, makePod(podSpec{name: fmt.Sprintf("fit-%d", i), scheduler: schedulerName, cpu: "500m", gpu: 1}))
			}
			tc.createPods(t, pods)
			tc.WaitFor("six pods Running", 60*time.Second, func() bool { return tc.count(t).Running == 6 })
			if got := metricSum(t, srv.MonitorURL, "fitledger_bind_outcomes_total", `reason="bound"`); got < 6 {
				t.Errorf("fitledger bound %v pods, want 6 (kube-scheduler must bind through the extender)", got)
			}
			for _, m := range []string{"Filter", "Prioritize", "Bind"} {
				if got := metricSum(t, srv.MonitorURL, "fitledger_server_requests_total", `method="`+m+`"`, `code="OK"`); got < 1 {
					t.Errorf("fitledger answered no %s call (%v)", m, got)
				}
			}

			// 2. Every GPU is taken; kube-scheduler ignores example.com/gpu (NodeResourcesFit's
			// ignoredResources), so only fitledger says no: kube-scheduler's own event carries
			// fitledger's reason.
			tc.createPods(t, []*corev1.Pod{makePod(podSpec{name: "no-gpu-left", scheduler: schedulerName, cpu: "100m", gpu: 1})})
			tc.WaitFor("FailedScheduling with fitledger's reason", 60*time.Second, func() bool {
				for _, e := range tc.events(t, "FailedScheduling") {
					if strings.HasPrefix(e, "no-gpu-left: ") && strings.Contains(e, "Insufficient example.com/gpu") {
						return true
					}
				}
				return false
			})
			if c := tc.count(t); c.Failed != 0 {
				t.Errorf("the kubelet rejected pods: %v", c)
			}

			// 3. Preemption: a high-priority pod that needs a GPU; kube-scheduler asks the
			// extender's preempt verb which low-priority victims stand, deletes them and binds.
			tc.deleteAllPods(t)
			tc.waitCountsNoPod(t, srv.MonitorURL)
			pods = nil
			for i := 0; i < 6; i++ {
				pods = append(pods, makePod(podSpec{name: fmt.Sprintf("low-%d", i), scheduler: schedulerName, cpu: "900m", priority: "low"}))
			}
			tc.createPods(t, pods)
			tc.WaitFor("six low-priority pods Running", 60*time.Second, func() bool { return tc.count(t).Running == 6 })
			tc.createPods(t, []*corev1.Pod{makePod(podSpec{name: "urgent", scheduler: schedulerName, cpu: "1500m", priority: "high"})})
			tc.WaitFor("the high-priority pod Running after preemption", 90*time.Second, func() bool {
				p, err := tc.Client.CoreV1().Pods("burst").Get(tc.ctx, "urgent", metav1.GetOptions{})
				return err == nil && p.Status.Phase == corev1.PodRunning
			})
			if got := metricSum(t, srv.MonitorURL, "fitledger_server_requests_total", `method="Preempt"`, `code="OK"`); got < 1 {
				t.Errorf("kube-scheduler never called the preempt verb (%v)", got)
			}
			if c := tc.count(t); c.Failed != 0 {
				t.Errorf("the kubelet rejected pods: %v", c)
			}
			tc.deleteAllPods(t)
		})
	}
}

// The real kube-scheduler ranks nodes by fitledger's Prioritize. fitledger's reply lists each
// candidate's score less the lowest candidate's and leaves the lowest out
// (webhook::ShiftPriorities): the ranking is kube-scheduler's only because it adds an extender's
// score to the nodes the reply lists and to no other (pkg/scheduler/schedule_one.go,
// prioritizeNodes). Three nodes of 10 example.com/gpu devices, which kube-scheduler ignores
// (managedResources with ignoredByScheduler) and fitledger manages and scores, 4 of node-1's and 8
// of node-2's taken by pods bound beforehand. One-GPU pods are created one at a time, each after
// the previous one is bound. The extender's weight of 100 makes a point of fitledger's 1,000 of
// kube-scheduler's, above the 200 its own resource scores (NodeResourcesFit and
// BalancedAllocation, on cpu and memory) can differ by, so every pod must land on a node that
// fitledger scores highest for it: under LeastAllocated the node with the most devices free,
// under MostAllocated the one with the fewest (there the whole sequence is fixed: two pods on
// node-2, then node-1). In both layouts.
func TestKubeSchedulerRanksByFitledgersScores(t *testing.T) {
	const devices, pods = 10, 8
	tc := startCluster(t, standardNodes(3, "8", devices))
	for _, layout := range []string{"webhook", "shim"} {
		for _, strategy := range []string{"LeastAllocated", "MostAllocated"} {
			t.Run(layout+"/"+strategy, func(t *testing.T) {
				name := "rank-" + layout + "-" + strings.ToLower(strategy)
				srv := fl.StartServer(t, tc.Cluster, fl.ServerOptions{Name: "fitledger-server-" + name,
					Kubeconfig: tc.Kubeconfig, NoWebhook: layout == "shim",
					Ledger: "  enabled: true\n  accounting: {mode: managed, managed: [example.com/gpu]}\n" +
						"  scoring: " + strategy + "\n"})
				url := srv.WebhookURL
				if layout == "shim" {
					url = fl.StartShim(t, tc.Cluster, srv)
				}
				sched := fl.StartScheduler(t, tc.Cluster, "kube-scheduler-"+name,
					fl.SchedulerConfig([]string{schedulerName}, &fl.Extender{URL: url, Bind: true,
						ManagedResources: []string{"example.com/gpu"}, Weight: 100}), tc.Kubeconfig)
				defer func() { sched.Stop(); srv.Proc.Stop(); tc.deleteAllPods(t) }()

				used := map[string]int64{"node-0": 0, "node-1": 4, "node-2": 8}
				for _, node := range []string{"node-1", "node-2"} {
					p := makePod(podSpec{name: "taken-" + node, cpu: "100m", gpu: used[node]})
					p.Spec.NodeName = node
					tc.createPods(t, []*corev1.Pod{p})
				}
				tc.WaitFor("fitledger to count the two pods bound beforehand", 60*time.Second, func() bool {
					return metricSum(t, srv.MonitorURL, "fitledger_counted_pods") == 2
				})
				// fitledger's score for a one-device pod on a node with `n` devices taken: the
				// share free (LeastAllocated) or taken (MostAllocated) after it, 0..10.
				score := func(n int64) int64 {
					if strategy == "LeastAllocated" {
						return devices - n - 1
					}
					return n + 1
				}
				var placed []string
				for i := 0; i < pods; i++ {
					best, want := int64(-1), []string{}
					for _, node := range []string{"node-0", "node-1", "node-2"} {
						if used[node] >= devices {
							continue
						}
						switch s := score(used[node]); {
						case s > best:
							best, want = s, []string{node}
						case s == best:
							want = append(want, node)
						}
					}
					pod := fmt.Sprintf("rank-%d", i)
					tc.createPods(t, []*corev1.Pod{makePod(podSpec{name: pod, scheduler: schedulerName, cpu: "100m", gpu: 1})})
					var node string
					tc.WaitFor(pod+" bound", 60*time.Second, func() bool {
						p, err := tc.Client.CoreV1().Pods("burst").Get(tc.ctx, pod, metav1.GetOptions{})
						if err == nil {
							node = p.Spec.NodeName
						}
						return node != ""
					})
					placed = append(placed, node)
					if !slices.Contains(want, node) {
						t.Errorf("%s went to %s (%d of %d devices taken: fitledger's score %d); fitledger scores %v highest (%d); placements so far %v",
							pod, node, used[node], devices, score(used[node]), want, best, placed)
					}
					used[node]++
				}
				if strategy == "MostAllocated" {
					wantSequence := []string{"node-2", "node-2", "node-1", "node-1", "node-1", "node-1", "node-1", "node-1"}
					if !slices.Equal(placed, wantSequence) {
						t.Errorf("placements %v, want %v", placed, wantSequence)
					}
				}
				if got := metricSum(t, srv.MonitorURL, "fitledger_server_requests_total", `method="Prioritize"`, `code="OK"`); got < pods {
					t.Errorf("fitledger answered %v Prioritize calls, want at least %d", got, pods)
				}
				if got := metricSum(t, srv.MonitorURL, "fitledger_bind_outcomes_total", `reason="bound"`); got != pods {
					t.Errorf("fitledger bound %v pods, want %d", got, pods)
				}
				tc.WaitFor(fmt.Sprintf("%d pods Running", pods+2), 60*time.Second, func() bool { return tc.count(t).Running == pods+2 })
				if c := tc.count(t); c.Failed != 0 {
					t.Errorf("the kubelet rejected pods: %v", c)
				}
				t.Logf("%s layout, %s: placed on %v", layout, strategy, placed)
			})
		}
	}
}
