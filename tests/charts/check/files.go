package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

func readFile(e *Env, rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(e.repo, rel))
	return string(b), err
}

// checkChartFiles checks the chart's files themselves: metadata, that the
// schema and the README describe every value, and that the templates stay
// within what the renderer (and so `helm template`) renders identically.
func checkChartFiles(c *Checker, e *Env) {
	chartYAML, err := readFile(e, "charts/fitledger/Chart.yaml")
	var meta map[string]interface{}
	if err == nil {
		err = yaml.UnmarshalStrict([]byte(chartYAML), &meta)
	}
	if err == nil {
		switch {
		case meta["apiVersion"] != "v2":
			err = fmt.Errorf("apiVersion %v, want v2", meta["apiVersion"])
		case meta["type"] != "application":
			err = fmt.Errorf("type %v, want application", meta["type"])
		case str(meta["appVersion"]) == "":
			err = fmt.Errorf("appVersion missing")
		case meta["dependencies"] != nil:
			err = fmt.Errorf("dependencies: subcharts are not supported")
		case !strings.HasPrefix(str(meta["kubeVersion"]), ">=1.29"):
			err = fmt.Errorf("kubeVersion %v: native sidecars need >=1.29", meta["kubeVersion"])
		}
	}
	c.Check("chart: Chart.yaml is apiVersion v2, application, kubeVersion >=1.29, no dependencies", err)

	valuesRaw, err1 := readFile(e, "charts/fitledger/values.yaml")
	schemaRaw, err2 := readFile(e, "charts/fitledger/values.schema.json")
	readme, err3 := readFile(e, "charts/fitledger/README.md")
	if err1 != nil || err2 != nil || err3 != nil {
		c.Check("chart: values.yaml, values.schema.json and README.md exist", fmt.Errorf("%v %v %v", err1, err2, err3))
		return
	}
	var values map[string]interface{}
	var schema map[string]interface{}
	err = yaml.UnmarshalStrict([]byte(valuesRaw), &values)
	if err == nil {
		err = json.Unmarshal([]byte(schemaRaw), &schema)
	}
	c.Check("chart: values.yaml and values.schema.json parse", err)
	if err != nil {
		return
	}
	// image.repository is the one value without a usable default.
	res := e.Render("--set", "image.repository=registry.example.com/fitledger")
	if res.err == nil && str(schema["$schema"]) == "" {
		res.err = fmt.Errorf("schema has no $schema")
	}
	c.Check("chart: values.schema.json validates the default values", res.err)

	leaves := map[string]bool{}
	c.Check("chart: values.schema.json declares every key of values.yaml",
		walkValues(values, schema, schema, "", leaves))
	var missing []string
	for k := range leaves {
		if !strings.Contains(readme, "| `"+k+"` |") {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	var readmeErr error
	if len(missing) > 0 {
		readmeErr = fmt.Errorf("values missing from the README's values table: %v", missing)
	}
	c.Check("chart: README's values table lists every value", readmeErr)

	var docErr error
	for _, want := range []string{"first full list", "leader", "helm test", "grpcurl", "port-forward", "system:kube-scheduler", "schedulerName"} {
		if !strings.Contains(readme, want) {
			docErr = fmt.Errorf("README does not mention %q", want)
			break
		}
	}
	c.Check("chart: README documents readiness (first full list), leader election, test, RBAC", docErr)

	var tplErr error
	_ = filepath.Walk(filepath.Join(e.chartDir, "templates"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		for _, banned := range []string{"lookup", ".Capabilities.APIVersions", ".Files.Glob", "toToml", ".Subcharts", "getHostByName", "env "} {
			if strings.Contains(string(b), banned) {
				tplErr = fmt.Errorf("%s uses %q, which `helm template` cannot render the same way offline", p, banned)
			}
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(e.chartDir, "charts")); err == nil {
		tplErr = fmt.Errorf("charts/fitledger/charts exists: no subcharts")
	}
	c.Check("chart: templates use no lookup, subcharts or cluster-dependent functions", tplErr)
}

// walkValues checks that every key of values is declared by the schema, and
// collects the documented leaves: scalars, lists, shared types ($ref) and
// objects the schema leaves free-form (securityContext, nodeSelector, ...).
func walkValues(values map[string]interface{}, node, root map[string]interface{}, prefix string, leaves map[string]bool) error {
	props := mapOf(node["properties"])
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		full := strings.TrimPrefix(prefix+"."+k, ".")
		sub := mapOf(props[k])
		if sub == nil {
			return fmt.Errorf("%s is not declared in values.schema.json", full)
		}
		if str(sub["$ref"]) != "" {
			leaves[full] = true // a shared type (resources, port, duration) is documented as a unit
			continue
		}
		if vm, ok := values[k].(map[string]interface{}); ok && len(vm) > 0 && sub["properties"] != nil && str(get(sub, "additionalProperties")) == "false" {
			if err := walkValues(vm, sub, root, full, leaves); err != nil {
				return err
			}
			continue
		}
		leaves[full] = true
	}
	return nil
}

// checkExistingSchedulerConfig checks config/kube-scheduler/: the extender
// entry an existing scheduler adds, pointing at the chart's extender Service
// (the "standalone" value set).
func checkExistingSchedulerConfig(c *Checker, e *Env) {
	doc, err := readFile(e, "config/kube-scheduler/extender-for-existing-scheduler.yaml")
	var cfg *KubeSchedulerConfiguration
	if err == nil {
		cfg, err = ParseKubeSchedulerConfiguration(doc)
	}
	if err == nil {
		err = ValidateKubeSchedulerConfiguration(cfg)
	}
	c.Check("config/kube-scheduler: extender-for-existing-scheduler.yaml decodes strictly and passes kube-scheduler validation", err)
	if err != nil {
		return
	}
	err = func() error {
		var ours []Extender
		for _, x := range cfg.Extenders {
			if strings.Contains(x.URLPrefix, ":8888") {
				ours = append(ours, x)
			}
		}
		if len(ours) != 1 {
			return fmt.Errorf("want exactly one extender on the shim's port 8888, found %d", len(ours))
		}
		x := ours[0]
		if err := checkExtenderVerbs(x); err != nil {
			return err
		}
		u, err := url.Parse(x.URLPrefix)
		if err != nil {
			return err
		}
		host := u.Hostname()
		if u.Scheme != "https" || !x.EnableHTTPS {
			return fmt.Errorf("urlPrefix %s: the Service is reached over HTTPS (enableHTTPS: true)", x.URLPrefix)
		}
		if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() {
			return fmt.Errorf("urlPrefix host %q: a host-network kube-scheduler cannot resolve Service names, use the Service's ClusterIP", host)
		}
		t := x.TLSConfig
		if t == nil || t.Insecure || t.CAFile == "" || t.CertFile == "" || t.KeyFile == "" || t.ServerName == "" {
			return fmt.Errorf("tlsConfig needs caFile, certFile, keyFile (the shim verifies client certificates) and serverName")
		}
		// It must agree with the chart rendered with tests/charts/values/standalone.yaml.
		sa, err := os.ReadFile(e.ValuesFile("standalone.yaml"))
		if err != nil {
			return err
		}
		var alone map[string]interface{}
		if err := yaml.Unmarshal(sa, &alone); err != nil {
			return err
		}
		if ip := str(get(alone, "shim", "service", "clusterIP")); ip != host {
			return fmt.Errorf("urlPrefix host %s, but the standalone value set pins the Service to %s", host, ip)
		}
		if t.ServerName != "fitledger-extender.fitledger.svc" {
			return fmt.Errorf("serverName %q, want the Service's DNS name fitledger-extender.fitledger.svc", t.ServerName)
		}
		var want []ExtenderManagedResource
		for _, m := range list(get(alone, "extender", "managedResources")) {
			want = append(want, ExtenderManagedResource{Name: str(get(m, "name")), IgnoredByScheduler: get(m, "ignoredByScheduler") == true})
		}
		if fmt.Sprint(x.ManagedResources) != fmt.Sprint(want) {
			return fmt.Errorf("managedResources %v, but the extender is deployed with %v", x.ManagedResources, want)
		}
		return nil
	}()
	c.Check("config/kube-scheduler: the entry points at the extender Service's ClusterIP over mutual TLS", err)

	readme, err := readFile(e, "config/kube-scheduler/README.md")
	if err == nil {
		for _, want := range []string{"extender-for-existing-scheduler.yaml", "scheduler.enabled=false", "ClusterIP", "kubeadm"} {
			if !strings.Contains(readme, want) {
				err = fmt.Errorf("README does not mention %q", want)
				break
			}
		}
	}
	c.Check("config/kube-scheduler: README explains the alternative", err)
}
