package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"fitledger.test/upstream/suite/delayproxy"
	"fitledger.test/upstream/suite/fl"
)

// The burst where it really happens with the real kube-scheduler. On loopback a watch event
// arrives within milliseconds; in a busy cluster it lags by hundreds of milliseconds to seconds.
// The schedulers and fitledger reach the API server through delayproxy, which passes every watch
// chunk on `lag` after it arrived (lists, binds and every other request pass at once); the counts
// are printed at each lag and asserted where they are deterministic.

// report prints one line of the burst table (stdout, so ctest's log keeps it).
func report(format string, args ...interface{}) {
	fmt.Fprintf(os.Stdout, "BURST "+format+"\n", args...)
}

// (a) Two kube-scheduler processes place one burst onto the same nodes at once. Each assumes its
// own pods in its own cache and is blind to the other's until its watch shows them. Plain, the
// kubelet stand-in rejects the overcommit (OutOfcpu); both delegating to one fitledger (filter and
// bind verbs), fitledger's ledger re-checks each bind against every pod either scheduler placed,
// and nothing is rejected.
func TestBurstTwoSchedulers(t *testing.T) {
	const nodes, cpuPerNode, burst = 4, 4, 24 // 16 one-CPU slots, 24 pods
	tc := startCluster(t, standardNodes(nodes, fmt.Sprint(cpuPerNode), 0))
	proxy, err := delayproxy.Start(tc.APIURL, tc.CAPEM, tc.Token, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viaProxy := tc.WriteKubeconfig("via-proxy.kubeconfig", proxy.URL, tc.Token)

	// The rejection detector counts the pods of the schedulers named here only: scheduler a's.
	srv := fl.StartServer(t, tc.Cluster, fl.ServerOptions{Kubeconfig: viaProxy,
		Extra: "kubernetes: {schedulerNames: [fitledger-scheduler-a]}"})
	names := []string{"fitledger-scheduler-a", "fitledger-scheduler-b"}
	counted := 0.0

	run := func(withLedger bool, lag time.Duration) podCounts {
		proxy.SetLag(lag)
		var ext *fl.Extender
		mode := "plain"
		if withLedger {
			ext = &fl.Extender{URL: srv.WebhookURL, Bind: true}
			mode = "fitledger"
		}
		var scheds []interface{ Stop() }
		for _, n := range names {
			p := fl.StartScheduler(t, tc.Cluster, fmt.Sprintf("kube-scheduler-%s-%s-%v", n[len(n)-1:], mode, lag),
				fl.SchedulerConfig([]string{n}, ext), viaProxy)
			scheds = append(scheds, p)
		}
		var pods []*corev1.Pod
		for i := 0; i < burst; i++ {
			pods = append(pods, makePod(podSpec{name: fmt.Sprintf("b-%02d", i), scheduler: names[i%2], cpu: "1"}))
		}
		tc.createPods(t, pods)
		c := tc.settle(t, burst, 120*time.Second)
		for _, s := range scheds {
			s.Stop()
		}
		// fitledger's kubelet-rejection detector: scheduler a's rejections, not b's.
		want := counted + float64(c.FailedBy[names[0]])
		tc.WaitFor(fmt.Sprintf("fitledger_kubelet_rejections_total %v (scheduler a's)", want), 30*time.Second, func() bool {
			return metricSum(t, srv.MonitorURL, "fitledger_kubelet_rejections_total") == want
		})
		counted = want
		tc.deleteAllPods(t)
		tc.waitCountsNoPod(t, srv.MonitorURL)
		report("(a) two kube-schedulers, %d pods on %d one-CPU slots, watch lag %v, %s: %v", burst, nodes*cpuPerNode, lag, mode, c)
		return c
	}

	for _, lag := range []time.Duration{0, 300 * time.Millisecond, 1500 * time.Millisecond} {
		plain := run(false, lag)
		ledger := run(true, lag)
		if ledger.Failed != 0 || ledger.Running != nodes*cpuPerNode {
			t.Errorf("lag %v, both schedulers through fitledger: %v; want %d Running and none rejected", lag, ledger, nodes*cpuPerNode)
		}
		if plain.Failed != plain.Reasons["OutOfcpu"] {
			t.Errorf("lag %v, plain: rejections other than OutOfcpu: %v", lag, plain)
		}
		// At a lag of a busy cluster the plain burst overcommits every time: each scheduler
		// fills every node from its own view.
		if lag >= time.Second && plain.Failed == 0 {
			t.Errorf("lag %v, plain: nothing rejected (%v); the burst did not reproduce", lag, plain)
		}
	}
}

// (b) A device-plugin resource on the nodes (example.com/gpu, 2 devices each) that kube-scheduler
// ignores (the extender's managedResources with ignoredByScheduler: true) and fitledger manages.
// One kube-scheduler, serial: through fitledger-server --no-ledger (fit decided from its watch
// alone) the kubelet's device manager rejects the overcommit (UnexpectedAdmissionError); through
// the ledger, none.
func TestBurstIgnoredByScheduler(t *testing.T) {
	const nodes, gpus, burst = 4, 2, 12
	tc := startCluster(t, standardNodes(nodes, "32", gpus))
	proxy, err := delayproxy.Start(tc.APIURL, tc.CAPEM, tc.Token, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viaProxy := tc.WriteKubeconfig("via-proxy.kubeconfig", proxy.URL, tc.Token)

	run := func(withLedger bool, lag time.Duration) podCounts {
		proxy.SetLag(lag)
		mode := "fitledger --no-ledger"
		opts := fl.ServerOptions{Name: fmt.Sprintf("fitledger-server-noledger-%v", lag), Kubeconfig: viaProxy,
			Args: []string{"--no-ledger"}}
		if withLedger {
			mode = "fitledger"
			opts = fl.ServerOptions{Name: fmt.Sprintf("fitledger-server-ledger-%v", lag), Kubeconfig: viaProxy}
		}
		srv := fl.StartServer(t, tc.Cluster, opts)
		sched := fl.StartScheduler(t, tc.Cluster, "kube-scheduler-"+opts.Name[len("fitledger-server-"):],
			fl.SchedulerConfig([]string{schedulerName}, &fl.Extender{URL: srv.WebhookURL, Bind: true,
				ManagedResources: []string{"example.com/gpu"}}), viaProxy)
		var pods []*corev1.Pod
		for i := 0; i < burst; i++ {
			pods = append(pods, makePod(podSpec{name: fmt.Sprintf("g-%02d", i), scheduler: schedulerName, cpu: "100m", gpu: 1}))
		}
		tc.createPods(t, pods)
		c := tc.settle(t, burst, 120*time.Second)
		// The device manager's refusals are kubelet rejections for fitledger's detector too.
		tc.WaitFor(fmt.Sprintf("fitledger_kubelet_rejections_total %d", c.Failed), 30*time.Second, func() bool {
			return metricSum(t, srv.MonitorURL, "fitledger_kubelet_rejections_total") == float64(c.Failed)
		})
		sched.Stop()
		srv.Proc.Stop()
		tc.deleteAllPods(t)
		report("(b) example.com/gpu ignored by kube-scheduler, %d pods on %d devices, watch lag %v, %s: %v", burst, nodes*gpus, lag, mode, c)
		return c
	}

	for _, lag := range []time.Duration{0, 300 * time.Millisecond, 1500 * time.Millisecond} {
		plain := run(false, lag)
		ledger := run(true, lag)
		if ledger.Failed != 0 || ledger.Running != nodes*gpus {
			t.Errorf("lag %v, through the ledger: %v; want %d Running and none rejected", lag, ledger, nodes*gpus)
		}
		if plain.Failed != plain.Reasons["UnexpectedAdmissionError"] {
			t.Errorf("lag %v, --no-ledger: rejections other than the device manager's: %v", lag, plain)
		}
		if lag >= time.Second && plain.Failed == 0 {
			t.Errorf("lag %v, --no-ledger: nothing rejected (%v); the burst did not reproduce", lag, plain)
		}
	}
}
