{{/* Names, labels and the certificate material shared by several templates. */}}

{{- define "snapready.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "snapready.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "snapready.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "snapready.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "snapready.selectorLabels" -}}
app.kubernetes.io/name: {{ include "snapready.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "snapready.labels" -}}
{{ include "snapready.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "snapready.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "snapready.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "snapready.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "snapready.helpersImage" -}}
{{- $h := .Values.helpersImage -}}
{{- if $h.digest -}}
{{- printf "%s:%s@%s" $h.repository $h.tag $h.digest -}}
{{- else -}}
{{- printf "%s:%s" $h.repository $h.tag -}}
{{- end -}}
{{- end -}}

{{/* Secret holding tls.crt/tls.key (and ca.crt in selfSigned mode), mounted into the pods. */}}
{{- define "snapready.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{- required "certificates.existingSecret.name is required in mode existingSecret" .Values.certificates.existingSecret.name -}}
{{- else -}}
{{- printf "%s-tls" (include "snapready.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "snapready.caSecretName" -}}
{{- printf "%s-ca" (include "snapready.fullname" .) -}}
{{- end -}}

{{- define "snapready.servingCertificateName" -}}
{{- printf "%s-serving" (include "snapready.fullname" .) -}}
{{- end -}}

{{/*
selfSigned material, generated once per render and memoised on .Release (a map shared by all
templates of a render) so the Secrets and both webhook caBundles agree. On upgrade the CA is
read back with lookup and kept: the caBundle never changes, so a reissued serving certificate is
picked up by the server's hot reload without any failed call. `helm template` has no cluster:
lookup returns nothing and fresh material is generated.
*/}}
{{- define "snapready.selfSigned" -}}
{{- if not (hasKey .Release "snapreadySelfSigned") -}}
{{- $fullname := include "snapready.fullname" . -}}
{{- $cfg := .Values.certificates.selfSigned -}}
{{- $oldCA := (lookup "v1" "Secret" .Release.Namespace (include "snapready.caSecretName" .)).data | default dict -}}
{{- $oldTLS := (lookup "v1" "Secret" .Release.Namespace (include "snapready.tlsSecretName" .)).data | default dict -}}
{{- $ca := dict -}}
{{- if and (hasKey $oldCA "tls.crt") (hasKey $oldCA "tls.key") -}}
{{- $ca = buildCustomCert (index $oldCA "tls.crt") (index $oldCA "tls.key") -}}
{{- else -}}
{{- $ca = genCA (printf "%s-ca" $fullname) (int $cfg.caValidityDays) -}}
{{- end -}}
{{- $result := dict "caCert" $ca.Cert "caKey" $ca.Key -}}
{{- if and (hasKey $oldTLS "tls.crt") (hasKey $oldTLS "tls.key") (hasKey $oldCA "tls.crt") (not $cfg.reissue) -}}
{{- $_ := set $result "cert" (index $oldTLS "tls.crt" | b64dec) -}}
{{- $_ := set $result "key" (index $oldTLS "tls.key" | b64dec) -}}
{{- else -}}
{{- $svc := printf "%s.%s" $fullname .Release.Namespace -}}
{{- $names := list $fullname $svc (printf "%s.svc" $svc) (printf "%s.svc.cluster.local" $svc) -}}
{{- $leaf := genSignedCert (printf "%s.svc" $svc) (list) $names (int $cfg.validityDays) $ca -}}
{{- $_ := set $result "cert" $leaf.Cert -}}
{{- $_ := set $result "key" $leaf.Key -}}
{{- end -}}
{{- $_ := set .Release "snapreadySelfSigned" $result -}}
{{- end -}}
{{- toJson (get .Release "snapreadySelfSigned") -}}
{{- end -}}

{{/* The caBundle of both webhook configurations ("" in certManager mode: cainjector sets it). */}}
{{- define "snapready.caBundle" -}}
{{- if eq .Values.certificates.mode "selfSigned" -}}
{{- (include "snapready.selfSigned" . | fromJson).caCert | b64enc -}}
{{- else if eq .Values.certificates.mode "existingSecret" -}}
{{- required "certificates.existingSecret.caBundle is required in mode existingSecret" .Values.certificates.existingSecret.caBundle -}}
{{- end -}}
{{- end -}}

{{- define "snapready.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" }}
annotations:
  # cert-manager's cainjector copies the CA of this Certificate into every caBundle.
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "snapready.servingCertificateName" .) }}
{{- end }}
{{- end -}}

{{/* namespaceSelector shared by both webhook configurations. */}}
{{- define "snapready.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    # kube-system (and other listed namespaces) and our own namespace: snapready's pods must
    # be able to start while no snapready pod answers (failurePolicy Fail would deadlock).
    # The label is set by the API server on every namespace (Kubernetes 1.22+).
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- range (append .Values.excludedNamespaces .Release.Namespace | uniq) }}
        - {{ . | quote }}
        {{- end }}
    # Opt-out label (design.md): namespaces labelled <prefix>ignore=true are never sent.
    - key: {{ printf "%signore" .Values.prefix | quote }}
      operator: NotIn
      values:
        - "true"
{{- end -}}

{{/* clientConfig of a webhook; argument: (dict "ctx" $ "path" "/mutate"). */}}
{{- define "snapready.clientConfig" -}}
{{- $ := .ctx -}}
clientConfig:
  service:
    name: {{ include "snapready.fullname" $ }}
    namespace: {{ $.Release.Namespace }}
    path: {{ .path }}
    # The Service port; it forwards to the pod's containerPort.
    port: {{ $.Values.service.port }}
  {{- with include "snapready.caBundle" $ }}
  caBundle: {{ . }}
  {{- end }}
{{- end -}}

{{/* Where the pod mounts the TLS Secret and the settings file. */}}
{{- define "snapready.tlsDir" -}}/etc/snapready/tls{{- end -}}
{{- define "snapready.configFile" -}}/etc/snapready/config/settings.yaml{{- end -}}

{{/* The apps/v1 pod controllers the validating webhook receives (JSON list). */}}
{{- define "snapready.podControllers" -}}
{{- $kinds := list "deployments" "statefulsets" "daemonsets" -}}
{{- if .Values.validateReplicaSets -}}
{{- $kinds = append $kinds "replicasets" -}}
{{- end -}}
{{- toJson $kinds -}}
{{- end -}}

{{/*
Custom resources that embed pod templates, API group -> resources: the built-in table of
webhook/kube/custom_workloads.py (tests/deploy compares the two).
*/}}
{{- define "snapready.customWorkloads" -}}
{{- toJson (dict
  "agents.x-k8s.io" (list "sandboxes")
  "extensions.agents.x-k8s.io" (list "sandboxtemplates" "sandboxwarmpools")
  "leaderworkerset.x-k8s.io" (list "leaderworkersets")
  "ray.io" (list "rayclusters" "rayservices" "rayjobs")
  "serving.kserve.io" (list "inferenceservices" "llminferenceservices")
  "jobset.x-k8s.io" (list "jobsets")
  "argoproj.io" (list "rollouts")
) -}}
{{- end -}}

{{/* The pod UPDATE guard's CEL matchCondition (webhook.admission.guard.ownership_condition). */}}
{{- define "snapready.ownerUsername" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "snapready.serviceAccountName" . }}
{{- end -}}
{{- define "snapready.bindingCondition" -}}
{{- $p := .Values.prefix -}}
request.userInfo.username != '{{ include "snapready.ownerUsername" . }}' && (object.metadata.?labels.orValue({}).exists(k, k.startsWith('{{ $p }}') && k != '{{ $p }}snapshot-source') || object.metadata.?annotations.orValue({}).exists(k, k.startsWith('{{ $p }}') && k != '{{ $p }}inject'))
{{- end -}}

{{- define "snapready.ownershipCondition" -}}
{{- $p := .Values.prefix -}}
{{- $a := printf "object.metadata.?annotations.orValue({})" -}}
{{- $o := printf "oldObject.metadata.?annotations.orValue({})" -}}
{{- $l := printf "metadata.?labels.orValue({})[?'%sselected']" $p -}}
request.userInfo.username != '{{ include "snapready.ownerUsername" . }}' && ({{ $a }}.exists(k, k.startsWith('{{ $p }}') && {{ $o }}[?k] != optional.of({{ $a }}[k])) || {{ $o }}.exists(k, k.startsWith('{{ $p }}') && {{ $a }}[?k] != optional.of({{ $o }}[k])) || object.{{ $l }} != oldObject.{{ $l }})
{{- end -}}

{{/*
The policy report API snapready writes and its ClusterRole grants (server setting reports.api):
openreports, wgpolicyk8s or off. auto asks Helm's discovery at install/upgrade time (OpenReports
first, the successor of wg-policy); installCRDs=true means OpenReports (the CRD comes with the
release, so discovery cannot see it yet).
*/}}
{{- define "snapready.reportsApi" -}}
{{- $api := .Values.reports.api -}}
{{- if ne $api "auto" -}}
{{- $api -}}
{{- else if or .Values.reports.installCRDs (.Capabilities.APIVersions.Has "openreports.io/v1alpha1/Report") -}}
openreports
{{- else if .Capabilities.APIVersions.Has "wgpolicyk8s.io/v1alpha2/PolicyReport" -}}
wgpolicyk8s
{{- else -}}
off
{{- end -}}
{{- end -}}
{{/* The API group and namespaced resource of those reports (webhook/kube/policy_reports.py). */}}
{{- define "snapready.reportsGroup" -}}
{{- if eq (include "snapready.reportsApi" .) "wgpolicyk8s" -}}wgpolicyk8s.io{{- else -}}openreports.io{{- end -}}
{{- end -}}
{{- define "snapready.reportsResource" -}}
{{- if eq (include "snapready.reportsApi" .) "wgpolicyk8s" -}}policyreports{{- else -}}reports{{- end -}}
{{- end -}}

{{- define "snapready.schedulingCondition" -}}
oldObject.spec.?schedulingGates.orValue([]).size() > 0 && (object.spec.?nodeSelector.orValue({}) != oldObject.spec.?nodeSelector.orValue({}) || object.spec.?affinity.orValue({}) != oldObject.spec.?affinity.orValue({}) || object.spec.?tolerations.orValue([]) != oldObject.spec.?tolerations.orValue([]) || object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}))
{{- end -}}
