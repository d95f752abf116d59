// Package fl starts fitledger's own programs (fitledger-server, fitledger-shim) and the real
// kube-scheduler beside a cluster.Cluster, as processes. The paths of fitledger's binaries come
// from FITLEDGER_SERVER, FITLEDGER_SHIM and FITLEDGER_CTL (CMake sets them for ctest).
package fl

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"fitledger.test/upstream/suite/cluster"
)

// Binary returns the path of one of fitledger's programs from its environment variable.
func Binary(t testing.TB, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set (ctest sets it; by hand: export %s=build/<path>)", env, env)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s=%s: %v", env, p, err)
	}
	return p
}

// Server is a running fitledger-server.
type Server struct {
	Proc        *cluster.Proc
	Dir         string
	WebhookURL  string // http://127.0.0.1:<port>/ (empty when the webhook is off)
	MonitorURL  string
	GRPCAddress string // 127.0.0.1:<port>
	Socket      string // the Unix socket's path
}

// ServerOptions adjusts fitledger-server's configuration.
type ServerOptions struct {
	Name       string // process name in logs (default fitledger-server)
	Kubeconfig string
	NoWebhook  bool
	// Ledger is the YAML of the config's ledger: block without the key (default: enabled).
	Ledger string
	// Extra is appended to the config file as is.
	Extra string
	Args  []string
	// BinaryEnv names the environment variable holding the binary (default FITLEDGER_SERVER).
	BinaryEnv string
}

// StartServer runs fitledger-server with a config file, waits for its ready file and /readyz.
func StartServer(t testing.TB, c *cluster.Cluster, o ServerOptions) *Server {
	t.Helper()
	if o.Name == "" {
		o.Name = "fitledger-server"
	}
	dir := c.Path(o.Name)
	os.MkdirAll(dir, 0o700)
	s := &Server{Dir: dir, Socket: filepath.Join(dir, "server.sock")}
	webhook := `webhook: {listen: "127.0.0.1:0"}`
	if o.NoWebhook {
		webhook = ""
	}
	ledger := o.Ledger
	if ledger == "" {
		ledger = "  enabled: true\n"
	}
	config := fmt.Sprintf(`kubeconfig: %q
grpc:
  listen: ["unix://%s", "127.0.0.1:0"]
monitor: {listen: "127.0.0.1:0"}
%s
ledger:
%s
log: {level: info}
%s
`, o.Kubeconfig, s.Socket, webhook, ledger, o.Extra)
	env := o.BinaryEnv
	if env == "" {
		env = "FITLEDGER_SERVER"
	}
	return startServer(t, c, o.Name, dir, config, o.Args, env)
}

// StartServerWithConfig runs fitledger-server with a configuration given as a YAML tree (the
// chart's server.yaml, adjusted).
func StartServerWithConfig(t testing.TB, c *cluster.Cluster, name string, config map[string]interface{}) *Server {
	t.Helper()
	dir := c.Path(name)
	os.MkdirAll(dir, 0o700)
	text, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, c, name, dir, string(text), nil, "FITLEDGER_SERVER")
}

