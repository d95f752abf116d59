package e2e

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"fitledger.test/upstream/suite/fl"
)

// kube-apiserver answers a WatchList (sendInitialEvents=true) that accepts gzip with a gzip body
// of one member per flush: the initial events end one member, each later event comes in its own
// (apiserver/pkg/endpoints/handlers/watch.go, perFlushGzipWriter; feature WatchListCompression).
// fitledger asks for gzip and decodes it itself: libcurl's own decoder stops at the second
// member, which cut every WatchList stream at its first event after the state (the watch then
// resumed after a backoff, and fitledger's view lagged meanwhile).
//
// Part 1 checks the fact on the real API server; part 2 that fitledger's streams run on past
// their state: events arrive and no stream restarts.
func TestWatchListStreamsReadEveryGzipMember(t *testing.T) {
	tc := startCluster(t, standardNodes(2, "2", 0))

	// 1. A raw WatchList of the namespace's pods, gzip accepted (set by hand, so Go's transport
	// leaves the body encoded).
	client, err := rest.HTTPClientFor(tc.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(tc.ctx, "GET", tc.Config.Host+"/api/v1/namespaces/burst/pods"+
		"?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=60", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("a WatchList accepting gzip: HTTP %d, Content-Encoding %q; want 200, gzip",
			resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	body := bufio.NewReader(resp.Body)
	// member reads one gzip member whole and returns its watch events' types.
	member := func(what string) []string {
		type result struct {
			types []string
			err   error
		}
		done := make(chan result, 1)
		go func() {
			z, err := gzip.NewReader(body)
			if err != nil {
				done <- result{err: err}
				return
			}
			z.Multistream(false)
			text, err := io.ReadAll(z)
			var types []string
			for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
				var e struct{ Type string }
				if line != "" && json.Unmarshal([]byte(line), &e) == nil {
					types = append(types, e.Type)
				}
			}
			done <- result{types, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("%s: %v", what, r.err)
			}
			return r.types
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: no gzip member in 60s", what)
			return nil
		}
	}
	if got := member("the initial events"); len(got) == 0 || got[len(got)-1] != "BOOKMARK" {
		t.Fatalf("the first gzip member: events %v, want the state ending with its BOOKMARK", got)
	}
	tc.createPods(t, []*corev1.Pod{makePod(podSpec{name: "raw-0", scheduler: "nobody", cpu: "100m"})})
	if got := member("the event after the state"); len(got) == 0 || got[0] != "ADDED" {
		t.Fatalf("the second gzip member: events %v, want the pod's ADDED", got)
	}

	// 2. fitledger's three WatchLists (nodes, pods, failed pods), then pod events on them.
	srv := fl.StartServer(t, tc.Cluster, fl.ServerOptions{Kubeconfig: tc.Kubeconfig, NoWebhook: true})
	defer srv.Proc.Stop()
	if got := metricSum(t, srv.MonitorURL, "fitledger_watch_total", `kind="watch_lists"`); got < 3 {
		t.Fatalf("fitledger read %v states by WatchList, want 3 (nodes, pods, failed pods)", got)
	}
	restarts := metricSum(t, srv.MonitorURL, "fitledger_watch_total", `kind="watch_restarts"`)
	// Pods bound at creation (spec.nodeName): fitledger counts each once its watch shows it.
	const n = 10
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		p := makePod(podSpec{name: fmt.Sprintf("p-%d", i), scheduler: "nobody", cpu: "100m"})
		p.Spec.NodeName = fmt.Sprintf("node-%d", i%2)
		pods = append(pods, p)
	}
	tc.createPods(t, pods)
	tc.WaitFor(fmt.Sprintf("fitledger counts the %d pods", n), 60*time.Second, func() bool {
		return metricSum(t, srv.MonitorURL, "fitledger_counted_pods") == n
	})
	if got := metricSum(t, srv.MonitorURL, "fitledger_watch_total", `kind="watch_restarts"`); got != restarts {
		t.Errorf("fitledger's watch streams restarted %v times while the pods came (want 0: a WatchList "+
			"stream runs on past its state)", got-restarts)
	}
	if got := metricSum(t, srv.MonitorURL, "fitledger_watch_total", `kind="decode_errors"`); got != 0 {
		t.Errorf("fitledger: %v watch events it could not decode", got)
	}
}
