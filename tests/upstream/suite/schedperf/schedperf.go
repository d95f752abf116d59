// Package schedperf measures what a cluster feels from an extender (issue 49): pods scheduled per
// second by the real kube-scheduler, and its own scheduling attempt duration, with no extender
// (the baseline), with fitledger-server's webhook (the chart's default layout: filter,
// prioritize, bind), with fitledger-shim in front of fitledger-server (the split layout) and with
// tests/perf/go-baseline (a standard-library Go extender, filter only). The shape is upstream's
// scheduler_perf SchedulingBasic (test/integration/scheduler_perf: node-default.yaml,
// pod-default.yaml): Nodes Node objects (4 cpu, 32Gi, 110 pods), InitPods pods already bound to
// them, then Pods measured pods created in bulk with the profile's scheduler name; pods/s from the
// first create to the last pod seen bound.
//
// One control plane serves every run: etcd and kube-apiserver, with no controller manager and no
// kubelet (nothing here needs a pod to run; the API server's TaintNodesByCondition and
// ServiceAccount admission plugins are off, so a new node is schedulable and a pod needs no
// ServiceAccount). Each run starts its extender and a fresh kube-scheduler (fresh metrics), creates
// the pods, waits until all are bound, reads kube-scheduler's /metrics, then stops both and
// deletes the pods (grace period 0) before the next run. Rounds interleave the configurations.
package schedperf

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"fitledger.test/upstream/suite/cluster"
	"fitledger.test/upstream/suite/delayproxy"
	"fitledger.test/upstream/suite/fl"
	"fitledger.test/upstream/suite/kubelet"
)

// The configurations, in the order each round runs them.
const (
	Baseline   = "baseline" // kube-scheduler, no extender
	Server     = "server"   // fitledger-server's webhook: filter, prioritize, bind
	Shim       = "shim"     // fitledger-shim -> fitledger-server over its Unix socket
	GoExtender = "go"       // tests/perf/go-baseline: filter
	// ServerFilterBind is Server without the prioritize verb (the chart's extender.prioritize:
	// false): one call in each scheduling cycle instead of two. Not in AllConfigs.
	ServerFilterBind = "server-fb"
	// ServerB is Server with another fitledger-server binary ($FITLEDGER_SERVER_B): a change
	// measured against the binary before it in one run. Not in AllConfigs.
	ServerB = "server-b"
)

// AllConfigs is every configuration.
var AllConfigs = []string{Baseline, Server, Shim, GoExtender}

const (
	schedulerName = "perf-scheduler"
	initNamespace = "perf-init"
	namespace     = "perf"
)

// Options sizes a measurement.
type Options struct {
	Nodes, InitPods, Pods, Rounds int
	Configs                       []string // default AllConfigs
	GoBaseline                    string   // the go-baseline binary (GoExtender)
	Creators                      int      // goroutines creating pods (default 32)
	// PercentageOfNodesToScore: the profile's (0: kube-scheduler's adaptive default, 10% at
	// 5,000 nodes), so each extender call carries that share of the nodes.
	PercentageOfNodesToScore int
	// ProfileDir: when set, round 1 of each configuration runs under `perf record -a` (every
	// process on the machine) and ProfileDir/<config>.txt gets perf's CPU share per process and
	// kube-scheduler's top symbols; ProfileDir/<config>.data keeps the samples (perf report -i).
	ProfileDir string
	Log        func(format string, args ...any)
}

