// Package kubelet is a kubelet stand-in on client-go: it owns a set of Node objects (creates
// them, keeps their status Ready and their Leases renewed) and admits every pod bound to them
// with upstream's own admission code, in the order the kubelet uses:
//
//  1. the device manager's allocation (pkg/kubelet/cm/devicemanager/manager.go, devicesToAllocate):
//     a count of each node's healthy devices per device-plugin resource, less those allocated to
//     admitted, non-terminal pods, asked for by the containers' limits; a resource with no healthy
//     device is refused ("no healthy devices present; cannot allocate unhealthy devices %s"), a
//     shortage is the device manager's own error
//     "requested number of devices unavailable for %s. Requested: %d, Available: %d", turned into
//     the kubelet's answer by upstream's admission.GetPodAdmitResult (pkg/kubelet/cm/admission):
//     reason UnexpectedAdmissionError. Devices are counted, not named (no plugin, no NUMA).
//  2. upstream's predicate admission, lifecycle.NewPredicateAdmitHandler (pkg/kubelet/lifecycle/
//     predicate.go): removes extended resources the node does not list, runs the scheduler's
//     noderesources.Fits through AdmissionCheck, and answers OutOfcpu, OutOfmemory, OutOfpods,
//     OutOf<extended resource>; its plugin-resource hook raises the node's allocatable of each
//     device resource to what is allocated, as the device manager's sanitizeNodeAllocatable does.
//
// Admitted pods go Running; rejected ones Failed with the kubelet's reason, message
// "Pod was rejected: <message>" and a Warning event (kubelet.go, rejectPod). Pods are admitted one
// at a time in creation order per node (HandlePodAdditions sorts by creation time), against the
// admitted, non-terminal pods of that node. A pod being deleted is removed at once (grace 0), as
// a kubelet does once its containers are gone. It shares no code with fitledger.
package kubelet

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubernetes/pkg/kubelet/cm/admission"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	schedulerframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// Node is one node the stand-in owns.
type Node struct {
	Name        string
	Labels      map[string]string
	Allocatable corev1.ResourceList // also its capacity
	// Devices: device-plugin resources and their healthy device counts (also added to
	// Allocatable, as the kubelet reports them).
	Devices map[corev1.ResourceName]int64
}

