package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"fitledger.test/upstream/suite/cluster"
	"fitledger.test/upstream/suite/fl"
	"fitledger.test/upstream/suite/kubelet"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func admissionPod(name string, app corev1.ResourceList, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: app}}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// The pods both kubelets judge, in order, on a node of 4 cpu, 8Gi, 5 pods and 2 example.com/foo.
func admissionCases() []*corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	return []*corev1.Pod{
		admissionPod("k01-fits", rl("cpu", "1500m", "memory", "1Gi"), nil),
		admissionPod("k02-fits", rl("cpu", "2"), nil),
		admissionPod("k03-out-of-cpu", rl("cpu", "1"), nil),
		admissionPod("k04-init-container-larger", rl("cpu", "100m"), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: rl("cpu", "3")}}}
		}),
		admissionPod("k05-sidecar-adds", rl("cpu", "200m"), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "registry.k8s.io/pause:3.10",
				RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "200m")}}}
		}),
		admissionPod("k06-out-of-memory", rl("memory", "7500Mi"), nil),
		admissionPod("k07-out-of-extended", rl("example.com/foo", "3"), nil),
		admissionPod("k08-extended-the-node-lacks", rl("example.com/bar", "1"), nil),
		admissionPod("k09-overhead", rl(), func(p *corev1.Pod) { p.Spec.Overhead = rl("cpu", "50m") }),
		admissionPod("k10-out-of-pods", rl(), nil),
	}
}

// The kubelet stand-in answers as the kubelet: upstream's admission code, offline, on known pods
// (the messages are the kubelet's own, read from pkg/kubelet/lifecycle/predicate.go and the
// device manager).
func TestKubeletStandInAnswersAsTheKubelet(t *testing.T) {
	node := kubelet.NodeObject(kubelet.Node{Name: "n", Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "5", "example.com/foo", "2")})
	got := kubelet.Verdicts(node, nil, admissionCases())
	want := []string{
		"k01-fits admit", "k02-fits admit",
		"k03-out-of-cpu OutOfcpu: Node didn't have enough resource: cpu, requested: 1000, used: 3500, capacity: 4000",
		"k04-init-container-larger OutOfcpu: Node didn't have enough resource: cpu, requested: 3000, used: 3500, capacity: 4000",
		"k05-sidecar-adds admit",
		"k06-out-of-memory OutOfmemory: Node didn't have enough resource: memory, requested: 7864320000, used: 1073741824, capacity: 8589934592",
		"k07-out-of-extended OutOfexample.com/foo: Node didn't have enough resource: example.com/foo, requested: 3, used: 0, capacity: 2",
		"k08-extended-the-node-lacks admit", "k09-overhead admit",
		"k10-out-of-pods OutOfpods: Node didn't have enough resource: pods, requested: 1, used: 5, capacity: 5",
	}
	for i, v := range got {
		s := v.Name + " admit"
		if !v.Admit {
			s = fmt.Sprintf("%s %s: %s", v.Name, v.Reason, v.Message)
		}
		if i >= len(want) || s != want[i] {
			t.Errorf("verdict %d: %s", i, s)
		}
	}
	// Devices: 2 example.com/gpu; the third asked for is the device manager's refusal.
	gpuNode := kubelet.NodeObject(kubelet.Node{Name: "g", Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "110"),
		Devices: map[corev1.ResourceName]int64{"example.com/gpu": 2}})
	gpu := func(name string, n string) *corev1.Pod {
		return admissionPod(name, rl("example.com/gpu", n), func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("example.com/gpu", n) })
	}
	got = kubelet.Verdicts(gpuNode, map[corev1.ResourceName]int64{"example.com/gpu": 2}, []*corev1.Pod{gpu("g1", "1"), gpu("g2", "2"), gpu("g3", "1")})
	wantGPU := []string{"admit", "UnexpectedAdmissionError: Allocate failed due to requested number of devices unavailable for example.com/gpu. Requested: 2, Available: 1, which is unexpected", "admit"}
	for i, v := range got {
		s := "admit"
		if !v.Admit {
			s = v.Reason + ": " + v.Message
		}
		if s != wantGPU[i] {
			t.Errorf("device verdict %d: %s, want %s", i, s, wantGPU[i])
		}
	}
}

