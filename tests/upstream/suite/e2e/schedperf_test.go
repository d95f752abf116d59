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
