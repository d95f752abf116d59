package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	resourcehelper "k8s.io/component-helpers/resource"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	apiv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/features"
	schedulerframework "k8s.io/kubernetes/pkg/scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"fitledger.test/upstream/suite/fl"
)

// The differential test of fitledger's request arithmetic (model/pod.cc PodRequests) against
// upstream's own code, on a corpus of generated pods: in-place resize in every state (container
// and pod-level statuses, present or not, feasible or not), sidecars and init containers,
// pod-level resources, overhead, extended resources and hugepages. Each pod is defaulted and
// validated by the API server's own code (pkg/apis/core/v1 SetObjectDefaults_Pod, pkg/api/pod
// DefaultPodLevelResources, validation.ValidatePodCreate: a pod it would refuse is left out) and
// passed through protobuf, as kube-scheduler reads it. Upstream's answers:
//   - a pod on a node (RequestBasis::kSpecAndStatus): kube-scheduler's NodeInfo amount,
//     framework.PodInfo.CalculateResource (requests and the scoring's non-zero cpu and memory);
//   - the pod being scheduled (RequestBasis::kSpec): NodeResourcesFit's computePodResourceRequest
//     (component-helpers PodRequests with pod-level resources on) for the requests, and the
//     scoring's calculatePodResourceRequest (NonMissingContainerRequests 100m / 200Mi) for the
//     non-zero amounts, on the pod without its status (a pod being scheduled has none).
// Every difference is printed with the pod; the test fails on any.

const requestsCorpusSize = 4000

// pick returns one of the values.
func pick[T any](r *rand.Rand, values ...T) T { return values[r.IntN(len(values))] }

