package main

import (
	"fmt"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// rendered holds what the checks of one good value set share.
type rendered struct {
	objs       []Obj
	deploy     Obj
	podSpec    map[string]interface{}
	containers map[string]map[string]interface{} // by name, init and regular
	server     *ServerConfig
	shim       *ShimConfig
	sched      *KubeSchedulerConfiguration
	// The configuration files as rendered, for the binaries.
	serverYAML, shimYAML string
}

func checkGoodSet(c *Checker, e *Env, s goodSet) {
	w := &s.want
	name := func(what string) string { return s.name + ": " + what }
	res := e.Render(append([]string{}, s.args...)...)
	if res.err != nil {
		c.Check(name("renders"), fmt.Errorf("%v: %s", res.err, firstLine(res.stderr)))
		return
	}
	c.Check(name("renders"), nil)
	objs, err := ParseManifests(res.stdout)
	c.Check(name("every document parses as YAML, without duplicate keys"), err)
	if err != nil {
		return
	}
	r := &rendered{objs: objs}
	c.Check(name("kinds and apiVersions are real"), checkKinds(objs))
	c.Check(name("names, namespaces and labels are valid"), checkMetadata(objs, w))
	c.Check(name("expected objects and no others"), checkObjectSet(objs, w))
	if err := r.loadDeployment(w); err != nil {
		c.Check(name("Deployment"), err)
		return
	}
	c.Check(name("Deployment: replicas, strategy, selector, images"), checkDeployment(r, w))
	c.Check(name("pod: containers and native-sidecar order"), checkContainerLayout(r, w))
	c.Check(name("security contexts: non-root, read-only root, no escalation, drop ALL, RuntimeDefault"), checkSecurity(objs))
	c.Check(name("probes on the health endpoints of the monitor ports (never the webhook's)"), checkProbes(r, w))
	c.Check(name("volumes, mounts and referenced ConfigMaps/Secrets"), checkVolumes(r, w))
	c.Check(name("container resources come from the values"), checkResources(r, w))
	c.Check(name("fitledger-server config (keys, rules, values)"), r.loadServerConfig(w))
	c.Check(name("server.yaml sets no removed key (grpc.unaryListen, webhook.threads)"), checkNoRemovedKeys("server.yaml", r.serverYAML))
	if w.Webhook == "shim" {
		c.Check(name("fitledger-shim config (keys, rules, values)"), r.loadShimConfig(w))
		c.Check(name("shim.yaml sets no removed key (threads)"), checkNoRemovedKeys("shim.yaml", r.shimYAML))
		c.Check(name("shim dials the server's grpc.listen Unix socket in the shared emptyDir"), checkSocketWiring(r))
	} else {
		c.Check(name("server mode: no fitledger-shim container, config, port or volume"), checkNoShim(r, w))
		c.Check(name("server's Unix socket is in the emptyDir"), checkSocketWiring(r))
	}
	c.Check(name("shim.ioThreads and shim.maxConnections reach the "+w.Webhook+"'s webhook config"), checkWebhookLimits(r, w))
	c.Check(name("monitor, gRPC and webhook ports match container ports and probes"), checkPorts(r, w))
	if w.Scheduler {
		c.Check(name("KubeSchedulerConfiguration decodes strictly and passes kube-scheduler validation"), r.loadSchedulerConfig())
		if r.sched != nil {
			c.Check(name("extender entry: the "+w.Webhook+"'s webhook on 127.0.0.1 (its listen, prefix, TLS), verbs, weight, nodeCacheCapable, not ignorable"), checkExtenderEntry(r, w))
			c.Check(name("extender managedResources are the values' extended resources"), checkManaged(r, w))
			c.Check(name("leader election on the release's own Lease, which fitledger-server follows; profile for the scheduler name"), checkLeaderElection(r, w))
			c.Check(name("deadlines: bind budget < shim's server timeout < kube-scheduler's httpTimeout"), checkDeadlines(r))
			c.Check(name("the ledger ignores what kube-scheduler's NodeResourcesFit ignores (profile args, extenders' ignoredByScheduler)"), checkIgnoredResources(r, w))
			c.Check(name("the profile's percentageOfNodesToScore is the values'"), checkPercentageOfNodesToScore(r, w))
			c.Check(name("kube-scheduler mounts its config, TLS files and runs --config"), checkSchedulerWiring(r, w))
		}
	} else {
		c.Check(name("no KubeSchedulerConfiguration; extender Service targets the "+w.Webhook+"'s webhook port"), checkStandalone(r, w))
	}
	c.Check(name("RBAC grants exactly the expected permissions"), checkRBAC(objs, w))
	c.Check(name("ServiceAccount"), checkServiceAccount(r, w))
	c.Check(name("PodDisruptionBudget"), checkPDB(r, w))
	c.Check(name("pod anti-affinity across nodes"), checkAntiAffinity(r, w))
	c.Check(name("helm test hook calls gRPC health through port-forward"), checkTestHook(objs, w))
	c.Check(name("NOTES.txt renders"), checkNotes(e, s, w))
	checkBinaries(c, e, name, r, w)
}

func checkKinds(objs []Obj) error {
	for _, o := range objs {
		k, ok := knownKinds[o.Kind()]
		if !ok {
			return fmt.Errorf("%s (%s): unknown kind %q", o.Name(), o.Source, o.Kind())
		}
		if o.APIVersion() != k.apiVersion {
			return fmt.Errorf("%s: apiVersion %q, want %q", o.Ref(), o.APIVersion(), k.apiVersion)
		}
	}
	return nil
}

func checkMetadata(objs []Obj, w *Want) error {
	seen := map[string]bool{}
	for _, o := range objs {
		if o.Name() == "" {
			return fmt.Errorf("%s: metadata.name is empty", o.Source)
		}
		key := o.Kind() + "/" + o.Namespace() + "/" + o.Name()
		if seen[key] {
			return fmt.Errorf("%s rendered twice", o.Ref())
		}
		seen[key] = true
		switch o.Kind() {
		case "Service":
			if !isDNSLabel(o.Name()) {
				return fmt.Errorf("%s: a Service name must be a DNS-1123 label", o.Ref())
			}
		case "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			if !rbacName.MatchString(o.Name()) || len(o.Name()) > 253 {
				return fmt.Errorf("%s: invalid RBAC name", o.Ref())
			}
		default:
			if !isDNSSubdomain(o.Name()) {
				return fmt.Errorf("%s: name is not a DNS-1123 subdomain", o.Ref())
			}
		}
		namespaced := knownKinds[o.Kind()].namespaced
		switch {
		case !namespaced && o.Namespace() != "":
			return fmt.Errorf("%s: cluster-scoped object with a namespace", o.Ref())
		case namespaced && o.Kind() == "RoleBinding" && strings.HasSuffix(o.Name(), "-extension-apiserver-authentication-reader"):
			if o.Namespace() != "kube-system" {
				return fmt.Errorf("%s: must be in kube-system (the Role it binds is there)", o.Ref())
			}
		case namespaced && o.Namespace() != w.Namespace:
			return fmt.Errorf("%s: namespace %q, want the release namespace %q", o.Ref(), o.Namespace(), w.Namespace)
		}
		labels := mapOf(get(o.M, "metadata", "labels"))
		for k, v := range map[string]string{
			"app.kubernetes.io/name": "fitledger", "app.kubernetes.io/instance": w.Release,
			"app.kubernetes.io/managed-by": "Helm",
		} {
			if str(labels[k]) != v {
				return fmt.Errorf("%s: label %s=%q, want %q", o.Ref(), k, str(labels[k]), v)
			}
		}
		if err := validLabels(labels); err != nil {
			return fmt.Errorf("%s: %v", o.Ref(), err)
		}
	}
	return nil
}

