package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// The types below mirror k8s.io/kube-scheduler/config/v1 (and component-base's
// LeaderElectionConfiguration and ClientConnectionConfiguration) field for
// field, so that strictKeys rejects a key kube-scheduler's strict decoder
// would reject.

type KubeSchedulerConfiguration struct {
	APIVersion                string                 `json:"apiVersion"`
	Kind                      string                 `json:"kind"`
	Parallelism               *int32                 `json:"parallelism,omitempty"`
	LeaderElection            LeaderElection         `json:"leaderElection"`
	ClientConnection          ClientConnection       `json:"clientConnection"`
	EnableProfiling           *bool                  `json:"enableProfiling,omitempty"`
	EnableContentionProfiling *bool                  `json:"enableContentionProfiling,omitempty"`
	PercentageOfNodesToScore  *int32                 `json:"percentageOfNodesToScore,omitempty"`
	PodInitialBackoffSeconds  *int64                 `json:"podInitialBackoffSeconds,omitempty"`
	PodMaxBackoffSeconds      *int64                 `json:"podMaxBackoffSeconds,omitempty"`
	Profiles                  []KubeSchedulerProfile `json:"profiles,omitempty"`
	Extenders                 []Extender             `json:"extenders,omitempty"`
	DelayCacheUntilActive     bool                   `json:"delayCacheUntilActive,omitempty"`
}

type LeaderElection struct {
	LeaderElect       *bool  `json:"leaderElect"`
	LeaseDuration     string `json:"leaseDuration"`
	RenewDeadline     string `json:"renewDeadline"`
	RetryPeriod       string `json:"retryPeriod"`
	ResourceLock      string `json:"resourceLock"`
	ResourceName      string `json:"resourceName"`
	ResourceNamespace string `json:"resourceNamespace"`
}

type ClientConnection struct {
	Kubeconfig         string  `json:"kubeconfig"`
	AcceptContentTypes string  `json:"acceptContentTypes"`
	ContentType        string  `json:"contentType"`
	QPS                float32 `json:"qps"`
	Burst              int32   `json:"burst"`
}

type KubeSchedulerProfile struct {
	SchedulerName            *string                  `json:"schedulerName,omitempty"`
	PercentageOfNodesToScore *int32                   `json:"percentageOfNodesToScore,omitempty"`
	Plugins                  map[string]interface{}   `json:"plugins,omitempty"`
	PluginConfig             []map[string]interface{} `json:"pluginConfig,omitempty"`
}

type Extender struct {
	URLPrefix        string                    `json:"urlPrefix"`
	FilterVerb       string                    `json:"filterVerb,omitempty"`
	PreemptVerb      string                    `json:"preemptVerb,omitempty"`
	PrioritizeVerb   string                    `json:"prioritizeVerb,omitempty"`
	Weight           int64                     `json:"weight,omitempty"`
	BindVerb         string                    `json:"bindVerb,omitempty"`
	EnableHTTPS      bool                      `json:"enableHTTPS,omitempty"`
	TLSConfig        *ExtenderTLSConfig        `json:"tlsConfig,omitempty"`
	HTTPTimeout      string                    `json:"httpTimeout,omitempty"`
	NodeCacheCapable bool                      `json:"nodeCacheCapable,omitempty"`
	ManagedResources []ExtenderManagedResource `json:"managedResources,omitempty"`
	Ignorable        bool                      `json:"ignorable,omitempty"`
}

type ExtenderTLSConfig struct {
	Insecure   bool   `json:"insecure,omitempty"`
	ServerName string `json:"serverName,omitempty"`
	CertFile   string `json:"certFile,omitempty"`
	KeyFile    string `json:"keyFile,omitempty"`
	CAFile     string `json:"caFile,omitempty"`
	CertData   []byte `json:"certData,omitempty"`
	KeyData    []byte `json:"keyData,omitempty"`
	CAData     []byte `json:"caData,omitempty"`
}

type ExtenderManagedResource struct {
	Name               string `json:"name"`
	IgnoredByScheduler bool   `json:"ignoredByScheduler,omitempty"`
}

// ParseKubeSchedulerConfiguration decodes strictly and checks apiVersion/kind.
func ParseKubeSchedulerConfiguration(doc string) (*KubeSchedulerConfiguration, error) {
	var cfg KubeSchedulerConfiguration
	if err := decodeStrict(doc, &cfg); err != nil {
		return nil, err
	}
	if cfg.APIVersion != "kubescheduler.config.k8s.io/v1" || cfg.Kind != "KubeSchedulerConfiguration" {
		return nil, fmt.Errorf("apiVersion/kind %s/%s, want kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration", cfg.APIVersion, cfg.Kind)
	}
	setDefaults(&cfg)
	return &cfg, nil
}

