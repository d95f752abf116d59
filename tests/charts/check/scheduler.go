package main

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"reflect"
	"strings"
	"time"
)

func (r *rendered) loadSchedulerConfig() error {
	c := r.containers["kube-scheduler"]
	p := configFlag(strList(c["args"]))
	if p == "" {
		return fmt.Errorf("kube-scheduler has no --config")
	}
	doc, err := configFile(r, c, p)
	if err != nil {
		return err
	}
	cfg, err := ParseKubeSchedulerConfiguration(doc)
	if err != nil {
		return err
	}
	if err := ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return err
	}
	r.sched = cfg
	return nil
}

func checkExtenderEntry(r *rendered, w *Want) error {
	exts := r.sched.Extenders
	if len(exts) != w.Extenders {
		return fmt.Errorf("%d extenders, want %d", len(exts), w.Extenders)
	}
	e := exts[0]
	if err := checkLoopbackExtender(e, w.ShimPort, w.ShimTLS); err != nil {
		return err
	}
	// The process serving the webhook listens where urlPrefix points, with
	// the prefix and TLS the entry expects.
	var listen, prefix string
	var tls bool
	switch {
	case w.Webhook == "shim" && r.shim != nil:
		listen, prefix, tls = r.shim.Listen, r.shim.Prefix, r.shim.TLS != nil
	case w.Webhook != "shim" && r.server != nil && r.server.Webhook != nil:
		listen, prefix, tls = r.server.Webhook.Listen, r.server.Webhook.Prefix, r.server.Webhook.TLS != nil
	default:
		return fmt.Errorf("no %s webhook configuration to compare the extender entry with", w.Webhook)
	}
	u, err := url.Parse(e.URLPrefix)
	if err != nil {
		return err
	}
	if listen != u.Host {
		return fmt.Errorf("the %s webhook listens on %s, the extender calls %s", w.Webhook, listen, u.Host)
	}
	if strings.TrimRight(u.Path, "/") != strings.TrimRight(prefix, "/") {
		return fmt.Errorf("the %s webhook's prefix is %q, the extender calls %q", w.Webhook, prefix, u.Path)
	}
	if tls != (u.Scheme == "https") {
		return fmt.Errorf("the %s webhook serves TLS %v, the extender calls %s", w.Webhook, tls, u.Scheme)
	}
	if (e.PrioritizeVerb != "") != w.Prioritize {
		return fmt.Errorf("prioritizeVerb %q, want prioritize=%v", e.PrioritizeVerb, w.Prioritize)
	}
	if w.Prioritize && e.Weight != w.Weight {
		return fmt.Errorf("weight %d, want %d", e.Weight, w.Weight)
	}
	if (e.BindVerb != "") != w.Bind || (e.PreemptVerb != "") != w.Preempt {
		return fmt.Errorf("bindVerb %q preemptVerb %q, want bind=%v preempt=%v", e.BindVerb, e.PreemptVerb, w.Bind, w.Preempt)
	}
	if (e.TLSConfig != nil) != w.ShimTLS {
		return fmt.Errorf("tlsConfig present %v, want %v", e.TLSConfig != nil, w.ShimTLS)
	}
	if w.ShimTLS {
		t := e.TLSConfig
		if t.Insecure {
			return fmt.Errorf("tlsConfig.insecure must not be set")
		}
		if t.CAFile == "" {
			return fmt.Errorf("tlsConfig.caFile is empty: the shim's certificate would be checked against the system roots")
		}
		if (t.CertFile != "") != w.ShimClientAuth || (t.KeyFile != "") != w.ShimClientAuth {
			return fmt.Errorf("tlsConfig certFile/keyFile set %v, want %v", t.CertFile != "", w.ShimClientAuth)
		}
	}
	return nil
}

func checkManaged(r *rendered, w *Want) error {
	got := r.sched.Extenders[0].ManagedResources
	if len(got) == 0 && len(w.Managed) == 0 {
		return nil
	}
	if !reflect.DeepEqual(got, w.Managed) {
		return fmt.Errorf("managedResources %+v, want %+v", got, w.Managed)
	}
	return nil
}

