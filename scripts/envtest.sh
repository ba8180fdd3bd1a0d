#!/usr/bin/env bash
# Build (once) and cache the binaries of the envtest control plane the tests run against:
# etcd, kube-apiserver and kube-controller-manager, built from the Go module proxy with the versions
# pinned in envtest/go.mod + go.sum (Kubernetes) and envtest/etcd/go.mod + go.sum (etcd).
#
# The cache folder is versioned:
#   ${SNAPREADY_ENVTEST_CACHE:-$HOME/.cache/snapready/envtest}/k8s-<ver>-etcd-<ver>-<go.sum hash>
# A folder whose three binaries run `--version` is reused; otherwise they are built into a
# temporary folder next to it and moved in place in one rename. Progress goes to stderr; the last
# line printed (on stdout) is exactly KUBEBUILDER_ASSETS=<folder>.
#
# Environment: SNAPREADY_ENVTEST_CACHE (cache root), SNAPREADY_ENVTEST_JOBS (go build -p, default:
# the number of CPUs, at most 4), SNAPREADY_ENVTEST_GOPROXY (default https://proxy.golang.org).
set -eu
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODDIR="$ROOT/envtest"
ETCD_MODDIR="$MODDIR/etcd"

NAME=envtest
ENV_PREFIX=SNAPREADY_ENVTEST
# shellcheck source=scripts/gocache.sh
. "$ROOT/scripts/gocache.sh"

# The version a go.mod requires for a module (the `require x v` line or the one in a require block).
required_version() {
	awk -v mod="$2" '
		$1 == "require" && $2 == mod { print $3; exit }
		$1 == mod && $2 ~ /^v/ { print $2; exit }
	' "$1"
}

K8S_VERSION=$(required_version "$MODDIR/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(required_version "$ETCD_MODDIR/go.mod" go.etcd.io/etcd/server/v3)
[ -n "$K8S_VERSION" ] || die "no k8s.io/kubernetes requirement in $MODDIR/go.mod"
[ -n "$ETCD_VERSION" ] || die "no go.etcd.io/etcd/server/v3 requirement in $ETCD_MODDIR/go.mod"
SUM_HASH=$(cat "$MODDIR/go.sum" "$ETCD_MODDIR/go.sum" | sha256 | cut -c1-12)

CACHE_ROOT=${SNAPREADY_ENVTEST_CACHE:-$HOME/.cache/snapready/envtest}
FOLDER="$CACHE_ROOT/k8s-${K8S_VERSION#v}-etcd-${ETCD_VERSION#v}-$SUM_HASH"
BINARIES="etcd kube-apiserver kube-controller-manager"

complete() {
	for bin in $BINARIES; do
		[ -x "$1/$bin" ] || return 1
		"$1/$bin" --version >/dev/null 2>&1 || return 1
	done
}

done_with() {
	echo "KUBEBUILDER_ASSETS=$FOLDER"
	exit 0
}

prepare_build

# What Kubernetes' hack/lib/version.sh stamps into its release binaries (/version, --version).
k8s_minor=${K8S_VERSION#v*.}
k8s_minor=${k8s_minor%%.*}
k8s_major=${K8S_VERSION#v}
k8s_major=${k8s_major%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags="$ldflags -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$k8s_major"
	ldflags="$ldflags -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
done

log "building into $FOLDER ($(go version | cut -d' ' -f3), go build -p $JOBS; a cold build takes many minutes)"
started=$(date +%s)

build() { # build <binary> <module dir> <package> [ldflags]
	t0=$(date +%s)
	log "[$1] building $3 ..."
	(cd "$2" && go build -p "$JOBS" -trimpath -ldflags "$4" -o "$BUILD/$1" "$3") ||
		die "go build of $3 failed"
	"$BUILD/$1" --version >/dev/null 2>&1 || die "$BUILD/$1 --version failed"
	log "[$1] done in $(($(date +%s) - t0))s: $("$BUILD/$1" --version 2>&1 | head -n 1)"
}

build etcd "$ETCD_MODDIR" . "-s -w"
build kube-apiserver "$MODDIR" k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build kube-controller-manager "$MODDIR" k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"

install_build
log "built in $(($(date +%s) - started))s"
done_with
