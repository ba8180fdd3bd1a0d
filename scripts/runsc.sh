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

log() {
	printf 'runsc: %s\n' "$*" >&2
}

die() {
	log "error: $*"
	exit 1
}

# The version gvisor/go.mod requires for gvisor.dev/gvisor.
GVISOR_VERSION=$(awk '$1 == "require" && $2 == "gvisor.dev/gvisor" { print $3; exit }' "$MODDIR/go.mod")
[ -n "$GVISOR_VERSION" ] || die "no 'require gvisor.dev/gvisor' line in $MODDIR/go.mod"

if command -v sha256sum >/dev/null 2>&1; then
	SUM_HASH=$(sha256sum <"$MODDIR/go.sum" | cut -c1-12)
else
	SUM_HASH=$(shasum -a 256 <"$MODDIR/go.sum" | cut -c1-12)
fi

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

complete "$FOLDER" && done_with

mkdir -p "$CACHE_ROOT"
# Serialise concurrent builds (two shells, two test runs): the second one waits, then reuses.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$CACHE_ROOT/.lock"
	if ! flock -n 9; then
		log "another runsc build holds $CACHE_ROOT/.lock; waiting for it"
		flock 9
	fi
	complete "$FOLDER" && done_with
fi

command -v go >/dev/null 2>&1 || die "go is not installed (https://go.dev/dl/, 1.26 or newer): it builds runsc"

cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
[ "$cpus" -le 4 ] || cpus=4
JOBS=${SNAPREADY_RUNSC_JOBS:-$cpus}

# Modules come from the module proxy only, checked against the committed go.sum (and sum.golang.org).
export GOPROXY="${SNAPREADY_RUNSC_GOPROXY:-https://proxy.golang.org}"
export GOFLAGS="-buildvcs=false -mod=readonly"
export CGO_ENABLED=0

BUILD=$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")
trap 'rm -rf "$BUILD"' EXIT

log "building runsc $GVISOR_VERSION into $FOLDER ($(go version | cut -d' ' -f3), go build -p $JOBS; a cold build takes about 5 minutes on 2 CPUs)"
started=$(date +%s)
# runsc prints version.version for --version and in its logs; gVisor's release build stamps it.
(cd "$MODDIR" && go build -p "$JOBS" -trimpath \
	-ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" \
	-o "$BUILD/runsc" gvisor.dev/gvisor/runsc) || die "go build of gvisor.dev/gvisor/runsc failed"
complete "$BUILD" || die "$BUILD/runsc --version does not print 'runsc version $GVISOR_VERSION'"

# A stale, incomplete folder of the same name is moved aside first: the final rename is atomic.
chmod 755 "$BUILD" # mktemp made it private
if [ -e "$FOLDER" ]; then
	mv "$FOLDER" "$BUILD/stale"
fi
mv "$BUILD" "$FOLDER"
rm -rf "$FOLDER/stale"
trap - EXIT
log "built in $(($(date +%s) - started))s: $("$FOLDER/runsc" --version 2>&1 | head -n 1)"
done_with