// Result is one run of one configuration.
type Result struct {
	Config        string
	Round         int
	Pods          int
	Seconds       float64 // first create to last pod seen bound
	PodsPerSecond float64
	CreateSeconds float64 // first create to the last create answered
	// kube-scheduler's scheduler_scheduling_attempt_duration_seconds of this profile's attempts
	// that scheduled a pod: count, and p50 / p99 interpolated in its buckets as Prometheus'
	// histogram_quantile does (seconds).
	Attempts               int
	AttemptP50, AttemptP99 float64
	Unscheduled            int // attempts with another result (unschedulable, error)
	// scheduler_scheduling_algorithm_duration_seconds: the serial part of each cycle (filter,
	// extenders, scoring), mean and quantiles (seconds).
	AlgorithmMean, AlgorithmP50, AlgorithmP99 float64
	// fitledger-server's own time in its webhook per call (server configuration only; mean,
	// seconds): what of the extender's share is fitledger's work, the rest being kube-scheduler's
	// encoding and the HTTP round trip.
	WebhookFilterMean, WebhookPrioritizeMean float64
	// The same from each request's last byte (fitledger_webhook_handling_duration_seconds):
	// without kube-scheduler's sending.
	HandlingFilterMean, HandlingPrioritizeMean float64
	// kube-scheduler's OpportunisticBatching (scheduler_batch_attempts_total by result): cycles
	// that reused the previous cycle's scores for one node ("hint_used") and the others. It is off
	// in a profile with extenders (frameworkImpl.computeBatchablePlugins).
	BatchAttempts map[string]int
	// kube-scheduler's VmRSS and VmHWM at the round's end (its informers hold every node and
	// pod): what its memory limit must cover.
	SchedulerRSSKiB, SchedulerHWMKiB int64
}

// Start brings up the control plane the measurement needs.
func Start(t testing.TB) *cluster.Cluster {
	t.Helper()
	return cluster.Start(t, cluster.Options{NoControllerManager: true,
		APIServerArgs: []string{"--disable-admission-plugins=TaintNodesByCondition,ServiceAccount"}})
}

// Measure creates the nodes and the bound pods, then runs every configuration Rounds times.
func Measure(t testing.TB, c *cluster.Cluster, o Options) []Result {
	t.Helper()
	if len(o.Configs) == 0 {
		o.Configs = AllConfigs
	}
	if o.Creators == 0 {
		o.Creators = 32
	}
	if o.Log == nil {
		o.Log = t.Logf
	}
	ctx := context.Background()
	client := c.Client
	for _, ns := range []string{initNamespace, namespace} {
		if _, err := client.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
	began := time.Now()
	names := createNodes(t, c, o.Nodes, o.Creators)
	o.Log("%d nodes created in %v", o.Nodes, time.Since(began).Round(time.Millisecond))
	began = time.Now()
	parallel(t, o.InitPods, o.Creators, func(i int) error {
		p := pod(fmt.Sprintf("init-%d", i), initNamespace)
		p.Spec.NodeName = names[i%len(names)]
		_, err := client.CoreV1().Pods(initNamespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	o.Log("%d bound pods created in %v", o.InitPods, time.Since(began).Round(time.Millisecond))

	adminKubeconfig := c.Kubeconfig
	var results []Result
	for round := 1; round <= o.Rounds; round++ {
		for _, config := range o.Configs {
			r := runOne(t, c, o, config, round, adminKubeconfig)
			o.Log("round %d %-8s %d pods in %.2f s: %.1f pods/s; attempts %d, p50 %.2f ms, p99 %.2f ms; algorithm mean %.2f ms, p50 %.2f, p99 %.2f; webhook filter %.2f ms, prioritize %.2f ms (handling %.2f, %.2f); batching %v; kube-scheduler VmRSS %d MiB, VmHWM %d MiB; created in %.2f s",
				round, config, r.Pods, r.Seconds, r.PodsPerSecond, r.Attempts, r.AttemptP50*1e3, r.AttemptP99*1e3,
				r.AlgorithmMean*1e3, r.AlgorithmP50*1e3, r.AlgorithmP99*1e3, r.WebhookFilterMean*1e3, r.WebhookPrioritizeMean*1e3,
				r.HandlingFilterMean*1e3, r.HandlingPrioritizeMean*1e3, r.BatchAttempts,
				r.SchedulerRSSKiB/1024, r.SchedulerHWMKiB/1024, r.CreateSeconds)
			results = append(results, r)
		}
	}
	return results
}

// createNodes creates n nodes as scheduler_perf's node-default.yaml (4 cpu, 32Gi, 110 pods) with
// GKE-style names, as a real cluster's (the webhook's payload carries them), and returns the names.
func createNodes(t testing.TB, c *cluster.Cluster, n, creators int) []string {
	t.Helper()
	names := make([]string, n)
	parallel(t, n, creators, func(i int) error {
		names[i] = fmt.Sprintf("gke-perf-default-pool-%08x-%04d", uint32(i)*2654435761, i)
		node := kubelet.NodeObject(kubelet.Node{Name: names[i], Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi"),
			corev1.ResourcePods: resource.MustParse("110")},
			Labels: map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("us-central1-%c", 'a'+i%3)}})
		_, err := c.Client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
		return err
	})
	return names
}

// pod is scheduler_perf's pod-default.yaml: one container asking for 100m cpu and 500Mi.
func pod(name, ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:                 schedulerName,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi")}}}},
		},
	}
}