// Verdict is the kubelet's answer for one pod.
type Verdict struct {
	Name    string `json:"name"`
	Admit   bool   `json:"admit"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// nodeState is what the stand-in's kubelet on one node knows.
type nodeState struct {
	node      *corev1.Node
	devices   map[corev1.ResourceName]int64
	admitted  map[types.UID]*corev1.Pod // admitted, non-terminal
	allocated map[types.UID]map[corev1.ResourceName]int64
	decided   map[types.UID]bool
}

func newNodeState(n *corev1.Node, devices map[corev1.ResourceName]int64) *nodeState {
	return &nodeState{node: n, devices: devices, admitted: map[types.UID]*corev1.Pod{},
		allocated: map[types.UID]map[corev1.ResourceName]int64{}, decided: map[types.UID]bool{}}
}

func (s *nodeState) inUse(r corev1.ResourceName) int64 {
	var n int64
	for _, a := range s.allocated {
		n += a[r]
	}
	return n
}

// limitOf: the device manager allocates by a container's limits (manager.go
// allocateContainerResources ranges over container.Resources.Limits); listed says whether the
// container names the resource at all.
func limitOf(c *corev1.Container, r corev1.ResourceName) (n int64, listed bool) {
	q, ok := c.Resources.Limits[r]
	if !ok {
		return 0, false
	}
	return q.Value(), true
}

// allocateDevices follows the device manager's per-container allocation (init containers first,
// their devices reusable by the containers after them unless they are restartable sidecars).
func (s *nodeState) allocateDevices(pod *corev1.Pod) (map[corev1.ResourceName]int64, error) {
	got := map[corev1.ResourceName]int64{}
	for r := range s.devices {
		reusable := int64(0)
		held := int64(0) // devices this pod holds for running containers
		take := func(need int64, listed bool) error {
			// devicesToAllocate checks the resource's health before the count it needs.
			if listed && s.devices[r] == 0 {
				return fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", r)
			}
			if need == 0 {
				return nil
			}
			available := s.devices[r] - s.inUse(r) - held - reusable
			if available < need {
				return fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", r, need, available)
			}
			return nil
		}
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			need, listed := limitOf(c, r)
			fromReuse := min(need, reusable)
			if err := take(need-fromReuse, listed); err != nil {
				return nil, err
			}
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				reusable -= fromReuse
				held += need
			} else {
				reusable += need - fromReuse
			}
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			need, listed := limitOf(c, r)
			fromReuse := min(need, reusable)
			if err := take(need-fromReuse, listed); err != nil {
				return nil, err
			}
			reusable -= fromReuse
			held += need
		}
		if total := held + reusable; total > 0 {
			got[r] = total
		}
	}
	return got, nil
}

// admit runs the kubelet's admission for pod on this node and records an admitted pod.
func (s *nodeState) admit(ctx context.Context, pod *corev1.Pod) Verdict {
	v := Verdict{Name: pod.Name}
	devices, err := s.allocateDevices(pod)
	if err != nil {
		r := admission.GetPodAdmitResult(err)
		v.Reason, v.Message = r.Reason, r.Message
		return v
	}
	others := make([]*corev1.Pod, 0, len(s.admitted))
	for _, p := range s.admitted {
		others = append(others, p)
	}
	sort.Slice(others, func(i, j int) bool { return others[i].UID < others[j].UID })
	node := s.node
	allocatedNow := map[corev1.ResourceName]int64{}
	for r := range s.devices {
		allocatedNow[r] = s.inUse(r) + devices[r]
	}
	handler := lifecycle.NewPredicateAdmitHandler(
		func(context.Context, bool) (*corev1.Node, error) { return node, nil },
		lifecycle.NewAdmissionFailureHandlerStub(),
		func(ni *schedulerframework.NodeInfo, _ *lifecycle.PodAdmitAttributes) error {
			// sanitizeNodeAllocatable: allocatable at least what the device manager allocated.
			if ni.Allocatable.ScalarResources == nil {
				ni.Allocatable.ScalarResources = map[corev1.ResourceName]int64{}
			}
			for r, n := range allocatedNow {
				if ni.Allocatable.ScalarResources[r] < n {
					ni.Allocatable.ScalarResources[r] = n
				}
			}
			return nil
		})
	result := handler.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others, Operation: lifecycle.AddOperation})
	if !result.Admit {
		v.Reason, v.Message = result.Reason, result.Message
		return v
	}
	v.Admit = true
	s.admitted[pod.UID] = pod
	if len(devices) > 0 {
		s.allocated[pod.UID] = devices
	}
	return v
}

func (s *nodeState) release(uid types.UID) {
	delete(s.admitted, uid)
	delete(s.allocated, uid)
}

// NodeObject is the Node the stand-in registers for n.
func NodeObject(n Node) *corev1.Node {
	alloc := corev1.ResourceList{}
	for k, v := range n.Allocatable {
		alloc[k] = v
	}
	for r, count := range n.Devices {
		alloc[r] = *resource.NewQuantity(count, resource.DecimalSI)
	}
	labels := map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux",
		"kubernetes.io/arch": "amd64", "fitledger.test/stand-in": "true"}
	for k, v := range n.Labels {
		labels[k] = v
	}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity: alloc, Allocatable: alloc,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
					Message: "kubelet stand-in is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeHostName, Address: n.Name}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}

// Verdicts admits pods in order on one node (each admitted pod joins the node's pods), with
// devices the node's device-plugin resources: the same code the stand-in runs, offline.
func Verdicts(node *corev1.Node, devices map[corev1.ResourceName]int64, pods []*corev1.Pod) []Verdict {
	s := newNodeState(node, devices)
	out := make([]Verdict, 0, len(pods))
	for i, p := range pods {
		if p.UID == "" {
			p.UID = types.UID(fmt.Sprintf("verdict-pod-%d", i))
		}
		out = append(out, s.admit(context.Background(), p))
	}
	return out
}

// Kubelet runs the stand-in for a set of nodes.
type Kubelet struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	mu       sync.Mutex
	nodes    map[string]*nodeState
	queue    chan *corev1.Pod
	// Rejected counts the pods this stand-in rejected (for tests; also visible in the API).
	rejected int
}

// Start registers the nodes and runs until ctx ends.
func Start(ctx context.Context, client kubernetes.Interface, nodes []Node) (*Kubelet, error) {
	k := &Kubelet{client: client, nodes: map[string]*nodeState{}, queue: make(chan *corev1.Pod, 100000)}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	k.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet"})
	for _, n := range nodes {
		obj := NodeObject(n)
		_, err := client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("create node %s: %w", n.Name, err)
		}
		var updated *corev1.Node
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status = obj.Status
			updated, err = client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("node %s status: %w", n.Name, err)
		}
		k.nodes[n.Name] = newNodeState(updated, n.Devices)
	}
	go k.heartbeat(ctx)
	go k.admitLoop(ctx)
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", "",
		fields.OneTermNotEqualSelector("spec.nodeName", ""))
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o interface{}) { k.enqueue(o) },
			UpdateFunc: func(_, o interface{}) { k.enqueue(o) },
			DeleteFunc: func(o interface{}) {
				if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				if p, ok := o.(*corev1.Pod); ok {
					k.forget(p)
				}
			},
		},
	})
	go informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil, fmt.Errorf("pod informer did not sync")
	}
	return k, nil
}

// Rejected returns how many pods this stand-in has rejected.
func (k *Kubelet) Rejected() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rejected
}

func (k *Kubelet) enqueue(o interface{}) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	_, ours := k.nodes[p.Spec.NodeName]
	k.mu.Unlock()
	if ours {
		k.queue <- p
	}
}

func (k *Kubelet) forget(p *corev1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.nodes[p.Spec.NodeName]; ok {
		s.release(p.UID)
	}
}

// admitLoop takes what has queued, and handles it per node in creation order.
func (k *Kubelet) admitLoop(ctx context.Context) {
	for {
		var batch []*corev1.Pod
		select {
		case <-ctx.Done():
			return
		case p := <-k.queue:
			batch = append(batch, p)
		}
	drain:
		for {
			select {
			case p := <-k.queue:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		sort.SliceStable(batch, func(i, j int) bool {
			return batch[i].CreationTimestamp.Before(&batch[j].CreationTimestamp)
		})
		for _, p := range batch {
			k.handle(ctx, p)
		}
	}
}

func (k *Kubelet) handle(ctx context.Context, p *corev1.Pod) {
	k.mu.Lock()
	s := k.nodes[p.Spec.NodeName]
	if p.DeletionTimestamp != nil {
		s.release(p.UID)
		k.mu.Unlock()
		err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			k.queue <- p // the API is down: try again
			time.Sleep(100 * time.Millisecond)
		}
		return
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		s.release(p.UID)
		k.mu.Unlock()
		return
	}
	if s.decided[p.UID] {
		k.mu.Unlock()
		return
	}
	v := s.admit(ctx, p)
	s.decided[p.UID] = true
	if !v.Admit {
		k.rejected++
	}
	k.mu.Unlock()
	k.postStatus(ctx, p, v)
}

// postStatus writes the verdict to the pod's status, retrying while the API is unreachable.
func (k *Kubelet) postStatus(ctx context.Context, p *corev1.Pod, v Verdict) {
	now := metav1.Now()
	status := corev1.PodStatus{}
	if v.Admit {
		status = corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "127.0.0.1", PodIP: "127.0.0.1", StartTime: &now,
			HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}}, PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
		}
		for _, c := range p.Spec.Containers {
			status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
	} else {
		k.recorder.Eventf(p, corev1.EventTypeWarning, v.Reason, "%s", v.Message)
		status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: v.Reason,
			Message: "Pod was rejected: " + v.Message, QOSClass: p.Status.QOSClass}
	}
	for ctx.Err() == nil {
		cur, err := k.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err == nil {
			if cur.UID != p.UID {
				return
			}
			if status.QOSClass == "" {
				status.QOSClass = cur.Status.QOSClass
			}
			cur.Status = status
			_, err = k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			if err == nil || apierrors.IsNotFound(err) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heartbeat renews each node's Lease every 10 s (as the kubelet's nodeLeaseController does, with
// a 40 s lease) and posts its Ready condition every 30 s.
func (k *Kubelet) heartbeat(ctx context.Context) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	beats := 0
	for {
		k.mu.Lock()
		names := make([]string, 0, len(k.nodes))
		for n := range k.nodes {
			names = append(names, n)
		}
		k.mu.Unlock()
		for _, n := range names {
			k.renewLease(ctx, n)
			if beats%3 == 2 {
				k.postNodeReady(ctx, n)
			}
		}
		beats++
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (k *Kubelet) renewLease(ctx context.Context, node string) {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		k.mu.Lock()
		uid := k.nodes[node].node.UID
		k.mu.Unlock()
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: uid}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &now}}, metav1.CreateOptions{})
		return
	}
	if err != nil {
		return
	}
	l.Spec.RenewTime = &now
	leases.Update(ctx, l, metav1.UpdateOptions{})
}

func (k *Kubelet) postNodeReady(ctx context.Context, name string) {
	n, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	now := metav1.Now()
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].LastHeartbeatTime = now
	}
	k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
}
