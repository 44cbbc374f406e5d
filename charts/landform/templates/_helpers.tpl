{{/*
Names are fixed, not derived from the release name: Landform runs once per
cluster (its CRD and ClusterRole are cluster-wide), the controller looks for
the runner ServiceAccount landform-runner by that name, and the kustomize
bases in config/ use the same names.
*/}}

{{- define "landform.labels" -}}
app.kubernetes.io/name: landform
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "landform.selectorLabels" -}}
app.kubernetes.io/name: landform
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- /* The labels of a shard's Pods and its Deployment's selector: not
selected by the main Deployment's selector (component differs), selected by
the metrics Service's (name and instance). */}}
{{- define "landform.shardSelectorLabels" -}}
app.kubernetes.io/name: landform
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: shard
infra.landform.dev/shard: {{ .shard | quote }}
{{- end }}

{{- /* The controller Deployment's name: landform-controller, or
landform-controller-<shard> for a shard. */}}
{{- define "landform.controllerName" -}}
{{- if . }}{{ printf "landform-controller-%s" . }}{{ else }}landform-controller{{ end }}
{{- end }}

{{- define "landform.image" -}}
{{- printf "%s:%s" .repository (.tag | default .appVersion) -}}
{{- end }}