// checkDeadlines: fitledger answers within kube-scheduler's httpTimeout: the
// server's bind budget ends first, then (shim mode) the shim's wait for the
// server, then kube-scheduler's own timeout.
func checkDeadlines(r *rendered) error {
	if r.server == nil {
		return fmt.Errorf("server config missing")
	}
	httpTimeout, err := time.ParseDuration(r.sched.Extenders[0].HTTPTimeout)
	if err != nil {
		return fmt.Errorf("extender httpTimeout %q: %v", r.sched.Extenders[0].HTTPTimeout, err)
	}
	budget, err := time.ParseDuration(r.server.Kubernetes.BindBudget)
	if err != nil || budget <= 0 {
		return fmt.Errorf("kubernetes.bindBudget %q is not a positive duration", r.server.Kubernetes.BindBudget)
	}
	if budget > httpTimeout-time.Second {
		return fmt.Errorf("bind budget %v leaves less than 1s of kube-scheduler's httpTimeout %v", budget, httpTimeout)
	}
	if r.shim != nil {
		wait, err := time.ParseDuration(r.shim.ServerTimeout)
		if err != nil || wait <= budget || wait >= httpTimeout {
			return fmt.Errorf("shim serverTimeout %q must lie between the bind budget %v and httpTimeout %v", r.shim.ServerTimeout, budget, httpTimeout)
		}
	}
	return nil
}

// checkPercentageOfNodesToScore: the profile carries
// scheduler.percentageOfNodesToScore when set (not 0), and no such key otherwise.
func checkPercentageOfNodesToScore(r *rendered, w *Want) error {
	got := r.sched.Profiles[0].PercentageOfNodesToScore
	switch {
	case w.PercentageOfNodesToScore == 0 && got != nil:
		return fmt.Errorf("profile percentageOfNodesToScore %d, want none", *got)
	case w.PercentageOfNodesToScore != 0 && (got == nil || *got != w.PercentageOfNodesToScore):
		return fmt.Errorf("profile percentageOfNodesToScore %v, want %d", got, w.PercentageOfNodesToScore)
	}
	return nil
}

// checkIgnoredResources: the profile's NodeResourcesFit arguments are the
// values', and the server's ledger ignores what kube-scheduler will ignore,
// computed here from the rendered KubeSchedulerConfiguration by
// kube-scheduler's own rule (pkg/scheduler/scheduler.go buildExtenders: when
// any extender has managedResources with ignoredByScheduler, they replace the
// profile's ignoredResources), less fitledger's own managed resources (and
// their groups).
func checkIgnoredResources(r *rendered, w *Want) error {
	var profIgnored, profGroups []string
	for _, pc := range r.sched.Profiles[0].PluginConfig {
		if str(pc["name"]) != "NodeResourcesFit" {
			continue
		}
		profIgnored = strList(get(pc, "args", "ignoredResources"))
		profGroups = strList(get(pc, "args", "ignoredResourceGroups"))
	}
	if !equalStrings(profIgnored, w.FitIgnored) || !equalStrings(profGroups, w.FitIgnoredGroups) {
		return fmt.Errorf("profile NodeResourcesFit ignoredResources %v ignoredResourceGroups %v, want %v and %v",
			profIgnored, profGroups, w.FitIgnored, w.FitIgnoredGroups)
	}
	var fromExtenders []string
	for _, x := range r.sched.Extenders {
		for _, m := range x.ManagedResources {
			if m.IgnoredByScheduler {
				fromExtenders = append(fromExtenders, m.Name)
			}
		}
	}
	effective := profIgnored
	if len(fromExtenders) > 0 {
		effective = fromExtenders
	}
	own, ownGroups := map[string]bool{}, map[string]bool{}
	for _, m := range r.sched.Extenders[0].ManagedResources {
		own[m.Name] = true
		ownGroups[strings.SplitN(m.Name, "/", 2)[0]] = true
	}
	var want, wantGroups []string
	for _, n := range effective {
		if !own[n] {
			want = append(want, n)
		}
	}
	for _, g := range profGroups {
		if !ownGroups[g] {
			wantGroups = append(wantGroups, g)
		}
	}
	got := r.server.Ledger
	if !equalStrings(got.IgnoredResources, want) || !equalStrings(got.IgnoredResourceGroups, wantGroups) {
		return fmt.Errorf("server ledger.ignoredResources %v ignoredResourceGroups %v; kube-scheduler ignores %v and groups %v (fitledger's own %v excepted)",
			got.IgnoredResources, got.IgnoredResourceGroups, want, wantGroups, r.sched.Extenders[0].ManagedResources)
	}
	return nil
}

