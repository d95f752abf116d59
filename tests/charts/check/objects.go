package main

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Obj is one rendered Kubernetes object, decoded as kubectl decodes YAML
// (sigs.k8s.io/yaml: YAML 1.1 scalars, JSON-compatible values).
type Obj struct {
	Source string
	M      map[string]interface{}
}

func (o Obj) Kind() string       { return str(o.M["kind"]) }
func (o Obj) APIVersion() string { return str(o.M["apiVersion"]) }
func (o Obj) Name() string       { return str(get(o.M, "metadata", "name")) }
func (o Obj) Namespace() string  { return str(get(o.M, "metadata", "namespace")) }
func (o Obj) Ref() string        { return fmt.Sprintf("%s %s/%s", o.Kind(), o.Namespace(), o.Name()) }
func (o Obj) Annotation(k string) string {
	return str(get(o.M, "metadata", "annotations", k))
}
func (o Obj) IsHook() bool { return o.Annotation("helm.sh/hook") != "" }

// ParseManifests splits the renderer's output ("---\n# Source: path\n...") and
// decodes each document strictly: a duplicate key is an error, as it is for
// the API server's strict field validation.
func ParseManifests(out string) ([]Obj, error) {
	var objs []Obj
	parts := strings.Split(out, "---\n# Source: ")
	for _, p := range parts[1:] {
		nl := strings.IndexByte(p, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("document without content: %q", p)
		}
		source, body := p[:nl], p[nl+1:]
		if i := strings.Index(body, "\nNOTES:\n"); i >= 0 {
			body = body[:i]
		}
		m := map[string]interface{}{}
		if err := yaml.UnmarshalStrict([]byte(body), &m); err != nil {
			return nil, fmt.Errorf("%s: %v", source, err)
		}
		objs = append(objs, Obj{Source: source, M: m})
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no manifests in the output")
	}
	return objs, nil
}

func get(v interface{}, path ...string) interface{} {
	for _, p := range path {
		m, ok := v.(map[string]interface{})
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v interface{}) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func list(v interface{}) []interface{} {
	l, _ := v.([]interface{})
	return l
}

func mapOf(v interface{}) map[string]interface{} {
	m, _ := v.(map[string]interface{})
	return m
}

func strList(v interface{}) []string {
	var out []string
	for _, x := range list(v) {
		out = append(out, str(x))
	}
	return out
}

// num returns a JSON number as an int64 and whether it was an integer.
func num(v interface{}) (int64, bool) {
	f, ok := v.(float64)
	if !ok || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

func find(objs []Obj, kind, name string) (Obj, bool) {
	for _, o := range objs {
		if o.Kind() == kind && o.Name() == name {
			return o, true
		}
	}
	return Obj{}, false
}

func ofKind(objs []Obj, kind string) []Obj {
	var out []Obj
	for _, o := range objs {
		if o.Kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// knownKinds lists, for each kind the chart may emit, its apiVersion and
// whether it is namespaced (Kubernetes 1.29+ built-in API).
var knownKinds = map[string]struct {
	apiVersion string
	namespaced bool
}{
	"ConfigMap":           {"v1", true},
	"Secret":              {"v1", true},
	"Service":             {"v1", true},
	"ServiceAccount":      {"v1", true},
	"Pod":                 {"v1", true},
	"Deployment":          {"apps/v1", true},
	"PodDisruptionBudget": {"policy/v1", true},
	"Role":                {"rbac.authorization.k8s.io/v1", true},
	"RoleBinding":         {"rbac.authorization.k8s.io/v1", true},
	"ClusterRole":         {"rbac.authorization.k8s.io/v1", false},
	"ClusterRoleBinding":  {"rbac.authorization.k8s.io/v1", false},
	"NetworkPolicy":       {"networking.k8s.io/v1", true},
}

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	labelValue       = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	qualifiedName    = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	ianaSvcName      = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	// RBAC role names are path segments: anything but "/" and "%", not "." or "..".
	rbacName = regexp.MustCompile(`^[^/%]+$`)
)

func isDNSSubdomain(s string) bool { return len(s) <= 253 && dns1123Subdomain.MatchString(s) }
func isDNSLabel(s string) bool     { return len(s) <= 63 && dns1123Label.MatchString(s) }

// isQualifiedName is apimachinery's validation.IsQualifiedName.
func isQualifiedName(s string) bool {
	parts := strings.Split(s, "/")
	name := s
	switch len(parts) {
	case 1:
	case 2:
		prefix := parts[0]
		name = parts[1]
		if prefix == "" || !isDNSSubdomain(prefix) {
			return false
		}
	default:
		return false
	}
	return name != "" && len(name) <= 63 && qualifiedName.MatchString(name)
}

// isExtendedResourceName is k8s.io/kubernetes/pkg/apis/core/v1/helper's
// IsExtendedResourceName, applied after IsQualifiedName as kube-scheduler's
// validateExtendedResourceName does.
func isExtendedResourceName(name string) bool {
	if !isQualifiedName(name) {
		return false
	}
	// IsNativeResource: no domain prefix, or in the kubernetes.io/ namespace.
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") {
		return false
	}
	if strings.HasPrefix(name, "requests.") {
		return false
	}
	return isQualifiedName("requests." + name)
}

// strictKeys reports map keys that the json tags of t do not name exactly
// (Kubernetes' config decoders are strict and case-sensitive), recursively.
func strictKeys(v interface{}, t reflect.Type, path string) error {
	for t.Kind() == reflect.Ptr {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]interface{})
		if !ok {
			if v == nil {
				return nil
			}
			return fmt.Errorf("%s: want an object, got %T", path, v)
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f.Type
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("%s: unknown field %q", path, strings.TrimPrefix(path+"."+k, "."))
			}
			if err := strictKeys(m[k], ft, strings.TrimPrefix(path+"."+k, ".")); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		for i, x := range list(v) {
			if err := strictKeys(x, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		for k, x := range mapOf(v) {
			if err := strictKeys(x, t.Elem(), path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeStrict checks the keys of a YAML document against the struct type of
// out, then decodes it into out (typed: a string where an int belongs fails).
func decodeStrict(doc string, out interface{}) error {
	var generic interface{}
	if err := yaml.UnmarshalStrict([]byte(doc), &generic); err != nil {
		return err
	}
	if err := strictKeys(generic, reflect.TypeOf(out), ""); err != nil {
		return err
	}
	return yaml.Unmarshal([]byte(doc), out)
}
