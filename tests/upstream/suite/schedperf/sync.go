package schedperf

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fitledger.test/upstream/suite/cluster"
	"fitledger.test/upstream/suite/fl"
)

// SyncOptions sizes the initial-sync measurement (issue 49 item 4): what a fitledger-server start
// costs against a real kube-apiserver and etcd holding Nodes nodes and Pods bound pods.
type SyncOptions struct {
	Nodes, Pods, Rounds int
	Creators            int // goroutines creating objects (default 32)
	Log                 func(format string, args ...any)
}

// The two ways a round starts fitledger-server: its streams accept gzip (the default, as
// client-go's: kube-apiserver 1.37 then compresses each WatchList, WatchListCompression), or the
// kubeconfig sets disable-compression and nothing is compressed.
const (
	EncodingGzip  = "gzip"
	EncodingPlain = "plain"
)

// SyncResult is one start of fitledger-server.
type SyncResult struct {
	Round    int
	Encoding string // EncodingGzip or EncodingPlain
	// Start to /readyz answering 200 (the first list or WatchList of nodes and pods done), polled
	// every 5 ms.
	ServingMs float64
	// VmRSS at serving and two seconds later, and the peak (VmHWM), KiB.
	RSSAtServingKiB, RSSKiB, HWMKiB int64
	// CPU seconds (user + system) from start to serving: fitledger-server's own, and what
	// kube-apiserver and etcd spent meanwhile.
	ServerCPU, APIServerCPU, EtcdCPU float64
}

// SyncReport is the whole measurement.
type SyncReport struct {
	Nodes, Pods   int
	PodJSONBytes  int     // one pod as the API server returns it (JSON, managedFields included)
	CreateSeconds float64 // creating the nodes and pods
	Results       []SyncResult
	MedianServing float64 // of the gzip starts (the default), as the RSS medians
	MedianRSSKiB  float64
	MedianHWMKiB  float64
	// The disable-compression starts: start to serving, and kube-apiserver's CPU seconds, with
	// the gzip starts' for comparison.
	MedianServingPlain      float64
	MedianAPIServerCPU      float64
	MedianAPIServerCPUPlain float64
	APIServerRSSKB          int64 // kube-apiserver's VmRSS after the pods were created
}

