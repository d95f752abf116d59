package main

// The rendered configuration files, loaded and served by the binaries built
// from this repository (when they exist): the strict YAML loaders, the
// validation, the TLS files and the webhook's start are then the binaries'
// own, not this checker's copy of their rules.
//
// Each process gets what its pod would give it, made local: the Secret
// volumes it mounts become directories of generated tls.crt / tls.key /
// ca.crt (the paths in the file are rewritten from the mount path to them),
// a kubeconfig stands in for the ServiceAccount (an API server that refuses
// connections, so the view never syncs), and the listeners move to free
// loopback ports so that runs never collide with anything on the machine.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// checkBinaries runs fitledger-server on the rendered server.yaml, and in
// shim mode fitledger-shim on shim.yaml. Skipped when the binary is absent,
// unless --require-binaries (ctest sets it): then an absent binary fails.
func checkBinaries(c *Checker, e *Env, name func(string) string, r *rendered, w *Want) {
	checkBinary(c, e, name("fitledger-server binary loads server.yaml and serves (webhook, TLS, metrics)"),
		"--server-bin", e.serverBin, "server.yaml", r.serverYAML, func() error { return runServer(e.serverBin, r, w) })
	if w.Webhook != "shim" {
		return
	}
	checkBinary(c, e, name("fitledger-shim binary loads shim.yaml and serves (TLS)"),
		"--shim-bin", e.shimBin, "shim.yaml", r.shimYAML, func() error { return runShim(e.shimBin, r, w) })
}

