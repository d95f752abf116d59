package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fitledger.test/upstream/suite/delayproxy"
	"fitledger.test/upstream/suite/fl"
)

// A bind that times out after it succeeded, on the real API server: kube-apiserver writes the
// binding, and its reply reaches fitledger-server after the server's bind timeout (3 s;
// delayproxy holds it 5 s), so fitledger cannot know whether the pod is bound. It must keep the
// pod counted on the node (assumed, "outcome unknown") until its watch shows it, which here lags
// 25 s. The resource is example.com/gpu, one device on the one node, which kube-scheduler
// ignores (managedResources with ignoredByScheduler): only fitledger's count keeps a second GPU
// pod off the node in that window. Were the pod forgotten at the timeout, the second pod would be
// bound and the kubelet stand-in's device manager would reject it (UnexpectedAdmissionError).
func TestBindThatTimesOutAfterItSucceeded(t *testing.T) {
	tc := startCluster(t, standardNodes(1, "4", 1))
	proxy, err := delayproxy.Start(tc.APIURL, tc.CAPEM, tc.Token, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.HoldBindingReplies(5 * time.Second)
	viaProxy := tc.WriteKubeconfig("via-proxy.kubeconfig", proxy.URL, tc.Token)
	srv := fl.StartServer(t, tc.Cluster, fl.ServerOptions{Kubeconfig: viaProxy,
		Extra: "kubernetes: {bindTimeout: 3s, bindBudget: 4s}"})
	sched := fl.StartScheduler(t, tc.Cluster, "kube-scheduler", fl.SchedulerConfig([]string{schedulerName},
		&fl.Extender{URL: srv.WebhookURL, Bind: true, ManagedResources: []string{"example.com/gpu"}}), tc.Kubeconfig)
	defer func() { sched.Stop(); srv.Proc.Stop() }()
	// Once fitledger's sync (a WatchList, a watch too) is done. The second pod's refusal comes
	// about 4 s after the first pod's binding, its confirmation 25 s after: a margin of about 20 s,
	// and the check after the refusal fails loudly (never passes) if a stalled machine uses it up.
	proxy.SetLag(25 * time.Second)

	tc.createPods(t, []*corev1.Pod{makePod(podSpec{name: "first", scheduler: schedulerName, cpu: "100m", gpu: 1})})
	tc.WaitFor("fitledger's bind of the first pod to end with its outcome unknown", 60*time.Second, func() bool {
		return metricSum(t, srv.MonitorURL, "fitledger_bind_outcomes_total", `reason="outcome_unknown"`) == 1
	})
	if got := proxy.HeldBindingReplies(); got != 1 {
		t.Fatalf("the proxy held %d binding replies, want 1", got)
	}
	first, err := tc.Client.CoreV1().Pods("burst").Get(tc.ctx, "first", metav1.GetOptions{})
	if err != nil || first.Spec.NodeName != "node-0" {
		t.Fatalf("the first pod in the API: %v, %v; want bound to node-0 (the bind succeeded)", first, err)
	}
	if got := metricSum(t, srv.MonitorURL, "fitledger_counted_pods"); got != 1 {
		t.Errorf("fitledger counts %v pods after the unknown outcome, want 1 (the first, assumed)", got)
	}

	tc.createPods(t, []*corev1.Pod{makePod(podSpec{name: "second", scheduler: schedulerName, cpu: "100m", gpu: 1})})
	tc.WaitFor("kube-scheduler's FailedScheduling of the second pod with fitledger's reason", 60*time.Second, func() bool {
		for _, e := range tc.events(t, "FailedScheduling") {
			if strings.HasPrefix(e, "second: ") && strings.Contains(e, "Insufficient example.com/gpu") {
				return true
			}
		}
		return false
	})
	// The refusal must have come from the assumption, not from the watch.
	if got := metricSum(t, srv.MonitorURL, "fitledger_ledger_transitions_total", `kind="confirmed"`); got != 0 {
		t.Fatalf("fitledger's watch confirmed %v pods before the second pod was refused; the test needs it to lag longer", got)
	}

	tc.WaitFor("fitledger's watch to confirm the first pod", 60*time.Second, func() bool {
		return metricSum(t, srv.MonitorURL, "fitledger_ledger_transitions_total", `kind="confirmed"`) == 1
	})
	if got := metricSum(t, srv.MonitorURL, "fitledger_counted_pods"); got != 1 {
		t.Errorf("fitledger counts %v pods once its watch shows the first, want 1 (counted once)", got)
	}
	tc.WaitFor("the first pod Running", 60*time.Second, func() bool { return tc.count(t).Running == 1 })
	c := tc.count(t)
	if c.Failed != 0 || c.Unbound != 1 {
		t.Errorf("pods: %v; want the first Running, the second unbound, none rejected", c)
	}
}