// checkSelectsOnlyTheDeployment: `sel` (a PodDisruptionBudget's, the
// anti-affinity's or the Service's) names the pods' component and matches
// neither the `helm test` pod nor any other pod the chart renders.
func checkSelectsOnlyTheDeployment(what string, sel map[string]interface{}, r *rendered) error {
	labels := mapOf(get(r.deploy.M, "spec", "template", "metadata", "labels"))
	if comp := str(labels["app.kubernetes.io/component"]); comp == "" || str(sel["app.kubernetes.io/component"]) != comp {
		return fmt.Errorf("%s selector %v does not select app.kubernetes.io/component=%s", what, sel, comp)
	}
	for _, o := range r.objs {
		if o.Kind() != "Pod" {
			continue
		}
		podLabels := mapOf(get(o.M, "metadata", "labels"))
		matches := true
		for k, v := range sel {
			if podLabels[k] != v {
				matches = false
			}
		}
		if matches {
			return fmt.Errorf("%s selector %v also selects the pod %s", what, sel, o.Name())
		}
	}
	return nil
}

func checkLeaderElection(r *rendered, w *Want) error {
	le := r.sched.LeaderElection
	if le.LeaderElect == nil || !*le.LeaderElect {
		return fmt.Errorf("leaderElection.leaderElect is not true")
	}
	if le.ResourceName != w.LeaseName || le.ResourceNamespace != w.Namespace || le.ResourceLock != "leases" {
		return fmt.Errorf("Lease %s %s/%s, want leases %s/%s", le.ResourceLock, le.ResourceNamespace, le.ResourceName, w.Namespace, w.LeaseName)
	}
	if le.ResourceName == "kube-scheduler" {
		return fmt.Errorf("the Lease must not be the default scheduler's")
	}
	if r.server != nil {
		sle := r.server.LeaderElection
		if sle == nil || sle.LeaseName != le.ResourceName || sle.LeaseNamespace != le.ResourceNamespace {
			return fmt.Errorf("fitledger-server follows the Lease %+v, kube-scheduler elects on %s/%s", sle, le.ResourceNamespace, le.ResourceName)
		}
	}
	if len(r.sched.Profiles) != 1 || *r.sched.Profiles[0].SchedulerName != w.SchedulerName {
		return fmt.Errorf("profiles %+v, want one for %s", r.sched.Profiles, w.SchedulerName)
	}
	if w.SchedulerName == "default-scheduler" {
		return fmt.Errorf("a second scheduler must not take the default scheduler's name")
	}
	return nil
}

func checkSchedulerWiring(r *rendered, w *Want) error {
	c := r.containers["kube-scheduler"]
	if got := strList(c["command"]); !reflect.DeepEqual(got, []string{"/usr/local/bin/kube-scheduler"}) {
		return fmt.Errorf("kube-scheduler command %v", got)
	}
	if mp, ok := mount(c, "scheduler-tmp"); !ok || mp != "/tmp" {
		return fmt.Errorf("kube-scheduler has no writable /tmp (its root filesystem is read-only)")
	}
	if t := r.sched.Extenders[0].TLSConfig; t != nil {
		if err := filesUnderMount(c, "shim-ca", t.CAFile); err != nil {
			return err
		}
		if path.Base(t.CAFile) != "ca.crt" {
			return fmt.Errorf("tlsConfig.caFile %s is not the projected ca.crt", t.CAFile)
		}
		if t.CertFile != "" {
			if err := filesUnderMount(c, "shim-client-tls", t.CertFile, t.KeyFile); err != nil {
				return err
			}
		}
	}
	for _, a := range strList(c["args"]) {
		if strings.HasPrefix(a, "--leader-elect") || strings.HasPrefix(a, "--kubeconfig") || strings.HasPrefix(a, "--bind-address=127.") {
			return fmt.Errorf("kube-scheduler arg %q overrides the configuration or hides the probes", a)
		}
	}
	return nil
}

