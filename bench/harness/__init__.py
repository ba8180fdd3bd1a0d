"""What every benchmark shares; each module says what it owns.

* ``objects``: the repository's data files (reviews, CRDs, example policies) and the objects built
  from them (a pod as a client sends it, the gVisor RuntimeClass);
* ``plane``: the envtest control plane, the benchmark's work folder, signals and clean-up;
* ``api``: JSON requests to the API server and the set-up every cluster benchmark needs;
* ``servers``: starting ``snapready serve`` and the constant webhook, readiness, their counters;
* ``constant``: the constant-response webhook itself (``python -m bench.harness.constant``);
* ``peers``: the Go (controller-runtime) and kopf peer webhooks of ``bench/peers/``: building
  (``scripts/peers.sh``), starting, readiness, their counters;
* ``proc``: CPU time and memory of processes and of the machine, from /proc;
* ``stats``: percentiles, verdicts and Markdown tables.
"""
