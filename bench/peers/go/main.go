// Command peer is the Go peer of `make bench-cluster`: a controller-runtime admission webhook
// that does only what design.md "Targets" compares snapready with, the gVisor check and a spec
// hash, the way a Go operator would write it.
//
//   - /mutate: decode the Pod (admission.Decoder, the typed core/v1 Pod), check
//     spec.runtimeClassName (GKE Sandbox: "gvisor", snapready's gvisor-runtime rule with its
//     default names); a gVisor pod gets the annotation snapready.io/spec-hash =
//     "peer:sha256:<hex>", SHA-256 of the JSON of the hashed fields (below), as a JSON patch
//     diffed against the raw object received (admission.PatchResponseFromRaw).
//   - /validate: decode the Pod, deny a pod CREATE that is not gVisor; anything else is allowed
//     (the chart's validating configuration also sends workloads, snapshot objects and pod
//     UPDATEs).
//   - /metrics: controller-runtime's own Prometheus registry; the bench counts calls with
//     controller_runtime_webhook_requests_total{webhook="/mutate"|"/validate"}, which
//     webhook.Server.Register instruments.
//
// Hashed fields (the same list as bench/peers/kopf_peer.py): of every container and init
// container its name, image, command, args, env, ports and resources; of the pod spec
// runtimeClassName, nodeSelector, hostNetwork, hostPID, hostIPC, shareProcessNamespace,
// securityContext, dnsPolicy, dnsConfig, os, hostUsers and automountServiceAccountToken.
//
// Served by webhook.NewServer (controller-runtime's webhook server: TLS from --cert-dir's
// tls.crt/tls.key, HTTP/2 and HTTP/1.1) on --host:--port; no manager, cache or client: nothing
// but admission runs in the process. SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const (
	hashAnnotation = "snapready.io/spec-hash"
	hashPrefix     = "peer:sha256:"
	gvisorRuntime  = "gvisor"
)

// hashedContainer is what the spec hash keeps of a container.
type hashedContainer struct {
	Name      string                      `json:"name"`
	Image     string                      `json:"image,omitempty"`
	Command   []string                    `json:"command,omitempty"`
	Args      []string                    `json:"args,omitempty"`
	Env       []corev1.EnvVar             `json:"env,omitempty"`
	Ports     []corev1.ContainerPort      `json:"ports,omitempty"`
	Resources corev1.ResourceRequirements `json:"resources"`
}

// hashedSpec is what the spec hash keeps of a pod.
type hashedSpec struct {
	Containers                   []hashedContainer          `json:"containers"`
	InitContainers               []hashedContainer          `json:"initContainers,omitempty"`
	RuntimeClassName             *string                    `json:"runtimeClassName,omitempty"`
	NodeSelector                 map[string]string          `json:"nodeSelector,omitempty"`
	HostNetwork                  bool                       `json:"hostNetwork,omitempty"`
	HostPID                      bool                       `json:"hostPID,omitempty"`
	HostIPC                      bool                       `json:"hostIPC,omitempty"`
	ShareProcessNamespace        *bool                      `json:"shareProcessNamespace,omitempty"`
	SecurityContext              *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	DNSPolicy                    corev1.DNSPolicy           `json:"dnsPolicy,omitempty"`
	DNSConfig                    *corev1.PodDNSConfig       `json:"dnsConfig,omitempty"`
	OS                           *corev1.PodOS              `json:"os,omitempty"`
	HostUsers                    *bool                      `json:"hostUsers,omitempty"`
	AutomountServiceAccountToken *bool                      `json:"automountServiceAccountToken,omitempty"`
}

func hashedContainers(containers []corev1.Container) []hashedContainer {
	kept := make([]hashedContainer, 0, len(containers))
	for i := range containers {
		c := &containers[i]
		kept = append(kept, hashedContainer{
			Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args,
			Env: c.Env, Ports: c.Ports, Resources: c.Resources,
		})
	}
	return kept
}

// specHash is "peer:sha256:<64 hex>" over the JSON of the pod's hashed fields.
func specHash(pod *corev1.Pod) (string, error) {
	s := &pod.Spec
	data, err := json.Marshal(hashedSpec{
		Containers:                   hashedContainers(s.Containers),
		InitContainers:               hashedContainers(s.InitContainers),
		RuntimeClassName:             s.RuntimeClassName,
		NodeSelector:                 s.NodeSelector,
		HostNetwork:                  s.HostNetwork,
		HostPID:                      s.HostPID,
		HostIPC:                      s.HostIPC,
		ShareProcessNamespace:        s.ShareProcessNamespace,
		SecurityContext:              s.SecurityContext,
		DNSPolicy:                    s.DNSPolicy,
		DNSConfig:                    s.DNSConfig,
		OS:                           s.OS,
		HostUsers:                    s.HostUsers,
		AutomountServiceAccountToken: s.AutomountServiceAccountToken,
	})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hashPrefix + hex.EncodeToString(sum[:]), nil
}

// gvisorProblem is why the pod is not a GKE Sandbox pod, or "" when it is.
func gvisorProblem(pod *corev1.Pod) string {
	class := pod.Spec.RuntimeClassName
	switch {
	case class == nil || *class == "":
		return "runtimeClassName is not set; set it to gvisor (GKE Sandbox)"
	case *class != gvisorRuntime:
		return "runtimeClassName is not a GKE Sandbox runtime; set it to gvisor (GKE Sandbox)"
	}
	return ""
}

// mutator stamps the spec hash on gVisor pods.
type mutator struct{ decoder admission.Decoder }

func (m *mutator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "Pod" || req.SubResource != "" {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := m.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if gvisorProblem(pod) != "" {
		return admission.Allowed("not a GKE Sandbox pod: no spec hash")
	}
	hash, err := specHash(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[hashAnnotation] = hash
	current, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, current)
}

// validator denies a pod CREATE that is not gVisor.
type validator struct{ decoder admission.Decoder }

func (v *validator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "Pod" || req.SubResource != "" || req.Operation != "CREATE" {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := v.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if problem := gvisorProblem(pod); problem != "" {
		return admission.Denied(problem)
	}
	return admission.Allowed("")
}

// versions is "peer <go version> controller-runtime <version>", from the binary's build info.
func versions() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "peer (no build info)"
	}
	framework := "?"
	for _, dep := range info.Deps {
		if dep.Path == "sigs.k8s.io/controller-runtime" {
			framework = dep.Version
		}
	}
	return fmt.Sprintf("peer %s controller-runtime %s", info.GoVersion, framework)
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 9443, "HTTPS port")
	certDir := flag.String("cert-dir", "", "folder holding tls.crt and tls.key")
	version := flag.Bool("version", false, "print the Go and controller-runtime versions and exit")
	flag.Parse()
	if *version {
		fmt.Println(versions())
		return
	}
	if *certDir == "" {
		fmt.Fprintln(os.Stderr, "peer: --cert-dir is required")
		os.Exit(2)
	}
	// Info lines of the server (V(0)) to stderr; the per-request lines are V(5) and dropped.
	logf.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{}))

	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	decoder := admission.NewDecoder(scheme)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	server := webhook.NewServer(webhook.Options{
		Host: *host, Port: *port, CertDir: *certDir, WebhookMux: mux,
	})
	server.Register("/mutate", &webhook.Admission{Handler: &mutator{decoder}})
	server.Register("/validate", &webhook.Admission{Handler: &validator{decoder}})

	if err := server.Start(signals.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}
