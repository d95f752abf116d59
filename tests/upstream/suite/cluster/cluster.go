// Package cluster runs a local Kubernetes control plane from the upstream binaries that
// tests/upstream/build made: etcd, kube-apiserver (secure port, generated certificates,
// service-account keys, RBAC, a token file) and kube-controller-manager, each a process on free
// loopback ports. Its folder (certificates, data, logs) is removed when the test passes and kept,
// with the end of each log printed, when it fails.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Bin is the folder of the upstream binaries (FITLEDGER_UPSTREAM_BIN, the last line
// tests/upstream/build prints).
func Bin(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("FITLEDGER_UPSTREAM_BIN")
	if dir == "" {
		t.Fatalf("FITLEDGER_UPSTREAM_BIN is not set: run tests/upstream/build and export its last line")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("upstream binary %s: %v (run tests/upstream/build)", name, err)
	}
	return p
}

// Proc is one process of the control plane (or any process a test starts), its output in a log.
type Proc struct {
	Name string
	Path string
	Args []string
	Env  []string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs the process; its stdout and stderr are appended to p.Log.
func (p *Proc) Start() error {
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), p.Path, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	return nil
}

// Pid is the process's id (0 before Start).
func (p *Proc) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM, then SIGKILL after 10 s, and waits for the exit.
func (p *Proc) Stop() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// Kill stops the process at once (SIGKILL), as a crash would.
func (p *Proc) Kill() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreePort returns a loopback port nobody listens on at the moment of the call. A process given it
// may still lose a race for it; the callers retry a failed start on new ports.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Cluster is a running control plane.
type Cluster struct {
	t          testing.TB
	Dir        string
	APIURL     string // https://127.0.0.1:<port>
	Token      string // the admin's bearer token (system:masters)
	CAFile     string
	CAPEM      []byte
	Kubeconfig string // the admin's kubeconfig (token, CA)
	Config     *rest.Config
	Client     *kubernetes.Clientset

	Etcd, APIServer, ControllerManager *Proc
	Extra                              []*Proc // processes a test started with c.Process
	etcdURL                            string
	saKey                              string
	apiServerExtra                     []string
}

// Options adjusts the control plane.
type Options struct {
	NoControllerManager bool
	// NoControlPlane: only the folder and the process bookkeeping (for tests of fitledger-sim).
	NoControlPlane bool
	// APIServerArgs are appended to kube-apiserver's flags.
	APIServerArgs []string
}

// Start brings up etcd, kube-apiserver and kube-controller-manager and waits until the API
// answers /readyz and the "default" namespace has its ServiceAccount.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	begin := time.Now()
	dir, err := os.MkdirTemp("", "fitledger-upstream-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, Dir: dir, Token: randomToken(), apiServerExtra: opts.APIServerArgs}
	t.Cleanup(c.cleanup)
	for _, d := range []string{"logs", "pki", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if opts.NoControlPlane {
		return c
	}
	c.writePKI()
	c.startEtcd()
	c.startAPIServer()
	c.Kubeconfig = c.WriteKubeconfig("admin.kubeconfig", c.APIURL, c.Token)
	c.Config = c.RESTConfig(c.APIURL, c.Token)
	c.Client = kubernetes.NewForConfigOrDie(c.Config)
	if !opts.NoControllerManager {
		c.startControllerManager()
		c.WaitServiceAccount("default", "default")
	}
	t.Logf("control plane up in %v: %s (folder %s)", time.Since(begin).Round(time.Millisecond), c.APIURL, dir)
	return c
}

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.Dir}, parts...)...)
}

func (c *Cluster) cleanup() {
	all := append([]*Proc{c.Etcd, c.APIServer, c.ControllerManager}, c.Extra...)
	if c.t.Failed() {
		c.t.Logf("the test failed: the control plane's folder is kept: %s", c.Dir)
		for _, p := range all {
			if p != nil {
				c.t.Logf("--- the end of %s (%s):\n%s", p.Name, p.Log, p.Tail(25))
			}
		}
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i] != nil {
			all[i].Stop()
		}
	}
	if !c.t.Failed() {
		os.RemoveAll(c.Dir)
	}
}

