// go-baseline: a scheduler extender written the way the common Go extenders are written, as the
// baseline for fitledger's performance comparison (tests/perf/run.sh, docs/performance.md).
//
//   - net/http serves POST /filter with kube-scheduler's ExtenderArgs / ExtenderFilterResult
//     (encoding/json into typed structs, keys matched case-insensitively as Go does);
//   - an informer-style view: LIST (paged) + WATCH of nodes and pods from the API server, a map
//     of nodes and per-node requested sums updated from pod events, one RWMutex;
//   - NodeResourcesFit's rule for pods, cpu and memory, with its wording ("Too many pods",
//     "Insufficient cpu", "Insufficient memory").
//
// Standard library only; builds offline with Debian's Go 1.19:
//
//	GO111MODULE=off go build -o go-baseline ./tests/perf/go-baseline
//
// Usage: go-baseline --api http://127.0.0.1:PORT --listen 127.0.0.1:0 [--port-file PATH]
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// --- Kubernetes types (the subset an extender reads) ---

type ObjectMeta struct {
	Name              string `json:"name"`
	Namespace         string `json:"namespace"`
	UID               string `json:"uid"`
	ResourceVersion   string `json:"resourceVersion"`
	DeletionTimestamp string `json:"deletionTimestamp,omitempty"`
}

type ResourceRequirements struct {
	Requests map[string]string `json:"requests"`
	Limits   map[string]string `json:"limits"`
}

type Container struct {
	Name      string               `json:"name"`
	Resources ResourceRequirements `json:"resources"`
}

type PodSpec struct {
	NodeName       string            `json:"nodeName"`
	InitContainers []Container       `json:"initContainers"`
	Containers     []Container       `json:"containers"`
	Overhead       map[string]string `json:"overhead"`
}

type PodStatus struct {
	Phase string `json:"phase"`
}

type Pod struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     PodSpec    `json:"spec"`
	Status   PodStatus  `json:"status"`
}

type NodeStatus struct {
	Allocatable map[string]string `json:"allocatable"`
}

type Node struct {
	Metadata ObjectMeta `json:"metadata"`
	Status   NodeStatus `json:"status"`
}

type ListMeta struct {
	ResourceVersion string `json:"resourceVersion"`
	Continue        string `json:"continue"`
}

type NodeList struct {
	Metadata ListMeta `json:"metadata"`
	Items    []Node   `json:"items"`
}

type PodList struct {
	Metadata ListMeta `json:"metadata"`
	Items    []Pod    `json:"items"`
}

// ExtenderArgs and ExtenderFilterResult as in k8s.io/kube-scheduler/extender/v1 (no json tags:
// the keys are the field names, matched case-insensitively).
type ExtenderArgs struct {
	Pod       *Pod
	Nodes     *NodeList
	NodeNames *[]string
}

type ExtenderFilterResult struct {
	Nodes                      *NodeList
	NodeNames                  *[]string
	FailedNodes                map[string]string
	FailedAndUnresolvableNodes map[string]string
	Error                      string
}

// --- Quantities (apimachinery's resource.Quantity, rounded up) ---

var suffixes = map[string]*big.Rat{}

func init() {
	pow := func(base, exp int64) *big.Rat {
		r := big.NewRat(1, 1)
		b := big.NewRat(base, 1)
		if exp < 0 {
			b = big.NewRat(1, base)
			exp = -exp
		}
		for i := int64(0); i < exp; i++ {
			r.Mul(r, b)
		}
		return r
	}
	for i, s := range []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"} {
		suffixes[s] = pow(1024, int64(i+1))
	}
	for s, e := range map[string]int64{"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18} {
		suffixes[s] = pow(10, e)
	}
}

