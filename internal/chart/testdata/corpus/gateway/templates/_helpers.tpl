{{- define "gateway.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* ingress-nginx's: registry/image:tag, the tag appVersion when empty, @digest when set */}}
{{- define "gateway.controllerImage" -}}
{{- $tag := .Values.controller.image.tag | default .Chart.AppVersion -}}
{{- printf "%s/%s:%s" .Values.controller.image.registry .Values.controller.image.image $tag -}}
{{- if .Values.controller.image.digest }}@{{ .Values.controller.image.digest }}{{- end -}}
{{- end -}}

{{/* bitnami common.images.image's: given a dict of the image's values and the chart */}}
{{- define "gateway.image" -}}
{{- $registryName := .imageRoot.registry -}}
{{- $repositoryName := .imageRoot.repository -}}
{{- $separator := ":" -}}
{{- $termination := .imageRoot.tag | toString -}}
{{- if not .imageRoot.tag }}
  {{- if .chart }}
    {{- $termination = .chart.AppVersion | toString -}}
  {{- end -}}
{{- end -}}
{{- if .imageRoot.digest }}
  {{- $separator = "@" -}}
  {{- $termination = .imageRoot.digest | toString -}}
{{- end -}}
{{- if $registryName }}
  {{- printf "%s/%s%s%s" $registryName $repositoryName $separator $termination -}}
{{- else -}}
  {{- printf "%s%s%s" $repositoryName $separator $termination -}}
{{- end -}}
{{- end -}}
