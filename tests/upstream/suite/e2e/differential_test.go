package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"fitledger.test/upstream/suite/cluster"
	"fitledger.test/upstream/suite/fl"
)

// Differential checks, fitledger-sim against the real kube-apiserver: every kind of request
// fitledger-server and fitledgerctl make is sent to both, by client-go in JSON and in protobuf (the
// encodings fitledger's client uses), and what a client reads is compared: status codes, Status
// reasons and messages, watch event types and the WatchList end bookmark, the fields fitledger
// decodes. Then what users type with kubectl against the demo. Any difference fails the test and
// is printed as a table row.

// outcome renders an error (or its absence) as what a client reads from it.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		return fmt.Sprintf("%d %s: %s", s.Code, s.Reason, s.Message)
	}
	return "error: " + err.Error()
}

// observations is what one server answered, by scenario.
type observations map[string]string

func diffPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"diff": "yes"}},
		Spec: corev1.PodSpec{SchedulerName: "fitledger-scheduler", Containers: []corev1.Container{{
			Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}}},
	}
}

// firstEvents reads watch events until stop says so (or 10 s pass), rendering each.
func firstEvents(w watch.Interface, stop func(watch.Event) bool) string {
	defer w.Stop()
	var out []string
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return strings.Join(append(out, "closed"), " ")
			}
			s := string(e.Type)
			switch o := e.Object.(type) {
			case *metav1.Status:
				s += fmt.Sprintf("(%d %s: %s)", o.Code, o.Reason, o.Message)
			case metav1.Object: // a Pod, a Lease
				if e.Type == watch.Bookmark {
					if o.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
						s += "(initial-events-end)"
					}
				} else {
					s += "(" + o.GetName() + ")"
				}
			}
			out = append(out, s)
			if stop(e) {
				return strings.Join(out, " ")
			}
		case <-deadline:
			return strings.Join(append(out, "timeout"), " ")
		}
	}
}