func validLabels(labels map[string]interface{}) error {
	for k, v := range labels {
		if !isQualifiedName(k) {
			return fmt.Errorf("label key %q is not a qualified name", k)
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("label %s: value %v is not a string", k, v)
		}
		if len(s) > 63 || !labelValue.MatchString(s) {
			return fmt.Errorf("label %s: invalid value %q", k, s)
		}
	}
	return nil
}

func checkObjectSet(objs []Obj, w *Want) error {
	var got, want []string
	for _, o := range objs {
		if o.Kind() == "Role" || o.Kind() == "ClusterRole" || o.Kind() == "RoleBinding" || o.Kind() == "ClusterRoleBinding" {
			continue // checkRBAC compares these exactly
		}
		got = append(got, o.Kind()+" "+o.Name())
	}
	want = append(want, "Deployment "+w.Fullname, "ConfigMap "+w.Fullname)
	if w.CreateSA {
		want = append(want, "ServiceAccount "+w.ServiceAccount)
	}
	if w.Scheduler {
		want = append(want, "ConfigMap "+w.Fullname+"-scheduler")
	} else {
		want = append(want, "Service "+w.Fullname+"-extender")
	}
	if w.PDB {
		want = append(want, "PodDisruptionBudget "+w.Fullname)
	}
	if w.Test {
		want = append(want, "ServiceAccount "+w.Fullname+"-test", "Pod "+w.Fullname+"-test-grpc-health")
	}
	sort.Strings(got)
	sort.Strings(want)
	return diffSets(got, want)
}

func (r *rendered) loadDeployment(w *Want) error {
	d, ok := find(r.objs, "Deployment", w.Fullname)
	if !ok {
		return fmt.Errorf("no Deployment %s", w.Fullname)
	}
	r.deploy = d
	r.podSpec = mapOf(get(d.M, "spec", "template", "spec"))
	if r.podSpec == nil {
		return fmt.Errorf("Deployment has no pod template spec")
	}
	r.containers = map[string]map[string]interface{}{}
	for _, field := range []string{"initContainers", "containers"} {
		for _, x := range list(r.podSpec[field]) {
			cm := mapOf(x)
			if _, dup := r.containers[str(cm["name"])]; dup {
				return fmt.Errorf("container %s declared twice", str(cm["name"]))
			}
			r.containers[str(cm["name"])] = cm
		}
	}
	return nil
}

