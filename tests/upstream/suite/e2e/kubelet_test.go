package e2e

import (
	"context"
	"fmt"
	"os"
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
