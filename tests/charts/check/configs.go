package main

import (
	"fmt"
	"net"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ServerConfig mirrors fitledger-server's YAML configuration (camelCase keys).
type ServerConfig struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Kubernetes struct {
		// BindBudget: the whole Bind verb ends within it (issue 22), derived
		// from the extender entry's httpTimeout.
		BindBudget string `json:"bindBudget"`
		// SchedulerNames: whose kubelet rejections the server counts (the chart's
		// scheduler profile; every pod's, [], without the chart's scheduler).
		SchedulerNames []string `json:"schedulerNames"`
	} `json:"kubernetes"`
	GRPC struct {
		Listen []string  `json:"listen"`
		TLS    *TLSFiles `json:"tls,omitempty"`
	} `json:"grpc"`
	Monitor struct {
		Listen string `json:"listen"`
	} `json:"monitor"`
	// Webhook is kube-scheduler's extender webhook served by the server
	// itself (the chart's webhook.mode=server); nil or an empty listen: off.
	Webhook *WebhookConfig `json:"webhook,omitempty"`
	Ledger  struct {
		Enabled    bool `json:"enabled"`
		Accounting struct {
			Mode    string   `json:"mode"`
			Managed []string `json:"managed"`
		} `json:"accounting"`
		// What kube-scheduler's NodeResourcesFit ignores (issue 22):
		// NodeResourcesFitArgs semantics.
		IgnoredResources      []string `json:"ignoredResources"`
		IgnoredResourceGroups []string `json:"ignoredResourceGroups"`
		Scoring               string   `json:"scoring"`
		ReconcilePeriod       string   `json:"reconcilePeriod"`
		AssumedReconcileAge   string   `json:"assumedReconcileAge"`
	} `json:"ledger"`
	// LeaderElection is kube-scheduler's Lease the server follows (issue
	// 26); nil or an empty leaseName: off.
	LeaderElection *LeaderElectionConfig `json:"leaderElection,omitempty"`
	Log            struct {
		Level string `json:"level"`
	} `json:"log"`
}

// LeaderElectionConfig mirrors the server's leaderElection block.
type LeaderElectionConfig struct {
	LeaseName      string `json:"leaseName"`
	LeaseNamespace string `json:"leaseNamespace"`
	// Identity is the "<hostname>" of kube-scheduler's "<hostname>_<uuid>";
	// empty: the server's host name.
	Identity string `json:"identity,omitempty"`
}

// WebhookConfig mirrors the server's webhook block (the keys the chart
// writes; the binary has more, with defaults).
type WebhookConfig struct {
	Listen         string    `json:"listen"`
	Prefix         string    `json:"prefix"`
	MaxBodyBytes   int64     `json:"maxBodyBytes"`
	IOThreads      int64     `json:"ioThreads"`
	MaxConnections int64     `json:"maxConnections"`
	TLS            *TLSFiles `json:"tls,omitempty"`
}

// ShimConfig mirrors fitledger-shim's YAML configuration.
type ShimConfig struct {
	Listen         string    `json:"listen"`
	Prefix         string    `json:"prefix"`
	Server         string    `json:"server"`
	ServerTimeout  string    `json:"serverTimeout"`
	MaxBodyBytes   int64     `json:"maxBodyBytes"`
	IOThreads      int64     `json:"ioThreads"`
	MaxConnections int64     `json:"maxConnections"`
	TLS            *TLSFiles `json:"tls,omitempty"`
	Monitor        struct {
		Listen string `json:"listen"`
	} `json:"monitor"`
}