func checkDeployment(r *rendered, w *Want) error {
	spec := mapOf(r.deploy.M["spec"])
	if n, ok := num(spec["replicas"]); !ok || n != w.Replicas {
		return fmt.Errorf("replicas %v, want %d", spec["replicas"], w.Replicas)
	}
	strategy := str(get(spec, "strategy", "type"))
	if w.Scheduler {
		surge, _ := num(get(spec, "strategy", "rollingUpdate", "maxSurge"))
		if strategy != "RollingUpdate" || surge != 0 {
			return fmt.Errorf("strategy %s maxSurge %d: want RollingUpdate without surge", strategy, surge)
		}
	} else if strategy != "Recreate" {
		return fmt.Errorf("strategy %s: a single extender pod behind a Service must be replaced with Recreate", strategy)
	}
	sel := mapOf(get(spec, "selector", "matchLabels"))
	labels := mapOf(get(spec, "template", "metadata", "labels"))
	if len(sel) == 0 {
		return fmt.Errorf("empty selector")
	}
	for k, v := range sel {
		if labels[k] != v {
			return fmt.Errorf("selector %s=%v does not match the pod labels", k, v)
		}
	}
	if err := validLabels(labels); err != nil {
		return fmt.Errorf("pod labels: %v", err)
	}
	annotations := mapOf(get(spec, "template", "metadata", "annotations"))
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	if !hex.MatchString(str(annotations["checksum/config"])) {
		return fmt.Errorf("pod template lacks checksum/config (config changes would not roll the pods)")
	}
	if w.Scheduler && !hex.MatchString(str(annotations["checksum/scheduler-config"])) {
		return fmt.Errorf("pod template lacks checksum/scheduler-config")
	}
	for name, c := range r.containers {
		want := w.Image
		if name == "kube-scheduler" {
			want = w.SchedulerImage
		}
		if str(c["image"]) != want {
			return fmt.Errorf("container %s image %q, want %q", name, str(c["image"]), want)
		}
	}
	if str(r.podSpec["serviceAccountName"]) != w.ServiceAccount {
		return fmt.Errorf("serviceAccountName %q, want %q", str(r.podSpec["serviceAccountName"]), w.ServiceAccount)
	}
	if r.podSpec["hostNetwork"] == true || r.podSpec["hostPID"] == true || r.podSpec["hostIPC"] == true {
		return fmt.Errorf("pod uses host namespaces")
	}
	return nil
}

func names(v interface{}) []string {
	var out []string
	for _, x := range list(v) {
		out = append(out, str(get(x, "name")))
	}
	return out
}

// fitledgerContainers is the pod's fitledger containers, in start order: the
// server, then the shim in shim mode.
func fitledgerContainers(w *Want) []string {
	if w.Webhook == "shim" {
		return []string{"fitledger-server", "fitledger-shim"}
	}
	return []string{"fitledger-server"}
}

// checkContainerLayout: with kube-scheduler in the pod, server (and shim) are
// native sidecars, in this order, before kube-scheduler; alone they are
// regular containers.
func checkContainerLayout(r *rendered, w *Want) error {
	inits, mains := names(r.podSpec["initContainers"]), names(r.podSpec["containers"])
	ours := fitledgerContainers(w)
	if w.Scheduler {
		if !reflect.DeepEqual(inits, ours) || !reflect.DeepEqual(mains, []string{"kube-scheduler"}) {
			return fmt.Errorf("initContainers %v containers %v: want %v [kube-scheduler]", inits, mains, ours)
		}
		for _, n := range inits {
			if str(r.containers[n]["restartPolicy"]) != "Always" {
				return fmt.Errorf("%s: restartPolicy Always (a native sidecar) required", n)
			}
		}
	} else {
		if len(inits) != 0 || !reflect.DeepEqual(mains, ours) {
			return fmt.Errorf("initContainers %v containers %v: want none and %v", inits, mains, ours)
		}
	}
	for _, n := range ours {
		cmd := "/usr/local/bin/" + n
		if got := strList(r.containers[n]["command"]); !reflect.DeepEqual(got, []string{cmd}) {
			return fmt.Errorf("%s: command %v, want [%s]", n, got, cmd)
		}
	}
	return nil
}

// checkResources: each container has its own value's resources.
func checkResources(r *rendered, w *Want) error {
	want := map[string]map[string]interface{}{"fitledger-server": w.ServerResources}
	if w.Webhook == "shim" {
		want["fitledger-shim"] = w.ShimResources
	}
	if w.Scheduler {
		want["kube-scheduler"] = w.SchedulerResources
	}
	for n, c := range r.containers {
		res, ok := want[n]
		if !ok {
			return fmt.Errorf("unexpected container %s", n)
		}
		if got := mapOf(c["resources"]); !reflect.DeepEqual(got, res) {
			return fmt.Errorf("%s: resources %v, want %v", n, got, res)
		}
	}
	return nil
}

// allPodSpecs returns every pod spec of the render with a label for messages.
func allPodSpecs(objs []Obj) map[string]map[string]interface{} {
	out := map[string]map[string]interface{}{}
	for _, o := range objs {
		switch o.Kind() {
		case "Deployment":
			out[o.Ref()] = mapOf(get(o.M, "spec", "template", "spec"))
		case "Pod":
			out[o.Ref()] = mapOf(o.M["spec"])
		}
	}
	return out
}

