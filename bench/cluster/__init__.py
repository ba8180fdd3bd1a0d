"""Pod CREATE latency and cost through a real kube-apiserver (``make bench-cluster``).

Baselines: no webhook at all (``none``); the constant webhook (``constant``), which pays what
every webhook pays (TLS, HTTP, the event loop, two calls per pod): the floor; and two peers doing
only the gVisor check and a spec hash (``bench/peers/``): a Go controller-runtime webhook
(``go-peer``) and a kopf one (``kopf-peer``). snapready's targets are ratios to the floor and to
the Go peer in the same run (design.md "Targets").

Kyverno's method, scaled to one 2-core machine: a real control plane (``bench.harness.plane``:
etcd + kube-apiserver + kube-controller-manager of ``tests/envtest``, on 127.0.0.1) with GKE's Pod
snapshot CRDs, the gVisor RuntimeClass, a namespace ``bench-snap`` holding the example
PodSnapshotPolicy (``app=llm``) and its storage config, and a namespace ``bench-plain`` without
policies. Pods are created through the API server in scenarios that alternate round by round
(the order reverses every other round, so drift hits every scenario alike):

* ``none``: no webhook registered;
* ``constant``: the constant webhook (``bench.harness.constant --echo``: uid echoed, no patch),
  registered with the chart's webhook configurations (same rules, failurePolicy, timeout,
  matchPolicy, reinvocationPolicy, selectors; only the ``clientConfig`` becomes ``url`` +
  ``caBundle``);
* ``go-peer``: ``bench/peers/go`` (controller-runtime's ``webhook.Server``), built once by
  ``scripts/peers.sh``; skipped, and the report says why, when it cannot be built (no Go);
* ``kopf-peer``: ``bench/peers/kopf_peer.py`` run by ``kopf run --standalone`` with snapready's
  ServiceAccount kubeconfig (kopf reads discovery); both peers registered like the constant
  webhook (``--peers all|go|kopf|none``);
* ``snapready``: ``snapready serve --source kube`` with the chart's settings (defaults:
  ``injectHelpers: false``) and the chart's webhook configurations;
* ``snapready+inject``: the same with ``injectHelpers=true`` (a placeholder helpers digest: pods
  are never scheduled here, there are no nodes).

Pod kinds, each created ``--pods`` times per round at ``--concurrency`` (one keep-alive connection
per worker thread, admin client certificate): ``selected`` (the gVisor + 4 x L4 pod of review 03
with a fresh ``generateName``), ``unselected`` (review 01's plain pod in the policy namespace) and
``plain`` (the same pod in ``bench-plain``). Every scenario starts with a dry-run probe until the
API server calls the registered server (and only it), then a warm-up; pods are deleted
(deletecollection) after every scenario so etcd stays small.

Figures per scenario and kind: p50/p90/p99 CREATE latency; CPU milliseconds per pod of the webhook
process, kube-apiserver and etcd (``bench.harness.proc``: utime+stime deltas over each measured
phase); webhook calls per pod from the servers' own counters, split mutate/validate; the load
of processes outside the bench ("other cores"); then every webhook's ratios to the floor and the
Go peer, the in-process figures of ``bench.admit``, and design.md's targets, each figure next to
its target and marked met, NOT met or not measured (``targets``). The run ends with one line
in every benchmark's format, ``verdict: N/M targets met (NOT met: ...)``, for snapready with the
chart's defaults (``snapready+inject`` is shown beside it). With ``--profile DIR``, one extra
(unmeasured) phase of selected pods per snapready variant is sampled with py-spy and summarised,
then the API server's Go CPU profile is taken behind each webhook (the control plane runs with
``--profiling`` only then) and summarised per pod (``profile``). CPU figures are each process's
CPU clock (``bench.harness.proc.cpu_sample``), in nanoseconds.
No assertions: exit 0 whatever the figures.

Modules: ``objects`` (the cluster's namespaces, policies and pods), ``webhooks`` (the chart's
webhook configurations and the servers behind them), ``phases`` (alternating measured phases),
``targets`` (design.md's targets and the verdict, pure), ``report``, ``profile``; ``__main__``
runs it all.

Usage: ``python -m bench.cluster [--pods 200] [--rounds 2] [--concurrency 16] [--quick]
[--injection both|chart|on] [--peers all|go|kopf|none] [--scope static|dynamic] [--profile DIR]
[--keep DIR] [--timeout 1800]``
"""