// randomList draws a ResourceList from the names, each present with probability 1/2.
func randomList(r *rand.Rand, names ...string) corev1.ResourceList {
	amounts := map[string][]string{
		"cpu":               {"0", "100m", "250m", "0.5", "1", "1500m", "2", "3", "3.5"},
		"memory":            {"0", "64Mi", "128Mi", "200M", "1Gi", "1536Mi", "2Gi"},
		"ephemeral-storage": {"0", "1Gi", "500M"},
		"example.com/gpu":   {"0", "1", "2"},
		"hugepages-2Mi":     {"0", "2Mi", "4Mi"},
	}
	out := corev1.ResourceList{}
	for _, name := range names {
		if r.IntN(2) == 0 {
			out[corev1.ResourceName(name)] = resource.MustParse(pick(r, amounts[name]...))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// randomContainer draws a container as validation allows it: a limit at least its request,
// extended resources and hugepages with a limit equal to the request, hugepages only beside a
// memory request.
func randomContainer(r *rand.Rand, name string, initContainer bool) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.k8s.io/pause:3.10"}
	c.Resources.Requests = randomList(r, "cpu", "memory", "ephemeral-storage")
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Limits = corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{"example.com/gpu", "hugepages-2Mi"} {
		if r.IntN(4) == 0 {
			q := resource.MustParse(pick(r, "1", "2"))
			if name == "hugepages-2Mi" {
				q = resource.MustParse(pick(r, "2Mi", "4Mi"))
				if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
					c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
				}
			}
			c.Resources.Requests[name] = q
			c.Resources.Limits[name] = q
		}
	}
	if r.IntN(3) == 0 { // a limit on cpu or memory: the request, or more, or alone
		for name, q := range randomList(r, "cpu", "memory") {
			if req, ok := c.Resources.Requests[name]; ok && q.Cmp(req) < 0 {
				q = req.DeepCopy()
				q.Add(resource.MustParse(pick(r, "0", "1", "64Mi")))
			}
			c.Resources.Limits[name] = q
		}
	}
	if len(c.Resources.Requests) == 0 {
		c.Resources.Requests = nil
	}
	if len(c.Resources.Limits) == 0 {
		c.Resources.Limits = nil
	}
	if initContainer && r.IntN(2) == 0 {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	return c
}

// setPodLevel gives the pod pod-level requests (and sometimes limits) of cpu and memory, as
// validation allows them: at least the containers' aggregate, limits at least the requests and
// every container's limit.
func setPodLevel(r *rand.Rand, p *corev1.Pod) {
	defaulted := p.DeepCopy()
	apiv1.SetObjectDefaults_Pod(defaulted)
	aggregate := resourcehelper.PodRequests(defaulted, resourcehelper.PodResourcesOptions{
		SkipPodLevelResources: true, ExcludeOverhead: true})
	maxLimit := corev1.ResourceList{}
	for _, c := range append(append([]corev1.Container{}, defaulted.Spec.Containers...), defaulted.Spec.InitContainers...) {
		for name, q := range c.Resources.Limits {
			if cur, ok := maxLimit[name]; !ok || q.Cmp(cur) > 0 {
				maxLimit[name] = q.DeepCopy()
			}
		}
	}
	res := &corev1.ResourceRequirements{Requests: corev1.ResourceList{}}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if r.IntN(3) == 0 {
			continue
		}
		q := aggregate[name].DeepCopy()
		q.Add(resource.MustParse(pick(r, "0", "250m", "1", "64Mi", "1Gi")))
		limitOnly := r.IntN(4) == 0 // the API server defaults the request (DefaultPodLevelResources)
		if !limitOnly {
			res.Requests[name] = q
		}
		if limitOnly || r.IntN(2) == 0 {
			if res.Limits == nil {
				res.Limits = corev1.ResourceList{}
			}
			l := q.DeepCopy()
			if m, ok := maxLimit[name]; ok && m.Cmp(l) > 0 {
				l = m.DeepCopy()
			}
			l.Add(resource.MustParse(pick(r, "0", "1", "128Mi")))
			res.Limits[name] = l
		}
	}
	if len(res.Requests) > 0 || len(res.Limits) > 0 {
		p.Spec.Resources = res
	}
}

// randomStatus is a container's status in some state of a resize, or nil (no status yet).
func randomStatus(r *rand.Rand, name string) *corev1.ContainerStatus {
	if r.IntN(4) == 0 {
		return nil
	}
	s := &corev1.ContainerStatus{Name: name}
	if r.IntN(3) > 0 {
		s.AllocatedResources = randomList(r, "cpu", "memory", "ephemeral-storage")
	}
	if r.IntN(3) > 0 {
		s.Resources = &corev1.ResourceRequirements{Requests: randomList(r, "cpu", "memory")}
	}
	return s
}

func randomPod(r *rand.Rand, i int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default",
		UID: "uid"}}
	for j := 0; j < 1+r.IntN(3); j++ {
		p.Spec.Containers = append(p.Spec.Containers, randomContainer(r, fmt.Sprintf("c%d", j), false))
	}
	for j := 0; j < r.IntN(4); j++ {
		p.Spec.InitContainers = append(p.Spec.InitContainers, randomContainer(r, fmt.Sprintf("i%d", j), true))
	}
	if r.IntN(4) == 0 {
		p.Spec.Overhead = randomList(r, "cpu", "memory")
	}
	if r.IntN(3) == 0 {
		setPodLevel(r, p)
	}
	if r.IntN(5) > 0 { // the rest are pods the kubelet has not reported on
		p.Status.Phase = corev1.PodRunning
		for _, c := range p.Spec.Containers {
			if s := randomStatus(r, c.Name); s != nil {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, *s)
			}
		}
		for _, c := range p.Spec.InitContainers {
			if s := randomStatus(r, c.Name); s != nil {
				p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, *s)
			}
		}
		if r.IntN(2) == 0 {
			p.Status.AllocatedResources = randomList(r, "cpu", "memory")
		}
		if r.IntN(2) == 0 {
			p.Status.Resources = &corev1.ResourceRequirements{Requests: randomList(r, "cpu", "memory")}
		}
		switch r.IntN(4) {
		case 0:
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending,
				Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
		case 1:
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending,
				Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred}}
		}
	}
	return p
}

