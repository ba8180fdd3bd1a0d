# shellcheck shell=bash
# Shared by scripts/envtest.sh and scripts/runsc.sh (sourced, not run): build Go binaries from the
# Go module proxy, pinned by a committed go.mod + go.sum, into a versioned cache folder that
# appears in one atomic rename. The caller sets, before sourcing:
#   NAME        the log prefix (envtest, runsc)
#   CACHE_ROOT  the cache root; FOLDER the versioned folder inside it
#   ENV_PREFIX  its environment prefix (SNAPREADY_ENVTEST, SNAPREADY_RUNSC): <prefix>_JOBS and
#               <prefix>_GOPROXY are honoured
# and defines `complete DIR` (whether DIR holds a usable build) and `done_with` (prints the
# result line and exits 0).

log() {
	printf '%s: %s\n' "$NAME" "$*" >&2
}

die() {
	log "error: $*"
	exit 1
}

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum | cut -d' ' -f1
	else
		shasum -a 256 | cut -d' ' -f1
	fi
}

# Reuse FOLDER when it is complete; else take the cache lock (a concurrent build makes this one
# wait, then reuse its result), check for Go and export the build environment (JOBS, GOPROXY,
# GOFLAGS, CGO_ENABLED=0). Returns with BUILD, a private temporary folder next to FOLDER,
# removed on exit unless `install_build` moved it into place.
prepare_build() {
	complete "$FOLDER" && done_with
	mkdir -p "$CACHE_ROOT"
	# Serialise concurrent builds (two shells, two test runs): the second one waits, then reuses.
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$CACHE_ROOT/.lock"
		if ! flock -n 9; then
			log "another $NAME build holds $CACHE_ROOT/.lock; waiting for it"
			flock 9
		fi
		complete "$FOLDER" && done_with
	fi
	command -v go >/dev/null 2>&1 || die "go is not installed (https://go.dev/dl/, 1.26 or newer): it builds $NAME"
	local cpus jobs_var proxy_var
	cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
	[ "$cpus" -le 4 ] || cpus=4
	jobs_var="${ENV_PREFIX}_JOBS"
	proxy_var="${ENV_PREFIX}_GOPROXY"
	JOBS=${!jobs_var:-$cpus}
	# Modules come from the module proxy only, checked against the committed go.sum (and
	# sum.golang.org).
	export GOPROXY="${!proxy_var:-https://proxy.golang.org}"
	export GOFLAGS="-buildvcs=false -mod=readonly"
	export CGO_ENABLED=0
	BUILD=$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")
	trap 'rm -rf "$BUILD"' EXIT
}

# Move BUILD into place as FOLDER in one rename (a stale, incomplete folder of the same name is
# moved aside first).
install_build() {
	chmod 755 "$BUILD" # mktemp made it private
	if [ -e "$FOLDER" ]; then
		mv "$FOLDER" "$BUILD/stale"
	fi
	mv "$BUILD" "$FOLDER"
	rm -rf "$FOLDER/stale"
	trap - EXIT
}
