"""Test program run inside gVisor (``tests/gvisor/test_helpers_py.py``): ``snapready_rehydrate``
as an app uses it.

``python3 /app/rehydrate_app.py wait|checkpoint NAME...``. ``on_restore(callback)`` runs in the
background; ``checkpoint`` first asks for a checkpoint (``checkpoint_now``); then the main thread
loops on ``wait_for_checkpoint``. Lines printed (each in one write):

* ``answer<n> WORD``: the main thread's n-th answer (``refused <message>`` when the request fails);
* ``callback <k>``: the callback ran, the k-th time in this process's memory; then
  ``env<k> NAME=<hex>`` / ``env<k> NAME unset`` (``os.environ`` after the refresh) and
  ``child<k> <hex>`` (``/proc/self/environ`` of a child started then);
* ``slow <k>`` and ``slow <k> done``: with ``SLOW_CALLBACK=<seconds>`` in the restored
  environment, the k-th callback sleeps that long after its report (a slow reconnect);
* ``waiting <n>``: both threads hold ``/proc/gvisor/checkpoint`` open (safe to checkpoint).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.environ.get("SNAPREADY_HELPERS", "/snapready"))
rehydrate = importlib.import_module("snapready_rehydrate")
CHECKPOINT = "/proc/gvisor/checkpoint"
_lock = threading.Lock()
_calls = [0]  # callbacks run in this process's memory (a restored copy keeps the count)


def emit(line: str) -> None:
    with _lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def holders() -> int:
    """How many of this process's descriptors are open on the checkpoint file."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == CHECKPOINT
        except OSError:
            continue
    return count


def announce(cycle: int) -> None:
    def run() -> None:
        while holders() < 2:  # the on_restore thread and the main thread
            time.sleep(0.02)
        emit(f"waiting {cycle}")

    threading.Thread(target=run, daemon=True).start()


def report(names: list[str]) -> None:
    _calls[0] += 1
    k = _calls[0]
    emit(f"callback {k}")
    for name in names:
        value = os.environb.get(name.encode())
        emit(f"env{k} {name} unset" if value is None else f"env{k} {name}={value.hex()}")
    child = subprocess.run(["cat", "/proc/self/environ"], capture_output=True, check=True)
    emit(f"child{k} {child.stdout.hex()}")
    slow = float(os.environ.get("SLOW_CALLBACK") or 0)
    if slow:  # a callback still running when the next checkpoint is taken
        emit(f"slow {k}")
        time.sleep(slow)
        emit(f"slow {k} done")


def main() -> None:
    mode, names = sys.argv[1], sys.argv[2:]
    rehydrate.on_restore(lambda: report(names))
    emit("started")
    cycle = 0
    if mode == "checkpoint":
        while holders() < 1:  # the on_restore thread waits, so a restore reaches the callback
            time.sleep(0.02)
        cycle += 1
        try:
            emit(f"answer{cycle} {rehydrate.checkpoint_now()}")
        except OSError as error:
            emit(f"answer{cycle} refused {type(error).__name__}: {error}")
            return
    while True:
        announce(cycle)
        answer = rehydrate.wait_for_checkpoint()
        cycle += 1
        emit(f"answer{cycle} {answer}")


if __name__ == "__main__":
    main()