// requests runs the scenarios against one server and records what came back: reads (GET, LIST,
// WATCH) through read, writes (POST, PUT, DELETE) through write. fitledger-server and
// fitledgerctl write in JSON and read in JSON (LIST) or protobuf (watches); kube-scheduler and
// kubectl, which also write in protobuf, are not run against the sim (sim/README.md).
func requests(t *testing.T, cfg *rest.Config, read, write kubernetes.Interface, node string) observations {
	ctx := context.Background()
	obs := observations{}
	pods := read.CoreV1().Pods("default")
	wpods := write.CoreV1().Pods("default")

	_, err := pods.Get(ctx, "no-such-pod", metav1.GetOptions{})
	obs["GET a missing pod"] = outcome(err)

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{
		"topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/region": "region-1", "diff-other": "x"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}}}
	_, err = write.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	obs["POST a node"] = outcome(err)

	for _, name := range []string{"diff-a", "diff-b"} {
		p, err := wpods.Create(ctx, diffPod(name), metav1.CreateOptions{})
		obs["POST pod "+name] = outcome(err)
		if err == nil {
			q := p.Spec.Containers[0].Resources.Requests
			obs["POST pod "+name+": decoded"] = fmt.Sprintf("scheduler=%s cpu=%s memory=%s phase=%q qos=%s node=%q uid-set=%v rv-set=%v",
				p.Spec.SchedulerName, q.Cpu(), q.Memory(), p.Status.Phase, p.Status.QOSClass, p.Spec.NodeName,
				p.UID != "", p.ResourceVersion != "")
		}
	}
	_, err = wpods.Create(ctx, diffPod("diff-a"), metav1.CreateOptions{})
	obs["POST an existing pod"] = outcome(err)

	listRV := ""
	for _, rv := range []string{"", "0"} {
		list, err := pods.List(ctx, metav1.ListOptions{ResourceVersion: rv, Limit: 1})
		key := fmt.Sprintf("LIST pods resourceVersion=%q limit=1", rv)
		obs[key] = outcome(err)
		if err == nil {
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			obs[key+": items"] = fmt.Sprintf("%v continue-set=%v rv-set=%v", names, list.Continue != "", list.ResourceVersion != "")
			listRV = list.ResourceVersion
		}
	}
	if list, err := pods.List(ctx, metav1.ListOptions{Limit: -1}); err == nil {
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		obs["LIST pods limit=-1"] = fmt.Sprintf("%v continue-set=%v", names, list.Continue != "")
	} else {
		obs["LIST pods limit=-1"] = outcome(err)
	}

	// Requests a server refuses before reading anything: ValidateListOptions (422), an unknown
	// field label, a resourceVersion or continue token that does not parse, a continue token
	// with a resourceVersion (400).
	for _, c := range []struct {
		key  string
		opts metav1.ListOptions
	}{
		{"LIST pods resourceVersionMatch=Exact without a resourceVersion", metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchExact}},
		{"LIST pods with sendInitialEvents", metav1.ListOptions{SendInitialEvents: ptrBool(true)}},
		{"LIST pods by an unknown field label", metav1.ListOptions{FieldSelector: "spec.foo=x"}},
		{"LIST pods resourceVersion=abc", metav1.ListOptions{ResourceVersion: "abc"}},
		{"LIST pods with a continue token that does not decode", metav1.ListOptions{Continue: "%%%"}},
	} {
		_, err := pods.List(ctx, c.opts)
		obs[c.key] = outcome(err)
	}
	if page, err := pods.List(ctx, metav1.ListOptions{Limit: 1}); err == nil && page.Continue != "" {
		_, err = pods.List(ctx, metav1.ListOptions{Limit: 1, Continue: page.Continue, ResourceVersion: page.ResourceVersion})
		obs["LIST pods with a continue token and a resourceVersion"] = outcome(err)
	}
	if w, err := pods.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptrBool(true)}); err == nil {
		obs["WATCH pods with sendInitialEvents and no resourceVersionMatch"] = "ok"
		w.Stop()
	} else {
		obs["WATCH pods with sendInitialEvents and no resourceVersionMatch"] = outcome(err)
	}

	// Set-based label selectors (kubectl get -l 'diff in (yes)').
	for _, sel := range []string{"diff in (yes,maybe)", "diff notin (yes)", "diff in (maybe),diff"} {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
		key := fmt.Sprintf("LIST pods labelSelector=%q", sel)
		obs[key] = outcome(err)
		if err == nil {
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			obs[key+": items"] = fmt.Sprint(names)
		}
	}

	if rv, err := strconv.ParseUint(listRV, 10, 64); err == nil {
		// Raw HTTP: client-go would retry the 504 as its Retry-After header asks (ten times).
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		url := fmt.Sprintf("%s/api/v1/namespaces/default/pods?resourceVersion=%d&resourceVersionMatch=NotOlderThan", strings.TrimRight(cfg.Host, "/"), rv+1000000)
		resp, err := hc.Get(url)
		if err != nil {
			obs["LIST pods at a resourceVersion not reached yet"] = "error: " + err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var st metav1.Status
			json.Unmarshal(body, &st)
			cause := ""
			if st.Details != nil && len(st.Details.Causes) > 0 {
				cause = string(st.Details.Causes[0].Type)
			}
			retry := int32(-1)
			if st.Details != nil {
				retry = st.Details.RetryAfterSeconds
			}
			msg := st.Message
			if i := strings.Index(msg, ", current:"); i >= 0 {
				msg = msg[:i] // the current resourceVersion is each server's own
			}
			msg = strings.Replace(msg, strconv.FormatUint(rv+1000000, 10), "N", 1)
			obs["LIST pods at a resourceVersion not reached yet"] = fmt.Sprintf("%d %s: %s cause=%s retryAfterSeconds=%d Retry-After header=%q",
				resp.StatusCode, st.Reason, msg, cause, retry, resp.Header.Get("Retry-After"))
		}
	}

	w, err := pods.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptrBool(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	obs["WatchList pods"] = outcome(err)
	if err == nil {
		obs["WatchList pods: events"] = firstEvents(w, func(e watch.Event) bool { return e.Type == watch.Bookmark || e.Type == watch.Error })
	}

	// A WatchList from the LIST's resourceVersion (how fitledger-server resumes one): the state,
	// not older than it, then the end bookmark. From a resourceVersion the server has not reached:
	// after waiting for it (3 s), an ERROR event with the 504 "Too large resource version"
	// (cacher.go Watch, waitUntilWatchCacheFreshAndForceAllEvents).
	if rv, err := strconv.ParseUint(listRV, 10, 64); err == nil {
		for _, c := range []struct {
			key string
			rv  uint64
		}{{"WatchList pods from the LIST's resourceVersion", rv}, {"WatchList pods from a resourceVersion not reached yet", rv + 1000000}} {
			w, err := pods.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptrBool(true), ResourceVersion: strconv.FormatUint(c.rv, 10),
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
			obs[c.key] = outcome(err)
			if err == nil {
				e := firstEvents(w, func(e watch.Event) bool { return e.Type == watch.Bookmark || e.Type == watch.Error })
				// "Too large resource version: N, current: M": both are each server's own.
				e = regexp.MustCompile(`version: \d+, current: \d+`).ReplaceAllString(e, "version: N, current: M")
				obs[c.key+": events"] = e
			}
		}
	}

	// A watch from "" or "0" naming neither sendInitialEvents nor resourceVersionMatch is a
	// WatchList in 1.37 (apimachinery internalversion SetListOptionsDefaults, the WatchList
	// feature on): its initial state ends with the annotated bookmark.
	for _, rv := range []string{"", "0"} {
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		key := fmt.Sprintf("WATCH pods from resourceVersion=%q with bookmarks", rv)
		obs[key] = outcome(err)
		if err == nil {
			obs[key+": events"] = firstEvents(w, func(e watch.Event) bool { return e.Type == watch.Bookmark || e.Type == watch.Error })
		}
	}

	w, err = pods.Watch(ctx, metav1.ListOptions{ResourceVersion: listRV})
	obs["WATCH pods from the LIST's resourceVersion"] = outcome(err)
	if err == nil {
		go func() {
			time.Sleep(200 * time.Millisecond)
			wpods.Create(ctx, diffPod("diff-c"), metav1.CreateOptions{})
		}()
		obs["WATCH pods from the LIST's resourceVersion: events"] = firstEvents(w, func(e watch.Event) bool {
			p, ok := e.Object.(*corev1.Pod)
			return !ok || p.Name == "diff-c"
		})
	}

	w, err = pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	obs["WATCH pods from resourceVersion 1 (too old)"] = outcome(err)
	if err == nil {
		e := firstEvents(w, func(watch.Event) bool { return true })
		// "too old resource version: 1 (N)": N is each server's own.
		e = regexp.MustCompile(`\(\d+\)\)`).ReplaceAllString(e, "(N))")
		obs["WATCH pods from resourceVersion 1 (too old): events"] = e
	}

	bind := func(pod string) error {
		return wpods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default"},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	// What a scheduler leaves on a pod before its bind: a nomination and its own conditions. The
	// binding's write is read from the watch (the sim's kubelet then admits the pod at once, where
	// kube-apiserver's node has no kubelet).
	var boundEvent watch.Interface
	if p, err := pods.Get(ctx, "diff-a", metav1.GetOptions{}); err == nil {
		p.Status.NominatedNodeName = node
		p.Status.Conditions = append(p.Status.Conditions,
			corev1.PodCondition{Type: "example.com/Checked", Status: corev1.ConditionTrue},
			corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "no room"})
		updated, err := wpods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		obs["PUT a pod's status with a nomination and conditions"] = outcome(err)
		if err == nil {
			boundEvent, err = pods.Watch(ctx, metav1.ListOptions{ResourceVersion: updated.ResourceVersion,
				FieldSelector: "metadata.name=diff-a"})
			obs["WATCH the pod to be bound"] = outcome(err)
		}
	}
	err = wpods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "diff-a", Namespace: "default",
		Labels: map[string]string{"bound-by": "diff", "topology.kubernetes.io/zone": "from-the-binding"}},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	obs["POST binding"] = outcome(err)
	if boundEvent != nil {
		select {
		case e := <-boundEvent.ResultChan():
			s := string(e.Type)
			if p, ok := e.Object.(*corev1.Pod); ok {
				var labels, conditions []string
				for k, v := range p.Labels {
					labels = append(labels, k+"="+v)
				}
				sort.Strings(labels)
				for _, c := range p.Status.Conditions {
					conditions = append(conditions, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
				}
				s += fmt.Sprintf(" node %q labels %v conditions %v nominatedNodeName %q", p.Spec.NodeName, labels,
					conditions, p.Status.NominatedNodeName)
			}
			obs["POST binding: the pod as the binding wrote it"] = s
		case <-time.After(10 * time.Second):
			obs["POST binding: the pod as the binding wrote it"] = "timeout"
		}
		boundEvent.Stop()
	}
	obs["POST binding again"] = outcome(bind("diff-a"))
	obs["POST binding of a missing pod"] = outcome(bind("no-such-pod"))
	err = wpods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "diff-b", Namespace: "default"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "Bad_Node"}}, metav1.CreateOptions{})
	obs["POST binding to an invalid node name"] = outcome(err)
	if p, err := pods.Get(ctx, "diff-a", metav1.GetOptions{}); err == nil {
		obs["GET the bound pod: nodeName"] = p.Spec.NodeName
	}
	// A pod created bound gets the node's topology labels too (the PodTopologyLabels admission
	// plugin's admitPod).
	bound := diffPod("diff-n")
	bound.Spec.NodeName = node
	if p, err := wpods.Create(ctx, bound, metav1.CreateOptions{}); err == nil {
		var labels []string
		for k, v := range p.Labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		obs["POST a pod with spec.nodeName: labels"] = fmt.Sprint(labels)
	} else {
		obs["POST a pod with spec.nodeName"] = outcome(err)
	}

	// fitledger-server watches pods by status.phase field selectors (server/kube/watcher.h): a
	// pod whose update takes it out of the selector arrives as DELETED, carrying its previous
	// content (cacher/cache_watcher.go convertToWatchEvent).
	if f, err := wpods.Create(ctx, diffPod("diff-f"), metav1.CreateOptions{}); err == nil {
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: f.ResourceVersion,
			FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
		obs["WATCH pods by a phase field selector"] = outcome(err)
		if err == nil {
			f.Status.Phase = corev1.PodFailed
			_, err = wpods.UpdateStatus(ctx, f, metav1.UpdateOptions{})
			obs["PUT a pod's status to phase Failed"] = outcome(err)
			select {
			case e := <-w.ResultChan():
				s := string(e.Type)
				if p, ok := e.Object.(*corev1.Pod); ok {
					s += fmt.Sprintf("(%s phase=%s)", p.Name, p.Status.Phase)
				}
				obs["WATCH pods by a phase field selector: the event of the pod leaving it"] = s
			case <-time.After(10 * time.Second):
				obs["WATCH pods by a phase field selector: the event of the pod leaving it"] = "timeout"
			}
			w.Stop()
		}
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Failed"})
		obs["LIST pods by status.phase=Failed"] = outcome(err)
		if err == nil {
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			obs["LIST pods by status.phase=Failed: items"] = fmt.Sprint(names)
		}
	} else {
		obs["POST pod diff-f"] = outcome(err)
	}

	leases := write.CoordinationV1().Leases("default")
	lease := "diff-lease-" + node
	_, err = read.CoordinationV1().Leases("default").Get(ctx, lease, metav1.GetOptions{})
	obs["GET a missing Lease"] = outcome(err)
	holder := "diff-holder_1"
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptrInt32(15)}}, metav1.CreateOptions{})
	obs["POST a Lease"] = outcome(err)
	if err == nil {
		stale := l.DeepCopy()
		l.Spec.LeaseTransitions = ptrInt32(1)
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		obs["PUT the Lease"] = outcome(err)
		stale.Spec.LeaseTransitions = ptrInt32(2)
		_, err = leases.Update(ctx, stale, metav1.UpdateOptions{})
		obs["PUT the Lease with a stale resourceVersion"] = outcome(err)
		got, err := read.CoordinationV1().Leases("default").Get(ctx, lease, metav1.GetOptions{})
		if err == nil {
			obs["GET the Lease: decoded"] = fmt.Sprintf("holder=%s duration=%d transitions=%d", *got.Spec.HolderIdentity,
				*got.Spec.LeaseDurationSeconds, *got.Spec.LeaseTransitions)
			// An update that changes nothing is not written: the same resourceVersion.
			same, err := leases.Update(ctx, got, metav1.UpdateOptions{})
			obs["PUT the Lease unchanged"] = outcome(err)
			if err == nil {
				obs["PUT the Lease unchanged: resourceVersion kept"] = fmt.Sprint(same.ResourceVersion == got.ResourceVersion)
			}
			blind := got.DeepCopy()
			blind.ResourceVersion = ""
			_, err = leases.Update(ctx, blind, metav1.UpdateOptions{})
			obs["PUT the Lease without a resourceVersion"] = outcome(err)
		}
	}
	// A PUT of a Lease that does not exist creates it (AllowCreateOnUpdate).
	second := lease + "-b"
	_, err = leases.Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: second},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.UpdateOptions{})
	obs["PUT a missing Lease"] = outcome(err)
	// A Lease named by generateName is validated with its generated name, and generateName as a
	// prefix too (rest.BeforeCreate names it before ValidateLease). The 5 random characters differ.
	generated := regexp.MustCompile(`(diff-gen-|Bad_)[a-z0-9]{5}`)
	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "diff-gen-"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptrInt32(0)}}, metav1.CreateOptions{})
	obs["POST a Lease by generateName with leaseDurationSeconds 0"] = generated.ReplaceAllString(outcome(err), "${1}R")
	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "Bad_"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
	obs["POST a Lease by an invalid generateName"] = generated.ReplaceAllString(outcome(err), "${1}R")
	// A PUT whose body names another namespace; a PUT's uid is a precondition (a 409, checked
	// before anything else): a cached copy of a deleted Lease does not create it again, and one of
	// a Lease recreated since is refused. The UIDs are each server's own.
	uids := regexp.MustCompile(`UID in (precondition|object meta): [0-9a-f-]+`)
	third := lease + "-c"
	cached, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: third},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
	obs["POST a third Lease"] = outcome(err)
	if err == nil {
		moved := cached.DeepCopy()
		moved.Namespace = "kube-system"
		_, err = leases.Update(ctx, moved, metav1.UpdateOptions{})
		obs["PUT a Lease whose body names another namespace"] = outcome(err)
		// Decoding comes before the resourceVersion check: a wrong field type with a stale
		// resourceVersion is a 400. The decoder's own words differ: only the code and the start.
		typed := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q,"resourceVersion":"1"},"spec":{"leaseDurationSeconds":"15"}}`, third)
		err = write.CoordinationV1().RESTClient().Put().Namespace("default").Resource("leases").Name(third).
			Body([]byte(typed)).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		obs["PUT a Lease with a wrong field type and a stale resourceVersion"] = regexp.MustCompile(`(cannot be handled as a Lease: ).*`).ReplaceAllString(outcome(err), "$1...")
		obs["DELETE the third Lease"] = outcome(leases.Delete(ctx, third, metav1.DeleteOptions{}))
		_, err = leases.Update(ctx, cached, metav1.UpdateOptions{})
		obs["PUT a deleted Lease's cached copy"] = uids.ReplaceAllString(outcome(err), "UID in $1: U")
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: third},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
		obs["POST the third Lease again"] = outcome(err)
		_, err = leases.Update(ctx, cached, metav1.UpdateOptions{})
		obs["PUT a recreated Lease's old cached copy"] = uids.ReplaceAllString(outcome(err), "UID in $1: U")
		obs["DELETE the recreated third Lease"] = outcome(leases.Delete(ctx, third, metav1.DeleteOptions{}))
	}
	page, err := read.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{Limit: 1})
	obs["LIST Leases with limit=1"] = outcome(err)
	if err == nil {
		obs["LIST Leases with limit=1: page"] = fmt.Sprintf("items=%d continue=%v", len(page.Items), page.Continue != "")
	}
	w, err = read.CoordinationV1().Leases("default").Watch(ctx, metav1.ListOptions{SendInitialEvents: ptrBool(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
		FieldSelector: "metadata.name=" + second})
	obs["WatchList a Lease by name"] = outcome(err)
	if err == nil {
		obs["WatchList a Lease by name: events"] = firstEvents(w, func(e watch.Event) bool { return e.Type == watch.Bookmark || e.Type == watch.Error })
	}
	// "... the ResourceVersion in record (N)": N is each server's own.
	obs["DELETE a Lease with a stale resourceVersion precondition"] = regexp.MustCompile(`in record \(\d+\)`).ReplaceAllString(
		outcome(leases.Delete(ctx, second, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptrString("1")}})),
		"in record (N)")
	// A precondition given as "" is compared as any other value (the fields are pointers).
	emptyUID := types.UID("")
	obs["DELETE a Lease with an empty UID precondition"] = regexp.MustCompile(`in record \([^)]*\)`).ReplaceAllString(
		outcome(leases.Delete(ctx, second, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &emptyUID}})),
		"in record (U)")
	obs["DELETE the second Lease"] = outcome(leases.Delete(ctx, second, metav1.DeleteOptions{}))

	events := write.CoreV1().Events("default")
	now := metav1.Now()
	_, err = events.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "diff-a.1", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "diff-a", APIVersion: "v1"},
		Reason:         "FailedScheduling", Message: "0/1 nodes are available", Type: corev1.EventTypeWarning,
		FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: corev1.EventSource{Component: "fitledger-scheduler"}},
		metav1.CreateOptions{})
	obs["POST an Event"] = outcome(err)
	el, err := read.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=diff-a,involvedObject.kind=Pod"})
	obs["LIST Events by involvedObject"] = outcome(err)
	if err == nil {
		var rs []string
		for _, e := range el.Items {
			rs = append(rs, e.Type+"/"+e.Reason+"/"+e.Source.Component)
		}
		obs["LIST Events by involvedObject: items"] = strings.Join(rs, " ")
	}
	// "... the UID in record (U)": U is each server's own.
	stale := types.UID("00000000-0000-0000-0000-000000000000")
	obs["DELETE a pod with a stale UID precondition"] = regexp.MustCompile(`in record \([^)]*\)`).ReplaceAllString(
		outcome(wpods.Delete(ctx, "diff-a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &stale}})),
		"in record (U)")
	obs["DELETE a pod with an empty resourceVersion precondition"] = regexp.MustCompile(`in record \(\d+\)`).ReplaceAllString(
		outcome(wpods.Delete(ctx, "diff-a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptrString("")}})),
		"in record (N)")
	zero := int64(0)
	err = wpods.Delete(ctx, "diff-a", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	obs["DELETE the bound pod with gracePeriodSeconds=0"] = outcome(err)
	_, err = pods.Get(ctx, "diff-a", metav1.GetOptions{})
	obs["GET the pod deleted with gracePeriodSeconds=0"] = outcome(err)
	err = wpods.Delete(ctx, "no-such-pod", metav1.DeleteOptions{})
	obs["DELETE a missing pod"] = outcome(err)
	obs["DELETE the Lease"] = outcome(leases.Delete(ctx, lease, metav1.DeleteOptions{}))
	_, err = read.CoordinationV1().Leases("default").Get(ctx, lease, metav1.GetOptions{})
	obs["GET the deleted Lease"] = outcome(err)
	return obs
}

func ptrBool(b bool) *bool       { return &b }
func ptrInt32(v int32) *int32    { return &v }
func ptrString(v string) *string { return &v }

// startSim runs fitledger-sim (no nodes, no watch lag) and returns its kubeconfig.
func startSim(t *testing.T, c *cluster.Cluster) string {
	kubeconfig := c.Path("sim.kubeconfig")
	config := c.Path("sim.yaml")
	os.WriteFile(config, []byte("nodes: []\nwatchLag: 0s\n"), 0o600)
	p := c.Process("fitledger-sim", fl.Binary(t, "FITLEDGER_SIM"), []string{"--config", config, "--kubeconfig-out", kubeconfig})
	cluster.WaitFor(t, "fitledger-sim's kubeconfig", 30*time.Second, func() bool {
		if !p.Running() {
			t.Fatalf("fitledger-sim exited:\n%s", p.Tail(20))
		}
		_, err := os.Stat(kubeconfig)
		return err == nil
	})
	return kubeconfig
}

func clientFor(t *testing.T, cfg *rest.Config, contentType string) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = contentType
	cfg.AcceptContentTypes = contentType
	if contentType == "application/vnd.kubernetes.protobuf" {
		cfg.AcceptContentTypes = contentType + ",application/json"
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// knownDifferences: differences found by this test and not fixed in the sim yet, each keyed
// "what | observation" with the sim's answer as it is today. The others this test found (Lease
// DELETE, strict field validation, --sort-by, get all, a watch from "" or "0" that 1.37 serves as a
// WatchList, the binding's labels and conditions) are fixed. The test fails if a
// listed answer changes (fixed: remove the entry; or different: look), and on any other difference.
var knownDifferences = map[string]string{
	// The sim refuses a dryRun write (400) instead of validating it; neither stores the pod.
	"kubectl | kubectl create --dry-run=server": "exit 1",
}

func compare(t *testing.T, what string, real, sim observations) {
	keys := map[string]bool{}
	for k := range real {
		keys[k] = true
	}
	for k := range sim {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	same := 0
	for _, k := range sorted {
		if real[k] == sim[k] {
			same++
			if _, listed := knownDifferences[what+" | "+k]; listed {
				t.Errorf("%s, %s: the sim now answers as kube-apiserver does (%s): remove it from knownDifferences", what, k, real[k])
			}
			continue
		}
		if known, listed := knownDifferences[what+" | "+k]; listed && known == sim[k] {
			fmt.Printf("DIFFERENTIAL KNOWN DIFFERENCE (not fixed yet) %s, %s:\n    kube-apiserver: %s\n    fitledger-sim:  %s\n", what, k, real[k], sim[k])
			continue
		}
		t.Errorf("%s, %s:\n    kube-apiserver: %s\n    fitledger-sim:  %s", what, k, real[k], sim[k])
	}
	fmt.Printf("DIFFERENTIAL %s: %d of %d observations the same\n", what, same, len(sorted))
}

func TestDifferentialSimAgainstAPIServer(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	simKubeconfig := startSim(t, c)
	simCfg, err := clientcmd.BuildConfigFromFlags("", simKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for i, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		node := fmt.Sprintf("diff-node-%d", i)
		began := time.Now()
		real := requests(t, c.Config, clientFor(t, c.Config, ct), clientFor(t, c.Config, "application/json"), node)
		t.Logf("kube-apiserver's round in %v", time.Since(began).Round(time.Millisecond))
		began = time.Now()
		sim := requests(t, simCfg, clientFor(t, simCfg, ct), clientFor(t, simCfg, "application/json"), node)
		t.Logf("fitledger-sim's round in %v", time.Since(began).Round(time.Millisecond))
		compare(t, "client-go, reads in "+ct, real, sim)
		// The next round starts from the same objects: remove this round's.
		for _, cfg := range []*rest.Config{c.Config, simCfg} {
			cl := clientFor(t, cfg, "application/json")
			zero := int64(0)
			for _, p := range []string{"diff-a", "diff-b", "diff-c", "diff-f", "diff-n"} {
				cl.CoreV1().Pods("default").Delete(context.Background(), p, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
			cl.CoreV1().Events("default").Delete(context.Background(), "diff-a.1", metav1.DeleteOptions{})
		}
		for i, cfg := range []*rest.Config{c.Config, simCfg} {
			cl := clientFor(t, cfg, "application/json")
			left := ""
			c.WaitFor(fmt.Sprintf("the round's pods gone from %s (left: %s)", []string{"kube-apiserver", "fitledger-sim"}[i], left), 30*time.Second, func() bool {
				l, err := cl.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
				if err == nil && len(l.Items) > 0 {
					p := l.Items[0]
					left = fmt.Sprintf("%s node=%q deletionTimestamp=%v finalizers=%v phase=%s", p.Name, p.Spec.NodeName, p.DeletionTimestamp, p.Finalizers, p.Status.Phase)
				}
				return err == nil && len(l.Items) == 0
			})
		}
	}
	compare(t, "kubectl", kubectlRound(t, c, c.Kubeconfig), kubectlRound(t, c, simKubeconfig))
}

// kubectlRound runs what users type against the demo, with the machine's kubectl.
func kubectlRound(t *testing.T, c *cluster.Cluster, kubeconfig string) observations {
	obs := observations{}
	run := func(stdin string, args ...string) (string, int) {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig, "-n", "default"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl: %v", err)
		}
		return string(out), code
	}
	typo := `apiVersion: v1