// setDefaults applies kube-scheduler's defaulting (config/v1 SetDefaults_*) for
// the fields validated here, as kube-scheduler does before validating.
func setDefaults(cfg *KubeSchedulerConfiguration) {
	le := &cfg.LeaderElection
	if le.LeaderElect == nil {
		t := true
		le.LeaderElect = &t
	}
	for _, d := range []struct {
		field *string
		value string
	}{
		{&le.ResourceLock, "leases"}, {&le.ResourceName, "kube-scheduler"}, {&le.ResourceNamespace, "kube-system"},
	} {
		if *d.field == "" {
			*d.field = d.value
		}
	}
	// A duration of zero, written or not, is the default (kube-scheduler's
	// config/v1 SetDefaults_KubeSchedulerConfiguration calls component-base
	// config/v1alpha1 RecommendedDefaultLeaderElectionConfiguration, which
	// compares with the zero Duration).
	for _, d := range []struct {
		field *string
		value string
	}{
		{&le.LeaseDuration, "15s"}, {&le.RenewDeadline, "10s"}, {&le.RetryPeriod, "2s"},
	} {
		if v, err := time.ParseDuration(*d.field); *d.field == "" || (err == nil && v == 0) {
			*d.field = d.value
		}
	}
	if len(cfg.Profiles) == 0 {
		name := "default-scheduler"
		cfg.Profiles = []KubeSchedulerProfile{{SchedulerName: &name}}
	}
	for i := range cfg.Extenders {
		if cfg.Extenders[i].HTTPTimeout == "" {
			cfg.Extenders[i].HTTPTimeout = "5s"
		}
	}
}

func positiveDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration", field, s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s: %q must be > 0", field, s)
	}
	return d, nil
}

// ValidateKubeSchedulerConfiguration applies the rules of kube-scheduler's
// ValidateKubeSchedulerConfiguration that this configuration can break.
func ValidateKubeSchedulerConfiguration(cfg *KubeSchedulerConfiguration) error {
	if len(cfg.Profiles) == 0 {
		return fmt.Errorf("profiles: at least one profile is required")
	}
	names := map[string]bool{}
	for i, p := range cfg.Profiles {
		if p.SchedulerName == nil || *p.SchedulerName == "" {
			return fmt.Errorf("profiles[%d].schedulerName: required", i)
		}
		if names[*p.SchedulerName] {
			return fmt.Errorf("profiles[%d].schedulerName: duplicate %q", i, *p.SchedulerName)
		}
		names[*p.SchedulerName] = true
		if p.PercentageOfNodesToScore != nil && (*p.PercentageOfNodesToScore < 0 || *p.PercentageOfNodesToScore > 100) {
			return fmt.Errorf("profiles[%d].percentageOfNodesToScore: %d not in valid range [0-100]", i, *p.PercentageOfNodesToScore)
		}
		if err := validatePluginConfig(i, p.PluginConfig); err != nil {
			return err
		}
	}
	if err := validateLeaderElection(cfg.LeaderElection); err != nil {
		return err
	}
	return validateExtenders(cfg.Extenders)
}

// NodeResourcesFitArgs (kubescheduler.config.k8s.io/v1), the only plugin
// arguments the chart writes.
type NodeResourcesFitArgs struct {
	IgnoredResources      []string               `json:"ignoredResources,omitempty"`
	IgnoredResourceGroups []string               `json:"ignoredResourceGroups,omitempty"`
	ScoringStrategy       map[string]interface{} `json:"scoringStrategy,omitempty"`
}

// validatePluginConfig: each plugin configured once, and NodeResourcesFit's
// arguments decoded strictly and checked as validation_pluginargs.go
// ValidateNodeResourcesFitArgs does (names are qualified names; a group has no
// '/').
func validatePluginConfig(profile int, pcs []map[string]interface{}) error {
	seen := map[string]bool{}
	for j, pc := range pcs {
		name := str(pc["name"])
		where := fmt.Sprintf("profiles[%d].pluginConfig[%d]", profile, j)
		if name == "" || seen[name] {
			return fmt.Errorf("%s: name %q missing or repeated", where, name)
		}
		seen[name] = true
		for k := range pc {
			if k != "name" && k != "args" {
				return fmt.Errorf("%s: unknown field %q", where, k)
			}
		}
		if name != "NodeResourcesFit" {
			continue
		}
		var args NodeResourcesFitArgs
		raw, _ := json.Marshal(pc["args"])
		if err := decodeStrict(string(raw), &args); err != nil {
			return fmt.Errorf("%s.args: %v", where, err)
		}
		for i, r := range args.IgnoredResources {
			if !isQualifiedName(r) {
				return fmt.Errorf("%s.args.ignoredResources[%d]: %q is not a qualified name", where, i, r)
			}
		}
		for i, g := range args.IgnoredResourceGroups {
			if strings.Contains(g, "/") {
				return fmt.Errorf("%s.args.ignoredResourceGroups[%d]: resource group name can't contain '/'", where, i)
			}
			if !isQualifiedName(g) {
				return fmt.Errorf("%s.args.ignoredResourceGroups[%d]: %q is not a qualified name", where, i, g)
			}
		}
	}
	return nil
}