// parseQuantity returns the quantity as an exact rational.
func parseQuantity(s string) (*big.Rat, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty quantity")
	}
	i := 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, suffix := s[:i], s[i:]
	if num == "" || num == "." || num == "+" || num == "-" {
		return nil, fmt.Errorf("quantity %q: no number", s)
	}
	value, ok := new(big.Rat).SetString(num)
	if !ok {
		return nil, fmt.Errorf("quantity %q: bad number", s)
	}
	if m, ok := suffixes[suffix]; ok {
		return value.Mul(value, m), nil
	}
	if len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
		var exp int64
		if _, err := fmt.Sscan(suffix[1:], &exp); err != nil || exp > 30 || exp < -30 {
			return nil, fmt.Errorf("quantity %q: bad exponent", s)
		}
		m := big.NewRat(1, 1)
		for ; exp > 0; exp-- {
			m.Mul(m, big.NewRat(10, 1))
		}
		for ; exp < 0; exp++ {
			m.Mul(m, big.NewRat(1, 10))
		}
		return value.Mul(value, m), nil
	}
	return nil, fmt.Errorf("quantity %q: unknown suffix %q", s, suffix)
}

func ceil(r *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// Resource is what the fit rule compares: millicores, bytes, pod count.
type Resource struct {
	MilliCPU int64
	Memory   int64
	Pods     int64
}

func (r *Resource) add(o Resource) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.Pods += o.Pods
}

func (r *Resource) sub(o Resource) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.Pods -= o.Pods
}

func fromList(list map[string]string) (Resource, error) {
	var r Resource
	for name, text := range list {
		q, err := parseQuantity(text)
		if err != nil {
			return r, err
		}
		switch name {
		case "cpu":
			r.MilliCPU = ceil(new(big.Rat).Mul(q, big.NewRat(1000, 1)))
		case "memory":
			r.Memory = ceil(q)
		case "pods":
			r.Pods = ceil(q)
		}
	}
	return r, nil
}

// podRequests: max(sum of containers, largest init container) + overhead, as most extenders
// compute it.
func podRequests(pod *Pod) (Resource, error) {
	var sum Resource
	for _, c := range pod.Spec.Containers {
		r, err := fromList(c.Resources.Requests)
		if err != nil {
			return sum, err
		}
		sum.add(r)
	}
	for _, c := range pod.Spec.InitContainers {
		r, err := fromList(c.Resources.Requests)
		if err != nil {
			return sum, err
		}
		if r.MilliCPU > sum.MilliCPU {
			sum.MilliCPU = r.MilliCPU
		}
		if r.Memory > sum.Memory {
			sum.Memory = r.Memory
		}
	}
	overhead, err := fromList(pod.Spec.Overhead)
	if err != nil {
		return sum, err
	}
	sum.add(overhead)
	sum.Pods = 1
	return sum, nil
}

// --- The informer-style view ---

type nodeInfo struct {
	allocatable Resource
	requested   Resource
}

type podInfo struct {
	node     string
	requests Resource
}

type cache struct {
	mu    sync.RWMutex
	nodes map[string]*nodeInfo
	pods  map[string]podInfo // by UID, bound and non-terminal only
}

func newCache() *cache {
	return &cache{nodes: map[string]*nodeInfo{}, pods: map[string]podInfo{}}
}

func (c *cache) nodeLocked(name string) *nodeInfo {
	n := c.nodes[name]
	if n == nil {
		n = &nodeInfo{}
		c.nodes[name] = n
	}
	return n
}

func (c *cache) upsertNode(node *Node) {
	alloc, err := fromList(node.Status.Allocatable)
	if err != nil {
		log.Printf("node %s: %v", node.Metadata.Name, err)
		return
	}
	c.mu.Lock()
	c.nodeLocked(node.Metadata.Name).allocatable = alloc
	c.mu.Unlock()
}

func (c *cache) deleteNode(name string) {
	c.mu.Lock()
	delete(c.nodes, name)
	c.mu.Unlock()
}

