{{- define "common.names.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "common.images.image" -}}
{{- $registry := .imageRoot.registry -}}
{{- if .global.imageRegistry -}}
{{- $registry = .global.imageRegistry -}}
{{- end -}}
{{- if .imageRoot.digest -}}
{{- printf "%s/%s@%s" $registry .imageRoot.repository .imageRoot.digest -}}
{{- else -}}
{{- printf "%s/%s:%s" $registry .imageRoot.repository (.imageRoot.tag | toString) -}}
{{- end -}}
{{- end -}}

{{- define "common.tplvalues.render" -}}
{{- if typeIs "string" .value -}}
{{- tpl .value .context -}}
{{- else -}}
{{- tpl (.value | toYaml) .context -}}
{{- end -}}
{{- end -}}