// parallel runs f(0..n-1) on workers goroutines; fails the test on the first error.
func parallel(t testing.TB, n, workers int, f func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// extender starts config's extender and returns its scheduler entry and a stop function.
func extender(t testing.TB, c *cluster.Cluster, o Options, config string, round int, kubeconfig string) (*fl.Extender, func(), string) {
	t.Helper()
	serverOptions := fl.ServerOptions{Name: fmt.Sprintf("fitledger-server-%s-%d", config, round), Kubeconfig: kubeconfig,
		Extra: fmt.Sprintf("kubernetes: {schedulerNames: [%s]}\n", schedulerName)}
	switch config {
	case Baseline:
		return nil, func() {}, ""
	case Server, ServerFilterBind, ServerB:
		if config == ServerB {
			serverOptions.BinaryEnv = "FITLEDGER_SERVER_B"
		}
		s := fl.StartServer(t, c, serverOptions)
		return &fl.Extender{URL: s.WebhookURL, Bind: true, FilterOnly: config == ServerFilterBind}, s.Proc.Stop, s.MonitorURL
	case Shim:
		serverOptions.NoWebhook = true
		s := fl.StartServer(t, c, serverOptions)
		url, shim := fl.StartShimProc(t, c, s)
		return &fl.Extender{URL: url, Bind: true}, func() { shim.Stop(); s.Proc.Stop() }, ""
	case GoExtender:
		if o.GoBaseline == "" {
			t.Fatalf("the go configuration needs the go-baseline binary (Options.GoBaseline)")
		}
		// go-baseline speaks plain HTTP without credentials: the proxy (no lag) adds both.
		proxy, err := delayproxy.Start(c.APIURL, c.CAPEM, c.Token, 0)
		if err != nil {
			t.Fatal(err)
		}
		dir := c.Path(fmt.Sprintf("go-baseline-%d", round))
		os.MkdirAll(dir, 0o700)
		portFile := filepath.Join(dir, "port")
		p := c.Process(fmt.Sprintf("go-baseline-%d", round), o.GoBaseline,
			[]string{"--api", proxy.URL, "--listen", "127.0.0.1:0", "--port-file", portFile})
		var port int
		cluster.WaitFor(t, "go-baseline's port file (written once synced)", 120*time.Second, func() bool {
			if !p.Running() {
				t.Fatalf("go-baseline exited; its log ends:\n%s", p.Tail(20))
			}
			b, err := os.ReadFile(portFile)
			return err == nil && func() bool { _, e := fmt.Sscanf(string(b), "%d", &port); return e == nil }()
		})
		return &fl.Extender{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), FilterOnly: true},
			func() { p.Stop(); proxy.Close() }, ""
	}
	t.Fatalf("unknown configuration %q", config)
	return nil, nil, ""
}

