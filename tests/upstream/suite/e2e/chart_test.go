package e2e

import (
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
