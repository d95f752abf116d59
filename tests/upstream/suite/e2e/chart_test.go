package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"fitledger.test/upstream/suite/cluster"
	"fitledger.test/upstream/suite/fl"
)

func chartDir(t *testing.T) string {
	src := os.Getenv("FITLEDGER_SOURCE_DIR")
	if src == "" {
		t.Fatal("FITLEDGER_SOURCE_DIR is not set (ctest sets it)")
	}
	return filepath.Join(src, "charts", "fitledger")
}

// imageValues: fitledger's image is in no public registry, so the chart needs image.repository
// (tests/charts/values/image.yaml names one; nothing here pulls it).
func imageValues(t *testing.T) string {
	return filepath.Join(filepath.Dir(filepath.Dir(chartDir(t))), "tests", "charts", "values", "image.yaml")
}

func helm(t *testing.T, args ...string) (string, error) {
	cmd := exec.Command(cluster.Bin(t, "helm"), args...)
	home := t.TempDir()
	// helm keeps its cache, config and data under these; nothing is fetched.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The chart through the real helm: lint, template for every Kubernetes minor the chart knows, and
// each minor's kube-scheduler tag the chart picks.
func TestChartHelmLintAndTemplate(t *testing.T) {
	dir := chartDir(t)
	if out, err := helm(t, "lint", "--strict", dir); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	helpers, err := os.ReadFile(filepath.Join(dir, "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	releases := regexp.MustCompile(`(?m)^"1\.(\d+)": (v1\.\d+\.\d+)$`).FindAllStringSubmatch(string(helpers), -1)
	if len(releases) < 6 {
		t.Fatalf("found %d kube-scheduler releases in _helpers.tpl, want the chart's list", len(releases))
	}
	for _, r := range releases {
		kube := fmt.Sprintf("v1.%s.0", r[1])
		out, err := helm(t, "template", "fitledger", dir, "-n", "fitledger", "--kube-version", kube, "-f", imageValues(t))
		if err != nil {
			t.Errorf("helm template --kube-version %s: %v\n%s", kube, err, out)
			continue
		}
		if !strings.Contains(out, "registry.k8s.io/kube-scheduler:"+r[2]) {
			t.Errorf("helm template --kube-version %s: kube-scheduler is not %s", kube, r[2])
		}
	}
}

// helm install into the real API server; then the real kube-scheduler runs with the
// KubeSchedulerConfiguration of the installed release's ConfigMap and a token of the chart's
// ServiceAccount, and fitledger-server with the release's server.yaml and the same account: both
// start, a pod with the chart's scheduler name goes Running through them, and neither log shows
// a 403 (the chart's RBAC is enough).
func TestChartInstallRunsWithItsRBAC(t *testing.T) {
	tc := startCluster(t, standardNodes(2, "4", 0))
	out, err := helm(t, "install", "fitledger", chartDir(t), "-n", "fitledger", "--create-namespace",
		"--kubeconfig", tc.Kubeconfig, "--set", "replicaCount=1",
		"-f", imageValues(t))
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	ns := "fitledger"
	cms := tc.Client.CoreV1().ConfigMaps(ns)
	schedCM, err := cms.Get(tc.ctx, "fitledger-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's scheduler ConfigMap: %v", err)
	}
	serverCM, err := cms.Get(tc.ctx, "fitledger", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's ConfigMap: %v", err)
	}
	dep, err := tc.Client.AppsV1().Deployments(ns).Get(tc.ctx, "fitledger", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := dep.Spec.Template.Spec.ServiceAccountName
	tc.WaitServiceAccount(ns, sa)
	tr, err := tc.Client.CoreV1().ServiceAccounts(ns).CreateToken(tc.ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	saKubeconfig := tc.WriteKubeconfig("chart-sa.kubeconfig", tc.APIURL, tr.Status.Token)

	// The check below reads "forbidden" in the logs: first, that a refusal is logged so. The
	// namespace's default ServiceAccount has no RBAC at all.
	bare, err := tc.Client.CoreV1().ServiceAccounts(ns).CreateToken(tc.ctx, "default", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for default: %v", err)
	}
	bareDir := tc.Path("fitledger-server-no-rbac")
	os.MkdirAll(bareDir, 0o700)
	bareConfig := filepath.Join(bareDir, "server.yaml")
	os.WriteFile(bareConfig, []byte(fmt.Sprintf("kubeconfig: %q\ngrpc: {listen: [\"unix://%s/s.sock\"]}\n",
		tc.WriteKubeconfig("no-rbac.kubeconfig", tc.APIURL, bare.Status.Token), bareDir)), 0o600)
	bareProc := tc.Process("fitledger-server-no-rbac", fl.Binary(t, "FITLEDGER_SERVER"), []string{"--config", bareConfig})
	tc.WaitFor("fitledger-server without RBAC to log the API's refusal", 60*time.Second, func() bool {
		log, _ := os.ReadFile(bareProc.Log)
		return strings.Contains(strings.ToLower(string(log)), "forbidden")
	})
	bareProc.Stop()

	// fitledger-server with the release's server.yaml: only the addresses change (a pod's paths
	// and ports are a process's here) and the kubeconfig is the account's.
	var server map[string]interface{}
	if err := yaml.Unmarshal([]byte(serverCM.Data["server.yaml"]), &server); err != nil {
		t.Fatalf("server.yaml: %v", err)
	}
	dir := tc.Path("fitledger-server-chart")
	os.MkdirAll(dir, 0o700)
	server["kubeconfig"] = saKubeconfig
	server["grpc"].(map[string]interface{})["listen"] = []string{"unix://" + filepath.Join(dir, "server.sock"), "127.0.0.1:0"}
	server["monitor"] = map[string]interface{}{"listen": "127.0.0.1:0"}
	server["webhook"].(map[string]interface{})["listen"] = "127.0.0.1:0"
	srv := fl.StartServerWithConfig(t, tc.Cluster, "fitledger-server-chart", server)

	var sched map[string]interface{}
	if err := yaml.Unmarshal([]byte(schedCM.Data["config.yaml"]), &sched); err != nil {
		t.Fatalf("the scheduler's config.yaml: %v", err)
	}
	exts := sched["extenders"].([]interface{})
	exts[0].(map[string]interface{})["urlPrefix"] = srv.WebhookURL
	config, _ := yaml.Marshal(sched)
	schedProc := fl.StartScheduler(t, tc.Cluster, "kube-scheduler-chart", string(config), saKubeconfig)

	name := sched["profiles"].([]interface{})[0].(map[string]interface{})["schedulerName"].(string)
	tc.createPods(t, []*corev1.Pod{makePod(podSpec{name: "through-the-chart", scheduler: name, cpu: "100m"})})
	tc.WaitFor("the pod Running through the chart's scheduler", 90*time.Second, func() bool {
		return tc.count(t).Running == 1
	})
	if got := metricSum(t, srv.MonitorURL, "fitledger_bind_outcomes_total", `reason="bound"`); got != 1 {
		t.Errorf("fitledger bound %v pods, want 1", got)
	}
	for _, p := range []*cluster.Proc{srv.Proc, schedProc} {
		log, _ := os.ReadFile(p.Log)
		for _, line := range strings.Split(string(log), "\n") {
			// The API's refusal reads "... is forbidden: User ..." (reason Forbidden, code 403)
			// in either program's log.
			if strings.Contains(strings.ToLower(line), "forbidden") || strings.Contains(line, `"code":403`) {
				t.Errorf("%s was refused by the API (the chart's RBAC is short): %s", p.Name, line)
			}
		}
	}
}

func ptrInt64(v int64) *int64 { return &v }

// renderSchedulerConfig renders the chart with the real helm (release "fitledger" in namespace
// "fitledger", the image values and args) and returns the KubeSchedulerConfiguration of its
// scheduler ConfigMap.
func renderSchedulerConfig(t *testing.T, args ...string) map[string]interface{} {
	t.Helper()
	all := append([]string{"template", "fitledger", chartDir(t), "-n", "fitledger", "-f", imageValues(t)}, args...)
	out, err := helm(t, all...)
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", all, err, out)
	}
	for _, doc := range strings.Split(out, "\n---") {
		var obj struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Data     map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj.Kind != "ConfigMap" ||
			!strings.HasSuffix(obj.Metadata.Name, "-scheduler") {
			continue
		}
		var config map[string]interface{}
		if err := yaml.Unmarshal([]byte(obj.Data["config.yaml"]), &config); err != nil {
			t.Fatalf("the scheduler's config.yaml: %v", err)
		}
		return config
	}
	t.Fatalf("helm %v rendered no scheduler ConfigMap", all)
	return nil
}

// schedulerConfigForHere points a rendered configuration at this cluster: the admin kubeconfig,
// and the extenders' TLS files (mounted Secrets in a pod) at files of the cluster's PKI.
func schedulerConfigForHere(tc *testCluster, config map[string]interface{}) map[string]interface{} {
	config["clientConnection"] = map[string]interface{}{"kubeconfig": tc.Kubeconfig}
	exts, _ := config["extenders"].([]interface{})
	for _, e := range exts {
		tlsConfig, _ := e.(map[string]interface{})["tlsConfig"].(map[string]interface{})
		files := map[string]string{"caFile": tc.CAFile,
			"certFile": filepath.Join(filepath.Dir(tc.CAFile), "apiserver.crt"),
			"keyFile":  filepath.Join(filepath.Dir(tc.CAFile), "apiserver.key")}
		for key, path := range files {
			if _, ok := tlsConfig[key]; ok {
				tlsConfig[key] = path
			}
		}
	}
	return config
}

// loadInKubeScheduler runs the real kube-scheduler on config with --write-config-to: it reads the
// file, validates it (ValidateKubeSchedulerConfiguration), builds the scheduler with every
// profile, plugin argument and extender (scheduler.New), writes the configuration it would run
// with and exits 0 (cmd/kube-scheduler/app: Setup, options.LogOrWriteConfig). Returns that
// configuration, or the error and the end of its output when it refuses.
func loadInKubeScheduler(t *testing.T, tc *testCluster, name string, config map[string]interface{}) (map[string]interface{}, error) {
	t.Helper()
	dir := tc.Path(name)
	os.MkdirAll(dir, 0o700)
	text, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "written.yaml")
	if err := os.WriteFile(in, text, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tc.ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.Bin(t, "kube-scheduler"), "--config", in, "--write-config-to", out,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cluster.FreePort(t)),
		"--authentication-skip-lookup=true")
	output, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(output)), "\n")
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		return nil, fmt.Errorf("%v: %s", err, strings.Join(lines, "\n"))
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%s: kube-scheduler exited 0 without writing its configuration: %v\n%s", name, err, output)
	}
	var got map[string]interface{}
	if err := yaml.Unmarshal(written, &got); err != nil {
		t.Fatalf("%s: the configuration kube-scheduler wrote: %v", name, err)
	}
	return got, nil
}

