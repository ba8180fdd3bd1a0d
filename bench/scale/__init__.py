"""snapready's cluster caches at scale on a real control plane (``make bench-scale``).

Baseline: the same ``snapready serve`` on an ``empty`` cluster, measured next to it (RSS, sync
time, and the in-handler admission latency in alternating rounds); the targets are design.md's
("Targets": RSS <= 250 MiB at scale, <= 150 MiB empty, caches synced <= 60 s, in-handler p99
unchanged, i.e. scale / empty <= 1.2).

Starts two envtest control planes (``bench.harness.plane``, each in its own folder of a temporary
directory):

* ``empty``: GKE's Pod snapshot CRDs, the gVisor RuntimeClass, one namespace ``bench-000`` with
  the bench's PodSnapshotPolicy and its storage config, nothing else (the review's pod must be
  selected on both clusters, or the two servers would run different code);
* ``scale``: the same plus ``--namespaces`` namespaces (each with a policy), ``--nodes`` GKE-like
  Nodes (``nodes``), ``--pods`` pods stamped as snapready stamps them (``workload``) and
  ``--snapshots`` PodSnapshots (as GKE's controller), 9 in 10 with a SnapshotRecord as
  snapready's leader writes it (``populate``).

Objects are created directly (no webhook is registered) by ``--concurrency`` threads;
kube-controller-manager is stopped once the namespaces have their ServiceAccount (``populate``
says why). Then ``snapready serve --source kube`` runs against each cluster with the same settings
(``serve``): seconds from process start to ``/readyz`` 200, when each cache finished its list, RSS
and peak RSS after sync and ``--settle`` seconds later, CPU seconds; then ``--requests`` ``POST
/mutate`` per server in alternating rounds (``latency``). With ``--stages`` (default) the scale
cluster is also measured after the nodes and after the pods, so the RSS each kind adds can be
told apart; with ``--heap on`` (default ``auto``: when an RSS target is missed) a child process
syncs the same caches in-process under ``tracemalloc`` (``heap``). ``report`` prints the tables.

Usage: ``python -m bench.scale [--nodes 2000] [--pods 20000] [--snapshots 5000]
[--namespaces 50] [--quick] [--concurrency 24] [--requests 2000] [--rounds 8] [--settle 30]
[--no-stages] [--heap auto|on|off] [--keep DIR] [--timeout 3600]``
"""
