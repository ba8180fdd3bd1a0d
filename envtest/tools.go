//go:build tools

// Package tools records the commands scripts/envtest.sh builds, so that `go mod tidy` keeps their
// dependencies (and go.sum) complete. It is never compiled.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
