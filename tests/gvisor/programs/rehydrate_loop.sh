#!/bin/sh
# Test program run inside gVisor (tests/gvisor/test_helpers_sh.py): the shell helper as an app uses it.
#   rehydrate_loop.sh wait|checkpoint|checkpoint-twice NAME...
# `checkpoint` first asks for a checkpoint (`rehydrate checkpoint`); then, in both modes, a loop of
# `rehydrate wait`. `checkpoint-twice` asks twice and prints `first|second WORD STATUS`. After each answer it prints (cycle n counts answers):
#   answer<n> WORD STATUS   the helper's answer and exit status
#   env<n> NAME=<hex>       after a restore: the shell's value of each NAME after
#   env<n> NAME unset       `eval "$(rehydrate env)"` (hex of the bytes; values may hold newlines)
#   exec<n> <hex>           after a restore: /proc/self/environ of `rehydrate exec -- od ...`
# and `waiting <n>` once a process holds /proc/gvisor/checkpoint open again (safe to checkpoint).
# shellcheck disable=SC2010 # `ls -l` shows where /proc/PID/fd links point, in dash and busybox
set -u
mode=$1
shift
cycle=0

hex() {
    od -An -v -tx1 | tr -d ' \n'
}

report() {
    for name in "$@"; do
        value=''
        if eval "[ -n \"\${$name+x}\" ]"; then
            eval "value=\$$name"
            printf 'env%s %s=%s\n' "$cycle" "$name" "$(printf '%s' "$value" | hex)"
        else
            printf 'env%s %s unset\n' "$cycle" "$name"
        fi
    done
    printf 'exec%s %s\n' "$cycle" "$(/snapready/rehydrate exec -- od -An -v -tx1 /proc/self/environ | tr -d ' \n')"
}

announce() {
    (
        until ls -l /proc/[0-9]*/fd 2>/dev/null | grep -q 'gvisor/checkpoint'; do sleep 0.02; done
        echo "waiting $cycle"
    ) &
}

handle() {
    word=$1
    code=$2
    shift 2
    cycle=$((cycle + 1))
    echo "answer$cycle $word $code"
    if [ "$word" = restore ]; then
        eval "$(/snapready/rehydrate env)"
        report "$@"
    fi
}

echo "started"
if [ "$mode" = checkpoint-twice ]; then  # the workload trigger, asked for a second time
    for turn in first second; do
        answer=$(/snapready/rehydrate checkpoint)
        echo "$turn $answer $?"
    done
    exit 0
fi
if [ "$mode" = checkpoint ]; then
    answer=$(/snapready/rehydrate checkpoint)
    status=$?
    handle "$answer" "$status" "$@"
    [ "$status" = 0 ] || exit "$status"
fi
while :; do
    announce
    answer=$(/snapready/rehydrate wait)
    status=$?
    handle "$answer" "$status" "$@"
    [ "$status" = 0 ] || exit "$status"
done