func checkSecurity(objs []Obj) error {
	for ref, spec := range allPodSpecs(objs) {
		psc := mapOf(spec["securityContext"])
		if psc["runAsNonRoot"] != true {
			return fmt.Errorf("%s: pod securityContext.runAsNonRoot is not true", ref)
		}
		if uid, ok := num(psc["runAsUser"]); !ok || uid == 0 {
			return fmt.Errorf("%s: pod securityContext.runAsUser must be a non-zero uid", ref)
		}
		if str(get(psc, "seccompProfile", "type")) != "RuntimeDefault" {
			return fmt.Errorf("%s: pod seccompProfile is not RuntimeDefault", ref)
		}
		for _, field := range []string{"initContainers", "containers"} {
			for _, x := range list(spec[field]) {
				cm := mapOf(x)
				sc := mapOf(cm["securityContext"])
				who := ref + " container " + str(cm["name"])
				switch {
				case sc == nil:
					return fmt.Errorf("%s: no securityContext", who)
				case sc["allowPrivilegeEscalation"] != false:
					return fmt.Errorf("%s: allowPrivilegeEscalation is not false", who)
				case sc["readOnlyRootFilesystem"] != true:
					return fmt.Errorf("%s: readOnlyRootFilesystem is not true", who)
				case sc["privileged"] == true:
					return fmt.Errorf("%s: privileged", who)
				case !reflect.DeepEqual(strList(get(sc, "capabilities", "drop")), []string{"ALL"}):
					return fmt.Errorf("%s: capabilities.drop is not [ALL]", who)
				case len(list(get(sc, "capabilities", "add"))) != 0:
					return fmt.Errorf("%s: adds capabilities", who)
				case sc["runAsNonRoot"] == false:
					return fmt.Errorf("%s: runAsNonRoot false", who)
				case sc["runAsUser"] != nil && sc["runAsUser"] == float64(0):
					return fmt.Errorf("%s: runs as uid 0", who)
				case get(sc, "seccompProfile", "type") != nil && str(get(sc, "seccompProfile", "type")) != "RuntimeDefault":
					return fmt.Errorf("%s: seccompProfile is not RuntimeDefault", who)
				}
			}
		}
	}
	return nil
}

// probe returns the path and port of an httpGet probe, resolving a named port.
func probe(c map[string]interface{}, kind string) (path string, port int64, scheme string, err error) {
	p := mapOf(c[kind])
	if p == nil {
		return "", 0, "", fmt.Errorf("%s: no %s", str(c["name"]), kind)
	}
	hg := mapOf(p["httpGet"])
	if hg == nil {
		return "", 0, "", fmt.Errorf("%s: %s is not httpGet", str(c["name"]), kind)
	}
	if n, ok := num(hg["port"]); ok {
		port = n
	} else {
		for _, cp := range list(c["ports"]) {
			if str(get(cp, "name")) == str(hg["port"]) {
				port, _ = num(get(cp, "containerPort"))
			}
		}
		if port == 0 {
			return "", 0, "", fmt.Errorf("%s: %s names port %q that the container does not declare", str(c["name"]), kind, str(hg["port"]))
		}
	}
	scheme = str(hg["scheme"])
	if scheme == "" {
		scheme = "HTTP"
	}
	return str(hg["path"]), port, scheme, nil
}

func expectProbe(c map[string]interface{}, kind, wantPath string, wantPort int64, wantScheme string) error {
	p, port, scheme, err := probe(c, kind)
	if err != nil {
		return err
	}
	if p != wantPath || port != wantPort || scheme != wantScheme {
		return fmt.Errorf("%s %s: %s %s:%d, want %s %s:%d", str(c["name"]), kind, scheme, p, port, wantScheme, wantPath, wantPort)
	}
	return nil
}

// checkProbes: fitledger's probes go to the monitor port of each binary (its
// listener has a thread of its own; the webhook's port can be busy with
// connections, and a probe waiting behind them would restart a healthy pod).
func checkProbes(r *rendered, w *Want) error {
	monitors := []struct {
		name string
		port int64
	}{{"fitledger-server", w.ServerMonitorPort}}
	if w.Webhook == "shim" {
		monitors = append(monitors, struct {
			name string
			port int64
		}{"fitledger-shim", w.ShimMonitorPort})
	}
	for _, x := range monitors {
		c := r.containers[x.name]
		if err := expectProbe(c, "livenessProbe", "/healthz", x.port, "HTTP"); err != nil {
			return err
		}
		if err := expectProbe(c, "readinessProbe", "/readyz", x.port, "HTTP"); err != nil {
			return err
		}
		if w.Scheduler {
			// The sidecar's startup gates the containers after it.
			if err := expectProbe(c, "startupProbe", "/readyz", x.port, "HTTP"); err != nil {
				return err
			}
		}
	}
	if w.Scheduler {
		c := r.containers["kube-scheduler"]
		if err := expectProbe(c, "livenessProbe", "/livez", 10259, "HTTPS"); err != nil {
			return err
		}
		if err := expectProbe(c, "readinessProbe", "/readyz", 10259, "HTTPS"); err != nil {
			return err
		}
	}
	return nil
}

// mount returns the mountPath of volume vol in container c.
func mount(c map[string]interface{}, vol string) (string, bool) {
	for _, m := range list(c["volumeMounts"]) {
		if str(get(m, "name")) == vol {
			return str(get(m, "mountPath")), true
		}
	}
	return "", false
}

func volumes(spec map[string]interface{}) map[string]map[string]interface{} {
	out := map[string]map[string]interface{}{}
	for _, v := range list(spec["volumes"]) {
		out[str(get(v, "name"))] = mapOf(v)
	}
	return out
}