// asScheduled is the pod as kube-scheduler holds it: defaulted as the API server stores it (the
// versioned defaults, then PrepareForCreate's pod-level defaulting), then written and read as
// protobuf (where an empty map is absent). False when the API server would refuse to create it
// (ValidatePodCreate).
func asScheduled(t *testing.T, p *corev1.Pod) (*corev1.Pod, bool) {
	status := p.Status
	apiv1.SetObjectDefaults_Pod(p)
	internal := &api.Pod{}
	if err := apiv1.Convert_v1_Pod_To_core_Pod(p, internal, nil); err != nil {
		t.Fatalf("convert %s: %v", p.Name, err)
	}
	podutil.DefaultPodLevelResources(internal)
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&internal.Spec, nil, &internal.ObjectMeta, nil)
	if errs := validation.ValidatePodCreate(internal, opts); len(errs) > 0 {
		return nil, false
	}
	p = &corev1.Pod{}
	if err := apiv1.Convert_core_Pod_To_v1_Pod(internal, p, nil); err != nil {
		t.Fatalf("convert %s back: %v", p.Name, err)
	}
	p.Status = status // the kubelet's, set after the create
	data, err := p.Marshal()
	if err != nil {
		t.Fatalf("marshal %s: %v", p.Name, err)
	}
	out := &corev1.Pod{}
	if err := out.Unmarshal(data); err != nil {
		t.Fatalf("unmarshal %s: %v", p.Name, err)
	}
	return out, true
}

// requestsAnswer is one basis as pod_requests_tool prints it, and as it is built from upstream's.
type requestsAnswer struct {
	CPU           int64            `json:"cpu"`
	Memory        int64            `json:"memory"`
	Ephemeral     int64            `json:"ephemeral-storage"`
	Scalars       map[string]int64 `json:"scalars"`
	NonZeroCPU    int64            `json:"nonZeroCpu"`
	NonZeroMemory int64            `json:"nonZeroMemory"`
}

func fromResource(r *schedulerframework.Resource, non0CPU, non0Mem int64) requestsAnswer {
	a := requestsAnswer{CPU: r.MilliCPU, Memory: r.Memory, Ephemeral: r.EphemeralStorage,
		Scalars: map[string]int64{}, NonZeroCPU: non0CPU, NonZeroMemory: non0Mem}
	for name, v := range r.ScalarResources {
		if v != 0 {
			a.Scalars[string(name)] = v
		}
	}
	return a
}

// upstreamOnNode is kube-scheduler's amount for a pod in a NodeInfo.
func upstreamOnNode(t *testing.T, p *corev1.Pod) requestsAnswer {
	pi, err := schedulerframework.NewPodInfo(p)
	if err != nil {
		t.Fatalf("NewPodInfo %s: %v", p.Name, err)
	}
	res := pi.CalculateResource()
	r := res.Resource.(*schedulerframework.Resource)
	return fromResource(r, res.Non0CPU, res.Non0Mem)
}

// upstreamScheduling is NodeResourcesFit's amount for the pod being scheduled, and the scoring's.
func upstreamScheduling(p *corev1.Pod) requestsAnswer {
	filter := schedulerframework.NewResource(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
	pending := p.DeepCopy()
	pending.Status = corev1.PodStatus{}
	scoring := resourcehelper.PodRequests(pending, resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		InPlacePodLevelResourcesVerticalScalingEnabled: true,
		NonMissingContainerRequests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(schedutil.DefaultMilliCPURequest, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(schedutil.DefaultMemoryRequest, resource.DecimalSI),
		},
	})
	cpu, mem := scoring[corev1.ResourceCPU], scoring[corev1.ResourceMemory]
	return fromResource(filter, cpu.MilliValue(), mem.Value())
}

func same(a, b requestsAnswer) bool {
	if a.CPU != b.CPU || a.Memory != b.Memory || a.Ephemeral != b.Ephemeral ||
		a.NonZeroCPU != b.NonZeroCPU || a.NonZeroMemory != b.NonZeroMemory || len(a.Scalars) != len(b.Scalars) {
		return false
	}
	for k, v := range a.Scalars {
		if b.Scalars[k] != v {
			return false
		}
	}
	return true
}