func startServer(t testing.TB, c *cluster.Cluster, name, dir, config string, extraArgs []string, binaryEnv string) *Server {
	t.Helper()
	s := &Server{Dir: dir, Socket: filepath.Join(dir, "server.sock")}
	configPath := filepath.Join(dir, "server.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(dir, "ready.json")
	args := append([]string{"--config", configPath, "--ready-file", ready}, extraArgs...)
	s.Proc = c.Process(name, Binary(t, binaryEnv), args)
	var ports struct {
		GRPC    []int `json:"grpc_ports"`
		Monitor int   `json:"monitor_port"`
		Webhook int   `json:"webhook_port"`
	}
	cluster.WaitFor(t, name+"'s ready file", 60*time.Second, func() bool {
		if !s.Proc.Running() {
			t.Fatalf("%s exited; its log ends:\n%s", name, s.Proc.Tail(30))
		}
		b, err := os.ReadFile(ready)
		return err == nil && json.Unmarshal(b, &ports) == nil
	})
	if len(ports.GRPC) > 0 {
		s.GRPCAddress = fmt.Sprintf("127.0.0.1:%d", ports.GRPC[0])
	}
	s.MonitorURL = fmt.Sprintf("http://127.0.0.1:%d", ports.Monitor)
	if ports.Webhook > 0 {
		s.WebhookURL = fmt.Sprintf("http://127.0.0.1:%d/", ports.Webhook)
	}
	cluster.WaitFor(t, name+"'s /readyz", 60*time.Second, func() bool {
		resp, err := http.Get(s.MonitorURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return s
}

// Metric returns the value of one metric line (name with its labels, as printed) from /metrics,
// or -1 when absent.
func (s *Server) Metric(t testing.TB, name string) float64 {
	resp, err := http.Get(s.MonitorURL + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64*1024)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, name+" ") {
			var v float64
			fmt.Sscanf(strings.TrimPrefix(line, name+" "), "%g", &v)
			return v
		}
	}
	return -1
}

// StartShim runs fitledger-shim in front of server's Unix socket; returns its webhook URL.
func StartShim(t testing.TB, c *cluster.Cluster, s *Server) string {
	t.Helper()
	url, _ := StartShimProc(t, c, s)
	return url
}

// StartShimProc is StartShim, also returning the shim's process.
func StartShimProc(t testing.TB, c *cluster.Cluster, s *Server) (string, *cluster.Proc) {
	t.Helper()
	portFile := filepath.Join(s.Dir, "shim.port")
	p := c.Process("fitledger-shim", Binary(t, "FITLEDGER_SHIM"),
		[]string{"--listen", "127.0.0.1:0", "--server", "unix://" + s.Socket, "--port-file", portFile})
	var port int
	cluster.WaitFor(t, "fitledger-shim's port file", 30*time.Second, func() bool {
		if !p.Running() {
			t.Fatalf("fitledger-shim exited; its log ends:\n%s", p.Tail(30))
		}
		b, err := os.ReadFile(portFile)
		return err == nil && func() bool { _, e := fmt.Sscanf(string(b), "%d", &port); return e == nil }()
	})
	return fmt.Sprintf("http://127.0.0.1:%d/", port), p
}

// Extender is one extenders: entry of a KubeSchedulerConfiguration.
type Extender struct {
	URL              string
	Bind             bool
	Preempt          bool
	ManagedResources []string // each with ignoredByScheduler: true
	// ProfileIgnores: NodeResourcesFit's ignoredResources in every profile. Unlike
	// ManagedResources, kube-scheduler then still calls the extender for every pod (an extender
	// with managedResources is asked only about pods that request one of them).
	ProfileIgnores []string
	// FilterOnly: no prioritizeVerb (an extender that only filters, as tests/perf/go-baseline).
	FilterOnly bool
	// Weight: the prioritize verb's weight (0: 1). kube-scheduler adds each listed node's
	// score x Weight x 10 (MaxNodeScore / MaxExtenderPriority) to its own plugins' sum.
	Weight int
}

// SchedulerConfig is a KubeSchedulerConfiguration: one profile per name, no leader election,
// backoff of one second,
// with ext (nil: kube-scheduler on its own).
func SchedulerConfig(names []string, ext *Extender) string {
	var b strings.Builder
	b.WriteString("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
	b.WriteString("leaderElection: {leaderElect: false}\n")
	b.WriteString("clientConnection: {qps: 1000, burst: 2000}\n")
	// A pod whose bind failed is retried after a second, not up to ten: the tests wait for a
	// settled state, and a settled state is one that held longer than the longest backoff.
	b.WriteString("podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 1\n")
	b.WriteString("profiles:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - schedulerName: %q\n", n)
		if ext != nil && len(ext.ProfileIgnores) > 0 {
			fmt.Fprintf(&b, "    pluginConfig:\n      - name: NodeResourcesFit\n        args: {ignoredResources: [%q]}\n", strings.Join(ext.ProfileIgnores, `", "`))
		}
	}
	if ext != nil {
		fmt.Fprintf(&b, "extenders:\n  - urlPrefix: %q\n    filterVerb: filter\n", ext.URL)
		if !ext.FilterOnly {
			weight := ext.Weight
			if weight == 0 {
				weight = 1
			}
			fmt.Fprintf(&b, "    prioritizeVerb: prioritize\n    weight: %d\n", weight)
		}
		if ext.Bind {
			b.WriteString("    bindVerb: bind\n")
		}
		if ext.Preempt {
			b.WriteString("    preemptVerb: preempt\n")
		}
		b.WriteString("    nodeCacheCapable: true\n    httpTimeout: 5s\n    ignorable: false\n")
		if len(ext.ManagedResources) > 0 {
			b.WriteString("    managedResources:\n")
			for _, r := range ext.ManagedResources {
				fmt.Fprintf(&b, "      - {name: %q, ignoredByScheduler: true}\n", r)
			}
		}
	}
	return b.String()
}

// StartScheduler runs the real kube-scheduler with config (a KubeSchedulerConfiguration in YAML)
// against kubeconfig (a clientConnection.kubeconfig line is added); waits for its /readyz.
func StartScheduler(t testing.TB, c *cluster.Cluster, name, config, kubeconfig string) *cluster.Proc {
	t.Helper()
	p, _ := StartSchedulerWithPort(t, c, name, config, kubeconfig)
	return p
}

// StartSchedulerWithPort is StartScheduler, also returning the port of kube-scheduler's HTTPS
// endpoint (/metrics, /readyz; a self-signed certificate: InsecureClient reads it).
func StartSchedulerWithPort(t testing.TB, c *cluster.Cluster, name, config, kubeconfig string) (*cluster.Proc, int) {
	t.Helper()
	dir := c.Path(name)
	os.MkdirAll(dir, 0o700)
	if strings.Contains(config, "clientConnection:") {
		config = strings.Replace(config, "clientConnection: {", fmt.Sprintf("clientConnection: {kubeconfig: %q, ", kubeconfig), 1)
	} else {
		config += fmt.Sprintf("clientConnection: {kubeconfig: %q}\n", kubeconfig)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	port := cluster.FreePort(t)
	p := c.Process(name, cluster.Bin(t, "kube-scheduler"),
		[]string{"--config", path, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
			"--authentication-skip-lookup=true", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
			"--v=2"})
	client := InsecureClient()
	cluster.WaitFor(t, name+"'s /readyz", 60*time.Second, func() bool {
		if !p.Running() {
			t.Fatalf("%s exited; its log ends:\n%s", name, p.Tail(40))
		}
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p, port
}

// InsecureClient reads kube-scheduler's /readyz and /metrics: its serving certificate is
// self-signed, made at start; loopback only.
func InsecureClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}
