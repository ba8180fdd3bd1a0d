"""What each of snapready's caches retains, measured in-process (``make bench-scale --heap``).

A child process (``python -m bench.scale.heap KUBECONFIG``) syncs the same caches as ``snapready
serve --source kube`` under ``tracemalloc`` and prints JSON: per cache the objects held, the bytes
and Python objects they retain (a walk of the reflector's items and view), then what listing each
resource alone costs at its peak (the raw objects of every page); :func:`heap_report` runs it and
renders the tables.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

from bench.harness import proc
from bench.harness.objects import ROOT, Obj
from bench.harness.stats import markdown_table
from webhook.base.config import load_settings
from webhook.cluster.api.caches import ClusterSource, timing_from
from webhook.cluster.api.client import api_client
from webhook.cluster.api.transport import KubeTransport

MIB = proc.MIB


def deep_size(root: object, seen: set[int]) -> tuple[int, int]:
    """(bytes, objects) reachable from ``root`` not in ``seen`` (which it extends); containers,
    dataclass instances and their attributes are followed; classes and modules are not."""
    total = count = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ == "module":
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        count += 1
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            stack.append(vars(obj))
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, s) for s in obj.__slots__ if hasattr(obj, s))
    return total, count


def heap_child(kubeconfig: str) -> None:
    """Sync every cache in-process under tracemalloc; print JSON of what each retains, then
    what listing each resource alone costs at its peak (the raw objects of every page)."""
    settings = load_settings(source={"kind": "kube", "kubeconfig": kubeconfig})
    result: Obj = {"rss_before": proc.memory_mib(os.getpid())["VmRSS"]}
    tracemalloc.start(1)
    client = api_client(settings)
    transport = KubeTransport(client, settings.source.request_timeout_seconds)
    source = ClusterSource(transport, prefix=settings.prefix, timing=timing_from(settings.source))
    began = time.monotonic()
    source.start()
    while not source.synced():
        time.sleep(0.05)
    result["synced_s"] = time.monotonic() - began
    gc.collect()
    result["traced_current"], result["traced_peak"] = tracemalloc.get_traced_memory()
    memory = proc.memory_mib(os.getpid())
    result["rss"], result["hwm"] = memory["VmRSS"], memory["VmHWM"]
    held = tracemalloc.take_snapshot().statistics("lineno")[:10]
    seen: set[int] = set()
    result["caches"] = {}
    for name, reflector in source.reflectors.items():
        items_bytes, items_objects = deep_size(reflector.items, seen)
        result["caches"][name] = {
            "count": len(reflector.items),
            "retained": items_bytes + deep_size(reflector.view, seen)[0],
            "objects": items_objects,
        }
    result["state_rest"] = deep_size(source.state(), seen)[0]
    result["top"] = [
        {
            "where": f"{stat.traceback[0].filename.removeprefix(str(ROOT) + '/')}"
            f":{stat.traceback[0].lineno}",
            "bytes": stat.size,
            "blocks": stat.count,
        }
        for stat in held
    ]
    source.stop()
    for name, reflector in source.reflectors.items():
        if reflector.served and reflector.path:
            result["caches"][name].update(list_cost(transport, reflector.path, settings))
    client.close()
    print(json.dumps(result))


def list_cost(transport: Any, path: str, settings: Any) -> dict[str, int]:
    """Peak traced bytes of ``transport.list(path)`` alone, and the JSON size of what it got."""
    gc.collect()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    objects, _ = transport.list(path, page_size=settings.source.list_page_size)
    peak = tracemalloc.get_traced_memory()[1] - base
    size = len(orjson.dumps(objects))
    return {"list_peak": peak, "json": size}


def heap_report(kubeconfig: Path) -> str:
    """Run :func:`heap_child` with ``kubeconfig`` (snapready's ServiceAccount) in a child
    process; its figures as tables."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.scale.heap", str(kubeconfig)],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
        cwd=ROOT,
    )
    if out.returncode != 0:
        return f"heap analysis failed: {out.stderr[-1500:]}"
    data = json.loads(out.stdout.strip().splitlines()[-1])
    rows: list[list[object]] = []
    for name, cache in data["caches"].items():
        n = cache["count"]

        def per(key: str, n: int = n, cache: Obj = cache) -> str:
            return f"{cache[key] / n:,.0f}" if n and key in cache else "-"

        rows.append([name, n, f"{cache['retained'] / MIB:.2f}", per("retained"), per("objects"),
                     per("json"), per("list_peak")])  # fmt: skip
    rows.append(["(rest of ClusterState)", "", f"{data['state_rest'] / MIB:.2f}", "", "", "", ""])
    header = ["cache", "objects", "retained MiB", "retained B/object", "Python objects/item",
              "API JSON B/object", "list peak B/object (that list alone)"]  # fmt: skip
    lines = [
        f"in-process sync under tracemalloc: {data['synced_s']:.1f} s; traced after sync "
        f"{data['traced_current'] / MIB:.1f} MiB, traced peak during the lists "
        f"{data['traced_peak'] / MIB:.1f} MiB; process RSS after sync {data['rss']:.0f} MiB "
        f"(peak {data['hwm']:.0f} MiB; {data['rss_before']:.0f} MiB before the caches started)",
        "",
        markdown_table(header, rows),
        "",
        "largest allocation sites still held after sync (tracemalloc, by line):",
        "",
    ]
    lines += [
        f"  {t['bytes'] / MIB:7.2f} MiB {t['blocks']:>8} blocks  {t['where']}" for t in data["top"]
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    heap_child(sys.argv[1])