func TestPodRequestsMatchUpstreamOnACorpus(t *testing.T) {
	// The rules compared are those of kube-scheduler 1.37 with its default gates; the pods would
	// prove little if the gates that shape them were off.
	for _, gate := range []featuregate.Feature{features.InPlacePodVerticalScaling, features.PodLevelResources,
		features.InPlacePodLevelResourcesVerticalScaling} {
		if !utilfeature.DefaultFeatureGate.Enabled(gate) {
			t.Fatalf("feature gate %s is off by default here: the corpus would not test it", gate)
		}
	}
	r := rand.New(rand.NewPCG(50, 37))
	var pods []*corev1.Pod
	var input bytes.Buffer
	refused := 0
	for i := 0; i < requestsCorpusSize; i++ {
		p, valid := asScheduled(t, randomPod(r, i))
		if !valid {
			refused++
			continue
		}
		pods = append(pods, p)
		line, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		input.Write(line)
		input.WriteByte('\n')
	}
	cmd := exec.Command(fl.Binary(t, "FITLEDGER_POD_REQUESTS_TOOL"))
	cmd.Stdin = &input
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pod_requests_tool: %v: %s", err, stderr.String())
	}
	scanner := bufio.NewScanner(bytes.NewReader(out))
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	var differences []string
	resizing, podLevelStatus, infeasible := 0, 0, 0
	i := 0
	for ; scanner.Scan(); i++ {
		if i >= len(pods) {
			t.Fatalf("pod_requests_tool printed more lines than it read")
		}
		p := pods[i]
		var got struct {
			Error string          `json:"error"`
			Spec  *requestsAnswer `json:"spec"`
			Node  *requestsAnswer `json:"node"`
		}
		if err := json.Unmarshal(scanner.Bytes(), &got); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, scanner.Text())
		}
		podJSON, _ := json.Marshal(p)
		if got.Error != "" {
			differences = append(differences, fmt.Sprintf("%s: fitledger refused it: %s\n  pod: %s", p.Name, got.Error, podJSON))
			continue
		}
		if want := upstreamOnNode(t, p); !same(*got.Node, want) {
			differences = append(differences, fmt.Sprintf("%s on a node: fitledger %+v, upstream %+v\n  pod: %s", p.Name, *got.Node, want, podJSON))
		}
		if want := upstreamScheduling(p); !same(*got.Spec, want) {
			differences = append(differences, fmt.Sprintf("%s being scheduled: fitledger %+v, upstream %+v\n  pod: %s", p.Name, *got.Spec, want, podJSON))
		}
		if len(p.Status.ContainerStatuses) > 0 {
			resizing++
		}
		if p.Status.Resources != nil && p.Status.AllocatedResources != nil {
			podLevelStatus++
		}
		if resourcehelper.IsPodResizeInfeasible(p) {
			infeasible++
		}
	}
	if i != len(pods) {
		t.Fatalf("pod_requests_tool answered %d of %d pods", i, len(pods))
	}
	// Not vacuous: the corpus holds each state in numbers.
	if len(pods) < requestsCorpusSize/2 {
		t.Fatalf("the API server's validation refused %d of %d generated pods", refused, requestsCorpusSize)
	}
	if resizing < len(pods)/3 || podLevelStatus < len(pods)/20 || infeasible < len(pods)/10 {
		t.Fatalf("corpus too thin: %d with container statuses, %d with pod-level status, %d infeasible",
			resizing, podLevelStatus, infeasible)
	}
	if len(differences) > 0 {
		shown := differences
		if len(shown) > 20 {
			shown = shown[:20]
		}
		t.Fatalf("%d of %d answers differ from upstream's (first %d):\n%s", len(differences), 2*len(pods),
			len(shown), strings.Join(shown, "\n"))
	}
	t.Logf("%d pods (%d generated, %d refused by validation), both bases equal to upstream's: "+
		"%d with container statuses, %d with pod-level status, %d infeasible",
		len(pods), requestsCorpusSize, refused, resizing, podLevelStatus, infeasible)
}
