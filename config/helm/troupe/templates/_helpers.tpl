{{- /*
Names, labels and the pieces more than one template needs: troupe's identity
(which the admission policy trusts), the pod's security settings, and the two
configurations (troupe.yaml, the KubeSchedulerConfiguration).
*/ -}}

{{- define "troupe.fullname" -}}
{{- default "troupe" .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "troupe.serviceAccount" -}}
{{- default (include "troupe.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- /* The user name the API server gives troupe's requests. */ -}}
{{- define "troupe.identity" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "troupe.serviceAccount" . }}
{{- end -}}

{{- /* troupe-node's service account and the user name its requests carry,
       which its admission policy checks (node.enabled). */ -}}
{{- define "troupe.nodeServiceAccount" -}}
{{- default (printf "%s-node" (include "troupe.fullname" .)) .Values.node.serviceAccount.name -}}
{{- end -}}

{{- define "troupe.nodeIdentity" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "troupe.nodeServiceAccount" . }}
{{- end -}}

{{- define "troupe.nodeSelector" -}}
app.kubernetes.io/name: troupe
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node
{{- end -}}

{{- define "troupe.mode" -}}
{{- if not (has .Values.mode (list "sidecar" "service")) -}}
{{- fail (printf "mode must be sidecar or service, not %q" .Values.mode) -}}
{{- end -}}
{{- .Values.mode -}}
{{- end -}}

{{- /* The Deployment's name: the scheduler's in sidecar mode, troupe's in service mode. */ -}}
{{- define "troupe.workload" -}}
{{- if eq (include "troupe.mode" .) "sidecar" -}}
{{- include "troupe.fullname" . }}-scheduler
{{- else -}}
{{- include "troupe.fullname" . -}}
{{- end -}}
{{- end -}}

{{- define "troupe.labels" -}}
app.kubernetes.io/name: troupe
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- /* What selects the pods (never changes across upgrades). */ -}}
{{- define "troupe.selector" -}}
app.kubernetes.io/name: troupe
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ include "troupe.mode" . }}
{{- end -}}

{{- /* TLS on the verbs port: service mode only (sidecar's verbs stay on loopback). */ -}}
{{- define "troupe.tls" -}}
{{- if and .Values.tls.enabled (eq (include "troupe.mode" .) "service") -}}true{{- end -}}
{{- end -}}

{{- define "troupe.tlsSecret" -}}
{{- .Values.tls.secretName -}}
{{- end -}}

{{- define "troupe.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "troupe.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- /*
troupe.yaml. Rendered as JSON (which is YAML) so that every reader, troupe's
libyaml and the chart's test, sees one unambiguous document. listen comes from
the mode: loopback beside the scheduler, every address behind the Service.
*/ -}}
{{- define "troupe.config" -}}
{{- $c := deepCopy .Values.config -}}
{{- if eq (include "troupe.mode" .) "sidecar" -}}
{{- $_ := set $c "listen" (printf "127.0.0.1:%d" (int .Values.ports.verbs)) -}}
{{- else -}}
{{- $_ := set $c "listen" (printf "0.0.0.0:%d" (int .Values.ports.verbs)) -}}
{{- /* Several replicas behind the Service: only the Lease's holder is ready
       and binds (docs/ha.md). config.leader_election.* still wins. */ -}}
{{- if gt (int .Values.service.replicas) 1 -}}
{{- $le := deepCopy (default (dict) $c.leader_election) -}}
{{- if not (hasKey $le "enabled") -}}{{- $_ := set $le "enabled" true -}}{{- end -}}
{{- if not (hasKey $le "namespace") -}}{{- $_ := set $le "namespace" .Release.Namespace -}}{{- end -}}
{{- if not (hasKey $le "name") -}}{{- $_ := set $le "name" (include "troupe.fullname" .) -}}{{- end -}}
{{- $_ := set $c "leader_election" $le -}}
{{- end -}}
{{- end -}}
{{- if include "troupe.tls" . -}}
{{- $_ := set $c "tls" (dict
    "cert_file" "/etc/troupe/tls/tls.crt"
    "key_file" "/etc/troupe/tls/tls.key"
    "client_ca_file" "/etc/troupe/tls/ca.crt"
    "allowed_subjects" .Values.tls.allowedSubjects) -}}
{{- end -}}
{{- toPrettyJson $c -}}
{{- end -}}

{{- /*
The KubeSchedulerConfiguration: config/scheduler-config.yaml with the mode's
scheduler name, troupe's address, the client connection and leader election.
*/ -}}
{{- define "troupe.schedulerConfig" -}}
{{- $sidecar := eq (include "troupe.mode" .) "sidecar" -}}
{{- $ext := dict
    "filterVerb" "filter"
    "prioritizeVerb" "prioritize"
    "bindVerb" "bind"
    "preemptVerb" "preempt"
    "weight" (int .Values.extender.weight)
    "nodeCacheCapable" true
    "httpTimeout" .Values.extender.httpTimeout
    "ignorable" false
    "managedResources" .Values.extender.managedResources -}}
{{- if $sidecar -}}
{{- $_ := set $ext "urlPrefix" (printf "http://127.0.0.1:%d" (int .Values.ports.verbs)) -}}
{{- $_ := set $ext "enableHTTPS" false -}}
{{- else if include "troupe.tls" . -}}
{{- $_ := set $ext "urlPrefix" (printf "https://%s.%s.svc:%d" (include "troupe.fullname" .) .Release.Namespace (int .Values.ports.verbs)) -}}
{{- $_ := set $ext "enableHTTPS" true -}}
{{- $_ := set $ext "tlsConfig" (dict
    "certFile" .Values.tls.schedulerClient.certFile
    "keyFile" .Values.tls.schedulerClient.keyFile
    "caFile" .Values.tls.schedulerClient.caFile
    "serverName" (printf "%s.%s.svc" (include "troupe.fullname" .) .Release.Namespace)) -}}
{{- else -}}
{{- $_ := set $ext "urlPrefix" (printf "http://%s.%s.svc:%d" (include "troupe.fullname" .) .Release.Namespace (int .Values.ports.verbs)) -}}
{{- $_ := set $ext "enableHTTPS" false -}}
{{- end -}}
{{- $cfg := dict
    "apiVersion" "kubescheduler.config.k8s.io/v1"
    "kind" "KubeSchedulerConfiguration"
    "percentageOfNodesToScore" (int .Values.extender.percentageOfNodesToScore)
    "extenders" (list $ext) -}}
{{- if $sidecar -}}
{{- $profile := dict "schedulerName" .Values.scheduler.name -}}
{{- if .Values.scheduler.pluginConfig -}}
{{- $_ := set $profile "pluginConfig" .Values.scheduler.pluginConfig -}}
{{- end -}}
{{- $_ := set $cfg "profiles" (list $profile) -}}
{{- /* In the pod: the service account's token, no kubeconfig. */ -}}
{{- $_ := set $cfg "clientConnection" (dict "kubeconfig" "") -}}
{{- $_ := set $cfg "leaderElection" (dict
    "leaderElect" true
    "resourceLock" "leases"
    "resourceName" .Values.scheduler.leaseName
    "resourceNamespace" .Release.Namespace) -}}
{{- else -}}
{{- $_ := set $cfg "profiles" (list (dict "schedulerName" "default-scheduler")) -}}
{{- $_ := set $cfg "clientConnection" (dict "kubeconfig" .Values.extender.kubeconfig) -}}
{{- end -}}
{{- toPrettyJson $cfg -}}
{{- end -}}
