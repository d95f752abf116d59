package main

import (
	"strings"
)

// Want is what a value set must render to, written out independently of the
// chart's templates.
type Want struct {
	Release, Namespace string
	Fullname           string
	ServiceAccount     string
	CreateSA           bool
	RBAC               bool
	Scheduler          bool // kube-scheduler runs in the pod
	SchedulerName      string
	LeaseName          string
	Replicas           int64
	Image              string
	SchedulerImage     string
	KubectlImage       string

	// Webhook is the process serving kube-scheduler's extender webhook:
	// "server" (fitledger-server, no shim container) or "shim".
	Webhook string

	ShimPort, ShimMonitorPort, ServerMonitorPort int64
	// The webhook's limits (shim.*), written into the server's webhook block
	// or shim.yaml.
	ShimIOThreads, ShimMaxConnections, ShimMaxBodyBytes int64
	GRPCTCP                                             bool
	GRPCPort                                            int64
	GRPCTLS, GRPCClientAuth                             bool
	ShimTLS, ShimClientAuth                             bool

	Prioritize bool
	Weight     int64
	Bind       bool
	Preempt    bool
	Managed    []ExtenderManagedResource
	// Extenders is the number of extender entries (fitledger's first).
	Extenders int

	// Secrets maps the pod's secret volumes to their Secrets.
	Secrets map[string]string

	// Resources of the containers (those the pod runs).
	ServerResources, ShimResources, SchedulerResources map[string]interface{}

	AntiAffinity string // soft | hard
	PDB          bool
	Test         bool

	// Deadlines derived from extender.httpTimeout: the server's
	// kubernetes.bindBudget and, in shim mode, the shim's serverTimeout.
	BindBudget, ShimServerTimeout string
	// The profile's NodeResourcesFitArgs lists (pluginConfig), and what the
	// server's ledger ignores.
	FitIgnored, FitIgnoredGroups       []string
	LedgerIgnored, LedgerIgnoredGroups []string
	// The profile's percentageOfNodesToScore (0: not written).
	PercentageOfNodesToScore int32
}

// defaults is the expectation for `helm template fitledger charts/fitledger`.
func defaults() Want {
	return Want{
		Release: "fitledger", Namespace: "default", Fullname: "fitledger",
		ServiceAccount: "fitledger", CreateSA: true, RBAC: true,
		Scheduler: true, SchedulerName: "fitledger-scheduler", LeaseName: "fitledger-scheduler",
		Replicas: 2, Image: "registry.example.com/fitledger:0.1.0",
		// The renderer's cluster is v1.32.0 unless --kube-version says
		// otherwise: the chart's 1.32 release.
		SchedulerImage: "registry.k8s.io/kube-scheduler:v1.32.12",
		KubectlImage:   "registry.k8s.io/kubectl:v1.32.12",
		BindBudget:     "4s", ShimServerTimeout: "4500ms",
		Webhook:  "server",
		ShimPort: 8888, ShimMonitorPort: 8082, ServerMonitorPort: 8081,
		ShimIOThreads: 0, ShimMaxConnections: 1024, ShimMaxBodyBytes: 16777216,
		GRPCTCP: true, GRPCPort: 9090,
		Prioritize: true, Weight: 1, Bind: true, Preempt: true, Extenders: 1,
		AntiAffinity: "soft", PDB: true, Test: true,
		ServerResources:    resources("100m", "128Mi", "1Gi"),
		ShimResources:      resources("50m", "32Mi", "256Mi"),
		SchedulerResources: resources("100m", "128Mi", "2Gi"),
	}
}

// resources is a container's resources as the chart's values write them.
func resources(cpu, memory, memoryLimit string) map[string]interface{} {
	return map[string]interface{}{
		"requests": map[string]interface{}{"cpu": cpu, "memory": memory},
		"limits":   map[string]interface{}{"memory": memoryLimit},
	}
}

// inShim is w with the webhook in a fitledger-shim container
// (webhook.mode=shim): the webhook's TLS Secret is then the shim's volume.
func inShim(w Want) Want {
	w.Webhook = "shim"
	if secret, ok := w.Secrets["webhook-tls"]; ok {
		secrets := map[string]string{"shim-tls": secret}
		for k, v := range w.Secrets {
			if k != "webhook-tls" {
				secrets[k] = v
			}
		}
		w.Secrets = secrets
	}
	return w
}