func checkStandalone(r *rendered, w *Want) error {
	for _, cm := range ofKind(r.objs, "ConfigMap") {
		for _, v := range mapOf(cm.M["data"]) {
			if strings.Contains(str(v), "KubeSchedulerConfiguration") {
				return fmt.Errorf("ConfigMap %s carries a KubeSchedulerConfiguration without a kube-scheduler", cm.Name())
			}
		}
	}
	svc, ok := find(r.objs, "Service", w.Fullname+"-extender")
	if !ok {
		return fmt.Errorf("no Service %s-extender", w.Fullname)
	}
	labels := mapOf(get(r.deploy.M, "spec", "template", "metadata", "labels"))
	sel := mapOf(get(svc.M, "spec", "selector"))
	if len(sel) == 0 {
		return fmt.Errorf("Service without selector")
	}
	for k, v := range sel {
		if labels[k] != v {
			return fmt.Errorf("Service selector %s=%v does not match the pod", k, v)
		}
	}
	if err := checkSelectsOnlyTheDeployment("Service", sel, r); err != nil {
		return err
	}
	if ip := str(get(svc.M, "spec", "clusterIP")); ip != "" && net.ParseIP(ip) == nil {
		return fmt.Errorf("clusterIP %q is not an IP", ip)
	}
	ports := list(get(svc.M, "spec", "ports"))
	if len(ports) != 1 {
		return fmt.Errorf("Service ports %v, want one", ports)
	}
	port, _ := num(get(ports[0], "port"))
	target := str(get(ports[0], "targetPort"))
	if port != w.ShimPort {
		return fmt.Errorf("Service port %d, want the webhook's %d", port, w.ShimPort)
	}
	// The named targetPort resolves in exactly one container: the one serving
	// the webhook.
	serving := "fitledger-server"
	if w.Webhook == "shim" {
		serving = "fitledger-shim"
	}
	var targetPort int64
	for n, c := range r.containers {
		for _, p := range list(c["ports"]) {
			if str(get(p, "name")) != target {
				continue
			}
			if n != serving {
				return fmt.Errorf("Service targetPort %q is declared by %s, want %s (it serves the webhook)", target, n, serving)
			}
			targetPort, _ = num(get(p, "containerPort"))
		}
	}
	if targetPort != w.ShimPort {
		return fmt.Errorf("Service targetPort %q does not resolve to %s's webhook port %d", target, serving, w.ShimPort)
	}
	listen := ""
	if w.Webhook == "shim" && r.shim != nil {
		listen = r.shim.Listen
	} else if r.server != nil && r.server.Webhook != nil {
		listen = r.server.Webhook.Listen
	}
	if listen != fmt.Sprintf("0.0.0.0:%d", targetPort) {
		return fmt.Errorf("%s's webhook listens on %q; the Service sends to port %d of the pod IP", serving, listen, targetPort)
	}
	return nil
}

func checkServiceAccount(r *rendered, w *Want) error {
	if w.CreateSA {
		sa, ok := find(r.objs, "ServiceAccount", w.ServiceAccount)
		if !ok || sa.IsHook() {
			return fmt.Errorf("ServiceAccount %s is not rendered", w.ServiceAccount)
		}
	}
	if r.podSpec["automountServiceAccountToken"] == false {
		return fmt.Errorf("the pod does not mount its token: the in-cluster clients could not authenticate")
	}
	return nil
}

