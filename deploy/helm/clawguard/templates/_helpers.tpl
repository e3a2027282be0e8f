{{/* Labels every object carries; selectors use app.kubernetes.io/name only,
as the kustomize base does, so the two select the same pods. */}}
{{- define "clawguard.labels" -}}
app.kubernetes.io/part-of: clawguard
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "clawguard.image" -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end }}

{{/* What runners and bridges dial: the server Service unless told. */}}
{{- define "clawguard.serverAddress" -}}
{{- if .Values.runner.serverAddress -}}
{{- .Values.runner.serverAddress -}}
{{- else -}}
{{- printf "clawguard-server:%d" (int .Values.server.grpcPort) -}}
{{- end -}}
{{- end }}

{{/* The hardened container securityContext of the kustomize base. */}}
{{- define "clawguard.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{- define "clawguard.podSecurityNonRoot" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The Secret a client (runner, bridge) takes its TLS files from. */}}
{{- define "clawguard.clientTLSSecret" -}}
{{- default .Values.tls.secretName .Values.tls.clientSecretName -}}
{{- end }}

{{/* Client TLS flags (runner and bridge). */}}
{{- define "clawguard.clientTLSArgs" -}}
{{- if .Values.tls.enabled }}
- --tls-ca
- /var/run/clawguard/tls/ca.crt
{{- if .Values.tls.clientCA }}
- --tls-cert
- /var/run/clawguard/tls/tls.crt
- --tls-key
- /var/run/clawguard/tls/tls.key
{{- end }}
{{- end }}
{{- end }}
