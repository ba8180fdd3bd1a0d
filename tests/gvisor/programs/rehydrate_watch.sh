#!/bin/sh
# Test program run inside gVisor (tests/gvisor/test_helpers_sh.py): `rehydrate watch` as an app
# uses it.   rehydrate_watch.sh NAME...
# Runs `rehydrate watch -- /app/rehydrate_hook.sh NAME...` and prints `watching` once a process
# holds /proc/gvisor/checkpoint open (safe to checkpoint). The hook prints what it was given.
# shellcheck disable=SC2010 # `ls -l` shows where /proc/PID/fd links point, in dash and busybox
set -u
(
    until ls -l /proc/[0-9]*/fd 2>/dev/null | grep -q 'gvisor/checkpoint'; do sleep 0.02; done
    echo "watching"
) &
exec /snapready/rehydrate watch -- sh /app/rehydrate_hook.sh "$@"