func runOne(t testing.TB, c *cluster.Cluster, o Options, config string, round int, kubeconfig string) Result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ext, stopExtender, monitor := extender(t, c, o, config, round, kubeconfig)
	defer stopExtender()
	schedConfig := fl.SchedulerConfig([]string{schedulerName}, ext)
	if o.PercentageOfNodesToScore != 0 {
		profile := fmt.Sprintf("  - schedulerName: %q\n", schedulerName)
		schedConfig = strings.Replace(schedConfig, profile,
			profile+fmt.Sprintf("    percentageOfNodesToScore: %d\n", o.PercentageOfNodesToScore), 1)
	}
	sched, port := fl.StartSchedulerWithPort(t, c, fmt.Sprintf("kube-scheduler-%s-%d", config, round), schedConfig, kubeconfig)
	defer sched.Stop()

	// Count the pods seen bound, from a watch of the namespace started before the first create.
	var bound atomic.Int64
	var lastBound atomic.Int64 // unix nanoseconds
	seen := sync.Map{}
	note := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		if _, dup := seen.LoadOrStore(p.UID, true); dup {
			return
		}
		lastBound.Store(time.Now().UnixNano())
		bound.Add(1)
	}
	lw := cache.NewListWatchFromClient(c.Client.CoreV1().RESTClient(), "pods", namespace, fields.Everything())
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, n any) { note(n) }}})
	go informer.Run(ctx.Done())
	cluster.WaitFor(t, "the pod watch synced", 30*time.Second, informer.HasSynced)

	var profile *exec.Cmd
	profileData := ""
	if o.ProfileDir != "" && round == 1 {
		profileData = filepath.Join(o.ProfileDir, config+".data")
		profile = exec.Command("perf", "record", "-a", "-g", "-F", "499", "-o", profileData)
		if err := profile.Start(); err != nil {
			t.Fatalf("perf record: %v", err)
		}
		time.Sleep(500 * time.Millisecond) // perf's start-up, before the pods (profiling only)
	}
	begin := time.Now()
	parallel(t, o.Pods, o.Creators, func(i int) error {
		_, err := c.Client.CoreV1().Pods(namespace).Create(ctx, pod(fmt.Sprintf("p-%s-%d-%d", config, round, i), namespace), metav1.CreateOptions{})
		return err
	})
	created := time.Since(begin)
	deadline := time.Duration(o.Pods)*50*time.Millisecond + 120*time.Second
	cluster.WaitFor(t, fmt.Sprintf("%d pods bound (%s, round %d)", o.Pods, config, round), deadline, func() bool {
		if !sched.Running() {
			t.Fatalf("kube-scheduler exited; its log ends:\n%s", sched.Tail(40))
		}
		return bound.Load() >= int64(o.Pods)
	})
	elapsed := time.Unix(0, lastBound.Load()).Sub(begin).Seconds()
	if profile != nil {
		profile.Process.Signal(os.Interrupt)
		profile.Wait()
		summarizeProfile(t, profileData, filepath.Join(o.ProfileDir, config+".txt"))
	}
	r := Result{Config: config, Round: round, Pods: o.Pods, Seconds: elapsed,
		PodsPerSecond: float64(o.Pods) / elapsed, CreateSeconds: created.Seconds()}
	readScheduler(t, port, &r)
	if monitor != "" {
		readWebhook(t, monitor, &r)
	}
	r.SchedulerRSSKiB, r.SchedulerHWMKiB = procStatusKiB(sched.Pid(), "VmRSS:"), procStatusKiB(sched.Pid(), "VmHWM:")

	sched.Stop()
	stopExtender()
	stopExtender = func() {}
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(namespace).DeleteCollection(context.Background(),
		metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatalf("delete the measured pods: %v", err)
	}
	cluster.WaitFor(t, "the measured pods deleted", 120*time.Second, func() bool {
		list, err := c.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{Limit: 1})
		return err == nil && len(list.Items) == 0
	})
	return r
}

// summarizeProfile writes perf's CPU share per process (comm) and the top symbols of
// kube-scheduler and fitledger's processes.
func summarizeProfile(t testing.TB, data, out string) {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"report", "-i", data, "--stdio", "--no-children", "--sort", "comm", "--percent-limit", "1"},
		{"report", "-i", data, "--stdio", "--no-children", "-g", "none", "--comms", "kube-scheduler", "--sort", "dso,sym", "--percent-limit", "0.5"},
		{"report", "-i", data, "--stdio", "--no-children", "-g", "none", "--comms", "fitledger-serve,fitledger-shim,io,grpc_global_tim", "--sort", "comm,dso,sym", "--percent-limit", "0.5"},
	} {
		o, err := exec.Command("perf", args...).CombinedOutput()
		if err != nil {
			fmt.Fprintf(&b, "perf %s: %v\n", strings.Join(args, " "), err)
		}
		fmt.Fprintf(&b, "$ perf %s\n%s\n", strings.Join(args, " "), o)
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// data stays beside it, for `perf report -i` by caller (the summary is the top of each).
}

