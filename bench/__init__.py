"""snapready's benchmarks: one harness, one module (or folder) per benchmark.

Run from the repository root (the ``make`` targets do):

* ``python -m bench.throughput`` (``make bench``): requests/s and latency of ``snapready serve``
  against the constant webhook, driven by ``hey`` or httpx;
* ``python -m bench.admit`` (``make bench-admit``): the in-process cost of one selected pod;
* ``python -m bench.cluster`` (``make bench-cluster``): pod CREATE through a real kube-apiserver,
  no webhook vs the constant webhook vs the Go and kopf peers (``bench/peers/``) vs snapready;
* ``python -m bench.scale`` (``make bench-scale``): the cluster caches at scale against an empty
  cluster;
* ``python -m bench.cli`` (``make bench-cli``): the CLI on hostile and large input (YAML alias
  bombs; ``check`` of a 20 MB file of 24,000 objects), seconds and peak memory per command.

``bench.harness`` holds what they share: the control plane (``tests/envtest``'s), starting and
stopping servers (``snapready serve`` and the constant webhook), CPU and memory from /proc,
percentiles and tables, the API client and the objects every benchmark builds. A new scenario
goes into the benchmark that measures against the same baseline; a new benchmark is a module
that imports the harness, never another benchmark (``lint-imports`` holds that).
"""