func (c *cache) removePodLocked(uid string) {
	if old, ok := c.pods[uid]; ok {
		c.nodeLocked(old.node).requested.sub(old.requests)
		delete(c.pods, uid)
	}
}

func (c *cache) upsertPod(pod *Pod) {
	terminal := pod.Status.Phase == "Succeeded" || pod.Status.Phase == "Failed"
	if pod.Spec.NodeName == "" || terminal {
		c.mu.Lock()
		c.removePodLocked(pod.Metadata.UID)
		c.mu.Unlock()
		return
	}
	req, err := podRequests(pod)
	if err != nil {
		log.Printf("pod %s/%s: %v", pod.Metadata.Namespace, pod.Metadata.Name, err)
		return
	}
	c.mu.Lock()
	c.removePodLocked(pod.Metadata.UID)
	c.pods[pod.Metadata.UID] = podInfo{node: pod.Spec.NodeName, requests: req}
	c.nodeLocked(pod.Spec.NodeName).requested.add(req)
	c.mu.Unlock()
}

func (c *cache) deletePod(uid string) {
	c.mu.Lock()
	c.removePodLocked(uid)
	c.mu.Unlock()
}

// fits returns the NodeResourcesFit reasons `req` does not fit `name` ("" = fits).
func (c *cache) fitsLocked(name string, req Resource) (reasons []string, known bool) {
	n, ok := c.nodes[name]
	if !ok {
		return nil, false
	}
	if n.requested.Pods+1 > n.allocatable.Pods {
		reasons = append(reasons, "Too many pods")
	}
	if req.MilliCPU > 0 && req.MilliCPU > n.allocatable.MilliCPU-n.requested.MilliCPU {
		reasons = append(reasons, "Insufficient cpu")
	}
	if req.Memory > 0 && req.Memory > n.allocatable.Memory-n.requested.Memory {
		reasons = append(reasons, "Insufficient memory")
	}
	return reasons, true
}

// --- List + watch ---

type client struct {
	base string
	http *http.Client
}