func checkPDB(r *rendered, w *Want) error {
	pdbs := ofKind(r.objs, "PodDisruptionBudget")
	if !w.PDB {
		if len(pdbs) != 0 {
			return fmt.Errorf("PodDisruptionBudget rendered although disabled")
		}
		return nil
	}
	if len(pdbs) != 1 {
		return fmt.Errorf("%d PodDisruptionBudgets, want 1", len(pdbs))
	}
	pdb := pdbs[0]
	spec := mapOf(pdb.M["spec"])
	if (spec["maxUnavailable"] == nil) == (spec["minAvailable"] == nil) {
		return fmt.Errorf("set exactly one of maxUnavailable and minAvailable")
	}
	if n, ok := num(spec["minAvailable"]); ok && n >= w.Replicas {
		return fmt.Errorf("minAvailable %d >= replicas %d blocks every drain", n, w.Replicas)
	}
	labels := mapOf(get(r.deploy.M, "spec", "template", "metadata", "labels"))
	sel := mapOf(get(spec, "selector", "matchLabels"))
	if len(sel) == 0 {
		return fmt.Errorf("empty selector would select every pod of the namespace")
	}
	for k, v := range sel {
		if labels[k] != v {
			return fmt.Errorf("selector %s=%v does not match the pods", k, v)
		}
	}
	return checkSelectsOnlyTheDeployment("PodDisruptionBudget", sel, r)
}

func checkAntiAffinity(r *rendered, w *Want) error {
	anti := mapOf(get(r.podSpec, "affinity", "podAntiAffinity"))
	labels := mapOf(get(r.deploy.M, "spec", "template", "metadata", "labels"))
	var terms []interface{}
	switch w.AntiAffinity {
	case "hard":
		terms = list(anti["requiredDuringSchedulingIgnoredDuringExecution"])
		if anti["preferredDuringSchedulingIgnoredDuringExecution"] != nil {
			return fmt.Errorf("both required and preferred anti-affinity")
		}
	case "soft":
		for _, p := range list(anti["preferredDuringSchedulingIgnoredDuringExecution"]) {
			if n, ok := num(get(p, "weight")); !ok || n < 1 || n > 100 {
				return fmt.Errorf("preferred anti-affinity weight %v outside 1..100", get(p, "weight"))
			}
			terms = append(terms, get(p, "podAffinityTerm"))
		}
		if anti["requiredDuringSchedulingIgnoredDuringExecution"] != nil {
			return fmt.Errorf("required anti-affinity with podAntiAffinity=soft")
		}
	}
	if len(terms) != 1 {
		return fmt.Errorf("%d %s anti-affinity terms, want 1", len(terms), w.AntiAffinity)
	}
	t := mapOf(terms[0])
	if str(t["topologyKey"]) != "kubernetes.io/hostname" {
		return fmt.Errorf("topologyKey %q, want kubernetes.io/hostname", str(t["topologyKey"]))
	}
	sel := mapOf(get(t, "labelSelector", "matchLabels"))
	if len(sel) == 0 {
		return fmt.Errorf("anti-affinity term without matchLabels")
	}
	for k, v := range sel {
		if labels[k] != v {
			return fmt.Errorf("anti-affinity selector %s=%v does not match the pods", k, v)
		}
	}
	return checkSelectsOnlyTheDeployment("anti-affinity", sel, r)
}

