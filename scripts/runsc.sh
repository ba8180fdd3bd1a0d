#!/usr/bin/env bash
# Build (once) and cache runsc, gVisor's OCI runtime, which the rehydration-helper tests run under
# (tests/gvisor/): built from the Go module proxy at the version pinned in gvisor/go.mod + go.sum.
#
# The cache folder is versioned:
#   ${SNAPREADY_RUNSC_CACHE:-$HOME/.cache/snapready/runsc}/gvisor-<pseudo-version>-<go.sum hash>
# A folder whose runsc answers `--version` with the pinned version is reused; otherwise runsc is
# built into a temporary folder next to it and moved in place in one rename. Progress goes to
# stderr; the last line printed (on stdout) is exactly RUNSC=<path of the binary>.
#
# Environment: SNAPREADY_RUNSC_CACHE (cache root), SNAPREADY_RUNSC_JOBS (go build -p, default: the
# number of CPUs, at most 4), SNAPREADY_RUNSC_GOPROXY (default https://proxy.golang.org).
set -eu
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODDIR="$ROOT/gvisor"

NAME=runsc
ENV_PREFIX=SNAPREADY_RUNSC
# shellcheck source=scripts/gocache.sh
. "$ROOT/scripts/gocache.sh"

# The version gvisor/go.mod requires for gvisor.dev/gvisor.
GVISOR_VERSION=$(awk '$1 == "require" && $2 == "gvisor.dev/gvisor" { print $3; exit }' "$MODDIR/go.mod")
[ -n "$GVISOR_VERSION" ] || die "no 'require gvisor.dev/gvisor' line in $MODDIR/go.mod"

SUM_HASH=$(sha256 <"$MODDIR/go.sum" | cut -c1-12)

CACHE_ROOT=${SNAPREADY_RUNSC_CACHE:-$HOME/.cache/snapready/runsc}
FOLDER="$CACHE_ROOT/gvisor-${GVISOR_VERSION#v}-$SUM_HASH"

# The binary is complete when it runs and reports the version it was stamped with.
# (No pipe into `grep -q`: under pipefail its early exit would fail the pipeline with SIGPIPE.)
complete() {
	[ -x "$1/runsc" ] || return 1
	version=$("$1/runsc" --version 2>/dev/null) || return 1
	[ "$(printf '%s\n' "$version" | sed -n 1p)" = "runsc version $GVISOR_VERSION" ]
}

done_with() {
	echo "RUNSC=$FOLDER/runsc"
	exit 0
}

prepare_build

log "building runsc $GVISOR_VERSION into $FOLDER ($(go version | cut -d' ' -f3), go build -p $JOBS; a cold build takes about 5 minutes on 2 CPUs)"
started=$(date +%s)
# runsc prints version.version for --version and in its logs; gVisor's release build stamps it.
(cd "$MODDIR" && go build -p "$JOBS" -trimpath \
	-ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" \
	-o "$BUILD/runsc" gvisor.dev/gvisor/runsc) || die "go build of gvisor.dev/gvisor/runsc failed"
complete "$BUILD" || die "$BUILD/runsc --version does not print 'runsc version $GVISOR_VERSION'"

install_build
log "built in $(($(date +%s) - started))s: $("$FOLDER/runsc" --version 2>&1 | head -n 1)"
done_with