func (k *client) get(path string, out interface{}) error {
	resp, err := k.http.Get(k.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

const podSelector = "status.phase!=Succeeded,status.phase!=Failed"

func (k *client) listNodes(c *cache) (string, error) {
	cont := ""
	for {
		var list NodeList
		path := "/api/v1/nodes?limit=500"
		if cont != "" {
			path += "&continue=" + url.QueryEscape(cont)
		}
		if err := k.get(path, &list); err != nil {
			return "", err
		}
		for i := range list.Items {
			c.upsertNode(&list.Items[i])
		}
		if cont = list.Metadata.Continue; cont == "" {
			return list.Metadata.ResourceVersion, nil
		}
	}
}

func (k *client) listPods(c *cache) (string, error) {
	cont := ""
	for {
		var list PodList
		path := "/api/v1/pods?limit=500&fieldSelector=" + url.QueryEscape(podSelector)
		if cont != "" {
			path += "&continue=" + url.QueryEscape(cont)
		}
		if err := k.get(path, &list); err != nil {
			return "", err
		}
		for i := range list.Items {
			c.upsertPod(&list.Items[i])
		}
		if cont = list.Metadata.Continue; cont == "" {
			return list.Metadata.ResourceVersion, nil
		}
	}
}

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// watch streams events after rv into apply until the stream ends; returns the last rv.
func (k *client) watch(path, rv string, apply func(typ string, raw json.RawMessage) string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	resp, err := k.http.Get(k.base + path + sep + "watch=true&allowWatchBookmarks=true&resourceVersion=" + url.QueryEscape(rv))
	if err != nil {
		time.Sleep(time.Second)
		return rv
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			return rv
		}
		if ev.Type == "ERROR" {
			return "" // relist
		}
		if next := apply(ev.Type, ev.Object); next != "" {
			rv = next
		}
	}
}

func (k *client) run(c *cache, synced chan<- struct{}) {
	nodeRV, err := k.listNodes(c)
	for err != nil {
		log.Printf("list nodes: %v", err)
		time.Sleep(time.Second)
		nodeRV, err = k.listNodes(c)
	}
	podRV, err := k.listPods(c)
	for err != nil {
		log.Printf("list pods: %v", err)
		time.Sleep(time.Second)
		podRV, err = k.listPods(c)
	}
	close(synced)
	go func() {
		for {
			nodeRV = k.watch("/api/v1/nodes", nodeRV, func(typ string, raw json.RawMessage) string {
				var n Node
				if json.Unmarshal(raw, &n) != nil {
					return ""
				}
				switch typ {
				case "ADDED", "MODIFIED":
					c.upsertNode(&n)
				case "DELETED":
					c.deleteNode(n.Metadata.Name)
				}
				return n.Metadata.ResourceVersion
			})
			if nodeRV == "" {
				nodeRV, _ = k.listNodes(c)
			}
		}
	}()
	for {
		podRV = k.watch("/api/v1/pods?fieldSelector="+url.QueryEscape(podSelector), podRV,
			func(typ string, raw json.RawMessage) string {
				var p Pod
				if json.Unmarshal(raw, &p) != nil {
					return ""
				}
				switch typ {
				case "ADDED", "MODIFIED":
					c.upsertPod(&p)
				case "DELETED":
					c.deletePod(p.Metadata.UID)
				}
				return p.Metadata.ResourceVersion
			})
		if podRV == "" {
			podRV, _ = k.listPods(c)
		}
	}
}

// --- The extender ---

func filterHandler(c *cache) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var args ExtenderArgs
		result := ExtenderFilterResult{
			FailedNodes:                map[string]string{},
			FailedAndUnresolvableNodes: map[string]string{},
		}
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.Pod == nil {
			w.WriteHeader(http.StatusBadRequest)
			result.Error = fmt.Sprintf("bad request: %v", err)
			json.NewEncoder(w).Encode(&result)
			return
		}
		req, err := podRequests(args.Pod)
		if err != nil {
			result.Error = err.Error()
			json.NewEncoder(w).Encode(&result)
			return
		}
		var names []string
		if args.NodeNames != nil {
			names = *args.NodeNames
		} else if args.Nodes != nil {
			for _, n := range args.Nodes.Items {
				names = append(names, n.Metadata.Name)
			}
		}
		passing := make([]string, 0, len(names))
		c.mu.RLock()
		for _, name := range names {
			reasons, known := c.fitsLocked(name, req)
			switch {
			case !known:
				result.FailedNodes[name] = "node not found"
			case len(reasons) > 0:
				result.FailedNodes[name] = strings.Join(reasons, ", ")
			default:
				passing = append(passing, name)
			}
		}
		c.mu.RUnlock()
		result.NodeNames = &passing
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(&result)
	}
}

func main() {
	api := flag.String("api", "", "API server URL, e.g. http://127.0.0.1:6443")
	listen := flag.String("listen", "127.0.0.1:0", "HOST:PORT to serve the extender on")
	portFile := flag.String("port-file", "", "once synced and serving, write the port here")
	flag.Parse()
	if *api == "" {
		log.Fatal("--api is required")
	}
	k := &client{base: strings.TrimRight(*api, "/"), http: &http.Client{}}
	c := newCache()
	synced := make(chan struct{})
	start := time.Now()
	go k.run(c, synced)
	<-synced
	c.mu.RLock()
	log.Printf("synced %d nodes, %d pods in %v", len(c.nodes), len(c.pods), time.Since(start))
	c.mu.RUnlock()

	mux := http.NewServeMux()
	mux.HandleFunc("/filter", filterHandler(c))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		if err := os.WriteFile(*portFile+".tmp", []byte(fmt.Sprintf("%d\n", port)), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(*portFile+".tmp", *portFile); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("go-baseline listening on http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
