{{/* Chart name, overridable. */}}
{{- define "apphost.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified base name: "apphost" for a release called apphost, else "<release>-apphost". */}}
{{- define "apphost.fullname" -}}
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

{{/* Standard labels; pass (dict "root" $ "component" "gateway"). */}}
{{- define "apphost.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "apphost.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: apphost
{{- end }}

{{- define "apphost.selectorLabels" -}}
app.kubernetes.io/name: {{ include "apphost.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "apphost.componentName" -}}
{{- printf "%s-%s" (include "apphost.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "apphost.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where NATS is: the external URL, else the bundled server's Service. */}}
{{- define "apphost.natsUrl" -}}
{{- if .Values.nats.url }}
{{- .Values.nats.url }}
{{- else if .Values.nats.bundled.enabled }}
{{- printf "nats://%s-nats.%s.svc:4222" (include "apphost.fullname" .) .Release.Namespace }}
{{- else }}
{{- fail "set nats.url to your NATS server (JetStream enabled) or nats.bundled.enabled=true" }}
{{- end }}
{{- end }}

{{- define "apphost.platformKeySecret" -}}
{{- default (printf "%s-platform-key" (include "apphost.fullname" .)) .Values.platformKey.existingSecret }}
{{- end }}

{{/* Env every piece gets. */}}
{{- define "apphost.commonEnv" -}}
- name: NATS_URL
  value: {{ include "apphost.natsUrl" . | quote }}
- name: APPHOST_NATS_REPLICAS
  value: {{ .Values.nats.streamReplicas | toString | quote }}
- name: APPHOST_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: APPHOST_OPS_PORT
  value: {{ .Values.opsPort | quote }}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}

{{- define "apphost.platformKeyEnv" -}}
- name: APPHOST_PLATFORM_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "apphost.platformKeySecret" . }}
      key: platform-key
{{- end }}

{{/*
A platform Deployment. Pass (dict "root" $ "component" "gateway" "values" .Values.gateway
"env" <yaml list> "ports" <yaml list> "volumes" <yaml list> "volumeMounts" <yaml list> "automountToken" bool).
*/}}
{{- define "apphost.deployment" -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "apphost.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "apphost.labels" . | nindent 4 }}
spec:
  replicas: {{ .values.replicas }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "apphost.selectorLabels" . | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        {{- include "apphost.labels" . | nindent 8 }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $root.Values.opsPort | quote }}
        prometheus.io/path: /metrics
    spec:
      serviceAccountName: {{ include "apphost.componentName" . }}
      automountServiceAccountToken: {{ .automountToken }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      {{- /* From the pod's deletion: the preStop wait, then the piece's own SIGTERM bound, then a margin. */}}
      terminationGracePeriodSeconds: {{ add (default 0 .values.preStopSeconds) (include "apphost.shutdownBoundSeconds" .) 5 }}
      containers:
        - name: {{ .component }}
          image: {{ include "apphost.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: [{{ .command | quote }}]
          env:
            {{- include "apphost.commonEnv" $root | nindent 12 }}
            {{- include "apphost.shutdownEnv" . | nindent 12 }}
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with .values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: ops
              containerPort: {{ $root.Values.opsPort }}
              protocol: TCP
            {{- with .ports }}
            {{- . | nindent 12 }}
            {{- end }}
          {{- with .values.preStopSeconds }}
          # Serve on while the Service's endpoints drop this pod (kube-proxy, ingresses), then SIGTERM.
          lifecycle:
            preStop:
              sleep:
                seconds: {{ . }}
          {{- end }}
          startupProbe:
            httpGet: { path: /healthz, port: ops }
            periodSeconds: 2
            failureThreshold: 60
          livenessProbe:
            httpGet: { path: /healthz, port: ops }
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 3
          readinessProbe:
            httpGet: { path: /readyz, port: ops }
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 2
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with .volumeMounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- with .values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if .values.affinity }}
      affinity:
        {{- toYaml .values.affinity | nindent 8 }}
      {{- else if gt (int .values.replicas) 1 }}
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "apphost.selectorLabels" . | nindent 20 }}
      {{- end }}
      {{- if .values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml .values.topologySpreadConstraints | nindent 8 }}
      {{- else if gt (int .values.replicas) 1 }}
      # Replicas spread over zones where the nodes have them; never blocks scheduling on a one-zone cluster.
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "apphost.selectorLabels" . | nindent 14 }}
      {{- end }}
{{- end }}

{{/* A PodDisruptionBudget for a component, when enabled. */}}
{{- define "apphost.pdb" -}}
{{- if and .values.enabled .values.pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "apphost.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "apphost.labels" . | nindent 4 }}
spec:
  minAvailable: {{ .values.pdb.minAvailable }}
  selector:
    matchLabels:
      {{- include "apphost.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{- define "apphost.serviceAccount" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "apphost.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "apphost.labels" . | nindent 4 }}
automountServiceAccountToken: false
{{- end }}

{{/* The management API creates and names this Secret (key run-token-keys.json); the gateway reads it. */}}
{{- define "apphost.runTokenKeysSecret" -}}
apphost-run-token-keys
{{- end }}

{{/*
The one place a piece's SIGTERM bound is stated, in seconds: what the process allows itself in total
(src/shared/shutdown.ts exits when it passes). Its env (apphost.shutdownEnv) carries the same values, and
the pod's terminationGracePeriodSeconds is derived from it. test/integration/chart/shutdown-bounds.test.ts
checks it against each piece's own formula.
*/}}
{{- define "apphost.shutdownBoundSeconds" -}}
{{- $s := .values.shutdown -}}
{{- if eq .component "gateway" -}}
{{- /* serve.ts: handover + drain + run stop + outbox close + 10 s for NATS and the ops server */ -}}
{{- add $s.handoverSeconds $s.drainSeconds $s.runStopSeconds $s.webhookOutboxCloseSeconds 10 -}}
{{- else if eq .component "webhooks" -}}
{{- add $s.stopSeconds 5 -}}
{{- else -}}
{{- $s.timeoutSeconds -}}
{{- end -}}
{{- end }}

{{- define "apphost.shutdownEnv" -}}
{{- $s := .values.shutdown -}}
{{- if eq .component "gateway" }}
- name: APPHOST_GATEWAY_CONNECTION_HANDOVER_MS
  value: {{ mul $s.handoverSeconds 1000 | quote }}
- name: APPHOST_GATEWAY_DRAIN_TIMEOUT_MS
  value: {{ mul $s.drainSeconds 1000 | quote }}
- name: APPHOST_RUN_STOP_TIMEOUT_MS
  value: {{ mul $s.runStopSeconds 1000 | quote }}
- name: APPHOST_GATEWAY_WEBHOOK_OUTBOX_CLOSE_MS
  value: {{ mul $s.webhookOutboxCloseSeconds 1000 | quote }}
{{- else if eq .component "webhooks" }}
- name: APPHOST_WEBHOOK_STOP_BOUND_MS
  value: {{ mul $s.stopSeconds 1000 | quote }}
{{- else if eq .component "management" }}
- name: APPHOST_MANAGEMENT_SHUTDOWN_TIMEOUT_MS
  value: {{ mul $s.timeoutSeconds 1000 | quote }}
{{- else if eq .component "operator" }}
- name: APPHOST_OPERATOR_SHUTDOWN_TIMEOUT_MS
  value: {{ mul $s.timeoutSeconds 1000 | quote }}
{{- end }}
{{- end }}

{{/* {api_url} as callers reach it through the chart's Ingress ("" when there is none): apps are shown with their run URL. */}}
{{- define "apphost.publicApiUrl" -}}
{{- if and .Values.ingress.enabled .Values.ingress.api.host -}}
{{- printf "%s://%s" (ternary "https" "http" (ne .Values.ingress.api.tlsSecretName "")) .Values.ingress.api.host -}}
{{- end -}}
{{- end }}

{{/*
Bytes of a Kubernetes memory quantity ("1Gi", "512Mi", "1G", "900M", "129e6", ".5Gi", "+1Gi", 1073741824), as
a float.
Binary suffixes Ki Mi Gi Ti Pi Ei are powers of 1024; decimal ones k M G T P E and an exponent (e6) powers of
10; m is a thousandth. Anything else fails, naming the value.
*/}}
{{- define "apphost.kubeBytes" -}}
{{- $s := include "apphost.envValue" .value | trim -}}
{{- $num := regexFind "^\\+?([0-9]+\\.?[0-9]*|\\.[0-9]+)" $s -}}
{{- $suffix := trimPrefix $num $s -}}
{{- $units := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 -}}
{{- $factor := 0.0 -}}
{{- if hasKey $units $suffix -}}
{{- $factor = get $units $suffix -}}
{{- else if regexMatch "^[eE]\\+?[0-9]+$" $suffix -}}
{{- $factor = 1.0 -}}
{{- range until (atoi (regexFind "[0-9]+$" $suffix)) }}{{ $factor = mulf $factor 10 }}{{ end -}}
{{- end -}}
{{- if or (eq $num "") (eq $factor 0.0) -}}
{{- fail (printf "%s=%q is not a Kubernetes memory quantity (e.g. 1Gi, 512Mi, 1G)" .name $s) -}}
{{- end -}}
{{- mulf (float64 $num) $factor -}}
{{- end -}}

{{/*
A value given as env, as its string. Helm reads a values file's numbers as float64, which toString writes in
e-notation from 1e6 up (GOMEMLIMIT: 943718400 became "9.437184e+08", which Go refuses at start; a
MALLOC_TRIM_THRESHOLD_ of 1048576 became "1.048576e+06", not a number glibc reads): a whole number is
written with all its digits.
*/}}
{{- define "apphost.envValue" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}
{{- printf "%.0f" . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/*
Bytes of a Go byte count as GOMEMLIMIT takes it (runtime/debug.SetMemoryLimit): digits with an optional B,
KiB, MiB, GiB or TiB — not Kubernetes' Mi/Gi/M/G, which Go refuses at start (the schema refuses them too).
*/}}
{{- define "apphost.goBytes" -}}
{{- $s := include "apphost.envValue" .value | trim -}}
{{- if not (regexMatch "^[0-9]+((K|M|G|T)iB|B)?$" $s) -}}
{{- fail (printf "%s=%q is not a Go byte count: use B, KiB, MiB, GiB or TiB (e.g. 900MiB)" .name $s) -}}
{{- end -}}
{{- $num := regexFind "^[0-9]+" $s -}}
{{- $units := dict "" 1.0 "B" 1.0 "KiB" 1024.0 "MiB" 1048576.0 "GiB" 1073741824.0 "TiB" 1099511627776.0 -}}
{{- mulf (float64 $num) (get $units (trimPrefix $num $s)) -}}
{{- end -}}