// The chart's KubeSchedulerConfiguration judged by the real kube-scheduler (v1.37.2, the suite's),
// as tests/charts/check judges it against a mirror of its types:
//   - every value set below renders a configuration kube-scheduler loads, validates and builds a
//     scheduler from, with the value in the configuration it runs (percentageOfNodesToScore in
//     the profile, the extender's weight and timeout);
//   - every rule by which the chart refuses values because kube-scheduler would refuse them
//     (its template's checks and values.schema.json) is held to kube-scheduler: the defaults'
//     configuration with that one value changed is refused by kube-scheduler too, with the
//     message the case names. renewDeadline against 1.2 x retryPeriod is client-go's check when
//     leader election starts (leaderelection.NewLeaderElector), so that case runs kube-scheduler
//     in full and waits for it to exit; at its boundary (1.25 x) kube-scheduler takes its Lease.
func TestChartSchedulerConfigsLoadInKubeScheduler(t *testing.T) {
	tc := startCluster(t, standardNodes(1, "4", 0))
	tc.Namespace("fitledger") // the leader election Lease's, in the full runs
	values := filepath.Join(filepath.Dir(imageValues(t)))
	type check func(t *testing.T, written map[string]interface{})
	extender := func(written map[string]interface{}) map[string]interface{} {
		return written["extenders"].([]interface{})[0].(map[string]interface{})
	}
	good := []struct {
		name  string
		args  []string
		check check
	}{
		{name: "defaults"},
		{name: "shim mode", args: []string{"-f", filepath.Join(values, "webhook-shim.yaml")}},
		{name: "full (TLS with client certificates, managed resources, a second extender)",
			// The kube-scheduler the chart picks for this cluster (full.yaml pins a 1.31 one).
			args: []string{"-f", filepath.Join(values, "full.yaml"), "--set", "scheduler.image.tag="},
			check: func(t *testing.T, w map[string]interface{}) {
				if got := len(w["extenders"].([]interface{})); got != 2 {
					t.Errorf("%d extenders, want 2", got)
				}
				if got := extender(w)["weight"]; got != float64(5) {
					t.Errorf("weight %v, want 5", got)
				}
			}},
		{name: "full, shim mode", args: []string{"-f", filepath.Join(values, "full.yaml"), "-f", filepath.Join(values, "webhook-shim.yaml"),
			"--set", "scheduler.image.tag="}},
		{name: "ignored resources", args: []string{"-f", filepath.Join(values, "ignored-resources.yaml")}},
		{name: "another extender's managed resources", args: []string{"-f", filepath.Join(values, "ignored-by-extenders.yaml")}},
		{name: "no prioritize, weight 0", args: []string{"--set", "extender.prioritize=false,extender.weight=0"},
			check: func(t *testing.T, w map[string]interface{}) {
				if v, ok := extender(w)["prioritizeVerb"]; ok && v != "" {
					t.Errorf("prioritizeVerb %v, want none", v)
				}
			}},
		{name: "httpTimeout 2500ms", args: []string{"--set", "extender.httpTimeout=2500ms"},
			check: func(t *testing.T, w map[string]interface{}) {
				if got := extender(w)["httpTimeout"]; got != "2.5s" {
					t.Errorf("httpTimeout %v, want 2.5s", got)
				}
			}},
		{name: "percentageOfNodesToScore 20", args: []string{"--set", "scheduler.percentageOfNodesToScore=20"},
			check: func(t *testing.T, w map[string]interface{}) {
				if got := w["profiles"].([]interface{})[0].(map[string]interface{})["percentageOfNodesToScore"]; got != float64(20) {
					t.Errorf("the profile's percentageOfNodesToScore %v, want 20", got)
				}
			}},
		{name: "percentageOfNodesToScore 100", args: []string{"--set", "scheduler.percentageOfNodesToScore=100"}},
		{name: "leader election durations of zero (kube-scheduler's defaults)", args: []string{"--set",
			"scheduler.leaderElection.leaseDuration=0s,scheduler.leaderElection.renewDeadline=0s,scheduler.leaderElection.retryPeriod=0s"},
			check: func(t *testing.T, w map[string]interface{}) {
				le := w["leaderElection"].(map[string]interface{})
				for key, want := range map[string]string{"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"} {
					if le[key] != want {
						t.Errorf("leaderElection.%s %v, want kube-scheduler's default %s", key, le[key], want)
					}
				}
			}},
		{name: "leader election at its boundary", args: []string{"--set",
			"scheduler.leaderElection.leaseDuration=3s,scheduler.leaderElection.renewDeadline=2500ms,scheduler.leaderElection.retryPeriod=2s"}},
	}
	for i, g := range good {
		config := schedulerConfigForHere(tc, renderSchedulerConfig(t, g.args...))
		written, err := loadInKubeScheduler(t, tc, fmt.Sprintf("kube-scheduler-good-%d", i), config)
		if err != nil {
			t.Errorf("%s: kube-scheduler refused the chart's configuration: %v", g.name, err)
			continue
		}
		if g.check != nil {
			g.check(t, written)
		}
	}

	// The defaults' configuration with one change each; each refused by the chart
	// (tests/charts/check's bad value sets of the same names) and here by kube-scheduler.
	leaderElection := func(c map[string]interface{}) map[string]interface{} {
		return c["leaderElection"].(map[string]interface{})
	}
	fitledger := func(c map[string]interface{}) map[string]interface{} {
		return c["extenders"].([]interface{})[0].(map[string]interface{})
	}
	managed := func(names ...string) func(c map[string]interface{}) {
		return func(c map[string]interface{}) {
			var list []interface{}
			for _, n := range names {
				list = append(list, map[string]interface{}{"name": n, "ignoredByScheduler": true})
			}
			fitledger(c)["managedResources"] = list
		}
	}
	another := func(e map[string]interface{}) func(c map[string]interface{}) {
		return func(c map[string]interface{}) {
			e["urlPrefix"] = "http://127.0.0.1:9999/other"
			e["filterVerb"] = "filter"
			c["extenders"] = append(c["extenders"].([]interface{}), e)
		}
	}
	fitArgs := func(key string, v interface{}) func(c map[string]interface{}) {
		return func(c map[string]interface{}) {
			c["profiles"].([]interface{})[0].(map[string]interface{})["pluginConfig"] = []interface{}{
				map[string]interface{}{"name": "NodeResourcesFit", "args": map[string]interface{}{key: []interface{}{v}}}}
		}
	}
	bad := []struct {
		name   string
		change func(c map[string]interface{})
		want   string
	}{
		{"leaseDuration not above renewDeadline", func(c map[string]interface{}) { leaderElection(c)["leaseDuration"] = "10s" },
			"must be greater than `RenewDeadline`"},
		{"negative retryPeriod", func(c map[string]interface{}) { leaderElection(c)["retryPeriod"] = "-2s" },
			"retryPeriod: Invalid value"},
		{"percentageOfNodesToScore above 100", func(c map[string]interface{}) {
			c["profiles"].([]interface{})[0].(map[string]interface{})["percentageOfNodesToScore"] = 101
		}, "percentageOfNodesToScore"},
		{"weight-0-with-prioritize", func(c map[string]interface{}) { fitledger(c)["weight"] = 0 },
			"must have a positive weight applied to it"},
		{"negative weight", func(c map[string]interface{}) { fitledger(c)["weight"] = -2 },
			"must have a positive weight applied to it"},
		{"managed resource cpu", managed("cpu"), "is an invalid extended resource name"},
		{"managed resource kubernetes.io/", managed("kubernetes.io/batteries"), "is an invalid extended resource name"},
		{"managed resource in a kubernetes.io subdomain", managed("gpu.kubernetes.io/mem"), "is an invalid extended resource name"},
		{"managed resource hugepages", managed("hugepages-2Mi"), "is an invalid extended resource name"},
		{"managed resource without a name part", managed("example.com/"), "name part must be non-empty"},
		{"managed resource requests. prefix", managed("requests.example.com/gpu"), "is an invalid extended resource name"},
		{"duplicate managed resource", managed("example.com/gpu", "example.com/gpu"), "duplicate extender managed resource name"},
		{"two binders", another(map[string]interface{}{"bindVerb": "bind"}), "only one extender can implement bind"},
		{"extra extender prioritizing with weight 0", another(map[string]interface{}{"prioritizeVerb": "prioritize", "weight": 0}),
			"must have a positive weight applied to it"},
		{"extra extender managing fitledger's resource", func(c map[string]interface{}) {
			managed("example.com/gpu")(c)
			another(map[string]interface{}{"managedResources": []interface{}{map[string]interface{}{"name": "example.com/gpu"}}})(c)
		}, "duplicate extender managed resource name"},
		{"ignored resource group with a slash", fitArgs("ignoredResourceGroups", "example.com/gpu"), "ignoredResourceGroups"},
		{"ignored resource that is not a name", fitArgs("ignoredResources", "not a name"), "ignoredResources"},
	}
	for i, b := range bad {
		config := schedulerConfigForHere(tc, renderSchedulerConfig(t))
		b.change(config)
		_, err := loadInKubeScheduler(t, tc, fmt.Sprintf("kube-scheduler-bad-%d", i), config)
		switch {
		case err == nil:
			t.Errorf("%s: kube-scheduler accepted what the chart refuses", b.name)
		case !strings.Contains(err.Error(), b.want):
			t.Errorf("%s: kube-scheduler refused it, but not with %q: %v", b.name, b.want, err)
		}
	}

	// renewDeadline against retryPeriod x 1.2 (client-go's JitterFactor): refused when leader
	// election starts; kube-scheduler then exits. At 1.25 x it runs.
	boundary := renderSchedulerConfig(t, "--set",
		"scheduler.leaderElection.leaseDuration=3s,scheduler.leaderElection.renewDeadline=2500ms,scheduler.leaderElection.retryPeriod=2s")
	text, _ := yaml.Marshal(boundary)
	running := fl.StartScheduler(t, tc.Cluster, "kube-scheduler-renew-2500ms", string(text), tc.Kubeconfig)
	// /readyz answers before leader election starts: the Lease's holder shows it ran.
	lease := leaderElection(boundary)["resourceName"].(string)
	tc.WaitFor("kube-scheduler with renewDeadline 1.25 x retryPeriod to hold its Lease", 60*time.Second, func() bool {
		l, err := tc.Client.CoordinationV1().Leases("fitledger").Get(tc.ctx, lease, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	})
	running.Stop()

	leaderElection(boundary)["renewDeadline"] = "2400ms"
	dir := tc.Path("kube-scheduler-renew-2400ms")
	os.MkdirAll(dir, 0o700)
	path := filepath.Join(dir, "config.yaml")
	text, _ = yaml.Marshal(schedulerConfigForHere(tc, boundary))
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	refused := tc.Process("kube-scheduler-renew-2400ms", cluster.Bin(t, "kube-scheduler"), []string{"--config", path,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cluster.FreePort(t)), "--authentication-skip-lookup=true"})
	tc.WaitFor("kube-scheduler with renewDeadline 1.2 x retryPeriod to exit", 60*time.Second, func() bool {
		return !refused.Running()
	})
	if tail := refused.Tail(40); !strings.Contains(tail, "renewDeadline must be greater than retryPeriod*JitterFactor") {
		t.Errorf("kube-scheduler with renewDeadline 2400ms and retryPeriod 2s exited without client-go's message; its log ends:\n%s", tail)
	}
}