// histogram is one Prometheus histogram's samples summed over the series a filter keeps.
type histogram struct {
	count, sum float64
	buckets    map[float64]float64 // upper bound -> cumulative count
}

func (h histogram) quantile(q float64) float64 {
	if len(h.buckets) == 0 {
		return 0
	}
	return quantile(q, h.buckets)
}

func (h histogram) mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / h.count
}

// scrape reads metric (a histogram) from a /metrics URL, keeping the series keep accepts.
func scrape(t testing.TB, client *http.Client, url, metric string, keep func(labels map[string]string) bool) histogram {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	h := histogram{buckets: map[float64]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"_") {
			continue
		}
		labels, value, ok := parseSample(line)
		if !ok || !keep(labels) {
			continue
		}
		switch line[:strings.IndexAny(line, "{ ")] {
		case metric + "_bucket":
			le := math.Inf(1)
			if labels["le"] != "+Inf" {
				le, _ = strconv.ParseFloat(labels["le"], 64)
			}
			h.buckets[le] += value
		case metric + "_count", metric + "_total": // a histogram's count, or a counter
			h.count += value
		case metric + "_sum":
			h.sum += value
		}
	}
	return h
}

// readScheduler reads kube-scheduler's histograms for the run: the attempts of the profile that
// scheduled a pod (and the others), and the scheduling algorithm (filter, extenders, scoring:
// the serial part of each cycle an extender's Filter and Prioritize add to).
func readScheduler(t testing.TB, port int, r *Result) {
	t.Helper()
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	client := fl.InsecureClient()
	const attempts = "scheduler_scheduling_attempt_duration_seconds"
	var scheduled histogram
	// kube-scheduler counts an attempt once its binding cycle returns, which can be after the
	// test's watch saw the pod bound: wait until every bound pod is counted.
	cluster.WaitFor(t, fmt.Sprintf("kube-scheduler to count %d scheduled attempts", r.Pods), 30*time.Second, func() bool {
		scheduled = scrape(t, client, url, attempts, func(l map[string]string) bool {
			return l["profile"] == schedulerName && l["result"] == "scheduled"
		})
		return scheduled.count >= float64(r.Pods)
	})
	other := scrape(t, client, url, attempts, func(l map[string]string) bool {
		return l["profile"] == schedulerName && l["result"] != "scheduled"
	})
	if scheduled.count == 0 {
		t.Fatalf("kube-scheduler's /metrics has no %s for profile %s", attempts, schedulerName)
	}
	r.Attempts, r.Unscheduled = int(scheduled.count), int(other.count)
	r.AttemptP50, r.AttemptP99 = scheduled.quantile(0.5), scheduled.quantile(0.99)
	r.BatchAttempts = map[string]int{}
	for _, result := range []string{"hint_used", "hint_not_used", "no_hint"} {
		n := scrape(t, client, url, "scheduler_batch_attempts", func(l map[string]string) bool {
			return l["profile"] == schedulerName && l["result"] == result
		}).count
		if n > 0 {
			r.BatchAttempts[result] = int(n)
		}
	}
	algorithm := scrape(t, client, url, "scheduler_scheduling_algorithm_duration_seconds",
		func(map[string]string) bool { return true })
	r.AlgorithmMean, r.AlgorithmP50, r.AlgorithmP99 = algorithm.mean(), algorithm.quantile(0.5), algorithm.quantile(0.99)
}