type goodSet struct {
	name string
	args []string
	want Want
}

func goodSets(e *Env) []goodSet {
	var sets []goodSet
	shim := e.ValuesFile("webhook-shim.yaml")
	sets = append(sets, goodSet{name: "defaults", want: defaults()})
	// The webhook in a fitledger-shim container: the chart's layout before
	// webhook.mode, kept as an option.
	sets = append(sets, goodSet{name: "shim-mode", want: inShim(defaults()),
		args: []string{"-f", shim}})
	// webhook.mode missing, as after `helm upgrade --reuse-values` from a
	// chart without it: the default, server.
	sets = append(sets, goodSet{name: "webhook-mode-missing", want: defaults(),
		args: []string{"--set", "webhook=null"}})
	// The webhook's I/O threads and connection cap at the ends of their
	// ranges (the binaries' 0..256 and 1..2^20), in either process.
	low := defaults()
	low.ShimIOThreads, low.ShimMaxConnections = 1, 1
	sets = append(sets, goodSet{name: "webhook-one-io-thread-one-connection", want: low,
		args: []string{"--set", "shim.ioThreads=1", "--set", "shim.maxConnections=1"}})
	high := inShim(defaults())
	high.ShimIOThreads, high.ShimMaxConnections = 256, 1<<20
	sets = append(sets, goodSet{name: "shim-mode-most-io-threads-and-connections", want: high,
		args: []string{"-f", shim, "--set", "shim.ioThreads=256", "--set", "shim.maxConnections=1048576"}})
	// Missing, as after `helm upgrade --reuse-values` from a chart without
	// them: the binaries' defaults.
	sets = append(sets, goodSet{name: "webhook-limits-missing", want: defaults(),
		args: []string{"--set", "shim.ioThreads=null", "--set", "shim.maxConnections=null"}})
	sets = append(sets, goodSet{name: "webhook-limits-missing-shim-mode", want: inShim(defaults()),
		args: []string{"-f", shim, "--set", "shim.ioThreads=null", "--set", "shim.maxConnections=null"}})
	// That upgrade also brings back the earlier chart's shim.threads, which
	// fails rendering (badSets); nulled, as the message says, it renders. Helm
	// keeps a null for a key no other source of values has (this chart has no
	// default shim.threads): the chart reads it as unset.
	sets = append(sets, goodSet{name: "previous-chart-values-threads-null", want: defaults(),
		args: []string{"-f", e.ValuesFile("previous-chart-threads.yaml"), "--set", "shim.threads=null"}})
	sets = append(sets, goodSet{name: "shim-threads-null-shim-mode", want: inShim(defaults()),
		args: []string{"-f", shim, "--set", "shim.threads=null"}})

	// A GPU-memory scheduler: managed extended resources, TLS on every
	// listener, one pod per node, a second (non-binding) extender.
	full := defaults()
	full.Release, full.Namespace, full.Fullname = "gpu", "sched-system", "gpu-fitledger"
	full.ServiceAccount = "gpu-fitledger"
	full.SchedulerName, full.LeaseName = "gpu-scheduler", "gpu-scheduler-leader"
	full.Replicas = 3
	full.Image = "registry.example.com/fitledger@sha256:" + strings.Repeat("ab", 32)
	full.SchedulerImage = "registry.k8s.io/kube-scheduler:v1.31.8"
	full.KubectlImage = "registry.k8s.io/kubectl:v1.31.8"
	full.ShimPort, full.GRPCPort = 18888, 19090
	full.ShimIOThreads, full.ShimMaxConnections, full.ShimMaxBodyBytes = 2, 4096, 33554432
	full.BindBudget, full.ShimServerTimeout = "9s", "9500ms" // httpTimeout: 10s
	full.GRPCTLS, full.GRPCClientAuth = true, true
	full.ShimTLS, full.ShimClientAuth = true, true
	full.Weight = 5
	full.Managed = []ExtenderManagedResource{
		{Name: "example.com/gpu-mem", IgnoredByScheduler: true},
		{Name: "nvidia.com/gpu"},
	}
	full.Extenders = 2
	full.Secrets = map[string]string{"grpc-tls": "fitledger-grpc-tls", "webhook-tls": "fitledger-shim-tls",
		"shim-ca": "fitledger-shim-tls", "shim-client-tls": "fitledger-scheduler-client-tls"}
	full.AntiAffinity = "hard"
	fullArgs := []string{"--name", "gpu", "--namespace", "sched-system", "-f", e.ValuesFile("full.yaml")}
	sets = append(sets, goodSet{name: "full", want: full, args: fullArgs})
	sets = append(sets, goodSet{name: "full-shim-mode", want: inShim(full),
		args: append(append([]string{}, fullArgs...), "-f", shim)})

	// --set on top of defaults; int64 values from --set, not float64.
	set := defaults()
	set.Release, set.Fullname, set.ServiceAccount = "my-release", "my-release-fitledger", "my-release-fitledger"
	set.SchedulerName, set.LeaseName = "other-scheduler", "other-scheduler"
	set.Weight, set.Replicas = 3, 1
	set.Preempt = false
	set.ServerResources = resources("250m", "128Mi", "1Gi")
	sets = append(sets, goodSet{name: "set-flags", want: set,
		args: []string{"--name", "my-release", "--set", "scheduler.name=other-scheduler,extender.weight=3",
			"--set", "replicaCount=1", "--set", "extender.preempt=false", "--set", "server.resources.requests.cpu=250m"}})

	// Scoring off: weight 0 is then allowed, as kube-scheduler allows it.
	noPrio := defaults()
	noPrio.Prioritize, noPrio.Weight = false, 0
	sets = append(sets, goodSet{name: "no-prioritize-weight-0", want: noPrio,
		args: []string{"--set", "extender.prioritize=false", "--set", "extender.weight=0"}})

	// No gRPC TCP listener: only the Unix socket, and no helm test.
	noTCP := defaults()
	noTCP.GRPCTCP, noTCP.Test = false, false
	sets = append(sets, goodSet{name: "no-grpc-tcp", want: noTCP,
		args: []string{"--set", "grpc.tcp.enabled=false"}})

	// Existing ServiceAccount, RBAC managed elsewhere, no PDB.
	ext := defaults()
	ext.Fullname, ext.ServiceAccount = "fl", "scheduler-sa"
	ext.CreateSA, ext.RBAC, ext.PDB = false, false, false
	sets = append(sets, goodSet{name: "external-rbac", want: ext,
		args: []string{"-f", e.ValuesFile("external-rbac.yaml")}})

	// Extender only, for an existing scheduler (config/kube-scheduler/).
	alone := defaults()
	alone.Namespace = "fitledger"
	alone.Scheduler, alone.Replicas = false, 1
	alone.ShimTLS, alone.ShimClientAuth = true, true
	alone.Managed = []ExtenderManagedResource{{Name: "example.com/gpu-mem", IgnoredByScheduler: true}}
	alone.Extenders = 0
	alone.Secrets = map[string]string{"webhook-tls": "fitledger-extender-tls"}
	aloneArgs := []string{"--namespace", "fitledger", "-f", e.ValuesFile("standalone.yaml")}
	sets = append(sets, goodSet{name: "standalone", want: alone, args: aloneArgs})
	sets = append(sets, goodSet{name: "standalone-shim-mode", want: inShim(alone),
		args: append(append([]string{}, aloneArgs...), "-f", shim)})

	// kube-scheduler follows the cluster: the chart's release for the
	// cluster's minor version (managed clusters report versions such as
	// v1.31.4-eks-1a2b3c4); on a cluster one minor newer than any it knows, its
	// newest release, one minor older (within the version-skew policy).
	for _, k := range []struct{ name, kube, tag string }{
		{"cluster-1.29", "v1.29.0", "v1.29.15"},
		{"cluster-1.31-eks", "v1.31.4-eks-1a2b3c4", "v1.31.14"},
		{"cluster-1.33", "v1.33.1", "v1.33.8"},
		{"cluster-1.34", "v1.34.0", "v1.34.4"},
		{"cluster-1.35", "v1.35.2", "v1.35.4"},
		{"cluster-1.37", "v1.37.2", "v1.37.2"},
		{"cluster-1.38-newest-known-release", "v1.38.0", "v1.37.2"},
	} {
		w := defaults()
		w.SchedulerImage = "registry.k8s.io/kube-scheduler:" + k.tag
		w.KubectlImage = "registry.k8s.io/kubectl:" + k.tag
		sets = append(sets, goodSet{name: k.name, want: w, args: []string{"--kube-version", k.kube}})
	}
	// Overrides within the policy: one minor older, a newer patch of the same
	// minor; and outside it with allowSkew.
	for _, o := range []struct{ name, kube, tag string }{
		{"override-one-minor-older", "v1.33.1", "v1.32.9"},
		{"override-newer-patch-same-minor", "v1.33.1", "v1.33.9"},
	} {
		w := defaults()
		w.SchedulerImage = "registry.k8s.io/kube-scheduler:" + o.tag
		w.KubectlImage = "registry.k8s.io/kubectl:" + o.tag
		sets = append(sets, goodSet{name: o.name, want: w,
			args: []string{"--kube-version", o.kube, "--set", "scheduler.image.tag=" + o.tag}})
	}
	skew := defaults()
	skew.SchedulerImage = "registry.k8s.io/kube-scheduler:v1.34.1"
	skew.KubectlImage = "registry.k8s.io/kubectl:v1.34.1"
	sets = append(sets, goodSet{name: "override-outside-skew-with-allowSkew", want: skew,
		args: []string{"--kube-version", "v1.31.2", "--set", "scheduler.image.tag=v1.34.1", "--set", "scheduler.image.allowSkew=true"}})
	kubectl := defaults()
	kubectl.KubectlImage = "registry.k8s.io/kubectl:v1.32.0"
	sets = append(sets, goodSet{name: "kubectl-tag-override", want: kubectl,
		args: []string{"--set", "test.kubectlImage.tag=v1.32.0"}})

	// The deadlines follow extender.httpTimeout.
	slow := defaults()
	slow.BindBudget, slow.ShimServerTimeout = "1500ms", "2s"
	sets = append(sets, goodSet{name: "http-timeout-2500ms", want: slow,
		args: []string{"--set", "extender.httpTimeout=2500ms"}})
	sets = append(sets, goodSet{name: "http-timeout-2500ms-shim-mode", want: inShim(slow),
		args: []string{"--set", "extender.httpTimeout=2500ms", "-f", shim}})

	// Fewer candidates per cycle (docs/performance.md), and 0: the adaptive default, unwritten.
	pct := defaults()
	pct.PercentageOfNodesToScore = 20
	sets = append(sets, goodSet{name: "percentage-of-nodes-to-score-20", want: pct,
		args: []string{"--set", "scheduler.percentageOfNodesToScore=20"}})
	sets = append(sets, goodSet{name: "percentage-of-nodes-to-score-0", want: defaults(),
		args: []string{"--set", "scheduler.percentageOfNodesToScore=0"}})

	// Leader election durations of zero: kube-scheduler's defaults (15s, 10s, 2s),
	// as it reads them; the relations are checked on those.
	sets = append(sets, goodSet{name: "leader-election-durations-zero", want: defaults(),
		args: []string{"--set", "scheduler.leaderElection.leaseDuration=0s,scheduler.leaderElection.renewDeadline=0s,scheduler.leaderElection.retryPeriod=0s"}})
	sets = append(sets, goodSet{name: "leader-election-retry-zero-renew-2500ms", want: defaults(),
		args: []string{"--set", "scheduler.leaderElection.renewDeadline=2500ms,scheduler.leaderElection.retryPeriod=0s"}})

	// What kube-scheduler ignores, fitledger's ledger ignores: the profile's
	// NodeResourcesFitArgs...
	ign := defaults()
	ign.FitIgnored = []string{"example.com/foo", "vendor.example/bar"}
	ign.FitIgnoredGroups = []string{"example.org", "example.com"}
	ign.LedgerIgnored, ign.LedgerIgnoredGroups = ign.FitIgnored, ign.FitIgnoredGroups
	ignArgs := []string{"-f", e.ValuesFile("ignored-resources.yaml")}
	sets = append(sets, goodSet{name: "ignored-resources", want: ign, args: ignArgs})
	// ... replaced by the extenders' ignoredByScheduler resources when there
	// are any (kube-scheduler's buildExtenders)...
	ext2 := ign
	ext2.Extenders = 2
	ext2.LedgerIgnored = []string{"other.example/thing", "third.example/widget"}
	sets = append(sets, goodSet{name: "ignored-resources-and-another-extenders", want: ext2,
		args: append(append([]string{}, ignArgs...), "-f", e.ValuesFile("ignored-by-extenders.yaml"))})
	// ... less what fitledger manages itself (full.yaml: example.com/gpu-mem,
	// ignoredByScheduler, so the profile's list is replaced by it, and the
	// example.com group).
	fullIgn := full
	fullIgn.FitIgnored, fullIgn.FitIgnoredGroups = ign.FitIgnored, ign.FitIgnoredGroups
	fullIgn.LedgerIgnored, fullIgn.LedgerIgnoredGroups = nil, []string{"example.org"}
	sets = append(sets, goodSet{name: "full-with-ignored-resources", want: fullIgn,
		args: append(append([]string{}, fullArgs...), ignArgs...)})

	// Every set installs a built image (image.repository has no default).
	for i := range sets {
		sets[i].args = append([]string{"-f", e.ValuesFile("image.yaml")}, sets[i].args...)
	}
	return sets
}

