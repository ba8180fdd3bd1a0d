//go:build tools

// Package tools records the command scripts/runsc.sh builds, so that `go mod tidy` keeps its
// dependencies (and go.sum) complete. It is never compiled.
package tools

import (
	_ "gvisor.dev/gvisor/runsc"
)
