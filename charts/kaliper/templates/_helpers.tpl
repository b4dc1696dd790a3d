{{- define "kaliper.name" -}}kaliper{{- end -}}
{{- define "kaliper.fullname" -}}{{ .Release.Name }}-kaliper{{- end -}}
{{- define "kaliper.labels" -}}
app.kubernetes.io/name: kaliper
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kaliper
{{- end -}}
{{- define "kaliper.selector" -}}
app.kubernetes.io/name: kaliper
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