func checkTestHook(objs []Obj, w *Want) error {
	var hooks []Obj
	for _, o := range objs {
		if o.IsHook() {
			hooks = append(hooks, o)
		}
	}
	if !w.Test {
		if len(hooks) != 0 {
			return fmt.Errorf("hook %s rendered without a gRPC TCP listener to test", hooks[0].Ref())
		}
		return nil
	}
	for _, h := range hooks {
		if h.Annotation("helm.sh/hook") != "test" {
			return fmt.Errorf("%s: hook %q, want test", h.Ref(), h.Annotation("helm.sh/hook"))
		}
		if !strings.Contains(h.Annotation("helm.sh/hook-delete-policy"), "before-hook-creation") {
			return fmt.Errorf("%s: a second `helm test` would fail on the leftover object", h.Ref())
		}
	}
	pod, ok := find(objs, "Pod", w.Fullname+"-test-grpc-health")
	if !ok {
		return fmt.Errorf("no test pod")
	}
	if !pod.IsHook() {
		return fmt.Errorf("test pod is not a hook")
	}
	spec := mapOf(pod.M["spec"])
	if str(spec["restartPolicy"]) != "Never" || str(spec["serviceAccountName"]) != w.Fullname+"-test" {
		return fmt.Errorf("test pod restartPolicy %v serviceAccountName %v", spec["restartPolicy"], spec["serviceAccountName"])
	}
	inits, mains := list(spec["initContainers"]), list(spec["containers"])
	if len(inits) != 1 || len(mains) != 1 {
		return fmt.Errorf("test pod: want one port-forward sidecar and one check container")
	}
	pf := mapOf(inits[0])
	if str(pf["restartPolicy"]) != "Always" {
		return fmt.Errorf("port-forward is not a native sidecar (restartPolicy Always): the pod would never complete")
	}
	if str(pf["image"]) != w.KubectlImage {
		return fmt.Errorf("port-forward image %q, want %q", str(pf["image"]), w.KubectlImage)
	}
	args := strings.Join(append(strList(pf["command"]), strList(pf["args"])...), " ")
	forward := fmt.Sprintf("%d:%d", w.GRPCPort, w.GRPCPort)
	for _, want := range []string{"kubectl port-forward", "--namespace=" + w.Namespace, "--address=127.0.0.1", "deployment/" + w.Fullname, forward} {
		if !strings.Contains(args, want) {
			return fmt.Errorf("port-forward %q lacks %q", args, want)
		}
	}
	if _, ok := find(objs, "Deployment", w.Fullname); !ok {
		return fmt.Errorf("port-forward targets deployment/%s, which is not rendered", w.Fullname)
	}
	check := mapOf(mains[0])
	if str(check["image"]) != w.Image {
		return fmt.Errorf("check image %q, want %q", str(check["image"]), w.Image)
	}
	script := strings.Join(append(strList(check["command"]), strList(check["args"])...), " ")
	call := fmt.Sprintf("/usr/local/bin/fitledgerctl --server 127.0.0.1:%d", w.GRPCPort)
	if !strings.Contains(script, call) || !strings.Contains(script, " health;") {
		return fmt.Errorf("check script does not run %q ... health: %q", call, script)
	}
	if strings.Contains(script, "--tls-ca") != w.GRPCTLS || strings.Contains(script, "--tls-cert") != w.GRPCClientAuth {
		return fmt.Errorf("check script TLS flags do not match grpc.tls: %q", script)
	}
	if w.GRPCTLS {
		if _, ok := mount(check, "grpc-tls"); !ok {
			return fmt.Errorf("check container does not mount the gRPC TLS Secret")
		}
		if _, ok := volumes(spec)["grpc-tls"]; !ok {
			return fmt.Errorf("test pod lacks the grpc-tls volume")
		}
	}
	return nil
}

func checkNotes(e *Env, s goodSet, w *Want) error {
	res := e.Render(append(append([]string{}, s.args...), "--notes")...)
	if res.err != nil {
		return fmt.Errorf("%v: %s", res.err, firstLine(res.stderr))
	}
	i := strings.Index(res.stdout, "\nNOTES:\n")
	if i < 0 {
		return fmt.Errorf("no NOTES in the output")
	}
	notes := res.stdout[i:]
	var want []string
	if w.Scheduler {
		want = append(want, "schedulerName", w.SchedulerName, "get lease "+w.LeaseName, "rollout status deployment/"+w.Fullname,
			"running kube-scheduler "+w.SchedulerImage[strings.LastIndex(w.SchedulerImage, ":")+1:])
	} else {
		want = append(want, w.Fullname+"-extender", "config/kube-scheduler/README.md")
		if w.Webhook == "shim" {
			want = append(want, "fitledger-shim")
		} else {
			want = append(want, "serving the extender webhook itself")
		}
	}
	if w.GRPCTCP {
		want = append(want, "port-forward", fmt.Sprintf("%d:%d", w.GRPCPort, w.GRPCPort), "grpcurl", "grpc.health.v1.Health/Check")
	} else {
		want = append(want, "exec", "fitledgerctl --server unix://")
	}
	if w.Test {
		want = append(want, "helm test "+w.Release)
	}
	for _, x := range want {
		if !strings.Contains(notes, x) {
			return fmt.Errorf("NOTES lack %q", x)
		}
	}
	if strings.Contains(notes, "<no value>") {
		return fmt.Errorf("NOTES print <no value>")
	}
	return nil
}