// fitledger-sim's kubelet against the stand-in (upstream's admission code) on the same node and
// pods: each pod bound in order through the sim's API, its phase, reason and message read back.
func TestKubeletDifferentialSimAgainstStandIn(t *testing.T) {
	c := cluster.Start(t, cluster.Options{NoControlPlane: true})
	kubeconfig := c.Path("sim.kubeconfig")
	config := c.Path("sim.yaml")
	os.WriteFile(config, []byte(`nodes:
  - name: kd-node
    allocatable: {cpu: "4", memory: 8Gi, pods: 5, example.com/foo: 2}
watchLag: 0s
kubelet: {enabled: true}
`), 0o600)
	p := c.Process("fitledger-sim", fl.Binary(t, "FITLEDGER_SIM"), []string{"--config", config, "--kubeconfig-out", kubeconfig})
	cluster.WaitFor(t, "fitledger-sim's kubeconfig", 30*time.Second, func() bool {
		if !p.Running() {
			t.Fatalf("fitledger-sim exited:\n%s", p.Tail(20))
		}
		_, err := os.Stat(kubeconfig)
		return err == nil
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sim := clientFor(t, cfg, "application/json") // the sim reads JSON bodies only
	ctx := context.Background()
	node, err := sim.CoreV1().Nodes().Get(ctx, "kd-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := admissionCases()
	want := kubelet.Verdicts(node.DeepCopy(), nil, admissionCases())
	same := 0
	for i, pod := range pods {
		pod.Spec.NodeName = "kd-node"
		if _, err := sim.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s in the sim: %v", pod.Name, err)
		}
		var got *corev1.Pod
		cluster.WaitFor(t, pod.Name+" judged by the sim's kubelet", 30*time.Second, func() bool {
			got, err = sim.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
			return err == nil && (got.Status.Phase == corev1.PodRunning || got.Status.Phase == corev1.PodFailed)
		})
		simSays := "admit"
		if got.Status.Phase == corev1.PodFailed {
			simSays = got.Status.Reason + ": " + got.Status.Message
		}
		upstream := "admit"
		if !want[i].Admit {
			upstream = want[i].Reason + ": Pod was rejected: " + want[i].Message
		}
		if simSays != upstream {
			t.Errorf("%s:\n    upstream's admission: %s\n    fitledger-sim:        %s", pod.Name, upstream, simSays)
		} else {
			same++
		}
	}
	fmt.Printf("KUBELET fitledger-sim's kubelet and upstream's admission agree on %d of %d pods\n", same, len(pods))
}

// corpusRound is one node and a sequence of generated pods for it: requests in the forms the API
// server stores (canonical quantities), init containers, sidecars, overhead, pod-level requests,
// an extended resource the node lists and one it does not, hugepages, and a device-plugin
// resource asked for by limits. Each pod names at most one scalar resource, since upstream checks
// several failing ones in map order (at random).
func corpusRound(rng *rand.Rand, round int) (*corev1.Node, map[corev1.ResourceName]int64, []*corev1.Pod) {
	pick := func(options ...string) string { return options[rng.IntN(len(options))] }
	gpus := int64(rng.IntN(4)) // 0: the device plugin is registered with no healthy device
	alloc := rl("cpu", pick("2", "4", "3500m", "8"), "memory", pick("4Gi", "8Gi", "6000M"),
		"pods", pick("6", "12", "110"), "ephemeral-storage", pick("10Gi", "20G"),
		"example.com/foo", pick("1", "2", "4"))
	if rng.IntN(2) == 0 {
		alloc["hugepages-2Mi"] = resource.MustParse(pick("8Mi", "64Mi"))
	}
	devices := map[corev1.ResourceName]int64{"example.com/gpu": gpus}
	node := kubelet.NodeObject(kubelet.Node{Name: fmt.Sprintf("corpus-%d", round), Allocatable: alloc, Devices: devices})
	requests := func() corev1.ResourceList {
		r := corev1.ResourceList{}
		if rng.IntN(4) != 0 {
			r["cpu"] = resource.MustParse(pick("100m", "250m", "500m", "1", "1500m", "2", "333m", "1m"))
		}
		if rng.IntN(3) != 0 {
			r["memory"] = resource.MustParse(pick("64Mi", "256Mi", "1Gi", "1500M", "3Gi", "100"))
		}
		if rng.IntN(6) == 0 {
			r["ephemeral-storage"] = resource.MustParse(pick("1Gi", "5Gi", "12G"))
		}
		return r
	}
	container := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: requests()}}
	}
	always := corev1.ContainerRestartPolicyAlways
	var pods []*corev1.Pod
	for i := 0; i < 14; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%02d-%02d", round, i), Namespace: "default"}}
		for n := 1 + rng.IntN(2); n > 0; n-- {
			p.Spec.Containers = append(p.Spec.Containers, container(fmt.Sprintf("app-%d", n)))
		}
		switch rng.IntN(5) {
		case 0:
			p.Spec.InitContainers = []corev1.Container{container("init")}
		case 1:
			side := container("sidecar")
			side.RestartPolicy = &always
			p.Spec.InitContainers = []corev1.Container{side, container("init-after")}
		}
		if rng.IntN(6) == 0 {
			p.Spec.Overhead = rl("cpu", pick("50m", "250m"), "memory", "120Mi")
		}
		if rng.IntN(7) == 0 {
			// Pod-level requests (PodLevelResources, on by default since 1.34), at least what the
			// containers ask for, as validation requires.
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", pick("2", "3"), "memory", "4Gi")}
		}
		scalar := func(name corev1.ResourceName, q string, limit bool) {
			c := &p.Spec.Containers[0]
			c.Resources.Requests[name] = resource.MustParse(q)
			if limit {
				if c.Resources.Limits == nil {
					c.Resources.Limits = corev1.ResourceList{}
				}
				c.Resources.Limits[name] = resource.MustParse(q)
			}
		}
		switch rng.IntN(8) {
		case 0:
			scalar("example.com/foo", pick("1", "2"), false)
		case 1:
			scalar("example.com/bar", "1", false) // the node does not list it
		case 2:
			scalar("hugepages-2Mi", pick("2Mi", "8Mi"), true)
		case 3, 4:
			scalar("example.com/gpu", pick("1", "2"), true)
		}
		pods = append(pods, p)
	}
	return node, devices, pods
}

