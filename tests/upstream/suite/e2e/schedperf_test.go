package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"fitledger.test/upstream/suite/schedperf"
)

// The scheduling-throughput harness (tests/perf/sched.sh, issue 49) works end to end at a small
// size: every configuration binds every pod through the real kube-scheduler, kube-scheduler's
// attempt histogram is read, and the report has a row for each. A check that it runs, not a
// measurement (the sizes are far too small for one).
func TestSchedulingHarness(t *testing.T) {
	o := schedperf.Options{Nodes: 60, InitPods: 60, Pods: 60, Rounds: 1}
	o.GoBaseline = schedperf.GoBaselineBinary(t, os.Getenv("FITLEDGER_SOURCE_DIR"), t.TempDir())
	c := schedperf.Start(t)
	results := schedperf.Measure(t, c, o)
	if len(results) != len(schedperf.AllConfigs) {
		t.Fatalf("%d results, want %d", len(results), len(schedperf.AllConfigs))
	}
	for _, r := range results {
		if r.Attempts < r.Pods {
			t.Errorf("%s: kube-scheduler counted %d scheduled attempts for %d pods", r.Config, r.Attempts, r.Pods)
		}
		if r.PodsPerSecond <= 0 || r.AttemptP50 <= 0 || r.AttemptP99 < r.AttemptP50 {
			t.Errorf("%s: implausible figures %+v", r.Config, r)
		}
	}
	text, _ := schedperf.Report(results)
	fmt.Print(text)
	for _, config := range schedperf.AllConfigs {
		if !strings.Contains(text, "| "+config+" |") {
			t.Errorf("the report has no row for %s", config)
		}
	}
}

// The sync measurement (tests/perf/sched.sh --sync, issue 49 item 4) works end to end at a small
// size: every start of fitledger-server serves, and its figures are read. A check that it runs,
// not a measurement.
func TestSyncHarness(t *testing.T) {
	c := schedperf.Start(t)
	r := schedperf.MeasureSync(t, c, schedperf.SyncOptions{Nodes: 20, Pods: 200, Rounds: 2})
	if len(r.Results) != 4 {
		t.Fatalf("%d results, want 4 (2 rounds, gzip and plain)", len(r.Results))
	}
	encodings := map[string]int{}
	for _, x := range r.Results {
		encodings[x.Encoding]++
	}
	if encodings[schedperf.EncodingGzip] != 2 || encodings[schedperf.EncodingPlain] != 2 {
		t.Errorf("starts by encoding %v, want 2 gzip and 2 plain", encodings)
	}
	for _, x := range r.Results {
		if x.ServingMs <= 0 || x.RSSKiB <= 0 || x.HWMKiB < x.RSSKiB || x.ServerCPU < 0 || x.APIServerCPU < 0 {
			t.Errorf("implausible figures %+v", x)
		}
	}
	if r.PodJSONBytes < 200 || r.APIServerRSSKB <= 0 {
		t.Errorf("implausible report %+v", r)
	}
	text := schedperf.SyncText(r)
	fmt.Print(text)
	if !strings.Contains(text, "| median |") {
		t.Errorf("the table has no median row:\n%s", text)
	}
}
