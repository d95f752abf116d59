// The suites against the real control plane (tests/upstream/build's binaries): each test starts
// its own etcd, kube-apiserver, kube-controller-manager and kubelet stand-in (package cluster and
// kubelet), and fitledger's programs and kube-scheduler as processes beside them.
package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fitledger.test/upstream/suite/cluster"
	"fitledger.test/upstream/suite/kubelet"
)

const schedulerName = "fitledger-scheduler"

// testCluster is a control plane with the stand-in's nodes registered and schedulable.
type testCluster struct {
	*cluster.Cluster
	Kubelet *kubelet.Kubelet
	ctx     context.Context
}

// standardNodes: n nodes named node-0..., each cpu, memory 16Gi, 110 pods, and devices of
// example.com/gpu when gpus > 0 (a device-plugin resource).
func standardNodes(n int, cpu string, gpus int64) []kubelet.Node {
	var out []kubelet.Node
	for i := 0; i < n; i++ {
		node := kubelet.Node{Name: fmt.Sprintf("node-%d", i), Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods: resource.MustParse("110")}}
		if gpus > 0 {
			node.Devices = map[corev1.ResourceName]int64{"example.com/gpu": gpus}
		}
		out = append(out, node)
	}
	return out
}

func startCluster(t *testing.T, nodes []kubelet.Node) *testCluster {
	t.Helper()
	c := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k, err := kubelet.Start(ctx, c.Client, nodes)
	if err != nil {
		t.Fatalf("kubelet stand-in: %v", err)
	}
	tc := &testCluster{Cluster: c, Kubelet: k, ctx: ctx}
	// The node lifecycle controller lifts the not-ready taint TaintNodesByCondition put on them.
	c.WaitFor("nodes Ready and untainted", 60*time.Second, func() bool {
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) < len(nodes) {
			return false
		}
		for _, n := range list.Items {
			if len(n.Spec.Taints) > 0 {
				return false
			}
		}
		return true
	})
	c.Namespace("burst")
	return tc
}

type podSpec struct {
	name      string
	scheduler string
	cpu       string // "" for none
	gpu       int64
	priority  string // PriorityClass name
}

func makePod(s podSpec) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	if s.cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(s.cpu)
	}
	limits := corev1.ResourceList{}
	if s.gpu > 0 {
		q := *resource.NewQuantity(s.gpu, resource.DecimalSI)
		req["example.com/gpu"] = q
		limits["example.com/gpu"] = q
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: "burst", Labels: map[string]string{"test": "upstream"}},
		Spec: corev1.PodSpec{
			SchedulerName:                 s.scheduler,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: limits}}},
		},
	}
	if s.priority != "" {
		p.Spec.PriorityClassName = s.priority
	}
	return p
}

func (tc *testCluster) createPods(t *testing.T, pods []*corev1.Pod) {
	t.Helper()
	errs := make(chan error, len(pods))
	for _, p := range pods {
		go func(p *corev1.Pod) {
			_, err := tc.Client.CoreV1().Pods(p.Namespace).Create(tc.ctx, p, metav1.CreateOptions{})
			errs <- err
		}(p)
	}
	for range pods {
		if err := <-errs; err != nil {
			t.Fatalf("create pod: %v", err)
		}
	}
}

// podCounts tallies the pods of the namespace: phase (and Failed reason) -> count.
type podCounts struct {
	Running, Pending, Failed int
	Reasons                  map[string]int
	FailedBy                 map[string]int // Failed pods by spec.schedulerName
	Unbound                  int
}

func (tc *testCluster) count(t *testing.T) podCounts {
	list, err := tc.Client.CoreV1().Pods("burst").List(tc.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	c := podCounts{Reasons: map[string]int{}, FailedBy: map[string]int{}}
	for _, p := range list.Items {
		switch p.Status.Phase {
		case corev1.PodRunning:
			c.Running++
		case corev1.PodFailed:
			c.Failed++
			c.Reasons[p.Status.Reason]++
			c.FailedBy[p.Spec.SchedulerName]++
		default:
			c.Pending++
			if p.Spec.NodeName == "" {
				c.Unbound++
			}
		}
	}
	return c
}

func (c podCounts) String() string {
	var rs []string
	for r, n := range c.Reasons {
		rs = append(rs, fmt.Sprintf("%s=%d", r, n))
	}
	sort.Strings(rs)
	return fmt.Sprintf("running %d, pending %d (unbound %d), failed %d [%s]", c.Running, c.Pending, c.Unbound, c.Failed, strings.Join(rs, " "))
}

// settle waits until every pod is decided (Running or Failed) or unbound, and that state has
// held for four seconds (longer than kube-scheduler's backoff, one second in SchedulerConfig).
func (tc *testCluster) settle(t *testing.T, total int, deadline time.Duration) podCounts {
	t.Helper()
	var last podCounts
	stableSince := time.Time{}
	cluster.WaitFor(t, "the burst to settle", deadline, func() bool {
		c := tc.count(t)
		decided := c.Running+c.Failed+c.Unbound == total && c.Pending == c.Unbound
		if !decided || c.String() != last.String() {
			last = c
			stableSince = time.Time{}
			return false
		}
		if stableSince.IsZero() {
			stableSince = time.Now()
		}
		return time.Since(stableSince) > 4*time.Second
	})
	return last
}

func (tc *testCluster) deleteAllPods(t *testing.T) {
	t.Helper()
	zero := int64(0)
	tc.Client.CoreV1().Pods("burst").DeleteCollection(tc.ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	tc.WaitFor("pods deleted", 60*time.Second, func() bool {
		list, err := tc.Client.CoreV1().Pods("burst").List(tc.ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
}

// waitCountsNoPod waits until fitledger-server (its monitor URL) counts no pod: its watch has
// shown every deletion. kube-scheduler's watch may show a deletion before fitledger's does; a
// pod fitledger rejects in between for the room it frees is retried only at the next cluster
// event (kube-scheduler puts "Extender" among its unschedulable plugins, issue 122019), and an
// idle test cluster may have none for minutes.
func (tc *testCluster) waitCountsNoPod(t *testing.T, monitorURL string) {
	t.Helper()
	tc.WaitFor("fitledger to count no pod", 60*time.Second, func() bool {
		return metricSum(t, monitorURL, "fitledger_counted_pods") == 0
	})
}

// metricSum sums the samples of a metric whose label text contains every one of labels.
func metricSum(t *testing.T, monitorURL, name string, labels ...string) float64 {
	resp, err := http.Get(monitorURL + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
lines:
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		var v float64
		fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v)
		sum += v
	}
	return sum
}

// events returns the events of the namespace's pods with a reason, "pod: message" each.
func (tc *testCluster) events(t *testing.T, reason string) []string {
	list, err := tc.Client.CoreV1().Events("burst").List(tc.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e.InvolvedObject.Name+": "+e.Message)
		}
	}
	return out
}