// TLSFiles is the tls block of both configurations.
type TLSFiles struct {
	CertFile     string `json:"certFile"`
	KeyFile      string `json:"keyFile"`
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

func portOf(hostport string) string {
	_, port, _ := net.SplitHostPort(hostport)
	return port
}

// ValidateServerConfig applies fitledger-server's documented rules.
func ValidateServerConfig(c *ServerConfig) error {
	if len(c.GRPC.Listen) == 0 {
		return fmt.Errorf("grpc.listen is empty")
	}
	for _, addr := range c.GRPC.Listen {
		if strings.HasPrefix(addr, "unix://") {
			if !strings.HasPrefix(addr, "unix:///") {
				return fmt.Errorf("grpc.listen %q: a unix address needs an absolute path (unix:///path)", addr)
			}
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("grpc.listen %q: not unix:///path nor host:port", addr)
		}
		if !isLoopback(addr) && c.GRPC.TLS == nil {
			return fmt.Errorf("grpc.listen %q: a non-loopback TCP address requires grpc.tls", addr)
		}
	}
	if c.GRPC.TLS != nil && (c.GRPC.TLS.CertFile == "" || c.GRPC.TLS.KeyFile == "") {
		return fmt.Errorf("grpc.tls needs certFile and keyFile")
	}
	if _, _, err := net.SplitHostPort(c.Monitor.Listen); err != nil {
		return fmt.Errorf("monitor.listen %q: %v", c.Monitor.Listen, err)
	}
	if wh := c.Webhook; wh != nil && wh.Listen != "" {
		if _, _, err := net.SplitHostPort(wh.Listen); err != nil {
			return fmt.Errorf("webhook.listen %q: %v", wh.Listen, err)
		}
		if !strings.HasPrefix(wh.Prefix, "/") {
			return fmt.Errorf("webhook.prefix %q must start with /", wh.Prefix)
		}
		if wh.MaxBodyBytes < 1024 || wh.MaxBodyBytes > 1<<30 {
			return fmt.Errorf("webhook.maxBodyBytes %d outside 1024..1 GiB", wh.MaxBodyBytes)
		}
		if err := validateWebhookLimits("webhook.", wh.IOThreads, wh.MaxConnections); err != nil {
			return err
		}
		if wh.TLS != nil && (wh.TLS.CertFile == "" || wh.TLS.KeyFile == "") {
			return fmt.Errorf("webhook.tls needs certFile and keyFile")
		}
	}
	switch c.Ledger.Accounting.Mode {
	case "all":
		if len(c.Ledger.Accounting.Managed) != 0 {
			return fmt.Errorf("ledger.accounting.managed must be empty with mode all")
		}
	case "managed":
		if len(c.Ledger.Accounting.Managed) == 0 {
			return fmt.Errorf("ledger.accounting.managed is empty with mode managed")
		}
		for _, n := range c.Ledger.Accounting.Managed {
			if !isExtendedResourceName(n) {
				return fmt.Errorf("ledger.accounting.managed: %q is not an extended resource name", n)
			}
		}
	default:
		return fmt.Errorf("ledger.accounting.mode %q: want all or managed", c.Ledger.Accounting.Mode)
	}
	if c.Ledger.Scoring != "LeastAllocated" && c.Ledger.Scoring != "MostAllocated" {
		return fmt.Errorf("ledger.scoring %q", c.Ledger.Scoring)
	}
	for _, d := range []struct{ name, v string }{
		{"kubernetes.bindBudget", c.Kubernetes.BindBudget},
		{"ledger.reconcilePeriod", c.Ledger.ReconcilePeriod},
		{"ledger.assumedReconcileAge", c.Ledger.AssumedReconcileAge},
	} {
		if x, err := time.ParseDuration(d.v); err != nil || x <= 0 {
			return fmt.Errorf("%s %q is not a positive duration", d.name, d.v)
		}
	}
	for _, r := range c.Ledger.IgnoredResources {
		if !isQualifiedName(r) {
			return fmt.Errorf("ledger.ignoredResources: %q is not a resource name", r)
		}
	}
	for _, g := range c.Ledger.IgnoredResourceGroups {
		if strings.Contains(g, "/") || !isQualifiedName(g) {
			return fmt.Errorf("ledger.ignoredResourceGroups: %q is not a resource group (a name prefix without '/')", g)
		}
	}
	if le := c.LeaderElection; le != nil {
		if (le.LeaseName == "") != (le.LeaseNamespace == "") {
			return fmt.Errorf("leaderElection: leaseName %q and leaseNamespace %q go together", le.LeaseName, le.LeaseNamespace)
		}
		if strings.Contains(le.Identity, "_") {
			return fmt.Errorf("leaderElection.identity %q: the hostname part, without \"_\"", le.Identity)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warning", "error":
	default:
		return fmt.Errorf("log.level %q", c.Log.Level)
	}
	return nil
}

// ValidateShimConfig applies fitledger-shim's documented rules.
func ValidateShimConfig(c *ShimConfig) error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen %q: %v", c.Listen, err)
	}
	if !strings.HasPrefix(c.Prefix, "/") {
		return fmt.Errorf("prefix %q must start with /", c.Prefix)
	}
	if !strings.HasPrefix(c.Server, "unix:///") {
		if _, _, err := net.SplitHostPort(c.Server); err != nil {
			return fmt.Errorf("server %q: not unix:///path nor host:port", c.Server)
		}
	}
	if x, err := time.ParseDuration(c.ServerTimeout); err != nil || x <= 0 {
		return fmt.Errorf("serverTimeout %q is not a positive duration", c.ServerTimeout)
	}
	if c.MaxBodyBytes < 1024 || c.MaxBodyBytes > 1<<30 {
		return fmt.Errorf("maxBodyBytes %d outside 1024..1 GiB", c.MaxBodyBytes)
	}
	if err := validateWebhookLimits("", c.IOThreads, c.MaxConnections); err != nil {
		return err
	}
	if c.TLS != nil && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		return fmt.Errorf("tls needs certFile and keyFile")
	}
	if _, _, err := net.SplitHostPort(c.Monitor.Listen); err != nil {
		return fmt.Errorf("monitor.listen %q: %v", c.Monitor.Listen, err)
	}
	return nil
}