func checkVolumes(r *rendered, w *Want) error {
	vols := volumes(r.podSpec)
	for name, c := range r.containers {
		for _, m := range list(c["volumeMounts"]) {
			vn := str(get(m, "name"))
			if _, ok := vols[vn]; !ok {
				return fmt.Errorf("%s mounts volume %q that the pod does not declare", name, vn)
			}
		}
	}
	for vn, v := range vols {
		if cm := str(get(v, "configMap", "name")); cm != "" {
			if _, ok := find(r.objs, "ConfigMap", cm); !ok {
				return fmt.Errorf("volume %s: ConfigMap %s is not rendered", vn, cm)
			}
		}
	}
	secrets := map[string]string{}
	for vn, v := range vols {
		if s := str(get(v, "secret", "secretName")); s != "" {
			secrets[vn] = s
		}
	}
	wantSecrets := w.Secrets
	if wantSecrets == nil {
		wantSecrets = map[string]string{}
	}
	if !reflect.DeepEqual(secrets, wantSecrets) {
		return fmt.Errorf("secret volumes %v, want %v", secrets, wantSecrets)
	}
	if v, ok := vols["shim-ca"]; ok {
		items := list(get(v, "secret", "items"))
		if len(items) != 1 || str(get(items[0], "key")) != "ca.crt" {
			return fmt.Errorf("volume shim-ca must project only ca.crt (kube-scheduler has no use for the shim's key)")
		}
	}
	sock := vols["socket"]
	if sock == nil || get(sock, "emptyDir") == nil {
		return fmt.Errorf("no emptyDir volume named socket")
	}
	if w.Scheduler {
		if p, ok := mount(r.containers["kube-scheduler"], "socket"); ok {
			return fmt.Errorf("kube-scheduler mounts the server socket at %s: it must reach only the webhook", p)
		}
		for _, key := range []string{"shim-tls", "webhook-tls"} {
			if p, ok := mount(r.containers["kube-scheduler"], key); ok {
				return fmt.Errorf("kube-scheduler mounts the webhook's key pair (%s) at %s: it needs only ca.crt", key, p)
			}
		}
	}
	return nil
}

// configFile returns the content of the file a container reads at path p
// from a mounted ConfigMap.
func configFile(r *rendered, c map[string]interface{}, p string) (string, error) {
	vols := volumes(r.podSpec)
	for _, m := range list(c["volumeMounts"]) {
		mp := str(get(m, "mountPath"))
		if path.Dir(p) != mp {
			continue
		}
		cmName := str(get(vols[str(get(m, "name"))], "configMap", "name"))
		cm, ok := find(r.objs, "ConfigMap", cmName)
		if !ok {
			continue
		}
		data := mapOf(cm.M["data"])
		content, ok := data[path.Base(p)]
		if !ok {
			return "", fmt.Errorf("ConfigMap %s has no key %s", cmName, path.Base(p))
		}
		return str(content), nil
	}
	return "", fmt.Errorf("%s: no ConfigMap is mounted at %s", str(c["name"]), path.Dir(p))
}

// configFlag returns the value of --config in args ("--config X" or "--config=X").
func configFlag(args []string) string {
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
		if strings.HasPrefix(a, "--config=") {
			return strings.TrimPrefix(a, "--config=")
		}
	}
	return ""
}

func (r *rendered) loadServerConfig(w *Want) error {
	c := r.containers["fitledger-server"]
	p := configFlag(strList(c["args"]))
	if p == "" {
		return fmt.Errorf("fitledger-server has no --config")
	}
	doc, err := configFile(r, c, p)
	if err != nil {
		return err
	}
	r.serverYAML = doc
	var cfg ServerConfig
	if err := decodeStrict(doc, &cfg); err != nil {
		return fmt.Errorf("server.yaml: %v", err)
	}
	if err := ValidateServerConfig(&cfg); err != nil {
		return fmt.Errorf("server.yaml: %v", err)
	}
	r.server = &cfg
	if err := checkServerWebhook(c, &cfg, w); err != nil {
		return fmt.Errorf("server.yaml: %v", err)
	}
	var tcp []string
	for _, a := range cfg.GRPC.Listen {
		if !strings.HasPrefix(a, "unix://") {
			tcp = append(tcp, a)
		}
	}
	switch {
	case !w.GRPCTCP && len(tcp) != 0:
		return fmt.Errorf("grpc.listen has TCP addresses %v with grpc.tcp.enabled=false", tcp)
	case w.GRPCTCP && w.GRPCTLS && !reflect.DeepEqual(tcp, []string{fmt.Sprintf("0.0.0.0:%d", w.GRPCPort)}):
		return fmt.Errorf("grpc TCP listen %v, want 0.0.0.0:%d with TLS", tcp, w.GRPCPort)
	case w.GRPCTCP && !w.GRPCTLS && !reflect.DeepEqual(tcp, []string{fmt.Sprintf("127.0.0.1:%d", w.GRPCPort)}):
		return fmt.Errorf("grpc TCP listen %v, want 127.0.0.1:%d without TLS", tcp, w.GRPCPort)
	}
	if (cfg.GRPC.TLS != nil) != w.GRPCTLS {
		return fmt.Errorf("grpc.tls present %v, want %v", cfg.GRPC.TLS != nil, w.GRPCTLS)
	}
	if w.GRPCTLS {
		if (cfg.GRPC.TLS.ClientCAFile != "") != w.GRPCClientAuth {
			return fmt.Errorf("grpc.tls.clientCAFile set %v, want %v", cfg.GRPC.TLS.ClientCAFile != "", w.GRPCClientAuth)
		}
		if err := filesUnderMount(c, "grpc-tls", cfg.GRPC.TLS.CertFile, cfg.GRPC.TLS.KeyFile, cfg.GRPC.TLS.ClientCAFile); err != nil {
			return err
		}
	}
	var managed []string
	for _, m := range w.Managed {
		managed = append(managed, m.Name)
	}
	if len(managed) == 0 {
		if cfg.Ledger.Accounting.Mode != "all" {
			return fmt.Errorf("ledger.accounting.mode %q, want all (no managedResources)", cfg.Ledger.Accounting.Mode)
		}
	} else if cfg.Ledger.Accounting.Mode != "managed" || !reflect.DeepEqual(cfg.Ledger.Accounting.Managed, managed) {
		return fmt.Errorf("ledger.accounting %s %v, want managed %v", cfg.Ledger.Accounting.Mode, cfg.Ledger.Accounting.Managed, managed)
	}
	if cfg.Kubeconfig != "" {
		return fmt.Errorf("kubeconfig set: the server must use its in-cluster ServiceAccount")
	}
	if err := checkServerLease(r, c, &cfg, w); err != nil {
		return fmt.Errorf("server.yaml: %v", err)
	}
	if cfg.Kubernetes.BindBudget != w.BindBudget {
		return fmt.Errorf("kubernetes.bindBudget %q, want %q (extender.httpTimeout - 1s)", cfg.Kubernetes.BindBudget, w.BindBudget)
	}
	wantNames := []string{}
	if w.Scheduler {
		wantNames = append(wantNames, w.SchedulerName)
	}
	if cfg.Kubernetes.SchedulerNames == nil || !equalStrings(cfg.Kubernetes.SchedulerNames, wantNames) {
		return fmt.Errorf("kubernetes.schedulerNames %v, want %v (the chart's kube-scheduler profile; [] without it)", cfg.Kubernetes.SchedulerNames, wantNames)
	}
	if !equalStrings(cfg.Ledger.IgnoredResources, w.LedgerIgnored) || !equalStrings(cfg.Ledger.IgnoredResourceGroups, w.LedgerIgnoredGroups) {
		return fmt.Errorf("ledger.ignoredResources %v ignoredResourceGroups %v, want %v and %v",
			cfg.Ledger.IgnoredResources, cfg.Ledger.IgnoredResourceGroups, w.LedgerIgnored, w.LedgerIgnoredGroups)
	}
	return nil
}