// MeasureSync creates the nodes and the bound pods (scheduler_perf's pod-default: 100m, 500Mi),
// then starts fitledger-server Rounds times in each encoding (gzip, then plain, in each round),
// one after the other, each time measuring start to serving and its memory, and stopping it.
func MeasureSync(t testing.TB, c *cluster.Cluster, o SyncOptions) SyncReport {
	t.Helper()
	if o.Creators == 0 {
		o.Creators = 32
	}
	if o.Log == nil {
		o.Log = t.Logf
	}
	fl.Binary(t, "FITLEDGER_SERVER") // before minutes of creating objects
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: initNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("namespace %s: %v", initNamespace, err)
	}
	began := time.Now()
	names := createNodes(t, c, o.Nodes, o.Creators)
	o.Log("%d nodes created in %v", o.Nodes, time.Since(began).Round(time.Millisecond))
	podsBegan := time.Now()
	parallel(t, o.Pods, o.Creators, func(i int) error {
		p := pod(fmt.Sprintf("init-%d", i), initNamespace)
		p.Spec.NodeName = names[i%len(names)]
		_, err := c.Client.CoreV1().Pods(initNamespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	report := SyncReport{Nodes: o.Nodes, Pods: o.Pods, CreateSeconds: time.Since(began).Seconds()}
	o.Log("%d bound pods created in %v", o.Pods, time.Since(podsBegan).Round(time.Millisecond))
	raw, err := c.Client.CoreV1().RESTClient().Get().Namespace(initNamespace).Resource("pods").
		Name("init-0").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading one pod: %v", err)
	}
	report.PodJSONBytes = len(raw)
	report.APIServerRSSKB = procStatusKiB(c.APIServer.Pid(), "VmRSS:")

	plainKubeconfig := writePlainKubeconfig(t, c)
	for i := 0; i < 2*o.Rounds; i++ {
		round, encoding, kubeconfig := i/2+1, EncodingGzip, c.Kubeconfig
		if i%2 == 1 {
			encoding, kubeconfig = EncodingPlain, plainKubeconfig
		}
		r := startAndMeasure(t, c, round, encoding, kubeconfig)
		o.Log("sync %d (%s): serving %.0f ms after start; VmRSS %d MiB at serving, %d MiB 2 s later; VmHWM %d MiB; CPU s fitledger-server %.2f, kube-apiserver %.2f, etcd %.2f",
			round, encoding, r.ServingMs, r.RSSAtServingKiB/1024, r.RSSKiB/1024, r.HWMKiB/1024, r.ServerCPU, r.APIServerCPU, r.EtcdCPU)
		report.Results = append(report.Results, r)
	}
	var serving, rss, hwm, api, servingPlain, apiPlain []float64
	for _, r := range report.Results {
		if r.Encoding == EncodingPlain {
			servingPlain = append(servingPlain, r.ServingMs)
			apiPlain = append(apiPlain, r.APIServerCPU)
			continue
		}
		serving = append(serving, r.ServingMs)
		rss = append(rss, float64(r.RSSKiB))
		hwm = append(hwm, float64(r.HWMKiB))
		api = append(api, r.APIServerCPU)
	}
	report.MedianServing, report.MedianRSSKiB, report.MedianHWMKiB = median(serving), median(rss), median(hwm)
	report.MedianServingPlain, report.MedianAPIServerCPU, report.MedianAPIServerCPUPlain =
		median(servingPlain), median(api), median(apiPlain)
	return report
}

// writePlainKubeconfig writes a copy of the cluster's kubeconfig whose cluster sets
// disable-compression (client-go's field: the client asks for no gzip).
func writePlainKubeconfig(t testing.TB, c *cluster.Cluster) string {
	t.Helper()
	b, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	const anchor = "\n    server: "
	at := strings.Index(text, anchor)
	if at < 0 {
		t.Fatalf("%s has no cluster server line", c.Kubeconfig)
	}
	text = text[:at] + "\n    disable-compression: true" + text[at:]
	p := c.Path("plain.kubeconfig")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func startAndMeasure(t testing.TB, c *cluster.Cluster, round int, encoding, kubeconfig string) SyncResult {
	t.Helper()
	name := fmt.Sprintf("fitledger-server-sync-%d-%s", round, encoding)
	dir := c.Path(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "server.yaml")
	// The monitor's port is chosen here (retried on a clash), so /readyz can be polled from the
	// first millisecond, without waiting for a ready file.
	for attempt := 1; ; attempt++ {
		port := cluster.FreePort(t)
		config := fmt.Sprintf("kubeconfig: %q\ngrpc:\n  listen: [\"unix://%s\"]\nmonitor: {listen: \"127.0.0.1:%d\"}\n"+
			"webhook: {listen: \"127.0.0.1:0\"}\nlog: {level: warn}\n", kubeconfig, filepath.Join(dir, "server.sock"), port)
		if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		apiBefore, etcdBefore := procCPUSeconds(c.APIServer.Pid()), procCPUSeconds(c.Etcd.Pid())
		start := time.Now()
		p := c.Process(name, fl.Binary(t, "FITLEDGER_SERVER"), []string{"--config", configPath})
		url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
		client := &http.Client{Timeout: time.Second}
		var servingAt time.Time
		for deadline := start.Add(5 * time.Minute); time.Now().Before(deadline) && p.Running(); {
			resp, err := client.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					servingAt = time.Now()
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		if servingAt.IsZero() {
			tail := p.Tail(20)
			p.Stop()
			if strings.Contains(tail, "ddress already in use") && attempt < 5 {
				continue
			}
			t.Fatalf("%s never served; its log ends:\n%s", name, tail)
		}
		r := SyncResult{Round: round, Encoding: encoding, ServingMs: float64(servingAt.Sub(start).Microseconds()) / 1e3}
		r.RSSAtServingKiB = procStatusKiB(p.Pid(), "VmRSS:")
		r.ServerCPU = procCPUSeconds(p.Pid())
		r.APIServerCPU = procCPUSeconds(c.APIServer.Pid()) - apiBefore
		r.EtcdCPU = procCPUSeconds(c.Etcd.Pid()) - etcdBefore
		cluster.WaitFor(t, "two seconds after serving", 10*time.Second, func() bool {
			return time.Since(servingAt) >= 2*time.Second
		})
		r.RSSKiB = procStatusKiB(p.Pid(), "VmRSS:")
		r.HWMKiB = procStatusKiB(p.Pid(), "VmHWM:")
		p.Stop()
		return r
	}
}

// procStatusKiB reads one "Key: N kB" line of /proc/PID/status (0 when absent).
func procStatusKiB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

// procCPUSeconds is a process's user + system CPU time (/proc/PID/stat; 0 when unreadable).
// Assumes the usual 100 clock ticks a second (USER_HZ).
func procCPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: state is the first, utime the 12th.
	text := string(b)
	f := strings.Fields(text[strings.LastIndexByte(text, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// SyncText is the measurement as Markdown.
func SyncText(r SyncReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fitledger-server's initial sync from kube-apiserver v1.37.2 and etcd: %d nodes, %d bound pods "+
		"(%d bytes each as JSON), created in %.0f s; kube-apiserver's VmRSS then %d MiB.\n\n",
		r.Nodes, r.Pods, r.PodJSONBytes, r.CreateSeconds, r.APIServerRSSKB/1024)
	b.WriteString("| round | streams | start -> /readyz 200 ms | VmRSS at serving MiB | VmRSS 2 s later MiB | VmHWM MiB | CPU s to serving: fitledger-server / kube-apiserver / etcd |\n|---|---|---|---|---|---|---|\n")
	rs := append([]SyncResult(nil), r.Results...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Round < rs[j].Round })
	for _, x := range rs {
		fmt.Fprintf(&b, "| %d | %s | %.0f | %d | %d | %d | %.2f / %.2f / %.2f |\n", x.Round, x.Encoding, x.ServingMs, x.RSSAtServingKiB/1024,
			x.RSSKiB/1024, x.HWMKiB/1024, x.ServerCPU, x.APIServerCPU, x.EtcdCPU)
	}
	fmt.Fprintf(&b, "| median | gzip | %.0f | | %.0f | %.0f | kube-apiserver %.2f |\n", r.MedianServing, r.MedianRSSKiB/1024, r.MedianHWMKiB/1024, r.MedianAPIServerCPU)
	fmt.Fprintf(&b, "| median | plain | %.0f | | | | kube-apiserver %.2f |\n", r.MedianServingPlain, r.MedianAPIServerCPUPlain)
	return b.String()
}