// validateWebhookLimits applies config/http_listener.cc's ranges, which both
// binaries share: ioThreads 0..256 (0: one per CPU), maxConnections 1..2^20.
func validateWebhookLimits(prefix string, ioThreads, maxConnections int64) error {
	if ioThreads < 0 || ioThreads > 256 {
		return fmt.Errorf("%sioThreads %d outside 0..256", prefix, ioThreads)
	}
	if maxConnections < 1 || maxConnections > 1<<20 {
		return fmt.Errorf("%smaxConnections %d outside 1..2^20", prefix, maxConnections)
	}
	return nil
}

// removedKeys are configuration keys the binaries refuse at start since the
// transport's rewrite (issue 21), each with what replaced it.
var removedKeys = map[string][]struct{ key, why string }{
	"server.yaml": {
		{"grpc.unaryListen", "removed with fitledger's own HTTP/2 server: fitledger-shim dials the server's grpc.listen socket"},
		{"webhook.threads", "removed: webhook.ioThreads and webhook.maxConnections replaced it"},
	},
	"shim.yaml": {
		{"threads", "removed: ioThreads and maxConnections replaced it"},
	},
}

// checkNoRemovedKeys: the rendered file (server.yaml or shim.yaml) sets none
// of the keys its binary refuses, whatever their value (an empty list or 0
// included: a key is written only by a chart that still knows it).
func checkNoRemovedKeys(file, doc string) error {
	var m map[string]interface{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	for _, r := range removedKeys[file] {
		if v, found := lookupKey(m, r.key); found {
			return fmt.Errorf("%s sets %s (%v), which its binary refuses: %s", file, r.key, v, r.why)
		}
	}
	return nil
}

// lookupKey returns the value at the dotted key of a YAML document's map, and
// whether the key is there (a null value counts as there).
func lookupKey(m map[string]interface{}, dotted string) (interface{}, bool) {
	var node interface{} = m
	for _, part := range strings.Split(dotted, ".") {
		sub, ok := node.(map[string]interface{})
		if !ok {
			return nil, false
		}
		if node, ok = sub[part]; !ok {
			return nil, false
		}
	}
	return node, true
}
