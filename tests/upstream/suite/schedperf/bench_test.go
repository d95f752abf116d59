package schedperf

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: a positive integer", name, v)
	}
	return n
}

// BenchmarkSchedulingThroughput is issue 49's first measurement, run by tests/perf/sched.sh (with
// -benchtime 1x: one measurement of Rounds rounds). Sizes from SCHEDPERF_NODES, _INIT_PODS, _PODS,
// _ROUNDS (default 5,000 / 5,000 / 3,000 / 3), SCHEDPERF_PERCENTAGE (the profile's
// percentageOfNodesToScore; default unset), SCHEDPERF_CONFIGS (comma-separated; default
// baseline,server,shim,go; server-fb is the server without prioritize) and
// SCHEDPERF_PROFILE_DIR (perf profiles of round 1); the table goes to stdout and, when set, to
// SCHEDPERF_OUT.
func BenchmarkSchedulingThroughput(b *testing.B) {
	o := Options{
		Nodes:                    envInt(b, "SCHEDPERF_NODES", 5000),
		InitPods:                 envInt(b, "SCHEDPERF_INIT_PODS", 5000),
		Pods:                     envInt(b, "SCHEDPERF_PODS", 3000),
		Rounds:                   envInt(b, "SCHEDPERF_ROUNDS", 3),
		PercentageOfNodesToScore: envInt(b, "SCHEDPERF_PERCENTAGE", 0),
		Log: func(format string, args ...any) {
			fmt.Printf(format+"\n", args...)
		},
	}
	if v := os.Getenv("SCHEDPERF_CONFIGS"); v != "" {
		o.Configs = strings.Split(v, ",")
	}
	o.ProfileDir = os.Getenv("SCHEDPERF_PROFILE_DIR")
	o.GoBaseline = GoBaselineBinary(b, os.Getenv("FITLEDGER_SOURCE_DIR"), b.TempDir())
	c := Start(b)
	results := Measure(b, c, o)
	text, _ := Report(results)
	fmt.Printf("\nkube-scheduler v1.37.2, %d nodes, %d bound pods, %d measured pods, %d rounds, percentageOfNodesToScore %d (0: adaptive):\n\n%s",
		o.Nodes, o.InitPods, o.Pods, o.Rounds, o.PercentageOfNodesToScore, text)
	if out := os.Getenv("SCHEDPERF_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for config, s := range Summarize(results) {
		b.ReportMetric(s.PodsPerSecond, config+"_pods/s")
	}
}

// BenchmarkSyncFromAPIServer is issue 49 item 4's sync from the real API server, run by
// tests/perf/sched.sh --sync: SYNCPERF_NODES nodes and SYNCPERF_PODS bound pods (default 5,000
// and 150,000) in etcd, then fitledger-server started SYNCPERF_ROUNDS times (default 3); the
// table goes to stdout and, when set, to SCHEDPERF_OUT.
func BenchmarkSyncFromAPIServer(b *testing.B) {
	o := SyncOptions{
		Nodes:  envInt(b, "SYNCPERF_NODES", 5000),
		Pods:   envInt(b, "SYNCPERF_PODS", 150000),
		Rounds: envInt(b, "SYNCPERF_ROUNDS", 3),
		Log: func(format string, args ...any) {
			fmt.Printf(format+"\n", args...)
		},
	}
	c := Start(b)
	report := MeasureSync(b, c, o)
	text := SyncText(report)
	fmt.Printf("\n%s", text)
	if out := os.Getenv("SCHEDPERF_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(report.MedianServing, "serving_ms")
	b.ReportMetric(report.MedianRSSKiB/1024, "rss_MiB")
}
