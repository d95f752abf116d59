package e2e

import (
	"fmt"
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
