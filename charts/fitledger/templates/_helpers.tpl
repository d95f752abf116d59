{{/*
Chart name, truncated to 63 characters (a DNS-1123 label).
*/}}
{{- define "fitledger.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: the release name, plus the chart name unless the release name
contains it; truncated to 63 characters.
*/}}
{{- define "fitledger.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "fitledger.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fitledger.labels" -}}
helm.sh/chart: {{ include "fitledger.chart" . }}
{{ include "fitledger.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fitledger
{{- end }}

{{- define "fitledger.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fitledger.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The component of the Deployment's pods: scheduler (kube-scheduler + fitledger)
or extender (fitledger alone, behind the Service).
*/}}
{{- define "fitledger.component" -}}
{{- ternary "scheduler" "extender" .Values.scheduler.enabled }}
{{- end }}

{{/*
What the PodDisruptionBudget, the pod anti-affinity and the extender Service
select: the Deployment's pods only. The selector labels plus the component, so
that the `helm test` pod (component: test, the same name and instance labels)
is never one of them. The Deployment's own selector stays the selector labels:
it is immutable, and its pods carry the component label anyway.
*/}}
{{- define "fitledger.podSelectorLabels" -}}
{{ include "fitledger.selectorLabels" . }}
app.kubernetes.io/component: {{ include "fitledger.component" . }}
{{- end }}

{{- define "fitledger.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fitledger.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The fitledger image (server, shim, fitledgerctl). image.repository has no
default: the image is published in no registry, and a default that cannot be
pulled would leave the pods in ImagePullBackOff.
*/}}
{{- define "fitledger.image" -}}
{{- if not .Values.image.repository }}
{{- fail (printf "image.repository is not set, and fitledger's image is in no public registry: build it from the repository's Dockerfile, push it to a registry your cluster pulls from, and set image.repository to it: `docker build -t REGISTRY/fitledger:%s . && docker push REGISTRY/fitledger:%s`, then `helm install ... --set image.repository=REGISTRY/fitledger` (charts/fitledger/README.md, Prerequisites)" .Chart.AppVersion .Chart.AppVersion) }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
kube-scheduler's release for each Kubernetes minor version the chart supports:
the tag installed on a cluster of that minor when scheduler.image.tag is empty.
The newest patch release of each line when the chart was last updated; this is
the only place that lists them.
*/}}
{{- define "fitledger.schedulerReleases" -}}
"1.29": v1.29.15
"1.30": v1.30.14
"1.31": v1.31.14
"1.32": v1.32.12
"1.33": v1.33.8
"1.34": v1.34.4
"1.35": v1.35.4
"1.36": v1.36.3
"1.37": v1.37.2
{{- end }}

{{/*
The cluster's version as semver (.Capabilities.KubeVersion.Version: the API
server's gitVersion with `helm install`, --kube-version with `helm template`).
Managed clusters report e.g. v1.31.4-eks-1a2b3c4 or v1.31.4-gke.1000; the
.Minor field can read "31+" there, so the version string is parsed instead.
*/}}
{{- define "fitledger.clusterMinor" -}}
{{- $v := semver .Capabilities.KubeVersion.Version }}
{{- printf "%d.%d" $v.Major $v.Minor }}
{{- end }}

{{/*
kube-scheduler's tag: scheduler.image.tag, or the release of
fitledger.schedulerReleases for the cluster's minor version. Fails unless the
result is allowed by kube-scheduler's version-skew policy
(https://kubernetes.io/releases/version-skew-policy/: kube-scheduler must not
be newer than the kube-apiserver, and may be up to one minor version older),
except with scheduler.image.allowSkew. Minor versions are compared: a newer
patch of the cluster's minor is within the policy.
*/}}
{{- define "fitledger.schedulerTag" -}}
{{- $releases := fromYaml (include "fitledger.schedulerReleases" .) }}
{{- $cluster := semver .Capabilities.KubeVersion.Version }}
{{- $clusterMinor := include "fitledger.clusterMinor" . }}
{{- $tag := toString (.Values.scheduler.image.tag | default "") }}
{{- if not $tag }}
{{- if hasKey $releases $clusterMinor }}
{{- $tag = index $releases $clusterMinor }}
{{- else }}
{{- $newest := 0 }}
{{- range $minor, $_ := $releases }}
{{- $n := int64 (regexReplaceAll `^1\.` $minor "") }}
{{- if gt $n (int64 $newest) }}
{{- $newest = $n }}
{{- end }}
{{- end }}
{{- if and (eq (int64 $cluster.Major) 1) (eq (int64 $cluster.Minor) (add1 $newest)) }}
{{- /* One minor newer than the newest release known here: that release is within the skew. */}}
{{- $tag = index $releases (printf "1.%d" $newest) }}
{{- else }}
{{- fail (printf "no kube-scheduler release is known to this chart for Kubernetes %s (the cluster is %s; the chart knows 1.29 to 1.%d): set scheduler.image.tag to the kube-scheduler of the cluster's version, e.g. --set scheduler.image.tag=v%s.N" $clusterMinor .Capabilities.KubeVersion.Version $newest $clusterMinor) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not .Values.scheduler.image.allowSkew }}
{{- if not (regexMatch `^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$` $tag) }}
{{- fail (printf "scheduler.image.tag %q is not a Kubernetes version (vMAJOR.MINOR.PATCH), so it cannot be checked against the cluster's %s; set scheduler.image.allowSkew=true to use it anyway" $tag .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- $s := semver $tag }}
{{- $older := printf "%d.%d" $cluster.Major (sub (int64 $cluster.Minor) 1) }}
{{- if or (ne (int64 $s.Major) (int64 $cluster.Major)) (gt (int64 $s.Minor) (int64 $cluster.Minor)) }}
{{- fail (printf "scheduler.image.tag %s is newer than the cluster (Kubernetes %s): kube-scheduler must not be newer than the API server (version-skew policy, https://kubernetes.io/releases/version-skew-policy/). Use a %s.x or %s.x kube-scheduler (empty: %s), or set scheduler.image.allowSkew=true if you know this one works" $tag .Capabilities.KubeVersion.Version $clusterMinor $older (include "fitledger.schedulerDefaultTag" .)) }}
{{- end }}
{{- if lt (int64 $s.Minor) (sub (int64 $cluster.Minor) 1) }}
{{- fail (printf "scheduler.image.tag %s is more than one minor version older than the cluster (Kubernetes %s): kube-scheduler may be at most one minor version older than the API server (version-skew policy, https://kubernetes.io/releases/version-skew-policy/). Use a %s.x or %s.x kube-scheduler (empty: %s), or set scheduler.image.allowSkew=true if you know this one works" $tag .Capabilities.KubeVersion.Version $clusterMinor $older (include "fitledger.schedulerDefaultTag" .)) }}
{{- end }}
{{- end }}
{{- $tag }}
{{- end }}

{{/*
What an empty scheduler.image.tag renders on this cluster, for messages ("none"
when the chart knows no release for it).
*/}}
{{- define "fitledger.schedulerDefaultTag" -}}
{{- $releases := fromYaml (include "fitledger.schedulerReleases" .) }}
{{- index $releases (include "fitledger.clusterMinor" .) | default "none known to this chart" }}
{{- end }}

{{- define "fitledger.schedulerImage" -}}
{{- printf "%s:%s" .Values.scheduler.image.repository (include "fitledger.schedulerTag" .) }}
{{- end }}

{{- define "fitledger.leaseName" -}}
{{- default .Values.scheduler.name .Values.scheduler.leaderElection.resourceName }}
{{- end }}

{{/*
Fixed paths inside the pod. The Unix socket lives in the emptyDir "socket",
created by fitledger-server (the first of its grpc.listen, gRPC's own server)
and shared with fitledger-shim, which dials it (webhook.mode=shim).
*/}}
{{- define "fitledger.socketDir" -}}/run/fitledger{{- end }}
{{- define "fitledger.socketAddress" -}}unix:///run/fitledger/server.sock{{- end }}
{{- define "fitledger.configDir" -}}/etc/fitledger/config{{- end }}
{{- define "fitledger.schedulerConfigDir" -}}/etc/fitledger/scheduler{{- end }}
{{- define "fitledger.grpcTLSDir" -}}/etc/fitledger/tls/grpc{{- end }}
{{- define "fitledger.shimTLSDir" -}}/etc/fitledger/tls/shim{{- end }}
{{- define "fitledger.shimClientTLSDir" -}}/etc/fitledger/tls/shim-client{{- end }}
{{- define "fitledger.webhookTLSDir" -}}/etc/fitledger/tls/webhook{{- end }}

{{/*
Which process serves kube-scheduler's extender webhook: "server"
(fitledger-server, in process) or "shim" (a fitledger-shim container). A
missing webhook.mode is "server": `helm upgrade --reuse-values` from a chart
without the value drops the new defaults.
*/}}
{{- define "fitledger.webhookMode" -}}
{{- $mode := "server" }}
{{- with .Values.webhook }}
{{- with .mode }}
{{- $mode = toString . }}
{{- end }}
{{- end }}
{{- $mode }}
{{- end }}

{{/*
Where the webhook listens, in either mode: on loopback for the pod's own
kube-scheduler, on all interfaces behind the extender Service.
*/}}
{{- define "fitledger.webhookListen" -}}
{{- printf "%s:%d" (ternary "127.0.0.1" "0.0.0.0" .Values.scheduler.enabled) (int .Values.shim.port) }}
{{- end }}

{{/*
The webhook's I/O threads and connection cap, in either mode (fitledger-server's
webhook.ioThreads / webhook.maxConnections, fitledger-shim's ioThreads /
maxConnections). A missing or null value, as after `helm upgrade --reuse-values`
from a chart without it (which drops the new defaults), is the binaries'
default: 0 (one I/O thread per CPU) and 1024. fitledger.validateValues has
checked them.
*/}}
{{- define "fitledger.webhookIOThreads" -}}
{{- if kindIs "invalid" .Values.shim.ioThreads }}0{{ else }}{{ int64 .Values.shim.ioThreads }}{{ end }}
{{- end }}
{{- define "fitledger.webhookMaxConnections" -}}
{{- if kindIs "invalid" .Values.shim.maxConnections }}1024{{ else }}{{ int64 .Values.shim.maxConnections }}{{ end }}
{{- end }}

{{/*
The extender's base URL as kube-scheduler calls it: the webhook on loopback
(fitledger-server's or fitledger-shim's, the same URL in both modes).
*/}}
{{- define "fitledger.extenderURL" -}}
{{- printf "%s://127.0.0.1:%d/" (ternary "https" "http" (not (empty .Values.shim.tls.secretName))) (int .Values.shim.port) }}
{{- end }}

{{/*
The address fitledger-server's gRPC TCP listener binds.
*/}}
{{- define "fitledger.grpcTCPAddress" -}}
{{- printf "%s:%d" (ternary "0.0.0.0" "127.0.0.1" (not (empty .Values.grpc.tls.secretName))) (int .Values.grpc.tcp.port) }}
{{- end }}

{{- define "fitledger.grpcServerName" -}}
{{- default (printf "%s-grpc.%s.svc" (include "fitledger.fullname" .) .Release.Namespace) .Values.grpc.tls.serverName }}
{{- end }}

{{/*
A Go duration string ("5s", "1m30s", "2500ms") in whole milliseconds.
values.schema.json has checked its form (definitions.duration).
*/}}
{{- define "fitledger.durationMillis" -}}
{{- $ms := 0.0 }}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 }}
{{- $num := float64 (regexFind "^[0-9]+(\\.[0-9]+)?" $part) }}
{{- $unit := regexReplaceAll "^[0-9]+(\\.[0-9]+)?" $part "" }}
{{- $scale := get (dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0) $unit }}
{{- $ms = addf $ms (mulf $num $scale) }}
{{- end }}
{{- printf "%d" (int64 (floor $ms)) }}
{{- end }}

{{/*
fitledger's deadlines under kube-scheduler's extender.httpTimeout, all derived
from that one value so they cannot disagree: the Bind verb's budget
(fitledger-server's kubernetes.bindBudget) is httpTimeout minus 1s, the margin
for kube-scheduler's HTTP round trip and the answer's encoding; in shim mode the
shim waits for the server up to httpTimeout minus 500ms (its serverTimeout),
longer than the budget so that the server's own "outcome unknown" answer
reaches kube-scheduler.
*/}}
{{- define "fitledger.bindBudget" -}}
{{- include "fitledger.formatMillis" (sub (int64 (include "fitledger.durationMillis" .Values.extender.httpTimeout)) 1000) }}
{{- end }}
{{- define "fitledger.shimServerTimeout" -}}
{{- include "fitledger.formatMillis" (sub (int64 (include "fitledger.durationMillis" .Values.extender.httpTimeout)) 500) }}
{{- end }}
{{- define "fitledger.formatMillis" -}}
{{- if eq (mod (int64 .) 1000) 0 }}{{ printf "%ds" (div (int64 .) 1000) }}{{ else }}{{ printf "%dms" (int64 .) }}{{ end }}
{{- end }}

{{/*
The resources kube-scheduler's NodeResourcesFit ignores in fitledger's profile,
as a JSON list. kube-scheduler (pkg/scheduler/scheduler.go, buildExtenders)
collects every extender's managedResources with ignoredByScheduler: true and,
when there is any, sets the profile's NodeResourcesFitArgs.ignoredResources to
exactly that list (replacing what the profile set); otherwise the profile's own
list holds. fitledger's ledger ignores the same, except the resources it
manages itself (extender.managedResources, accounted by the ledger alone).
*/}}
{{- define "fitledger.ledgerIgnoredResources" -}}
{{- $own := list }}
{{- range .Values.extender.managedResources }}
{{- $own = append $own (toString .name) }}
{{- end }}
{{- $fromExtenders := list }}
{{- range .Values.extender.managedResources }}
{{- if .ignoredByScheduler }}
{{- $fromExtenders = append $fromExtenders (toString .name) }}
{{- end }}
{{- end }}
{{- range .Values.scheduler.extraExtenders }}
{{- range .managedResources }}
{{- if .ignoredByScheduler }}
{{- $fromExtenders = append $fromExtenders (toString .name) }}
{{- end }}
{{- end }}
{{- end }}
{{- $ignored := $fromExtenders }}
{{- if not $fromExtenders }}
{{- $ignored = (.Values.scheduler.nodeResourcesFit | default dict).ignoredResources | default list }}
{{- end }}
{{- $out := list }}
{{- range $ignored }}
{{- if and (not (has (toString .) $own)) (not (has (toString .) $out)) }}
{{- $out = append $out (toString .) }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/*
The resource groups (name prefixes) NodeResourcesFit ignores, as a JSON list:
the profile's ignoredResourceGroups, less any group of a resource fitledger
manages itself (it accounts that resource whatever the group).
*/}}
{{- define "fitledger.ledgerIgnoredResourceGroups" -}}
{{- $ownGroups := list }}
{{- range .Values.extender.managedResources }}
{{- $ownGroups = append $ownGroups (regexReplaceAll "/.*$" (toString .name) "") }}
{{- end }}
{{- $out := list }}
{{- range ((.Values.scheduler.nodeResourcesFit | default dict).ignoredResourceGroups | default list) }}
{{- if and (not (has (toString .) $ownGroups)) (not (has (toString .) $out)) }}
{{- $out = append $out (toString .) }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/*
Checks a managed resource name by kube-scheduler's rules for
extenders[].managedResources[].name (validateExtendedResourceName): a qualified
name with a domain prefix, not native (no kubernetes.io/ namespace, not cpu,
memory, ephemeral-storage, pods or hugepages-*), not starting with "requests.",
and "requests." + name still a qualified name.
Takes a dict with "path" (for the message) and "name".
*/}}
{{- define "fitledger.checkExtendedResourceName" -}}
{{- $name := toString .name }}
{{- $prefix := regexReplaceAll "/.*$" $name "" }}
{{- $short := regexReplaceAll "^[^/]*/" $name "" }}
{{- $qualified := regexMatch `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$` $name }}
{{- if or (not $qualified) (contains "kubernetes.io/" $name) (hasPrefix "requests." $name) (gt (len $prefix) 244) (gt (len $short) 63) }}
{{- fail (printf "%s %q is not an extended resource name: use a domain-prefixed name such as example.com/gpu-mem, outside the kubernetes.io/ namespace (cpu, memory, ephemeral-storage, pods and hugepages-* are native resources)" .path $name) }}
{{- end }}
{{- end }}

