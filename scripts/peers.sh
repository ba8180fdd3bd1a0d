#!/usr/bin/env bash
# Build (once) and cache the Go peer of `make bench-cluster` (bench/peers/go: a controller-runtime
# admission webhook doing only the gVisor check and a spec hash), from the Go module proxy with
# the versions pinned in bench/peers/go/go.mod + go.sum.
#
# The cache folder is versioned by what the binary is built from:
#   ${SNAPREADY_PEERS_CACHE:-$HOME/.cache/snapready/peers}/<hash of go.mod, go.sum and main.go>
# A folder whose `peer --version` names the pinned controller-runtime is reused; otherwise the peer
# is built into a temporary folder next to it and moved in place in one rename. Progress goes to
# stderr; the last line printed (on stdout) is exactly GO_PEER=<path of the binary>. Without Go
# it exits 1 with the reason on stderr (the benchmark then skips the Go peer and says why).
#
# Environment: SNAPREADY_PEERS_CACHE (cache root), SNAPREADY_PEERS_JOBS (go build -p, default:
# the number of CPUs, at most 4), SNAPREADY_PEERS_GOPROXY (default https://proxy.golang.org).
set -eu
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODDIR="$ROOT/bench/peers/go"

NAME=peers
ENV_PREFIX=SNAPREADY_PEERS
# shellcheck source=scripts/gocache.sh
. "$ROOT/scripts/gocache.sh"

RUNTIME_VERSION=$(awk '$1 == "sigs.k8s.io/controller-runtime" && $2 ~ /^v/ { print $2; exit }' "$MODDIR/go.mod")
[ -n "$RUNTIME_VERSION" ] || die "no sigs.k8s.io/controller-runtime requirement in $MODDIR/go.mod"

SOURCE_HASH=$(cat "$MODDIR/go.mod" "$MODDIR/go.sum" "$MODDIR/main.go" | sha256 | cut -c1-12)

CACHE_ROOT=${SNAPREADY_PEERS_CACHE:-$HOME/.cache/snapready/peers}
FOLDER="$CACHE_ROOT/$SOURCE_HASH"

# The binary is complete when it runs and names the controller-runtime it was built with.
complete() {
	[ -x "$1/peer" ] || return 1
	version=$("$1/peer" --version 2>/dev/null) || return 1
	case $version in
	*"controller-runtime $RUNTIME_VERSION") return 0 ;;
	*) return 1 ;;
	esac
}

done_with() {
	echo "GO_PEER=$FOLDER/peer"
	exit 0
}

prepare_build

log "building the Go peer (controller-runtime $RUNTIME_VERSION) into $FOLDER ($(go version | cut -d' ' -f3), go build -p $JOBS; a cold build takes about 3 minutes on 2 CPUs)"
started=$(date +%s)
(cd "$MODDIR" && go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$BUILD/peer" .) ||
	die "go build of bench/peers/go failed"
complete "$BUILD" || die "$BUILD/peer --version does not name controller-runtime $RUNTIME_VERSION"

install_build
log "built in $(($(date +%s) - started))s: $("$FOLDER/peer" --version)"
done_with
