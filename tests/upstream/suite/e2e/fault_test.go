package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fitledger.test/upstream/suite/fl"
)

// Faults on the real control plane: kube-apiserver restarted in the middle of a burst, then etcd
// restarted in the middle of another. Two kube-schedulers place the pods through one fitledger
// (the burst of TestBurstTwoSchedulers). Afterwards: every pod is still there, none was rejected
// by the kubelet, the nodes hold exactly their capacity, and fitledger's ledger settles by itself
// to the API's count (nothing assumed, every Running pod counted once).
func TestFaultsRestartAPIServerAndEtcd(t *testing.T) {
	const nodes, cpuPerNode, burst = 6, 4, 36 // 24 slots
	tc := startCluster(t, standardNodes(nodes, fmt.Sprint(cpuPerNode), 0))
	srv := fl.StartServer(t, tc.Cluster, fl.ServerOptions{Kubeconfig: tc.Kubeconfig})
	names := []string{"fitledger-scheduler-a", "fitledger-scheduler-b"}
	for _, n := range names {
		fl.StartScheduler(t, tc.Cluster, "kube-scheduler-"+n[len(n)-1:],
			fl.SchedulerConfig([]string{n}, &fl.Extender{URL: srv.WebhookURL, Bind: true}), tc.Kubeconfig)
	}

	for round, fault := range []string{"kube-apiserver", "etcd"} {
		var pods []*corev1.Pod
		for i := 0; i < burst; i++ {
			pods = append(pods, makePod(podSpec{name: fmt.Sprintf("f%d-%02d", round, i), scheduler: names[i%2], cpu: "1"}))
		}
		tc.createPods(t, pods)
		// Mid-burst: as soon as the first pod is bound.
		tc.WaitFor("a first pod bound", 60*time.Second, func() bool {
			list, err := tc.Client.CoreV1().Pods("burst").List(tc.ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, p := range list.Items {
				if p.Spec.NodeName != "" {
					return true
				}
			}
			return false
		})
		began := time.Now()
		if fault == "kube-apiserver" {
			tc.RestartAPIServer()
		} else {
			tc.RestartEtcd()
		}
		t.Logf("%s restarted in %v", fault, time.Since(began).Round(time.Millisecond))

		c := tc.settle(t, burst, 180*time.Second)
		report("faults: %s restarted mid-burst, %d pods on %d one-CPU slots: %v", fault, burst, nodes*cpuPerNode, c)
		if c.Failed != 0 {
			t.Errorf("%s restart: the kubelet rejected pods: %v", fault, c)
		}
		if c.Running != nodes*cpuPerNode || c.Running+c.Unbound != burst {
			t.Errorf("%s restart: %v; want %d Running and the rest unbound, none lost", fault, c, nodes*cpuPerNode)
		}
		// The ledger settles by itself: nothing left assumed, each Running pod counted once.
		tc.WaitFor("fitledger's ledger to agree with the API", 120*time.Second, func() bool {
			return metricSum(t, srv.MonitorURL, "fitledger_assumed_pods") == 0 &&
				metricSum(t, srv.MonitorURL, "fitledger_counted_pods") == float64(c.Running) &&
				metricSum(t, srv.MonitorURL, "fitledger_synced") == 1
		})
		tc.deleteAllPods(t)
		tc.waitCountsNoPod(t, srv.MonitorURL)
	}
}
