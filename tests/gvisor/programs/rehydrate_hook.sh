#!/bin/sh
# The command `rehydrate watch` runs after each restore (tests/gvisor/test_helpers_sh.py):
#   rehydrate_hook.sh NAME...
# prints `hook-<PLAIN> NAME=<hex>` (or `hook-<PLAIN> NAME unset`) for each NAME of its
# environment, then `done-<PLAIN>`; with SLOW_CALLBACK=<seconds> it then prints
# `slow-<PLAIN>`, sleeps that long (a slow reconnect) and prints `slow-<PLAIN> done`.
set -u
tag="hook-${PLAIN:-}"
for name in "$@"; do
    if eval "[ -n \"\${$name+x}\" ]"; then
        eval "value=\$$name"
        printf '%s %s=%s\n' "$tag" "$name" "$(printf '%s' "$value" | od -An -v -tx1 | tr -d ' \n')"
    else
        printf '%s %s unset\n' "$tag" "$name"
    fi
done
echo "done-${PLAIN:-}"
if [ "${SLOW_CALLBACK:-0}" != 0 ]; then
    echo "slow-${PLAIN:-}"
    sleep "$SLOW_CALLBACK"
    echo "slow-${PLAIN:-} done"
fi