func validateLeaderElection(le LeaderElection) error {
	if le.LeaderElect == nil || !*le.LeaderElect {
		return nil
	}
	lease, err := positiveDuration("leaderElection.leaseDuration", le.LeaseDuration)
	if err != nil {
		return err
	}
	renew, err := positiveDuration("leaderElection.renewDeadline", le.RenewDeadline)
	if err != nil {
		return err
	}
	retry, err := positiveDuration("leaderElection.retryPeriod", le.RetryPeriod)
	if err != nil {
		return err
	}
	if lease <= renew {
		return fmt.Errorf("leaderElection.leaseDuration %s must be greater than renewDeadline %s", lease, renew)
	}
	if float64(renew) <= 1.2*float64(retry) {
		return fmt.Errorf("leaderElection.renewDeadline %s must be greater than 1.2 x retryPeriod %s", renew, retry)
	}
	if le.ResourceLock == "" || le.ResourceName == "" || le.ResourceNamespace == "" {
		return fmt.Errorf("leaderElection: resourceLock, resourceName and resourceNamespace are required")
	}
	if le.ResourceLock != "leases" {
		return fmt.Errorf("leaderElection.resourceLock %q: only leases is supported", le.ResourceLock)
	}
	return nil
}

// validateExtenders is kube-scheduler's validateExtenders: a positive weight
// for a prioritizing extender, one binder at most, extended resource names
// only, each managed at most once.
func validateExtenders(exts []Extender) error {
	binders := 0
	managed := map[string]bool{}
	for i, e := range exts {
		if e.URLPrefix == "" {
			return fmt.Errorf("extenders[%d].urlPrefix: required", i)
		}
		if e.PrioritizeVerb != "" && e.Weight <= 0 {
			return fmt.Errorf("extenders[%d].weight: %d: must have a positive weight applied to it", i, e.Weight)
		}
		if e.BindVerb != "" {
			binders++
		}
		if e.HTTPTimeout != "" {
			if _, err := positiveDuration(fmt.Sprintf("extenders[%d].httpTimeout", i), e.HTTPTimeout); err != nil {
				return err
			}
		}
		for j, r := range e.ManagedResources {
			if !isExtendedResourceName(r.Name) {
				return fmt.Errorf("extenders[%d].managedResources[%d].name: %q is an invalid extended resource name", i, j, r.Name)
			}
			if managed[r.Name] {
				return fmt.Errorf("extenders[%d].managedResources[%d].name: duplicate extender managed resource name %q", i, j, r.Name)
			}
			managed[r.Name] = true
		}
	}
	if binders > 1 {
		return fmt.Errorf("extenders: found %d extenders implementing bind: only one extender can implement bind", binders)
	}
	return nil
}

// checkLoopbackExtender checks fitledger's own entry (the first) as the
// chart must write it: the shim on 127.0.0.1:<port>, the fixed settings, the
// verbs the shim serves.
func checkLoopbackExtender(e Extender, shimPort int64, https bool) error {
	u, err := url.Parse(e.URLPrefix)
	if err != nil {
		return fmt.Errorf("urlPrefix %q: %v", e.URLPrefix, err)
	}
	wantScheme := "http"
	if https {
		wantScheme = "https"
	}
	if u.Scheme != wantScheme {
		return fmt.Errorf("urlPrefix %q: scheme %q, want %q", e.URLPrefix, u.Scheme, wantScheme)
	}
	if e.EnableHTTPS != https {
		return fmt.Errorf("enableHTTPS %v does not match the urlPrefix scheme", e.EnableHTTPS)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host != "127.0.0.1" {
		return fmt.Errorf("urlPrefix %q does not point at 127.0.0.1", e.URLPrefix)
	}
	if port != fmt.Sprint(shimPort) {
		return fmt.Errorf("urlPrefix %q: port %s, but the shim listens on %d", e.URLPrefix, port, shimPort)
	}
	if p := strings.TrimRight(u.Path, "/"); p != "" {
		return fmt.Errorf("urlPrefix %q: path %q, but the shim's prefix is /", e.URLPrefix, u.Path)
	}
	return checkExtenderVerbs(e)
}

// checkExtenderVerbs checks the settings every fitledger extender entry has.
func checkExtenderVerbs(e Extender) error {
	if e.FilterVerb != "filter" {
		return fmt.Errorf("filterVerb %q, want filter", e.FilterVerb)
	}
	for _, v := range []struct{ name, got, want string }{
		{"prioritizeVerb", e.PrioritizeVerb, "prioritize"},
		{"bindVerb", e.BindVerb, "bind"},
		{"preemptVerb", e.PreemptVerb, "preempt"},
	} {
		if v.got != "" && v.got != v.want {
			return fmt.Errorf("%s %q: the shim serves %q", v.name, v.got, v.want)
		}
	}
	if !e.NodeCacheCapable {
		return fmt.Errorf("nodeCacheCapable must be true")
	}
	if e.Ignorable {
		return fmt.Errorf("ignorable must be false")
	}
	if e.HTTPTimeout == "" {
		return fmt.Errorf("httpTimeout must be set")
	}
	return nil
}
