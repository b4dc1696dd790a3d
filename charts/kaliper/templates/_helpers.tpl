{{- define "kaliper.name" -}}{{ default "kaliper" .Values.nameOverride | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "kaliper.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else -}}
{{ printf "%s-%s" .Release.Name (include "kaliper.name" .) | trunc 63 | trimSuffix "-" }}
{{- end -}}
{{- end -}}
{{- define "kaliper.labels" -}}
app.kubernetes.io/name: {{ include "kaliper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kaliper
{{- end -}}
{{- define "kaliper.selector" -}}
app.kubernetes.io/name: {{ include "kaliper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
