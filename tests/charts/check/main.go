// Command check renders charts/fitledger through the render program for a set
// of value sets and checks the rendered objects; it also checks
// config/kube-scheduler/ and the Dockerfile, and runs the built fitledger-server
// and fitledger-shim on the rendered configurations when given. One line per
// check (SKIP lines for binaries that are not built), then "N passed, M
// failed"; exit status 1 when any check failed.
//
//	check --render BIN --repo DIR --values DIR [--server-bin BIN] [--shim-bin BIN]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Checker counts and prints check outcomes.
type Checker struct {
	passed, failed int
}

// Skip records a check that could not run, and why; it counts neither way.
func (c *Checker) Skip(name, reason string) {
	fmt.Printf("SKIP %s: %s\n", name, reason)
}

// Check records one check: err == nil passes.
func (c *Checker) Check(name string, err error) {
	if err == nil {
		c.passed++
		fmt.Printf("PASS %s\n", name)
		return
	}
	c.failed++
	fmt.Printf("FAIL %s: %v\n", name, err)
}

// Env is what every check needs: where things are.
type Env struct {
	render    string
	repo      string
	valuesDir string
	chartDir  string
	// The built binaries that load the rendered configurations; empty: skip.
	serverBin, shimBin string
	requireBinaries    bool
}

// RenderResult is one run of the renderer.
type RenderResult struct {
	stdout, stderr string
	err            error // non-nil when the renderer exited non-zero
}

func (e *Env) Render(args ...string) RenderResult {
	return e.RenderChart(e.chartDir, args...)
}

// RenderChart renders another chart directory (the renderer's fixtures).
func (e *Env) RenderChart(dir string, args ...string) RenderResult {
	full := append(append([]string{}, args...), dir)
	cmd := exec.Command(e.render, full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return RenderResult{stdout: out.String(), stderr: errb.String(), err: err}
}

// ValuesFile is the path of a value set under tests/charts/values.
func (e *Env) ValuesFile(name string) string { return filepath.Join(e.valuesDir, name) }

func main() {
	render := flag.String("render", "", "path of the render binary")
	repo := flag.String("repo", "", "repository root")
	values := flag.String("values", "", "directory of the test value sets")
	serverBin := flag.String("server-bin", "", "fitledger-server binary to load the rendered server.yaml with (skipped if empty or not built)")
	requireBinaries := flag.Bool("require-binaries", false, "fail (instead of skipping) when --server-bin or --shim-bin is not built")
	shimBin := flag.String("shim-bin", "", "fitledger-shim binary to load the rendered shim.yaml with (skipped if empty or not built)")
	flag.Parse()
	if *render == "" || *repo == "" || *values == "" {
		fmt.Fprintln(os.Stderr, "usage: check --render BIN --repo DIR --values DIR")
		os.Exit(2)
	}
	env := &Env{render: *render, repo: *repo, valuesDir: *values,
		chartDir: filepath.Join(*repo, "charts", "fitledger"), serverBin: *serverBin, shimBin: *shimBin, requireBinaries: *requireBinaries}
	c := &Checker{}

	checkRenderer(c, env)
	for _, s := range goodSets(env) {
		checkGoodSet(c, env, s)
	}
	for _, b := range badSets(env) {
		checkBadSet(c, env, b)
	}
	checkChartFiles(c, env)
	checkExistingSchedulerConfig(c, env)
	checkDockerfile(c, env)

	fmt.Printf("%d passed, %d failed\n", c.passed, c.failed)
	if c.failed > 0 {
		os.Exit(1)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