// checkServerLease: beside its own kube-scheduler the server follows the
// release's Lease (leaderElection.leaseName/leaseNamespace) and recognises its
// pod's scheduler by the pod's hostname: no identity in the file or the flags
// (one value would be every replica's), and no spec.hostname or hostNetwork
// (replicas would share a hostname, and each server would take the other's
// scheduler for its own). Without kube-scheduler in the pod: no Lease.
func checkServerLease(r *rendered, c map[string]interface{}, cfg *ServerConfig, w *Want) error {
	le := cfg.LeaderElection
	if !w.Scheduler {
		if le != nil && le.LeaseName != "" {
			return fmt.Errorf("leaderElection.leaseName %q without kube-scheduler in the pod", le.LeaseName)
		}
		return nil
	}
	if le == nil || le.LeaseName != w.LeaseName || le.LeaseNamespace != w.Namespace {
		return fmt.Errorf("leaderElection %+v, want leaseName %q leaseNamespace %q", le, w.LeaseName, w.Namespace)
	}
	if le.Identity != "" {
		return fmt.Errorf("leaderElection.identity %q: every replica would claim it; leave it to the pod's hostname", le.Identity)
	}
	for _, a := range strList(c["args"]) {
		if strings.HasPrefix(a, "--leader-identity") {
			return fmt.Errorf("fitledger-server arg %q: every replica would claim it", a)
		}
	}
	if h := str(r.podSpec["hostname"]); h != "" {
		return fmt.Errorf("pod spec.hostname %q: the replicas would share one hostname", h)
	}
	if b, _ := r.podSpec["hostNetwork"].(bool); b {
		return fmt.Errorf("pod hostNetwork: replicas on one node would share its hostname")
	}
	return nil
}