type badSet struct {
	name string
	args []string
	// want is a substring of the renderer's error; with schema validation
	// skipped, wantTemplate (if set) must come from the chart's own checks.
	want         string
	wantTemplate string
}

// The chart's refusal of shim.threads, as the binaries refuse threads: what
// replaced it, and how to upgrade with --reuse-values.
const (
	threadsRemoved = "shim.threads was removed (set to 64): the webhook no longer holds a thread per request. Remove it from your values: the webhook now runs on shim.ioThreads I/O threads (default 0: one per CPU) and shim.maxConnections caps its open connections (default 1024)"
	threadsReuse   = "`helm upgrade --reuse-values` brings back an earlier chart's shim.threads (its default was 64): upgrade with --reset-then-reuse-values (Helm 3.14+) instead, adding --set shim.threads=null if you had set it yourself, or pass your values files again"
)

func badSets(e *Env) []badSet {
	notExtended := "is not an extended resource name"
	skewPolicy := "version-skew policy, https://kubernetes.io/releases/version-skew-policy/"
	image := []string{"-f", e.ValuesFile("image.yaml")}
	withImage := func(b badSet) badSet {
		b.args = append(append([]string{}, image...), b.args...)
		return b
	}
	sets := []badSet{
		{name: "scheduler newer than the cluster", args: []string{"--kube-version", "v1.32.0", "--set", "scheduler.image.tag=v1.33.2"},
			wantTemplate: "scheduler.image.tag v1.33.2 is newer than the cluster (Kubernetes v1.32.0): kube-scheduler must not be newer than the API server (" + skewPolicy + "). Use a 1.32.x or 1.31.x kube-scheduler (empty: v1.32.12), or set scheduler.image.allowSkew=true"},
		{name: "scheduler newer than a 1.29 cluster", args: []string{"--kube-version", "v1.29.3", "--set", "scheduler.image.tag=v1.30.14"},
			wantTemplate: "scheduler.image.tag v1.30.14 is newer than the cluster (Kubernetes v1.29.3)"},
		{name: "scheduler two minors older than the cluster", args: []string{"--kube-version", "v1.34.0", "--set", "scheduler.image.tag=v1.32.12"},
			wantTemplate: "scheduler.image.tag v1.32.12 is more than one minor version older than the cluster (Kubernetes v1.34.0): kube-scheduler may be at most one minor version older than the API server (" + skewPolicy + "). Use a 1.34.x or 1.33.x kube-scheduler (empty: v1.34.4)"},
		{name: "a cluster two minors past the chart's releases", args: []string{"--kube-version", "v1.39.0"},
			wantTemplate: "no kube-scheduler release is known to this chart for Kubernetes 1.39 (the cluster is v1.39.0; the chart knows 1.29 to 1.37): set scheduler.image.tag"},
		{name: "scheduler tag that is not a version", args: []string{"--set", "scheduler.image.tag=latest"},
			want: "scheduler.image.tag: Does not match pattern", wantTemplate: `scheduler.image.tag "latest" is not a Kubernetes version`},
		{name: "httpTimeout too short for a bind budget", args: []string{"--set", "extender.httpTimeout=1500ms"},
			wantTemplate: "extender.httpTimeout must be at least 2s, got 1500ms: fitledger's Bind verb must end 1s before it (kubernetes.bindBudget = httpTimeout - 1s)"},
		{name: "leaseDuration not above renewDeadline", args: []string{"--set", "scheduler.leaderElection.leaseDuration=10s"},
			wantTemplate: "scheduler.leaderElection.leaseDuration (10s) must be greater than renewDeadline (10s): kube-scheduler refuses to start otherwise"},
		{name: "leaseDuration of zero (15s) not above renewDeadline", args: []string{"--set", "scheduler.leaderElection.leaseDuration=0s,scheduler.leaderElection.renewDeadline=20s"},
			wantTemplate: "scheduler.leaderElection.leaseDuration (15s) must be greater than renewDeadline (20s): kube-scheduler refuses to start otherwise"},
		{name: "renewDeadline not above 1.2 x retryPeriod", args: []string{"--set", "scheduler.leaderElection.renewDeadline=2400ms"},
			wantTemplate: "scheduler.leaderElection.renewDeadline (2400ms) must be greater than 1.2 x retryPeriod (2s)"},
		{name: "negative retryPeriod", args: []string{"--set", "scheduler.leaderElection.retryPeriod=-2s"},
			want:         "scheduler.leaderElection.retryPeriod",
			wantTemplate: "scheduler.leaderElection.retryPeriod must not be negative, got -2s: kube-scheduler refuses to start otherwise (0s: its default)"},
		{name: "retryPeriod under a millisecond", args: []string{"--set", "scheduler.leaderElection.retryPeriod=500us"},
			wantTemplate: "scheduler.leaderElection.retryPeriod must be at least 1ms (0s: kube-scheduler's default), got 500us"},
		{name: "percentageOfNodesToScore above 100", args: []string{"--set", "scheduler.percentageOfNodesToScore=101"},
			want: "scheduler.percentageOfNodesToScore", wantTemplate: "scheduler.percentageOfNodesToScore must be an integer in 0..100 (kube-scheduler's validation), or empty; got 101"},
		{name: "percentageOfNodesToScore not an integer", args: []string{"--set", "scheduler.percentageOfNodesToScore=12.5"},
			want: "scheduler.percentageOfNodesToScore", wantTemplate: "scheduler.percentageOfNodesToScore must be an integer in 0..100 (kube-scheduler's validation), or empty; got 12.5"},
		{name: "assumedReconcileAge under twice the bind timeout", args: []string{"--set", "server.ledger.assumedReconcileAge=5s"},
			wantTemplate: "server.ledger.assumedReconcileAge must be at least 6s, got 5s: twice fitledger-server's kubernetes.bindTimeout (3s)"},
		{name: "ignored resource group with a slash", args: []string{"--set", "scheduler.nodeResourcesFit.ignoredResourceGroups[0]=example.com/gpu"},
			want: "scheduler.nodeResourcesFit.ignoredResourceGroups.0", wantTemplate: `scheduler.nodeResourcesFit.ignoredResourceGroups[0] "example.com/gpu": a resource group is the part before "/"`},
		{name: "ignored resource that is not a name", args: []string{"--set", "scheduler.nodeResourcesFit.ignoredResources[0]=not a name"},
			want: "scheduler.nodeResourcesFit.ignoredResources.0", wantTemplate: `scheduler.nodeResourcesFit.ignoredResources[0] "not a name" is not a resource name`},
	}
	old := []badSet{
		{name: "weight-0-with-prioritize (values file)", args: []string{"-f", e.ValuesFile("bad-weight.yaml")},
			want: "extender.weight: Must be greater than or equal to 1", wantTemplate: "extender.weight must be > 0 when extender.prioritize is true"},
		{name: "weight-0-with-prioritize (--set)", args: []string{"--set", "extender.weight=0"},
			want: "extender.weight: Must be greater than or equal to 1", wantTemplate: "extender.weight must be > 0 when extender.prioritize is true"},
		{name: "negative weight", args: []string{"--set", "extender.weight=-2"},
			want: "extender.weight", wantTemplate: "extender.weight must be > 0"},
		{name: "managed resource cpu", args: []string{"-f", e.ValuesFile("bad-managed-cpu.yaml")},
			want: "extender.managedResources.0.name", wantTemplate: `extender.managedResources[0].name "cpu" ` + notExtended},
		{name: "managed resource kubernetes.io/", args: []string{"--set", "extender.managedResources[0].name=kubernetes.io/batteries"},
			want: "extender.managedResources.0.name", wantTemplate: `"kubernetes.io/batteries" ` + notExtended},
		{name: "managed resource in a kubernetes.io subdomain", args: []string{"--set", "extender.managedResources[0].name=gpu.kubernetes.io/mem"},
			want: "extender.managedResources.0.name", wantTemplate: notExtended},
		{name: "managed resource hugepages", args: []string{"--set", "extender.managedResources[0].name=hugepages-2Mi"},
			want: "extender.managedResources.0.name", wantTemplate: notExtended},
		{name: "managed resource without a name part", args: []string{"--set", "extender.managedResources[0].name=example.com/"},
			want: "extender.managedResources.0.name", wantTemplate: notExtended},
		{name: "managed resource requests. prefix", args: []string{"--set", "extender.managedResources[0].name=requests.example.com/gpu"},
			want: "extender.managedResources.0.name", wantTemplate: notExtended},
		{name: "duplicate managed resource", args: []string{"-f", e.ValuesFile("bad-duplicate-managed.yaml")},
			wantTemplate: "is listed twice"},
		{name: "two binders", args: []string{"-f", e.ValuesFile("bad-two-binders.yaml")},
			wantTemplate: "only one extender may bind, found 2"},
		{name: "extra extender prioritizing with weight 0", args: []string{"-f", e.ValuesFile("bad-extra-weight.yaml")},
			want: "scheduler.extraExtenders.0.weight", wantTemplate: "scheduler.extraExtenders[0].weight must be > 0"},
		{name: "extra extender managing fitledger's resource", args: []string{"-f", e.ValuesFile("bad-extra-duplicate.yaml")},
			wantTemplate: "is already managed by another extender"},
		{name: "standalone without TLS", args: []string{"--set", "scheduler.enabled=false"},
			wantTemplate: "scheduler.enabled=false exposes the extender webhook"},
		{name: "standalone without TLS, shim mode", args: []string{"-f", e.ValuesFile("webhook-shim.yaml"), "--set", "scheduler.enabled=false"},
			wantTemplate: "scheduler.enabled=false exposes the extender webhook"},
		{name: "unknown webhook.mode (values file)", args: []string{"-f", e.ValuesFile("bad-webhook-mode.yaml")},
			want:         `webhook.mode: webhook.mode must be one of the following: "server", "shim"`,
			wantTemplate: `webhook.mode must be "server" (fitledger-server serves the extender webhook) or "shim" (a fitledger-shim container serves it); got "sidecar"`},
		{name: "webhook.mode in the wrong case", args: []string{"--set", "webhook.mode=Server"},
			want: "webhook.mode: webhook.mode must be one of the following", wantTemplate: `webhook.mode must be "server"`},
		{name: "misspelled webhook value", args: []string{"--set", "webhook.mod=shim"},
			want: "Additional property mod is not allowed"},
		// shim.threads was removed: refused (schema or not) with what replaced it, as the binaries refuse threads.
		{name: "shim.threads (removed)", args: []string{"--set", "shim.threads=64"},
			want: threadsRemoved, wantTemplate: threadsRemoved},
		{name: "shim.threads (removed), shim mode", args: []string{"-f", e.ValuesFile("webhook-shim.yaml"), "--set", "shim.threads=8"},
			want: strings.Replace(threadsRemoved, "(set to 64)", "(set to 8)", 1), wantTemplate: strings.Replace(threadsRemoved, "(set to 64)", "(set to 8)", 1)},
		{name: "upgrade --reuse-values from a chart with shim.threads", args: []string{"-f", e.ValuesFile("previous-chart-threads.yaml")},
			want: threadsReuse, wantTemplate: threadsReuse},
		{name: "shim.ioThreads above 256", args: []string{"--set", "shim.ioThreads=257"},
			want: "shim.ioThreads: Must be less than or equal to 256", wantTemplate: "shim.ioThreads must be an integer in 0..256 (fitledger-server's webhook.ioThreads and fitledger-shim's ioThreads); got 257"},
		{name: "negative shim.ioThreads", args: []string{"--set", "shim.ioThreads=-1"},
			want: "shim.ioThreads: Must be greater than or equal to 0", wantTemplate: "shim.ioThreads must be an integer in 0..256"},
		{name: "shim.ioThreads not a number", args: []string{"--set", "shim.ioThreads=many"},
			want: "shim.ioThreads: Invalid type", wantTemplate: `shim.ioThreads must be an integer in 0..256; got "many"`},
		{name: "shim.maxConnections 0", args: []string{"--set", "shim.maxConnections=0"},
			want: "shim.maxConnections: Must be greater than or equal to 1", wantTemplate: "shim.maxConnections must be an integer in 1..1048576"},
		{name: "shim.maxConnections above 2^20", args: []string{"-f", e.ValuesFile("webhook-shim.yaml"), "--set", "shim.maxConnections=1048577"},
			want: "shim.maxConnections: Must be less than or equal to", wantTemplate: "shim.maxConnections must be an integer in 1..1048576 (fitledger-server's webhook.maxConnections and fitledger-shim's maxConnections); got 1048577"},
		{name: "webhook port on the server's monitor port", args: []string{"--set", "shim.port=8081"},
			wantTemplate: "server.monitorPort and shim.port are both 8081"},
		{name: "webhook port on kube-scheduler's port", args: []string{"--set", "shim.port=10259"},
			wantTemplate: "shim.port and kube-scheduler's secure port are both 10259"},
		{name: "shim monitor on the gRPC port, shim mode", args: []string{"-f", e.ValuesFile("webhook-shim.yaml"), "--set", "shim.monitorPort=9090"},
			wantTemplate: "grpc.tcp.port and shim.monitorPort are both 9090"},
		{name: "shim clientAuth without client secret", args: []string{"--set", "shim.tls.secretName=shim-tls,shim.tls.clientAuth=true"},
			wantTemplate: "shim.tls.clientSecretName is required"},
		{name: "existing ServiceAccount without a name", args: []string{"--set", "serviceAccount.create=false"},
			wantTemplate: "serviceAccount.name is required when serviceAccount.create is false"},
		{name: "misspelled value", args: []string{"--set", "extender.wieght=2"},
			want: "Additional property wieght is not allowed"},
		{name: "scheduler name not a DNS subdomain", args: []string{"--set", "scheduler.name=Fit_Ledger"},
			want: "scheduler.name: Does not match pattern"},
		{name: "Kubernetes older than native sidecars", args: []string{"--kube-version", "v1.28.9"},
			want: "chart requires kubeVersion: >=1.29.0-0 which is incompatible with Kubernetes v1.28.9"},
	}
	var out []badSet
	for _, b := range append(sets, old...) {
		out = append(out, withImage(b))
	}
	// The image unset: no default can be pulled, so rendering says how to build one.
	unset := "image.repository is not set, and fitledger's image is in no public registry: build it from the repository's Dockerfile, push it to a registry your cluster pulls from, and set image.repository to it: `docker build -t REGISTRY/fitledger:0.1.0 . && docker push REGISTRY/fitledger:0.1.0`, then `helm install ... --set image.repository=REGISTRY/fitledger`"
	return append(out,
		badSet{name: "image.repository unset", wantTemplate: unset},
		badSet{name: "image.repository set empty", args: []string{"-f", e.ValuesFile("image.yaml"), "--set", "image.repository="}, wantTemplate: unset},
		badSet{name: "image.repository unset in standalone mode", args: []string{"--namespace", "fitledger", "-f", e.ValuesFile("standalone.yaml")}, wantTemplate: unset})
}
