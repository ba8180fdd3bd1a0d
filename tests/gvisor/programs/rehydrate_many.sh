#!/bin/sh
# Test program run inside gVisor (tests/gvisor/test_helpers_sh.py): a large environment through
# `rehydrate env` and `rehydrate exec`. Prints `env BIG=<hex>`, `last <value>` (the shell's
# after `eval "$(rehydrate env)"`), `exec BIG=<hex>` (what `exec` hands a command), `finished`.
set -u
hex() {
    od -An -v -tx1 | tr -d ' \n'
}
eval "$(/snapready/rehydrate env)"
printf 'env BIG=%s\n' "$(printf '%s' "$BIG" | hex)"
printf 'last %s\n' "$SVC_1999_SERVICE_HOST"
printf 'exec BIG=%s\n' "$(/snapready/rehydrate exec -- sh -c 'printf "%s" "$BIG"' | hex)"
echo finished