kind: Pod
metadata: {name: typo}
spec:
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    imagePullPolcy: IfNotPresent
`
	out, code := run(typo, "create", "-f", "-")
	obs["kubectl create -f (a misspelt field)"] = fmt.Sprintf("exit %d, says unknown field: %v", code,
		strings.Contains(out, `unknown field "spec.containers[0].imagePullPolcy"`))
	for _, p := range []struct{ name, node string }{{"k-b", "diff-node-0"}, {"k-a", ""}, {"k-c", "diff-node-1"}} {
		pod := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  nodeName: %q\n  containers: [{name: main, image: registry.k8s.io/pause:3.10}]\n", p.name, p.node)
		if p.node == "" {
			pod = strings.Replace(pod, "  nodeName: \"\"\n", "", 1)
		}
		_, code := run(pod, "create", "-f", "-")
		obs["kubectl create -f pod "+p.name] = fmt.Sprintf("exit %d", code)
	}
	names := func(out string) string {
		var ns []string
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 0 && f[0] != "NAME" && strings.HasPrefix(f[0], "k-") || len(f) > 0 && strings.HasPrefix(f[0], "pod/k-") {
				ns = append(ns, f[0])
			}
		}
		return strings.Join(ns, " ")
	}
	dry := "apiVersion: v1\nkind: Pod\nmetadata: {name: k-dry}\nspec:\n  containers: [{name: main, image: registry.k8s.io/pause:3.10}]\n"
	_, code = run(dry, "create", "--dry-run=server", "-f", "-")
	obs["kubectl create --dry-run=server"] = fmt.Sprintf("exit %d", code)
	_, code = run("", "get", "pod", "k-dry")
	obs["kubectl create --dry-run=server: the pod exists afterwards"] = fmt.Sprint(code == 0)
	out, code = run("", "get", "pods", "--sort-by=.spec.nodeName")
	obs["kubectl get pods --sort-by=.spec.nodeName"] = fmt.Sprintf("exit %d: %s", code, names(out))
	out, code = run("", "get", "pods", "--sort-by=.metadata.name")
	obs["kubectl get pods --sort-by=.metadata.name"] = fmt.Sprintf("exit %d: %s", code, names(out))
	out, code = run("", "get", "all")
	obs["kubectl get all (the pods)"] = fmt.Sprintf("exit %d: %s", code, names(out))
	return obs
}