// fitledger-sim's kubelet (its own admission code, `fitledger-sim admit`) against upstream's
// admission code on a generated corpus: every verdict, reason and message the same. The corpus
// must reach every refusal it can, so that agreement is not agreement on admits alone.
func TestKubeletDifferentialSimAgainstStandInOnACorpus(t *testing.T) {
	sim := fl.Binary(t, "FITLEDGER_SIM")
	rng := rand.New(rand.NewPCG(48, 2026))
	total, same := 0, 0
	reasons := map[string]int{}
	for round := 0; round < 40; round++ {
		node, devices, pods := corpusRound(rng, round)
		copies := make([]*corev1.Pod, len(pods))
		for i, p := range pods {
			copies[i] = p.DeepCopy()
		}
		want := kubelet.Verdicts(node.DeepCopy(), devices, copies)
		in, err := json.Marshal(map[string]any{"node": node, "devices": devices, "pods": pods})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sim, "admit")
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("fitledger-sim admit, round %d: %v\n%s", round, err, stderr.String())
		}
		var got []kubelet.Verdict
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("fitledger-sim admit, round %d: %v\n%s", round, err, out)
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %d verdicts from the sim, %d from upstream", round, len(got), len(want))
		}
		for i := range want {
			total++
			key := "admit"
			if !want[i].Admit {
				key = want[i].Reason
			}
			reasons[key]++
			if got[i] != want[i] {
				podJSON, _ := json.Marshal(pods[i])
				t.Errorf("round %d, %s:\n    upstream's admission: %+v\n    fitledger-sim:        %+v\n    pod: %s",
					round, pods[i].Name, want[i], got[i], podJSON)
				continue
			}
			same++
		}
	}
	var seen []string
	for r, n := range reasons {
		seen = append(seen, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(seen)
	fmt.Printf("KUBELET corpus: fitledger-sim's kubelet and upstream's admission agree on %d of %d pods (upstream: %s)\n",
		same, total, strings.Join(seen, ", "))
	for _, r := range []string{"admit", "OutOfcpu", "OutOfmemory", "OutOfpods", "OutOfephemeral-storage",
		"OutOfexample.com/foo", "OutOfhugepages-2Mi", "UnexpectedAdmissionError"} {
		if reasons[r] == 0 {
			t.Errorf("the corpus reached no %s: widen it", r)
		}
	}
}