// equalStrings: the same strings in the same order (nil and empty alike).
func equalStrings(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// webhookListen is where the webhook must listen: loopback for the pod's own
// kube-scheduler, all interfaces behind the extender Service.
func webhookListen(w *Want) string {
	if w.Scheduler {
		return fmt.Sprintf("127.0.0.1:%d", w.ShimPort)
	}
	return fmt.Sprintf("0.0.0.0:%d", w.ShimPort)
}

// checkServerWebhook: in server mode the server's webhook block carries the
// shim.* values (listen, prefix, limits, TLS files from the mounted Secret);
// in shim mode there is none.
func checkServerWebhook(c map[string]interface{}, cfg *ServerConfig, w *Want) error {
	wh := cfg.Webhook
	if w.Webhook == "shim" {
		if wh != nil && wh.Listen != "" {
			return fmt.Errorf("webhook.listen %q in shim mode: two processes would serve the webhook", wh.Listen)
		}
		return nil
	}
	if wh == nil || wh.Listen == "" {
		return fmt.Errorf("no webhook.listen in server mode: nothing would answer kube-scheduler")
	}
	if want := webhookListen(w); wh.Listen != want {
		return fmt.Errorf("webhook.listen %q, want %q", wh.Listen, want)
	}
	if wh.Prefix != "/" {
		return fmt.Errorf("webhook.prefix %q, want /", wh.Prefix)
	}
	if wh.MaxBodyBytes != w.ShimMaxBodyBytes {
		return fmt.Errorf("webhook.maxBodyBytes %d, want shim.maxBodyBytes %d", wh.MaxBodyBytes, w.ShimMaxBodyBytes)
	}
	if (wh.TLS != nil) != w.ShimTLS {
		return fmt.Errorf("webhook.tls present %v, want %v", wh.TLS != nil, w.ShimTLS)
	}
	if w.ShimTLS {
		if (wh.TLS.ClientCAFile != "") != w.ShimClientAuth {
			return fmt.Errorf("webhook.tls.clientCAFile set %v, want %v", wh.TLS.ClientCAFile != "", w.ShimClientAuth)
		}
		if err := filesUnderMount(c, "webhook-tls", wh.TLS.CertFile, wh.TLS.KeyFile, wh.TLS.ClientCAFile); err != nil {
			return err
		}
		for _, f := range []string{wh.TLS.CertFile, wh.TLS.KeyFile, wh.TLS.ClientCAFile} {
			if f != "" && !map[string]bool{"tls.crt": true, "tls.key": true, "ca.crt": true}[path.Base(f)] {
				return fmt.Errorf("webhook.tls file %s is not a key of a kubernetes.io/tls Secret", f)
			}
		}
	}
	if !isLoopback(wh.Listen) && (wh.TLS == nil || wh.TLS.ClientCAFile == "") {
		return fmt.Errorf("the webhook listens on %s without client certificate verification", wh.Listen)
	}
	return nil
}

// filesUnderMount checks that each non-empty file lies under the mount of vol.
func filesUnderMount(c map[string]interface{}, vol string, files ...string) error {
	mp, ok := mount(c, vol)
	if !ok {
		return fmt.Errorf("%s does not mount volume %s", str(c["name"]), vol)
	}
	for _, f := range files {
		if f != "" && path.Dir(f) != mp {
			return fmt.Errorf("%s: %s is not under the %s mount %s", str(c["name"]), f, vol, mp)
		}
	}
	return nil
}

func (r *rendered) loadShimConfig(w *Want) error {
	c := r.containers["fitledger-shim"]
	p := configFlag(strList(c["args"]))
	if p == "" {
		return fmt.Errorf("fitledger-shim has no --config")
	}
	doc, err := configFile(r, c, p)
	if err != nil {
		return err
	}
	r.shimYAML = doc
	var cfg ShimConfig
	if err := decodeStrict(doc, &cfg); err != nil {
		return fmt.Errorf("shim.yaml: %v", err)
	}
	if err := ValidateShimConfig(&cfg); err != nil {
		return fmt.Errorf("shim.yaml: %v", err)
	}
	r.shim = &cfg
	if wantListen := webhookListen(w); cfg.Listen != wantListen {
		return fmt.Errorf("listen %q, want %q", cfg.Listen, wantListen)
	}
	if cfg.Prefix != "/" {
		return fmt.Errorf("prefix %q, want /", cfg.Prefix)
	}
	if cfg.ServerTimeout != w.ShimServerTimeout {
		return fmt.Errorf("serverTimeout %q, want %q (extender.httpTimeout - 500ms)", cfg.ServerTimeout, w.ShimServerTimeout)
	}
	if cfg.MaxBodyBytes != w.ShimMaxBodyBytes {
		return fmt.Errorf("maxBodyBytes %d, want shim.maxBodyBytes %d", cfg.MaxBodyBytes, w.ShimMaxBodyBytes)
	}
	if (cfg.TLS != nil) != w.ShimTLS {
		return fmt.Errorf("tls present %v, want %v", cfg.TLS != nil, w.ShimTLS)
	}
	if w.ShimTLS {
		if (cfg.TLS.ClientCAFile != "") != w.ShimClientAuth {
			return fmt.Errorf("tls.clientCAFile set %v, want %v", cfg.TLS.ClientCAFile != "", w.ShimClientAuth)
		}
		if err := filesUnderMount(c, "shim-tls", cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.ClientCAFile); err != nil {
			return err
		}
	}
	if !w.Scheduler && !isLoopback(cfg.Listen) && (cfg.TLS == nil || cfg.TLS.ClientCAFile == "") {
		return fmt.Errorf("the shim listens on %s without client certificate verification", cfg.Listen)
	}
	return nil
}

// checkSocketWiring: the server's Unix socket (one of its grpc.listen, served
// by gRPC's own server) lies in the emptyDir "socket" (its root filesystem is
// read-only), and in shim mode the shim dials exactly that socket, with the
// emptyDir mounted at the same path.
func checkSocketWiring(r *rendered) error {
	if r.server == nil {
		return fmt.Errorf("server config missing")
	}
	var socks []string
	for _, a := range r.server.GRPC.Listen {
		if strings.HasPrefix(a, "unix://") {
			socks = append(socks, a)
		}
	}
	if len(socks) != 1 {
		return fmt.Errorf("the server listens on Unix sockets %v, want one (in the socket emptyDir)", socks)
	}
	sock := socks[0]
	users := []string{"fitledger-server"}
	if r.shim != nil {
		if r.shim.Server != sock {
			return fmt.Errorf("the shim dials %q, the server's grpc.listen socket is %q", r.shim.Server, sock)
		}
		users = append(users, "fitledger-shim")
	}
	dir := path.Dir(strings.TrimPrefix(sock, "unix://"))
	if v := volumes(r.podSpec)["socket"]; get(v, "emptyDir") == nil {
		return fmt.Errorf("no emptyDir volume named socket")
	}
	for _, n := range users {
		mp, ok := mount(r.containers[n], "socket")
		if !ok || mp != dir {
			return fmt.Errorf("%s mounts the socket emptyDir at %q, want %q", n, mp, dir)
		}
	}
	return nil
}

func containerPort(c map[string]interface{}, port int64) bool {
	for _, p := range list(c["ports"]) {
		if n, _ := num(get(p, "containerPort")); n == port {
			return true
		}
	}
	return false
}

func checkPorts(r *rendered, w *Want) error {
	if r.server == nil || (w.Webhook == "shim" && r.shim == nil) {
		return fmt.Errorf("server or shim config missing")
	}
	if got := portOf(r.server.Monitor.Listen); got != fmt.Sprint(w.ServerMonitorPort) {
		return fmt.Errorf("server monitor on %s, want %d", got, w.ServerMonitorPort)
	}
	if isLoopback(r.server.Monitor.Listen) {
		return fmt.Errorf("the server's monitor listens on loopback: the kubelet's probes could not reach it")
	}
	if !containerPort(r.containers["fitledger-server"], w.ServerMonitorPort) {
		return fmt.Errorf("the server's monitor port is not declared as a container port")
	}
	// Every listener of the pod, which shares one network namespace.
	listeners := map[string]string{"server monitor": r.server.Monitor.Listen}
	for i, a := range r.server.GRPC.Listen {
		if !strings.HasPrefix(a, "unix://") {
			listeners[fmt.Sprintf("server grpc.listen[%d]", i)] = a
		}
	}
	webhookContainer := "fitledger-server"
	if w.Webhook == "shim" {
		webhookContainer = "fitledger-shim"
		if got := portOf(r.shim.Monitor.Listen); got != fmt.Sprint(w.ShimMonitorPort) {
			return fmt.Errorf("shim monitor on %s, want %d", got, w.ShimMonitorPort)
		}
		if isLoopback(r.shim.Monitor.Listen) {
			return fmt.Errorf("the shim's monitor listens on loopback: the kubelet's probes could not reach it")
		}
		if !containerPort(r.containers["fitledger-shim"], w.ShimMonitorPort) {
			return fmt.Errorf("the shim's monitor port is not declared as a container port")
		}
		listeners["shim monitor"], listeners["shim webhook"] = r.shim.Monitor.Listen, r.shim.Listen
	} else {
		if r.server.Webhook == nil {
			return fmt.Errorf("server mode without a webhook block")
		}
		listeners["server webhook"] = r.server.Webhook.Listen
	}
	if w.Scheduler {
		listeners["kube-scheduler"] = "0.0.0.0:10259"
	}
	byPort := map[string]string{}
	for who, addr := range listeners {
		if other, dup := byPort[portOf(addr)]; dup {
			return fmt.Errorf("%s and %s both listen on port %s", who, other, portOf(addr))
		}
		byPort[portOf(addr)] = who
	}
	if containerPort(r.containers["fitledger-server"], w.GRPCPort) != w.GRPCTCP {
		return fmt.Errorf("grpc container port %d declared %v, want %v", w.GRPCPort, !w.GRPCTCP, w.GRPCTCP)
	}
	// The webhook's port is declared (as "extender", the Service's target) only
	// where something outside the pod calls it, by the container serving it.
	for n, c := range r.containers {
		declared := containerPort(c, w.ShimPort)
		if want := n == webhookContainer && !w.Scheduler; declared != want {
			return fmt.Errorf("%s declares the webhook port %d: %v, want %v", n, w.ShimPort, declared, want)
		}
	}
	// Every declared port is unique across the pod.
	seen := map[int64]string{}
	for n, c := range r.containers {
		for _, p := range list(c["ports"]) {
			port, _ := num(get(p, "containerPort"))
			if other, dup := seen[port]; dup {
				return fmt.Errorf("port %d declared by %s and %s", port, other, n)
			}
			seen[port] = n
			if name := str(get(p, "name")); name != "" && (len(name) > 15 || !ianaSvcName.MatchString(name)) {
				return fmt.Errorf("%s: port name %q is not an IANA service name", n, name)
			}
		}
	}
	return nil
}

// checkNoShim: in server mode nothing of fitledger-shim is rendered: no
// container, no shim.yaml, no shim monitor port, no shim-tls volume.
func checkNoShim(r *rendered, w *Want) error {
	for n, c := range r.containers {
		if n == "fitledger-shim" || strings.Contains(strings.Join(strList(c["command"]), " "), "fitledger-shim") {
			return fmt.Errorf("container %s runs fitledger-shim", n)
		}
		for _, p := range list(c["ports"]) {
			if str(get(p, "name")) == "shim-monitor" {
				return fmt.Errorf("container %s declares shim-monitor", n)
			}
		}
	}
	if cm, ok := find(r.objs, "ConfigMap", w.Fullname); ok {
		if _, has := mapOf(cm.M["data"])["shim.yaml"]; has {
			return fmt.Errorf("ConfigMap %s carries shim.yaml, which nothing reads", w.Fullname)
		}
	}
	if _, ok := volumes(r.podSpec)["shim-tls"]; ok {
		return fmt.Errorf("volume shim-tls without a shim")
	}
	return nil
}

// checkWebhookLimits: shim.ioThreads and shim.maxConnections are written, as
// keys (a missing key would also read 0), into the configuration of the
// process that serves the webhook: the server's webhook block in server mode,
// shim.yaml in shim mode.
func checkWebhookLimits(r *rendered, w *Want) error {
	file, doc, prefix := "server.yaml", r.serverYAML, "webhook."
	if w.Webhook == "shim" {
		file, doc, prefix = "shim.yaml", r.shimYAML, ""
	}
	var m map[string]interface{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	for _, k := range []struct {
		key  string
		want int64
	}{{"ioThreads", w.ShimIOThreads}, {"maxConnections", w.ShimMaxConnections}} {
		v, ok := lookupKey(m, prefix+k.key)
		if !ok {
			return fmt.Errorf("%s has no %s%s (shim.%s)", file, prefix, k.key, k.key)
		}
		if n, isNum := num(v); !isNum || n != k.want {
			return fmt.Errorf("%s: %s%s is %v, want shim.%s = %d", file, prefix, k.key, v, k.key, k.want)
		}
	}
	return nil
}
