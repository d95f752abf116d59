// Command render is a small stand-in for `helm template`, for machines without
// Helm. It renders a chart directory with text/template + sprig and the Helm
// functions and objects a well-kept chart uses (include, tpl, required, fail,
// toYaml/fromYaml/toJson/fromJson, .Values, .Release, .Chart, .Capabilities,
// .Template, .Files.Get), validates the values against values.schema.json
// with the same library Helm 3 uses, checks Chart.yaml's kubeVersion, and prints
// the manifests in Helm's format and install order ("---\n# Source: ...").
//
//	render [--name NAME] [--namespace NS] [-f values.yaml]... [--set k=v]...
//	       [--set-string k=v]... [--kube-version v1.32.0]
//	       [--skip-schema-validation] [--notes] [--skip-tests] CHART_DIR
//
// Exit status 1 with "Error: ..." on stderr when Helm would refuse to render.
package main

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

type options struct {
	name, namespace, kubeVersion string
	valueFiles                   []string
	sets                         []string // "s:" or "t:" (string) prefixed
	skipSchema, notes, skipTests bool
	chartDir                     string
}

func parseArgs(args []string) (*options, error) {
	o := &options{name: "fitledger", namespace: "default", kubeVersion: "v1.32.0"}
	next := func(i *int, flag string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("flag needs an argument: %s", flag)
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var err error
		var v string
		// Accept --flag=value as well as --flag value.
		if strings.HasPrefix(a, "--") && strings.Contains(a, "=") {
			parts := strings.SplitN(a, "=", 2)
			a = parts[0]
			args = append(args[:i+1], append([]string{parts[1]}, args[i+1:]...)...)
		}
		switch a {
		case "--name":
			o.name, err = next(&i, a)
		case "-n", "--namespace":
			o.namespace, err = next(&i, a)
		case "-f", "--values":
			v, err = next(&i, a)
			o.valueFiles = append(o.valueFiles, v)
		case "--set":
			v, err = next(&i, a)
			o.sets = append(o.sets, "s:"+v)
		case "--set-string":
			v, err = next(&i, a)
			o.sets = append(o.sets, "t:"+v)
		case "--kube-version":
			o.kubeVersion, err = next(&i, a)
		case "--skip-schema-validation":
			o.skipSchema = true
		case "--notes":
			o.notes = true
		case "--skip-tests":
			o.skipTests = true
		default:
			if strings.HasPrefix(a, "-") {
				return nil, fmt.Errorf("unknown flag: %s", a)
			}
			if o.chartDir != "" {
				return nil, fmt.Errorf("more than one chart given: %s and %s", o.chartDir, a)
			}
			o.chartDir = a
		}
		if err != nil {
			return nil, err
		}
	}
	if o.chartDir == "" {
		return nil, fmt.Errorf("usage: render [flags] CHART_DIR")
	}
	return o, nil
}

func main() {
	o, err := parseArgs(os.Args[1:])
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", strings.TrimRight(err.Error(), "\n"))
		os.Exit(1)
	}
}

func run(o *options) error {
	c, err := LoadChart(o.chartDir)
	if err != nil {
		return err
	}
	if err := checkKubeVersion(c.Metadata, o.kubeVersion); err != nil {
		return err
	}
	user := map[string]interface{}{}
	for _, f := range o.valueFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		vals, err := ReadValues(raw)
		if err != nil {
			return fmt.Errorf("failed to parse %s: %w", f, err)
		}
		user = mergeMaps(user, vals)
	}
	for _, s := range o.sets {
		if err := parseSet(s[2:], user, s[0] == 't'); err != nil {
			return fmt.Errorf("failed parsing --set data: %w", err)
		}
	}
	values := coalesce(c.Values, user)
	if c.Schema != nil && !o.skipSchema {
		if err := validateSchema(c.Metadata.Name, c.Schema, values); err != nil {
			return err
		}
	}

	kv, err := semver.NewVersion(o.kubeVersion)
	if err != nil {
		return err
	}
	files := Files{}
	for _, f := range c.Files {
		files[f.Name] = f.Data
	}
	top := map[string]interface{}{
		"Values": values,
		"Release": &Release{
			Name: o.name, Namespace: o.namespace, IsInstall: true, Revision: 1, Service: "Helm",
		},
		"Chart": c.Metadata,
		"Capabilities": &Capabilities{
			KubeVersion: KubeVersion{
				Version: "v" + kv.String(),
				Major:   fmt.Sprint(kv.Major()),
				Minor:   fmt.Sprint(kv.Minor()),
			},
			APIVersions: defaultAPIVersions,
		},
		"Files":     files,
		"Subcharts": map[string]interface{}{},
	}
	rendered, err := Render(c, top)
	if err != nil {
		return err
	}
	return printManifests(os.Stdout, c, rendered, o)
}

// defaultAPIVersions is what .Capabilities.APIVersions.Has answers for
// offline rendering: the built-in groups of a current cluster.
var defaultAPIVersions = VersionSet{
	"v1", "apps/v1", "batch/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
	"coordination.k8s.io/v1", "networking.k8s.io/v1", "scheduling.k8s.io/v1",
	"storage.k8s.io/v1", "autoscaling/v2",
}

var sep = regexp.MustCompile("(?:^|\\s*\n)---\\s*")

// manifest is one YAML document of the output.
type manifest struct {
	source  string
	content string
	kind    string
	name    string
	hook    string
	weight  string
}

type simpleHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
	Metadata   *struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata,omitempty"`
}

// installOrder is Helm's releaseutil.InstallOrder for the kinds a chart like
// this one emits; unknown kinds go last, as in Helm.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret",
	"SecretList", "ConfigMap", "StorageClass", "PersistentVolume",
	"PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role",
	"RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod",
	"ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
	"StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
}

func kindRank(kind string) int {
	for i, k := range installOrder {
		if k == kind {
			return i
		}
	}
	return len(installOrder)
}

func printManifests(w *os.File, c *Chart, rendered map[string]string, o *options) error {
	var manifests, hooks []manifest
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	var notes string
	for _, name := range names {
		content := rendered[name]
		if strings.HasSuffix(name, "NOTES.txt") {
			notes = content
			continue
		}
		for _, doc := range sep.Split(content, -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head simpleHead
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return fmt.Errorf("YAML parse error on %s: %w", name, err)
			}
			m := manifest{source: name, content: strings.TrimSpace(doc), kind: head.Kind}
			if head.Metadata != nil {
				m.name = head.Metadata.Name
				m.hook = head.Metadata.Annotations["helm.sh/hook"]
				m.weight = head.Metadata.Annotations["helm.sh/hook-weight"]
			}
			if m.hook != "" {
				if o.skipTests && strings.Contains(m.hook, "test") {
					continue
				}
				hooks = append(hooks, m)
			} else {
				manifests = append(manifests, m)
			}
		}
	}
	sort.SliceStable(manifests, func(i, j int) bool {
		ri, rj := kindRank(manifests[i].kind), kindRank(manifests[j].kind)
		if ri != rj {
			return ri < rj
		}
		return manifests[i].name < manifests[j].name
	})
	for _, m := range append(manifests, hooks...) {
		fmt.Fprintf(w, "---\n# Source: %s\n%s\n", m.source, m.content)
	}
	if o.notes {
		fmt.Fprintf(w, "\nNOTES:\n%s\n", notes)
	}
	return nil
}
