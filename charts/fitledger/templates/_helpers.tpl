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

{{- define "fitledger.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fitledger.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The fitledger image (server, shim, fitledgerctl).
*/}}
{{- define "fitledger.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "fitledger.schedulerImage" -}}
{{- printf "%s:%s" .Values.scheduler.image.repository .Values.scheduler.image.tag }}
{{- end }}

{{- define "fitledger.leaseName" -}}
{{- default .Values.scheduler.name .Values.scheduler.leaderElection.resourceName }}
{{- end }}

{{/*
Fixed paths inside the pod. The Unix socket lives in the emptyDir "socket",
created by fitledger-server and shared with fitledger-shim (webhook.mode=shim).
*/}}
{{- define "fitledger.socketDir" -}}/run/fitledger{{- end }}
{{- define "fitledger.socketAddress" -}}unix:///run/fitledger/server.sock{{- end }}
{{/*
With webhook.mode=shim, fitledger-server also serves the unary methods on its
own HTTP/2 server (grpc.unaryListen) on this socket, and fitledger-shim dials it.
*/}}
{{- define "fitledger.unarySocketAddress" -}}unix:///run/fitledger/unary.sock{{- end }}
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
{{- if and (eq $mode "server") (lt (int .Values.shim.threads) 2) }}
{{- fail (printf "shim.threads must be at least 2 with webhook.mode=server (fitledger-server's webhook.threads is 2..4096); got %v" .Values.shim.threads) }}
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
grpc:
  listen:
    - {{ include "fitledger.socketAddress" . | quote }}
    {{- if .Values.grpc.tcp.enabled }}
    - {{ include "fitledger.grpcTCPAddress" . | quote }}
    {{- end }}
  {{- if eq (include "fitledger.webhookMode" .) "shim" }}
  unaryListen:
    - {{ include "fitledger.unarySocketAddress" . | quote }}
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
  threads: {{ int .Values.shim.threads }}
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
  scoring: {{ .Values.server.ledger.scoring }}
  reconcilePeriod: {{ .Values.server.ledger.reconcilePeriod | quote }}
  assumedReconcileAge: {{ .Values.server.ledger.assumedReconcileAge | quote }}
log:
  level: {{ .Values.server.logLevel }}
{{- end }}

{{/*
fitledger-shim's configuration file (shim.yaml), for webhook.mode=shim.
*/}}
{{- define "fitledger.shimConfig" -}}
listen: {{ include "fitledger.webhookListen" . | quote }}
prefix: /
server: {{ include "fitledger.unarySocketAddress" . | quote }}
maxBodyBytes: {{ int64 .Values.shim.maxBodyBytes }}
threads: {{ int .Values.shim.threads }}
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