// checkBinary runs `run` as check `what`, or skips / fails it when `bin` (given by `flag`) or
// the rendered `file` is missing.
func checkBinary(c *Checker, e *Env, what, flag, bin, file, rendered string, run func() error) {
	switch {
	case bin == "":
		c.Skip(what, "no "+flag)
	case !isExecutable(bin) && e.requireBinaries:
		c.Check(what, fmt.Errorf("%s is not built (--require-binaries)", bin))
	case !isExecutable(bin):
		c.Skip(what, bin+" is not built")
	case rendered == "":
		c.Check(what, fmt.Errorf("no %s was rendered", file))
	default:
		c.Check(what, run())
	}
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// unreachableKubeconfig points at a port that refuses connections.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
  - name: none
    cluster: {server: "http://127.0.0.1:1"}
contexts:
  - name: none
    context: {cluster: none, user: none}
users:
  - name: none
    user: {token: none}
current-context: none
`

func runServer(bin string, r *rendered, w *Want) error {
	dir, err := os.MkdirTemp("", "fitledger-chart-server.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	doc, err := localMounts(r.serverYAML, r.containers["fitledger-server"], dir, "grpc-tls", "webhook-tls")
	if err != nil {
		return err
	}
	configPath, kubeconfig := filepath.Join(dir, "server.yaml"), filepath.Join(dir, "kubeconfig")
	readyPath := filepath.Join(dir, "ready.json")
	if err := os.WriteFile(kubeconfig, []byte(unreachableKubeconfig), 0o600); err != nil {
		return err
	}
	args := []string{"--config", configPath, "--kubeconfig", kubeconfig,
		"--grpc-listen", "unix://" + filepath.Join(dir, "server.sock"),
		"--monitor-listen", "127.0.0.1:0", "--ready-file", readyPath}
	inProcess := w.Webhook != "shim"
	if inProcess {
		args = append(args, "--webhook-listen", "127.0.0.1:0")
	}
	if err := os.WriteFile(configPath, []byte(doc), 0o600); err != nil {
		return err
	}
	p, err := startProcess(bin, args)
	if err != nil {
		return err
	}
	defer p.kill()
	raw, err := p.waitForFile(readyPath)
	if err != nil {
		return err
	}
	var ready struct {
		MonitorPort int `json:"monitor_port"`
		WebhookPort int `json:"webhook_port"`
	}
	if err := json.Unmarshal(raw, &ready); err != nil {
		return fmt.Errorf("ready file %q: %v", raw, err)
	}
	if inProcess != (ready.WebhookPort > 0) {
		return fmt.Errorf("webhook port %d in %s mode", ready.WebhookPort, w.Webhook)
	}
	if inProcess {
		if err := probeWebhook(ready.WebhookPort, w.ShimTLS, w.ShimClientAuth); err != nil {
			return fmt.Errorf("fitledger-server's webhook: %v", err)
		}
	}
	// The chart's probes and Prometheus use the monitor, in either mode; the
	// webhook's metrics are there too in server mode.
	metrics, err := probeMonitor("fitledger-server", ready.MonitorPort)
	if err != nil {
		return err
	}
	// In server mode the webhook's metrics are on the server's monitor. (The
	// server declares the families in shim mode too, and counts its monitor's
	// own requests there, as verb healthz, readyz or other.)
	if inProcess && !strings.Contains(metrics, "\n# TYPE fitledger_webhook_requests_total ") {
		return fmt.Errorf("server mode, but the server's /metrics has no fitledger_webhook_requests_total")
	}
	// The monitor's own connection (this scrape) is counted on its listener.
	if !regexp.MustCompile(`(?m)^fitledger_http_open_connections\{listener="monitor"\} [1-9]`).MatchString(metrics) {
		return fmt.Errorf("server /metrics: no fitledger_http_open_connections{listener=\"monitor\"} >= 1")
	}
	for _, gone := range []string{"fitledger_server_unary_connections", "fitledger_shim_"} {
		if strings.Contains(metrics, gone) {
			return fmt.Errorf("server /metrics still has %s (removed with the transport's rewrite)", gone)
		}
	}
	return p.terminate()
}

// probeMonitor checks a binary's monitor listener as the chart's probes and a
// Prometheus scrape use it: /healthz 200, /readyz 503 (the API server is
// unreachable, so never synced), /metrics in the text exposition format with
// one HELP and one TYPE line per metric family and each family's samples
// together (Prometheus' expfmt parser refuses a scrape otherwise). Returns
// the metrics.
func probeMonitor(who string, port int) (string, error) {
	client := newClient(nil)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if _, err := httpGet(client, base+"/healthz", 200); err != nil {
		return "", fmt.Errorf("%s monitor: %v", who, err)
	}
	if _, err := httpGet(client, base+"/readyz", 503); err != nil {
		return "", fmt.Errorf("%s monitor: %v (not synced: not ready)", who, err)
	}
	metrics, err := httpGet(client, base+"/metrics", 200)
	if err != nil {
		return "", fmt.Errorf("%s monitor: %v", who, err)
	}
	if err := checkExposition(metrics); err != nil {
		return "", fmt.Errorf("%s /metrics: %v", who, err)
	}
	return metrics, nil
}

// checkExposition: each metric family has at most one HELP and one TYPE line,
// both before its samples, and its samples (histogram series included) are
// not interleaved with another family's.
func checkExposition(text string) error {
	help, typ, closed, sampled := map[string]bool{}, map[string]string{}, map[string]bool{}, map[string]bool{}
	current := ""
	enter := func(family string) error {
		if family == current {
			return nil
		}
		if closed[family] {
			return fmt.Errorf("metric family %s appears in two places", family)
		}
		if current != "" {
			closed[current] = true
		}
		current = family
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "#" && len(fields) >= 3 && (fields[1] == "HELP" || fields[1] == "TYPE"):
			name := fields[2]
			if err := enter(name); err != nil {
				return fmt.Errorf("line %d: %v", i+1, err)
			}
			if sampled[name] {
				return fmt.Errorf("line %d: %s line for %s after its samples", i+1, fields[1], name)
			}
			if fields[1] == "HELP" {
				if help[name] {
					return fmt.Errorf("line %d: second HELP line for %s", i+1, name)
				}
				help[name] = true
				continue
			}
			if _, dup := typ[name]; dup {
				return fmt.Errorf("line %d: second TYPE line for %s", i+1, name)
			}
			if len(fields) < 4 {
				return fmt.Errorf("line %d: TYPE line without a type", i+1)
			}
			typ[name] = fields[3]
		case fields[0] == "#":
		default:
			name := fields[0]
			if j := strings.IndexByte(name, '{'); j >= 0 {
				name = name[:j]
			}
			family := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(name, suffix); base != name && typ[base] == "histogram" {
					family = base
				}
			}
			if err := enter(family); err != nil {
				return fmt.Errorf("line %d: %v", i+1, err)
			}
			sampled[family] = true
		}
	}
	return nil
}

func runShim(bin string, r *rendered, w *Want) error {
	dir, err := os.MkdirTemp("", "fitledger-chart-shim.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	doc, err := localMounts(r.shimYAML, r.containers["fitledger-shim"], dir, "shim-tls")
	if err != nil {
		return err
	}
	configPath, portPath := filepath.Join(dir, "shim.yaml"), filepath.Join(dir, "port")
	if err := os.WriteFile(configPath, []byte(doc), 0o600); err != nil {
		return err
	}
	p, err := startProcess(bin, []string{"--config", configPath, "--listen", "127.0.0.1:0",
		"--monitor-listen", "127.0.0.1:0", "--server", "unix://" + filepath.Join(dir, "no-server.sock"),
		"--port-file", portPath})
	if err != nil {
		return err
	}
	defer p.kill()
	raw, err := p.waitForFile(portPath)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("port file %q: %v", raw, err)
	}
	if err := probeWebhook(port, w.ShimTLS, w.ShimClientAuth); err != nil {
		return fmt.Errorf("fitledger-shim: %v", err)
	}
	monitorPort, err := p.shimMonitorPort()
	if err != nil {
		return err
	}
	metrics, err := probeMonitor("fitledger-shim", monitorPort)
	if err != nil {
		return err
	}
	if !strings.Contains(metrics, "\n# TYPE fitledger_webhook_requests_total ") {
		return fmt.Errorf("shim /metrics has no fitledger_webhook_requests_total")
	}
	return p.terminate()
}

// shimMonitorPort reads the monitor's port from fitledger-shim's "serving"
// log record ({"msg":"fitledger-shim serving",...,"monitor":"HOST:PORT (port
// N)"}), which it writes right after its port file; waits up to 10 s.
func (p *process) shimMonitorPort() (int, error) {
	re := regexp.MustCompile(`\(port ([0-9]+)\)`)
	deadline := time.After(10 * time.Second)
	for {
		for _, line := range p.out.lines() {
			var rec struct{ Msg, Monitor string }
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "fitledger-shim serving" {
				continue
			}
			m := re.FindStringSubmatch(rec.Monitor)
			if m == nil {
				return 0, fmt.Errorf("fitledger-shim serves no monitor (%q)", rec.Monitor)
			}
			return strconv.Atoi(m[1])
		}
		select {
		case <-p.done:
			return 0, fmt.Errorf("fitledger-shim exited (%v): %s", p.err, p.out.tail())
		case <-deadline:
			return 0, fmt.Errorf("fitledger-shim logged no \"fitledger-shim serving\" record within 10 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// probeWebhook: /healthz answers (over TLS with a client certificate when the
// chart configures them), /readyz reports the unsynced server, and with client
// authentication a client without a certificate gets no answer.
func probeWebhook(port int, withTLS, clientAuth bool) error {
	scheme := "http"
	client := newClient(nil)
	var noCert *http.Client
	if withTLS {
		ca, err := testPKI()
		if err != nil {
			return err
		}
		scheme = "https"
		cfg := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
		noCert = newClient(cfg.Clone())
		if clientAuth {
			cfg.Certificates = []tls.Certificate{ca.client}
		}
		client = newClient(cfg)
	}
	base := fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
	if _, err := httpGet(client, base+"/healthz", 200); err != nil {
		return err
	}
	if _, err := httpGet(client, base+"/readyz", 503); err != nil {
		return fmt.Errorf("%v (the API server is unreachable: not ready)", err)
	}
	if clientAuth {
		if body, err := httpGet(noCert, base+"/healthz", 200); err == nil {
			return fmt.Errorf("answered %q to a client without a certificate", body)
		}
	}
	return nil
}

// newClient makes one request per connection: an idle keep-alive connection
// would hold the server's shutdown for its idle timeout.
func newClient(cfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

func httpGet(client *http.Client, url string, wantStatus int) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		return string(body), fmt.Errorf("GET %s: %d %q, want %d", url, resp.StatusCode, strings.TrimSpace(string(body)), wantStatus)
	}
	return string(body), nil
}

// localMounts makes the Secret volumes a container mounts local: each becomes
// dir/<volume> holding tls.crt, tls.key and ca.crt, and paths under the mount
// in doc are rewritten to it.
func localMounts(doc string, c map[string]interface{}, dir string, vols ...string) (string, error) {
	for _, vol := range vols {
		mp, ok := mount(c, vol)
		if !ok {
			continue
		}
		ca, err := testPKI()
		if err != nil {
			return "", err
		}
		local := filepath.Join(dir, vol)
		if err := os.Mkdir(local, 0o700); err != nil {
			return "", err
		}
		for name, content := range map[string][]byte{"tls.crt": ca.serverCert, "tls.key": ca.serverKey, "ca.crt": ca.caCert} {
			if err := os.WriteFile(filepath.Join(local, name), content, 0o600); err != nil {
				return "", err
			}
		}
		doc = strings.ReplaceAll(doc, mp+"/", local+"/")
	}
	return doc, nil
}

// pki is one CA with a server certificate for 127.0.0.1 and a client
// certificate: the content of the kubernetes.io/tls Secrets the chart mounts.
type pki struct {
	caCert, serverCert, serverKey []byte // PEM
	pool                          *x509.CertPool
	client                        tls.Certificate
}

var (
	pkiOnce sync.Once
	pkiVal  *pki
	pkiErr  error
)

func testPKI() (*pki, error) {
	pkiOnce.Do(func() { pkiVal, pkiErr = newPKI() })
	return pkiVal, pkiErr
}

func newPKI() (*pki, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fitledger chart test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		t := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		pk, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), nil
	}
	p := &pki{caCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	if p.serverCert, p.serverKey, err = leaf(2, "fitledger webhook", x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	clientCert, clientKey, err := leaf(3, "kube-scheduler", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if p.client, err = tls.X509KeyPair(clientCert, clientKey); err != nil {
		return nil, err
	}
	return p, nil
}

// process is a started binary whose output is kept for error messages.
type process struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // valid once done is closed
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.b.String()), "\n")
}

// tail returns the last lines of the output that say why a binary stopped:
// plain "NAME: message" lines (fitledger-server's fatal errors) and the
// message and error of JSON log records at level error (fitledger-shim's);
// other JSON log records are left out.
func (s *syncBuffer) tail() string {
	var plain []string
	for _, l := range s.lines() {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, "{") {
			plain = append(plain, l)
			continue
		}
		var rec struct{ Level, Msg, Error string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Level == "error" {
			plain = append(plain, strings.TrimSuffix(rec.Msg+": "+rec.Error, ": "))
		}
	}
	if len(plain) > 3 {
		plain = plain[len(plain)-3:]
	}
	return strings.Join(plain, " | ")
}

func startProcess(bin string, args []string) (*process, error) {
	p := &process{cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitForFile returns the content of the file the process writes once it
// serves; an error if it exits first or takes over 10 s.
func (p *process) waitForFile(path string) ([]byte, error) {
	deadline := time.After(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited (%v) before serving: %s", filepath.Base(p.cmd.Path), p.err, p.out.tail())
		case <-deadline:
			return nil, fmt.Errorf("%s did not serve within 10 s: %s", filepath.Base(p.cmd.Path), p.out.tail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// terminate sends SIGTERM and expects exit status 0 within 15 s.
func (p *process) terminate() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s after SIGTERM: %v: %s", filepath.Base(p.cmd.Path), p.err, p.out.tail())
		}
		return nil
	case <-time.After(15 * time.Second):
		return fmt.Errorf("%s did not exit within 15 s of SIGTERM", filepath.Base(p.cmd.Path))
	}
}

// kill stops the process if it still runs (after a failed check).
func (p *process) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
