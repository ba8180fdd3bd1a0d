"""Pod CREATE latency and cost through a real kube-apiserver (``make bench-cluster``).

Baselines: no webhook at all (``none``), and the constant webhook (``constant``), which pays what
every webhook pays (TLS, HTTP, the event loop, two calls per pod); snapready's targets are ratios
to the constant server's figures (design.md "Targets", issue 16).

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
phase); webhook calls per pod from the servers' own counters, split mutate/validate; then the
ratios snapready/constant and the targets, each marked met or NOT met, and the in-process figures
of ``bench.admit``. With ``--profile DIR``, one extra (unmeasured) phase of selected pods per
snapready variant is sampled with py-spy and summarised. No assertions: exit 0 whatever the
figures.

Modules: ``objects`` (the cluster's namespaces, policies and pods), ``webhooks`` (the chart's
webhook configurations and the servers behind them), ``phases`` (alternating measured phases),
``report``, ``profile``; ``__main__`` runs it all.

Usage: ``python -m bench.cluster [--pods 200] [--rounds 2] [--concurrency 16] [--quick]
[--injection both|chart|on] [--scope static|dynamic] [--profile DIR] [--keep DIR]
[--timeout 1800]``
"""
