package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// checkRenderer renders tests/charts/fixtures/helm-functions, whose expected
// output is written by hand from Helm 3's semantics (float64 values from files,
// int64 from --set, "<no value>" blanked, null deleting a default, toYaml's key
// order, include/tpl/required/fail, kubeVersion), so that the chart checks
// stand on a renderer that behaves like `helm template`.
func checkRenderer(c *Checker, e *Env) {
	dir := filepath.Join(filepath.Dir(e.valuesDir), "fixtures", "helm-functions")
	want, err := os.ReadFile(filepath.Join(dir, "expected.yaml"))
	if err != nil {
		c.Check("renderer: fixture output matches Helm's", err)
		return
	}
	res := e.RenderChart(dir, "--name", "rel", "--namespace", "ns", "--set", "drop=null",
		"--set", "setInt=5", "--kube-version", "v1.31.0")
	err = res.err
	if err == nil && res.stdout != string(want) {
		err = fmt.Errorf("output differs from expected.yaml:\n%s", res.stdout)
	} else if err != nil {
		err = fmt.Errorf("%v: %s", err, strings.TrimSpace(res.stderr))
	}
	c.Check("renderer: fixture output matches Helm's", err)

	for _, f := range []struct {
		name string
		args []string
		want string
	}{
		{"fail", []string{"--set", "failNow=true"}, "Error: execution error at (fixture/templates/configmap.yaml:24:4): failNow was set"},
		{"required", []string{"--set", "name=null"}, "name is required"},
		{"kubeVersion", []string{"--kube-version", "v1.19.0"}, "chart requires kubeVersion: >=1.20.0-0 which is incompatible with Kubernetes v1.19.0"},
	} {
		res := e.RenderChart(dir, f.args...)
		var err error
		switch {
		case res.err == nil:
			err = fmt.Errorf("rendered without error")
		case !strings.Contains(res.stderr, f.want):
			err = fmt.Errorf("error %q does not contain %q", strings.TrimSpace(res.stderr), f.want)
		}
		c.Check("renderer: "+f.name+" fails rendering as Helm does", err)
	}
}