// readWebhook reads fitledger's webhook time per verb (filter, prioritize) from its /metrics.
func readWebhook(t testing.TB, monitorURL string, r *Result) {
	t.Helper()
	for _, verb := range []string{"filter", "prioritize"} {
		only := func(l map[string]string) bool { return l["verb"] == verb }
		h := scrape(t, http.DefaultClient, monitorURL+"/metrics", "fitledger_webhook_request_duration_seconds", only)
		handling := scrape(t, http.DefaultClient, monitorURL+"/metrics", "fitledger_webhook_handling_duration_seconds", only)
		if verb == "filter" {
			r.WebhookFilterMean, r.HandlingFilterMean = h.mean(), handling.mean()
		} else {
			r.WebhookPrioritizeMean, r.HandlingPrioritizeMean = h.mean(), handling.mean()
		}
	}
}

// parseSample reads `name{k="v",...} value` (Prometheus text format, no escapes in the values
// used here).
func parseSample(line string) (map[string]string, float64, bool) {
	labels := map[string]string{}
	open, close := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	rest := line
	if open >= 0 && close > open {
		for _, kv := range strings.Split(line[open+1:close], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		rest = line[close+1:]
	} else if sp := strings.IndexByte(line, ' '); sp >= 0 {
		rest = line[sp:]
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
	return labels, v, err == nil
}

// quantile is Prometheus' histogram_quantile over cumulative buckets (upper bound -> count):
// linear interpolation inside the bucket the rank falls in; the highest finite bound if it falls
// in +Inf.
func quantile(q float64, buckets map[float64]float64) float64 {
	var bounds []float64
	for b := range buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	total := buckets[bounds[len(bounds)-1]]
	if total == 0 {
		return 0
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, b := range bounds {
		count := buckets[b]
		if count >= rank {
			if math.IsInf(b, 1) {
				return prevBound
			}
			if count == prevCount {
				return b
			}
			return prevBound + (b-prevBound)*(rank-prevCount)/(count-prevCount)
		}
		prevBound, prevCount = b, count
	}
	return prevBound
}

// Summary is one configuration's medians over its rounds.
type Summary struct {
	Config                                string
	Rounds                                int
	PodsPerSecond, AttemptP50, AttemptP99 float64
	AlgorithmMean, AlgorithmP99           float64
	WebhookMean                           float64   // filter + prioritize, fitledger's own time
	HandlingMean                          float64   // the same from each request's last byte
	PerRound                              []float64 // pods/s of each round
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Summarize takes the medians per configuration, in AllConfigs' order.
func Summarize(results []Result) map[string]Summary {
	out := map[string]Summary{}
	by := map[string][]Result{}
	for _, r := range results {
		by[r.Config] = append(by[r.Config], r)
	}
	for config, rs := range by {
		var pps, p50, p99, alg, alg99, hook, handling []float64
		for _, r := range rs {
			pps = append(pps, r.PodsPerSecond)
			p50 = append(p50, r.AttemptP50)
			p99 = append(p99, r.AttemptP99)
			alg = append(alg, r.AlgorithmMean)
			alg99 = append(alg99, r.AlgorithmP99)
			hook = append(hook, r.WebhookFilterMean+r.WebhookPrioritizeMean)
			handling = append(handling, r.HandlingFilterMean+r.HandlingPrioritizeMean)
		}
		out[config] = Summary{Config: config, Rounds: len(rs), PodsPerSecond: median(pps),
			AttemptP50: median(p50), AttemptP99: median(p99), AlgorithmMean: median(alg),
			AlgorithmP99: median(alg99), WebhookMean: median(hook), HandlingMean: median(handling), PerRound: pps}
	}
	return out
}

// Report is the table issue 49 asks for: each configuration's medians, its ratio to the
// baseline, and each target with PASS or MISS. ok is false when a target is missed.
func Report(results []Result) (text string, ok bool) {
	s := Summarize(results)
	var b strings.Builder
	base, haveBase := s[Baseline]
	fmt.Fprintf(&b, "| configuration | rounds | pods/s (median) | of baseline | attempt p50 ms | attempt p99 ms | p99 of baseline's | algorithm mean ms | algorithm p99 ms | extender's share of the cycle | fitledger's own ms per pod | pods/s per round |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, config := range append(append([]string(nil), AllConfigs...), ServerFilterBind, ServerB) {
		x, have := s[config]
		if !have {
			continue
		}
		ratio, p99ratio, share, own := "-", "-", "-", "-"
		if haveBase && base.PodsPerSecond > 0 {
			ratio = fmt.Sprintf("%.2f", x.PodsPerSecond/base.PodsPerSecond)
			p99ratio = fmt.Sprintf("%.2f", x.AttemptP99/base.AttemptP99)
		}
		if haveBase && config != Baseline && x.AlgorithmMean > 0 {
			// The algorithm's mean time beyond the baseline's: what the extender's calls add to
			// the serial part of each cycle, as a share of that part.
			share = fmt.Sprintf("%.0f%% (+%.2f ms)", 100*(x.AlgorithmMean-base.AlgorithmMean)/x.AlgorithmMean,
				(x.AlgorithmMean-base.AlgorithmMean)*1e3)
		}
		if x.WebhookMean > 0 {
			own = fmt.Sprintf("%.2f (handling %.2f)", x.WebhookMean*1e3, x.HandlingMean*1e3)
		}
		var rounds []string
		for _, v := range x.PerRound {
			rounds = append(rounds, fmt.Sprintf("%.1f", v))
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %s | %.2f | %.2f | %s | %.2f | %.2f | %s | %s | %s |\n", config, x.Rounds, x.PodsPerSecond, ratio,
			x.AttemptP50*1e3, x.AttemptP99*1e3, p99ratio, x.AlgorithmMean*1e3, x.AlgorithmP99*1e3, share, own, strings.Join(rounds, ", "))
	}
	ok = true
	check := func(name string, pass bool, detail string) {
		verdict := "PASS"
		if !pass {
			verdict, ok = "MISS", false
		}
		fmt.Fprintf(&b, "%s  %s (%s)\n", verdict, name, detail)
	}
	b.WriteString("\n")
	if !haveBase {
		return b.String(), ok
	}
	server, haveServer := s[Server]
	shim, haveShim := s[Shim]
	goExt, haveGo := s[GoExtender]
	if haveServer {
		check("default layout keeps at least 90% of the baseline's pods/s", server.PodsPerSecond >= 0.9*base.PodsPerSecond,
			fmt.Sprintf("%.2f", server.PodsPerSecond/base.PodsPerSecond))
		check("default layout's attempt p99 at most 1.5x the baseline's", server.AttemptP99 <= 1.5*base.AttemptP99,
			fmt.Sprintf("%.2fx", server.AttemptP99/base.AttemptP99))
	}
	if haveShim {
		check("split layout keeps at least 80% of the baseline's pods/s", shim.PodsPerSecond >= 0.8*base.PodsPerSecond,
			fmt.Sprintf("%.2f", shim.PodsPerSecond/base.PodsPerSecond))
		check("split layout's attempt p99 at most 1.5x the baseline's", shim.AttemptP99 <= 1.5*base.AttemptP99,
			fmt.Sprintf("%.2fx", shim.AttemptP99/base.AttemptP99))
	}
	if haveGo {
		if haveServer {
			check("default layout ahead of the Go extender", server.PodsPerSecond > goExt.PodsPerSecond,
				fmt.Sprintf("%.1f vs %.1f pods/s", server.PodsPerSecond, goExt.PodsPerSecond))
		}
		if haveShim {
			check("split layout ahead of the Go extender", shim.PodsPerSecond > goExt.PodsPerSecond,
				fmt.Sprintf("%.1f vs %.1f pods/s", shim.PodsPerSecond, goExt.PodsPerSecond))
		}
	}
	return b.String(), ok
}

// GoBaselineBinary builds tests/perf/go-baseline (standard library only) into dir.
func GoBaselineBinary(t testing.TB, sourceDir, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "go-baseline")
	goBin := os.Getenv("FITLEDGER_GO") // ctest sets it (CMake found it); else PATH's go
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-o", out, ".")
	cmd.Dir = filepath.Join(sourceDir, "tests", "perf", "go-baseline")
	cmd.Env = append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build tests/perf/go-baseline: %v\n%s", err, b)
	}
	return out
}
