{{- define "ingress.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ingress.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "ingress.image" -}}
{{- printf "%s/%s:%s" .Values.controller.image.registry .Values.controller.image.repository (.Values.controller.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "ingress.podTemplate" -}}
metadata:
  labels:
    {{- include "ingress.labels" . | nindent 4 }}
  {{- with .Values.controller.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "ingress.fullname" . }}
  terminationGracePeriodSeconds: {{ .Values.controller.terminationGracePeriodSeconds }}
  containers:
  - name: controller
    image: {{ include "ingress.image" . }}
    imagePullPolicy: {{ .Values.controller.image.pullPolicy }}
    args:
    - --log.level={{ .Values.controller.logLevel }}
    {{- range $name, $ep := .Values.controller.entryPoints }}
    - --entrypoints.{{ $name }}.address=:{{ $ep.port }}/tcp
    {{- end }}
    env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    ports:
    {{- range $name, $ep := .Values.controller.entryPoints }}
    - name: {{ $name }}
      containerPort: {{ $ep.port }}
    {{- end }}
    resources:
      {{- toYaml .Values.controller.resources | nindent 6 }}
{{- end -}}
