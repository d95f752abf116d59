package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// Metadata mirrors helm.sh/helm/v3/pkg/chart.Metadata: templates see it as .Chart,
// with the same exported field names (.Chart.Name, .Chart.AppVersion, ...).
type Metadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []interface{}     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []interface{}     `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// File is one file of the chart, its name relative to the chart root.
type File struct {
	Name string
	Data []byte
}

// Chart is a loaded chart directory.
type Chart struct {
	Metadata  *Metadata
	Templates []File // templates/**, names "templates/..."
	Files     []File // every other file except Chart.yaml, values.yaml, values.schema.json
	Values    map[string]interface{}
	Schema    []byte // nil when the chart has no values.schema.json
}

// LoadChart reads a chart directory the way Helm's loader does, and refuses what
// this renderer does not implement (subcharts, dependencies, Chart.lock).
func LoadChart(dir string) (*Chart, error) {
	c := &Chart{Values: map[string]interface{}{}}
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("Chart.yaml file is missing: %w", err)
	}
	c.Metadata = &Metadata{}
	if err := yaml.Unmarshal(raw, c.Metadata); err != nil {
		return nil, fmt.Errorf("cannot load Chart.yaml: %w", err)
	}
	if err := validateMetadata(c.Metadata); err != nil {
		return nil, fmt.Errorf("validation: chart.metadata %w", err)
	}
	if len(c.Metadata.Dependencies) > 0 {
		return nil, fmt.Errorf("chart declares dependencies: subcharts are not supported by this renderer")
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "values.yaml")); err == nil {
		if c.Values, err = ReadValues(raw); err != nil {
			return nil, fmt.Errorf("cannot load values.yaml: %w", err)
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "values.schema.json")); err == nil {
		c.Schema = raw
	}
	for _, forbidden := range []string{"charts", "requirements.yaml", "Chart.lock"} {
		if _, err := os.Stat(filepath.Join(dir, forbidden)); err == nil {
			return nil, fmt.Errorf("%s present: subcharts are not supported by this renderer", forbidden)
		}
	}
	ignore := readHelmignore(dir)
	err = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if info.IsDir() {
			return nil
		}
		if ignore(rel) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			c.Templates = append(c.Templates, File{Name: rel, Data: data})
		case rel == "Chart.yaml" || rel == "values.yaml" || rel == "values.schema.json":
		default:
			c.Files = append(c.Files, File{Name: rel, Data: data})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(c.Templates, func(i, j int) bool { return c.Templates[i].Name < c.Templates[j].Name })
	return c, nil
}

func validateMetadata(m *Metadata) error {
	if m.APIVersion != "v2" {
		return fmt.Errorf("apiVersion must be v2 (got %q)", m.APIVersion)
	}
	if m.Name == "" {
		return fmt.Errorf("name is required")
	}
	if _, err := semver.StrictNewVersion(m.Version); err != nil {
		return fmt.Errorf("version %q is invalid", m.Version)
	}
	if m.Type != "" && m.Type != "application" && m.Type != "library" {
		return fmt.Errorf("type must be application or library")
	}
	return nil
}

// readHelmignore supports the common subset of .helmignore: blank lines,
// comments, "name", "dir/" and shell globs matched against the base name or
// the relative path.
func readHelmignore(dir string) func(string) bool {
	raw, err := os.ReadFile(filepath.Join(dir, ".helmignore"))
	var patterns []string
	if err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			patterns = append(patterns, line)
		}
	}
	return func(rel string) bool {
		if rel == ".helmignore" {
			return true
		}
		for _, p := range patterns {
			dirOnly := strings.HasSuffix(p, "/")
			p = strings.TrimSuffix(p, "/")
			parts := strings.Split(rel, "/")
			for i, part := range parts {
				if dirOnly && i == len(parts)-1 {
					continue
				}
				if ok, _ := filepath.Match(p, part); ok {
					return true
				}
			}
			if ok, _ := filepath.Match(p, rel); ok {
				return true
			}
		}
		return false
	}
}

// checkKubeVersion applies Chart.yaml's kubeVersion constraint as Helm does.
func checkKubeVersion(m *Metadata, kube string) error {
	if m.KubeVersion == "" {
		return nil
	}
	c, err := semver.NewConstraint(m.KubeVersion)
	if err != nil {
		return fmt.Errorf("invalid kubeVersion constraint %q: %w", m.KubeVersion, err)
	}
	v, err := semver.NewVersion(kube)
	if err != nil {
		return fmt.Errorf("invalid --kube-version %q: %w", kube, err)
	}
	if !c.Check(v) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", m.KubeVersion, kube)
	}
	return nil
}