{{/*
Fails rendering, with a message naming the value, for what kube-scheduler or
fitledger would reject at run time. values.schema.json checks most of this too;
this check also holds with --skip-schema-validation.
*/}}
{{- define "fitledger.validateValues" -}}
{{- $ext := .Values.extender }}
{{- $mode := include "fitledger.webhookMode" . }}
{{- if not (has $mode (list "server" "shim")) }}
{{- fail (printf "webhook.mode must be \"server\" (fitledger-server serves the extender webhook) or \"shim\" (a fitledger-shim container serves it); got %q" $mode) }}
{{- end }}
{{- /*
Both binaries refuse their old threads key, naming what replaced it; so does
the chart. A null is unset: Helm keeps a null only where no other source of
values (the chart's defaults, the release's previous values) has the key.
*/}}
{{- if not (kindIs "invalid" .Values.shim.threads) }}
{{- fail (printf "shim.threads was removed (set to %v): the webhook no longer holds a thread per request. Remove it from your values: the webhook now runs on shim.ioThreads I/O threads (default 0: one per CPU) and shim.maxConnections caps its open connections (default 1024). `helm upgrade --reuse-values` brings back an earlier chart's shim.threads (its default was 64): upgrade with --reset-then-reuse-values (Helm 3.14+) instead, adding --set shim.threads=null if you had set it yourself, or pass your values files again" .Values.shim.threads) }}
{{- end }}
{{- range $key, $bounds := dict "ioThreads" (list 0 256) "maxConnections" (list 1 1048576) }}
{{- $v := index $.Values.shim $key }}
{{- if not (kindIs "invalid" $v) }}
{{- $lo := index $bounds 0 }}
{{- $hi := index $bounds 1 }}
{{- if not (or (kindIs "int64" $v) (kindIs "int" $v) (kindIs "float64" $v)) }}
{{- fail (printf "shim.%s must be an integer in %d..%d; got %q" $key $lo $hi (toString $v)) }}
{{- end }}
{{- if or (ne (floor (float64 $v)) (float64 $v)) (lt (float64 $v) (float64 $lo)) (gt (float64 $v) (float64 $hi)) }}
{{- fail (printf "shim.%s must be an integer in %d..%d (fitledger-server's webhook.%s and fitledger-shim's %s); got %v" $key $lo $hi $key $key $v) }}
{{- end }}
{{- end }}
{{- end }}
{{- $ports := list (list "server.monitorPort" (int .Values.server.monitorPort)) (list "shim.port" (int .Values.shim.port)) }}
{{- if .Values.grpc.tcp.enabled }}
{{- $ports = append $ports (list "grpc.tcp.port" (int .Values.grpc.tcp.port)) }}
{{- end }}
{{- if eq $mode "shim" }}
{{- $ports = append $ports (list "shim.monitorPort" (int .Values.shim.monitorPort)) }}
{{- end }}
{{- if .Values.scheduler.enabled }}
{{- $ports = append $ports (list "kube-scheduler's secure port" 10259) }}
{{- end }}
{{- range $i, $a := $ports }}
{{- range $j, $b := $ports }}
{{- if and (lt $i $j) (eq (index $a 1) (index $b 1)) }}
{{- fail (printf "%s and %s are both %d: the containers of a pod share its network, so each listener needs its own port" (index $a 0) (index $b 0) (index $a 1)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if lt (int64 (include "fitledger.durationMillis" $ext.httpTimeout)) 2000 }}
{{- fail (printf "extender.httpTimeout must be at least 2s, got %s: fitledger's Bind verb must end 1s before it (kubernetes.bindBudget = httpTimeout - 1s), and a bind (a GET, the binding POST and a GET of the pod) needs a second of its own" (toString $ext.httpTimeout)) }}
{{- end }}
{{- /* kube-scheduler refuses these at start (client-go tools/leaderelection NewLeaderElector, component-base ValidateLeaderElectionConfiguration): say so at install instead of a crash loop. A duration of zero is kube-scheduler's default (component-base config/v1alpha1 RecommendedDefaultLeaderElectionConfiguration: 15s, 10s, 2s), as kube-scheduler reads it; tests/upstream TestChartSchedulerConfigsLoadInKubeScheduler holds these rules to the real kube-scheduler */}}
{{- if .Values.scheduler.enabled }}
{{- $le := .Values.scheduler.leaderElection }}
{{- $effective := dict }}
{{- range $key, $default := dict "leaseDuration" 15000 "renewDeadline" 10000 "retryPeriod" 2000 }}
{{- $text := toString (index $le $key) }}
{{- if hasPrefix "-" $text }}
{{- fail (printf "scheduler.leaderElection.%s must not be negative, got %s: kube-scheduler refuses to start otherwise (0s: its default)" $key $text) }}
{{- end }}
{{- $ms := int64 (include "fitledger.durationMillis" $text) }}
{{- if not (regexMatch "[1-9]" $text) }}
{{- $ms = int64 $default }}
{{- else if le $ms 0 }}
{{- /* the chart's own floor: kube-scheduler takes any positive duration, but the checks below count milliseconds */}}
{{- fail (printf "scheduler.leaderElection.%s must be at least 1ms (0s: kube-scheduler's default), got %s" $key $text) }}
{{- end }}
{{- $_ := set $effective $key $ms }}
{{- end }}
{{- $lease := $effective.leaseDuration }}
{{- $renew := $effective.renewDeadline }}
{{- $retry := $effective.retryPeriod }}
{{- if le $lease $renew }}
{{- fail (printf "scheduler.leaderElection.leaseDuration (%s) must be greater than renewDeadline (%s): kube-scheduler refuses to start otherwise" (include "fitledger.formatMillis" $lease) (include "fitledger.formatMillis" $renew)) }}
{{- end }}
{{- if le (float64 $renew) (mulf (float64 $retry) 1.2) }}
{{- fail (printf "scheduler.leaderElection.renewDeadline (%s) must be greater than 1.2 x retryPeriod (%s): kube-scheduler refuses to start otherwise (client-go's leader election, JitterFactor 1.2)" (include "fitledger.formatMillis" $renew) (include "fitledger.formatMillis" $retry)) }}
{{- end }}
{{- end }}
{{- $pct := .Values.scheduler.percentageOfNodesToScore }}
{{- if not (kindIs "invalid" $pct) }}
{{- if not (and (or (kindIs "int64" $pct) (kindIs "int" $pct) (kindIs "float64" $pct)) (eq (floor (float64 $pct)) (float64 $pct)) (ge (float64 $pct) 0.0) (le (float64 $pct) 100.0)) }}
{{- fail (printf "scheduler.percentageOfNodesToScore must be an integer in 0..100 (kube-scheduler's validation), or empty; got %v" $pct) }}
{{- end }}
{{- end }}
{{- if lt (int64 (include "fitledger.durationMillis" .Values.server.ledger.assumedReconcileAge)) 6000 }}
{{- fail (printf "server.ledger.assumedReconcileAge must be at least 6s, got %s: twice fitledger-server's kubernetes.bindTimeout (3s), since a binding the server gave up on may still be applied by the API server; fitledger-server refuses to start otherwise" (toString .Values.server.ledger.assumedReconcileAge)) }}
{{- end }}
{{- $fit := .Values.scheduler.nodeResourcesFit | default dict }}
{{- range $i, $r := ($fit.ignoredResources | default list) }}
{{- if not (regexMatch `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$` (toString $r)) }}
{{- fail (printf "scheduler.nodeResourcesFit.ignoredResources[%d] %q is not a resource name (a qualified name such as example.com/foo; kube-scheduler's ValidateNodeResourcesFitArgs)" $i $r) }}
{{- end }}
{{- end }}
{{- range $i, $g := ($fit.ignoredResourceGroups | default list) }}
{{- if contains "/" (toString $g) }}
{{- fail (printf "scheduler.nodeResourcesFit.ignoredResourceGroups[%d] %q: a resource group is the part before \"/\" (e.g. example.com) and can't contain '/' (kube-scheduler's ValidateNodeResourcesFitArgs)" $i $g) }}
{{- end }}
{{- if not (regexMatch `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$` (toString $g)) }}
{{- fail (printf "scheduler.nodeResourcesFit.ignoredResourceGroups[%d] %q is not a valid resource group name" $i $g) }}
{{- end }}
{{- end }}
{{- if and $ext.prioritize (le (int $ext.weight) 0) }}
{{- fail (printf "extender.weight must be > 0 when extender.prioritize is true (kube-scheduler rejects a prioritizing extender whose weight is <= 0); got %v" $ext.weight) }}
{{- end }}
{{- $seen := dict }}
{{- range $i, $r := $ext.managedResources }}
{{- $path := printf "extender.managedResources[%d].name" $i }}
{{- include "fitledger.checkExtendedResourceName" (dict "path" $path "name" $r.name) }}
{{- if hasKey $seen (toString $r.name) }}
{{- fail (printf "%s %q is listed twice (kube-scheduler rejects duplicate managed resource names)" $path $r.name) }}
{{- end }}
{{- $_ := set $seen (toString $r.name) true }}
{{- end }}
{{- if .Values.scheduler.enabled }}
{{- $binders := ternary 1 0 (not (empty $ext.bind)) }}
{{- range $i, $e := .Values.scheduler.extraExtenders }}
{{- if not (empty $e.bindVerb) }}
{{- $binders = add1 $binders }}
{{- end }}
{{- if and (not (empty $e.prioritizeVerb)) (le (int $e.weight) 0) }}
{{- fail (printf "scheduler.extraExtenders[%d].weight must be > 0 because it sets prioritizeVerb; got %v" $i $e.weight) }}
{{- end }}
{{- range $j, $r := $e.managedResources }}
{{- $path := printf "scheduler.extraExtenders[%d].managedResources[%d].name" $i $j }}
{{- include "fitledger.checkExtendedResourceName" (dict "path" $path "name" $r.name) }}
{{- if hasKey $seen (toString $r.name) }}
{{- fail (printf "%s %q is already managed by another extender (kube-scheduler rejects duplicate managed resource names)" $path $r.name) }}
{{- end }}
{{- $_ := set $seen (toString $r.name) true }}
{{- end }}
{{- end }}
{{- if gt $binders 1 }}
{{- fail (printf "only one extender may bind, found %d: extender.bind is true and scheduler.extraExtenders sets bindVerb (set extender.bind=false or drop the other bindVerb)" $binders) }}
{{- end }}
{{- if and .Values.shim.tls.clientAuth (empty .Values.shim.tls.clientSecretName) }}
{{- fail "shim.tls.clientSecretName is required when shim.tls.clientAuth is true: kube-scheduler must present a client certificate to the webhook" }}
{{- end }}
{{- else }}
{{- if or (empty .Values.shim.tls.secretName) (not .Values.shim.tls.clientAuth) }}
{{- fail "scheduler.enabled=false exposes the extender webhook (whose bind verb binds pods) on a Service: set shim.tls.secretName and shim.tls.clientAuth=true so only kube-scheduler, with a client certificate, can call it" }}
{{- end }}
{{- end }}
{{- if and .Values.shim.tls.clientAuth (empty .Values.shim.tls.secretName) }}
{{- fail "shim.tls.clientAuth requires shim.tls.secretName (its ca.crt verifies the clients)" }}
{{- end }}
{{- if and .Values.grpc.tls.clientAuth (empty .Values.grpc.tls.secretName) }}
{{- fail "grpc.tls.clientAuth requires grpc.tls.secretName (its ca.crt verifies the clients)" }}
{{- end }}
{{- end }}

{{/*
fitledger-server's configuration file (server.yaml). With webhook.mode=server
its webhook block serves kube-scheduler's extender webhook, on the address,
limits and TLS Secret of the shim.* values.
*/}}
{{- define "fitledger.serverConfig" -}}
kubernetes:
  # The whole Bind verb ends within this: extender.httpTimeout - 1s.
  bindBudget: {{ include "fitledger.bindBudget" . | quote }}
  # The kubelet-rejection detector counts the pods of these schedulers: this
  # chart's; every pod's when fitledger extends a scheduler of your own.
  schedulerNames: {{ if .Values.scheduler.enabled }}[{{ .Values.scheduler.name | quote }}]{{ else }}[]{{ end }}
grpc:
  listen:
    - {{ include "fitledger.socketAddress" . | quote }}
    {{- if .Values.grpc.tcp.enabled }}
    - {{ include "fitledger.grpcTCPAddress" . | quote }}
    {{- end }}
  {{- if .Values.grpc.tls.secretName }}
  tls:
    certFile: {{ include "fitledger.grpcTLSDir" . }}/tls.crt
    keyFile: {{ include "fitledger.grpcTLSDir" . }}/tls.key
    {{- if .Values.grpc.tls.clientAuth }}
    clientCAFile: {{ include "fitledger.grpcTLSDir" . }}/ca.crt
    {{- end }}
  {{- end }}
monitor:
  listen: {{ printf "0.0.0.0:%d" (int .Values.server.monitorPort) | quote }}
{{- if eq (include "fitledger.webhookMode" .) "server" }}
webhook:
  listen: {{ include "fitledger.webhookListen" . | quote }}
  prefix: /
  maxBodyBytes: {{ int64 .Values.shim.maxBodyBytes }}
  ioThreads: {{ include "fitledger.webhookIOThreads" . }}
  maxConnections: {{ include "fitledger.webhookMaxConnections" . }}
  {{- if .Values.shim.tls.secretName }}
  tls:
    certFile: {{ include "fitledger.webhookTLSDir" . }}/tls.crt
    keyFile: {{ include "fitledger.webhookTLSDir" . }}/tls.key
    {{- if .Values.shim.tls.clientAuth }}
    clientCAFile: {{ include "fitledger.webhookTLSDir" . }}/ca.crt
    {{- end }}
  {{- end }}
{{- end }}
ledger:
  enabled: {{ .Values.server.ledger.enabled }}
  accounting:
    {{- with .Values.extender.managedResources }}
    mode: managed
    managed:
      {{- range . }}
      - {{ .name | quote }}
      {{- end }}
    {{- else }}
    mode: all
    managed: []
    {{- end }}
  # What kube-scheduler's NodeResourcesFit ignores: its profile arguments and
  # the other extenders' managedResources with ignoredByScheduler: true.
  ignoredResources: {{ include "fitledger.ledgerIgnoredResources" . }}
  ignoredResourceGroups: {{ include "fitledger.ledgerIgnoredResourceGroups" . }}
  scoring: {{ .Values.server.ledger.scoring }}
  reconcilePeriod: {{ .Values.server.ledger.reconcilePeriod | quote }}
  assumedReconcileAge: {{ .Values.server.ledger.assumedReconcileAge | quote }}
{{- if .Values.scheduler.enabled }}
# kube-scheduler's Lease (scheduler.leaderElection): the server answers only
# while this pod's kube-scheduler holds it, re-lists the pods from the API each
# time it becomes the holder, and refuses new binds once it no longer holds it.
# No identity: the server takes the pod's hostname (gethostname), which is the
# "<hostname>" of kube-scheduler's "<hostname>_<uuid>" (os.Hostname) because
# the containers of a pod share it; the downward API's metadata.name is not
# always that hostname (the kubelet truncates it to 63 characters).
leaderElection:
  leaseName: {{ include "fitledger.leaseName" . | quote }}
  leaseNamespace: {{ .Release.Namespace | quote }}
{{- end }}
log:
  level: {{ .Values.server.logLevel }}
{{- end }}

{{/*
fitledger-shim's configuration file (shim.yaml), for webhook.mode=shim.
*/}}
{{- define "fitledger.shimConfig" -}}
listen: {{ include "fitledger.webhookListen" . | quote }}
prefix: /
# fitledger-server's gRPC Unix socket (its grpc.listen) in the shared emptyDir.
server: {{ include "fitledger.socketAddress" . | quote }}
# Under extender.httpTimeout, above the server's bind budget.
serverTimeout: {{ include "fitledger.shimServerTimeout" . | quote }}
maxBodyBytes: {{ int64 .Values.shim.maxBodyBytes }}
ioThreads: {{ include "fitledger.webhookIOThreads" . }}
maxConnections: {{ include "fitledger.webhookMaxConnections" . }}
{{- if .Values.shim.tls.secretName }}
tls:
  certFile: {{ include "fitledger.shimTLSDir" . }}/tls.crt
  keyFile: {{ include "fitledger.shimTLSDir" . }}/tls.key
  {{- if .Values.shim.tls.clientAuth }}
  clientCAFile: {{ include "fitledger.shimTLSDir" . }}/ca.crt
  {{- end }}
{{- end }}
monitor:
  listen: {{ printf "0.0.0.0:%d" (int .Values.shim.monitorPort) | quote }}
{{- end }}

{{/*
The KubeSchedulerConfiguration: one profile for scheduler.name, leader election
on its own Lease, and fitledger's extender entry pointing at the webhook on
127.0.0.1 (only this pod's kube-scheduler calls it, and only while it leads).
The same in both webhook modes.
*/}}
{{- define "fitledger.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceLock: leases
  resourceName: {{ include "fitledger.leaseName" . | quote }}
  resourceNamespace: {{ .Release.Namespace | quote }}
  leaseDuration: {{ .Values.scheduler.leaderElection.leaseDuration | quote }}
  renewDeadline: {{ .Values.scheduler.leaderElection.renewDeadline | quote }}
  retryPeriod: {{ .Values.scheduler.leaderElection.retryPeriod | quote }}
profiles:
  - schedulerName: {{ .Values.scheduler.name | quote }}
    {{- with .Values.scheduler.percentageOfNodesToScore }}
    percentageOfNodesToScore: {{ int . }}
    {{- end }}
    {{- $fit := .Values.scheduler.nodeResourcesFit | default dict }}
    {{- if or $fit.ignoredResources $fit.ignoredResourceGroups }}
    pluginConfig:
      - name: NodeResourcesFit
        args:
          {{- with $fit.ignoredResources }}
          ignoredResources: {{ toJson . }}
          {{- end }}
          {{- with $fit.ignoredResourceGroups }}
          ignoredResourceGroups: {{ toJson . }}
          {{- end }}
    {{- end }}
extenders:
  - urlPrefix: {{ include "fitledger.extenderURL" . | quote }}
    filterVerb: filter
    {{- if .Values.extender.prioritize }}
    prioritizeVerb: prioritize
    weight: {{ int .Values.extender.weight }}
    {{- end }}
    {{- if .Values.extender.bind }}
    bindVerb: bind
    {{- end }}
    {{- if .Values.extender.preempt }}
    preemptVerb: preempt
    {{- end }}
    {{- if .Values.shim.tls.secretName }}
    enableHTTPS: true
    tlsConfig:
      caFile: {{ include "fitledger.shimTLSDir" . }}/ca.crt
      {{- with .Values.shim.tls.serverName }}
      serverName: {{ . | quote }}
      {{- end }}
      {{- if .Values.shim.tls.clientAuth }}
      certFile: {{ include "fitledger.shimClientTLSDir" . }}/tls.crt
      keyFile: {{ include "fitledger.shimClientTLSDir" . }}/tls.key
      {{- end }}
    {{- else }}
    enableHTTPS: false
    {{- end }}
    nodeCacheCapable: true
    httpTimeout: {{ .Values.extender.httpTimeout | quote }}
    ignorable: false
    {{- with .Values.extender.managedResources }}
    managedResources:
      {{- range . }}
      - name: {{ .name | quote }}
        ignoredByScheduler: {{ .ignoredByScheduler | default false }}
      {{- end }}
    {{- end }}
  {{- with .Values.scheduler.extraExtenders }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
Probes on an HTTP monitor port: liveness on /healthz, readiness on /readyz.
*/}}
{{- define "fitledger.monitorProbes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ .port }}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ .port }}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- if .sidecar }}
# A native sidecar counts as started once this passes; the containers after
# it in the pod start only then.
startupProbe:
  httpGet:
    path: /readyz
    port: {{ .port }}
  periodSeconds: 2
  timeoutSeconds: 3
  failureThreshold: 300
{{- end }}
{{- end }}

{{/*
fitledger-server's container. As a native sidecar (restartPolicy: Always in
initContainers) when kube-scheduler runs in the pod, so kube-scheduler starts
only after the server's first full list and stops before it. With
webhook.mode=server it serves the webhook too (its port declared only behind
the Service: on loopback nothing outside the pod reaches it).
*/}}
{{- define "fitledger.serverContainer" -}}
{{- $root := .root -}}
{{- $inProcess := eq (include "fitledger.webhookMode" $root) "server" -}}
- name: fitledger-server
  image: {{ include "fitledger.image" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  {{- if .sidecar }}
  restartPolicy: Always
  {{- end }}
  command:
    - /usr/local/bin/fitledger-server
  args:
    - --config
    - {{ include "fitledger.configDir" $root }}/server.yaml
  ports:
    {{- if $root.Values.grpc.tcp.enabled }}
    - name: grpc
      containerPort: {{ int $root.Values.grpc.tcp.port }}
      protocol: TCP
    {{- end }}
    {{- if and $inProcess (not $root.Values.scheduler.enabled) }}
    - name: extender
      containerPort: {{ int $root.Values.shim.port }}
      protocol: TCP
    {{- end }}
    - name: server-monitor
      containerPort: {{ int $root.Values.server.monitorPort }}
      protocol: TCP
  {{- include "fitledger.monitorProbes" (dict "port" "server-monitor" "sidecar" .sidecar) | nindent 2 }}
  resources:
    {{- toYaml $root.Values.server.resources | nindent 4 }}
  securityContext:
    {{- toYaml $root.Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: {{ include "fitledger.configDir" $root }}
      readOnly: true
    - name: socket
      mountPath: {{ include "fitledger.socketDir" $root }}
    {{- if $root.Values.grpc.tls.secretName }}
    - name: grpc-tls
      mountPath: {{ include "fitledger.grpcTLSDir" $root }}
      readOnly: true
    {{- end }}
    {{- if and $inProcess $root.Values.shim.tls.secretName }}
    - name: webhook-tls
      mountPath: {{ include "fitledger.webhookTLSDir" $root }}
      readOnly: true
    {{- end }}
{{- end }}

{{/*
fitledger-shim's container, for webhook.mode=shim (a native sidecar like the
server's, after it).
*/}}
{{- define "fitledger.shimContainer" -}}
{{- $root := .root -}}
- name: fitledger-shim
  image: {{ include "fitledger.image" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  {{- if .sidecar }}
  restartPolicy: Always
  {{- end }}
  command:
    - /usr/local/bin/fitledger-shim
  args:
    - --config
    - {{ include "fitledger.configDir" $root }}/shim.yaml
  ports:
    {{- if not $root.Values.scheduler.enabled }}
    - name: extender
      containerPort: {{ int $root.Values.shim.port }}
      protocol: TCP
    {{- end }}
    - name: shim-monitor
      containerPort: {{ int $root.Values.shim.monitorPort }}
      protocol: TCP
  {{- include "fitledger.monitorProbes" (dict "port" "shim-monitor" "sidecar" .sidecar) | nindent 2 }}
  resources:
    {{- toYaml $root.Values.shim.resources | nindent 4 }}
  securityContext:
    {{- toYaml $root.Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: {{ include "fitledger.configDir" $root }}
      readOnly: true
    - name: socket
      mountPath: {{ include "fitledger.socketDir" $root }}
    {{- if $root.Values.shim.tls.secretName }}
    - name: shim-tls
      mountPath: {{ include "fitledger.shimTLSDir" $root }}
      readOnly: true
    {{- end }}
{{- end }}