func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func writePEM(path, kind string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		panic(err)
	}
}

// writePKI makes a CA, the API server's serving certificate (127.0.0.1, localhost and the
// kubernetes Service's names), and the service-account signing key.
func (c *Cluster) writePKI() {
	caKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fitledger-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	c.CAFile = c.path("pki", "ca.crt")
	writePEM(c.CAFile, "CERTIFICATE", caDER)
	c.CAPEM, _ = os.ReadFile(c.CAFile)
	writePEM(c.path("pki", "ca.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caKey))

	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	writePEM(c.path("pki", "apiserver.crt"), "CERTIFICATE", der)
	writePEM(c.path("pki", "apiserver.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))

	saKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	c.saKey = c.path("pki", "sa.key")
	writePEM(c.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))
	pub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	writePEM(c.path("pki", "sa.pub"), "PUBLIC KEY", pub)

	tokens := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n", c.Token)
	if err := os.WriteFile(c.path("pki", "tokens.csv"), []byte(tokens), 0o600); err != nil {
		panic(err)
	}
}

// startWithRetry starts a process whose ports argsFor picks, and retries (new ports) when it
// exits before ready() holds: another process may have taken a port between FreePort and bind.
func (c *Cluster) startWithRetry(name string, binary string, argsFor func() []string, ready func() bool, deadline time.Duration) *Proc {
	for attempt := 1; attempt <= 3; attempt++ {
		p := &Proc{Name: name, Path: binary, Args: argsFor(), Log: c.path("logs", name+".log")}
		if err := p.Start(); err != nil {
			c.t.Fatal(err)
		}
		end := time.Now().Add(deadline)
		for time.Now().Before(end) && p.Running() {
			if ready() {
				return p
			}
			time.Sleep(50 * time.Millisecond)
		}
		if p.Running() {
			p.Stop()
			c.t.Fatalf("%s not ready within %v; its log ends:\n%s", name, deadline, p.Tail(40))
		}
		if !strings.Contains(p.Tail(30), "address already in use") {
			c.t.Fatalf("%s exited while starting; its log ends:\n%s", name, p.Tail(30))
		}
		c.t.Logf("%s lost its port to another process (attempt %d); again on new ports", name, attempt)
	}
	c.t.Fatalf("%s did not start in 3 attempts (log %s)", name, c.path("logs", name+".log"))
	return nil
}

func (c *Cluster) startEtcd() {
	var url string
	binary := Bin(c.t, "etcd")
	args := func() []string {
		url = fmt.Sprintf("http://127.0.0.1:%d", FreePort(c.t))
		return []string{"--name=fitledger-test", "--data-dir=" + c.path("etcd"),
			"--listen-client-urls=" + url, "--advertise-client-urls=" + url,
			"--listen-peer-urls=http://localhost:0", "--unsafe-no-fsync=true",
			"--log-level=warn"}
	}
	ready := func() bool {
		resp, err := http.Get(url + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	c.Etcd = c.startWithRetry("etcd", binary, args, ready, 30*time.Second)
	c.etcdURL = url
}

// RestartEtcd stops etcd and starts it again on the same port and data (for fault tests).
func (c *Cluster) RestartEtcd() {
	c.Etcd.Stop()
	if err := c.Etcd.Start(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Cluster) apiServerArgs(port int) []string {
	return append([]string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--advertise-address=127.0.0.1",
		// The kubernetes Service's endpoints would be 127.0.0.1, which the reconciler refuses
		// ("may not be in the loopback range"); nothing here reaches the API through that Service.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + c.path("pki", "apiserver.crt"),
		"--tls-private-key-file=" + c.path("pki", "apiserver.key"),
		"--client-ca-file=" + c.CAFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.path("pki", "sa.pub"),
		"--service-account-signing-key-file=" + c.saKey,
		"--authorization-mode=RBAC",
		"--token-auth-file=" + c.path("pki", "tokens.csv"),
		"--allow-privileged=true",
		"--v=1",
	}, c.apiServerExtra...)
}

func (c *Cluster) apiReady() bool {
	if c.APIURL == "" {
		return false
	}
	req, _ := http.NewRequest("GET", c.APIURL+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func (c *Cluster) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAPEM)
	return &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func (c *Cluster) startAPIServer() {
	binary := Bin(c.t, "kube-apiserver")
	args := func() []string {
		port := FreePort(c.t)
		c.APIURL = fmt.Sprintf("https://127.0.0.1:%d", port)
		return c.apiServerArgs(port)
	}
	c.APIServer = c.startWithRetry("kube-apiserver", binary, args, c.apiReady, 60*time.Second)
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port, and waits for
// /readyz (for fault tests).
func (c *Cluster) RestartAPIServer() {
	c.APIServer.Stop()
	if err := c.APIServer.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.WaitFor("kube-apiserver ready again", 60*time.Second, c.apiReady)
}

func (c *Cluster) startControllerManager() {
	kubeconfig := c.WriteKubeconfig("controller-manager.kubeconfig", c.APIURL, c.Token)
	p := &Proc{Name: "kube-controller-manager", Path: Bin(c.t, "kube-controller-manager"),
		Log: c.path("logs", "kube-controller-manager.log"),
		Args: []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false",
			"--bind-address=127.0.0.1", "--secure-port=0",
			"--service-account-private-key-file=" + c.saKey, "--root-ca-file=" + c.CAFile,
			"--use-service-account-credentials=false",
			"--node-monitor-period=1s", "--v=1"}}
	if err := p.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.ControllerManager = p
}

// WaitServiceAccount waits until the ServiceAccount exists (kube-controller-manager makes
// "default" in each namespace; the ServiceAccount admission plugin refuses pods until then).
func (c *Cluster) WaitServiceAccount(namespace, name string) {
	c.WaitFor("ServiceAccount "+namespace+"/"+name, 60*time.Second, func() bool {
		_, err := c.Client.CoreV1().ServiceAccounts(namespace).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	})
}

// Namespace creates a namespace and waits for its default ServiceAccount.
func (c *Cluster) Namespace(name string) {
	_, err := c.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.t.Fatalf("namespace %s: %v", name, err)
	}
	c.WaitServiceAccount(name, "default")
}

// WaitFor polls cond every 50 ms until it holds; fails the test after deadline.
func (c *Cluster) WaitFor(what string, deadline time.Duration, cond func() bool) {
	c.t.Helper()
	WaitFor(c.t, what, deadline, cond)
}

// WaitFor polls cond every 50 ms until it holds; fails the test after deadline.
func WaitFor(t testing.TB, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", deadline, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RESTConfig is a client configuration for server (the API server, or a proxy in front of it)
// with a bearer token. An http:// server gets no TLS.
func (c *Cluster) RESTConfig(server, token string) *rest.Config {
	cfg := &rest.Config{Host: server, BearerToken: token, QPS: 1000, Burst: 2000}
	if strings.HasPrefix(server, "https://") {
		cfg.TLSClientConfig = rest.TLSClientConfig{CAData: c.CAPEM}
	}
	return cfg
}

// WriteKubeconfig writes a kubeconfig for server and token into the cluster's folder.
func (c *Cluster) WriteKubeconfig(name, server, token string) string {
	p := c.path(name)
	tlsLine := ""
	if strings.HasPrefix(server, "https://") {
		tlsLine = "\n    certificate-authority: " + c.CAFile
	}
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s%s
users:
- name: user
  user:
    token: %s
contexts:
- name: local
  context: {cluster: local, user: user, namespace: default}
current-context: local
`, server, tlsLine, token)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// Process starts a process the test needs beside the control plane (kube-scheduler, fitledger),
// logged into the cluster's folder and stopped at the end of the test.
func (c *Cluster) Process(name, binary string, args []string, env ...string) *Proc {
	p := &Proc{Name: name, Path: binary, Args: args, Env: env, Log: c.path("logs", name+".log")}
	if err := p.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.Extra = append(c.Extra, p)
	return p
}

// Path returns a path inside the cluster's folder.
func (c *Cluster) Path(name string) string { return c.path(name) }

// Port returns the port of a URL such as https://127.0.0.1:1234.
func Port(url string) int {
	i := strings.LastIndex(url, ":")
	p, _ := strconv.Atoi(strings.TrimRight(url[i+1:], "/"))
	return p
}
