"""The controllers of cluster mode: each one a ``controllers.base.Reconciler`` (its ``reconcile``
and options).

Above the API edge (``cluster.api``), below the manager (``cluster.manager``), independent of
each other (import-linter contracts in ``pyproject.toml``): they share only ``base`` and what
the edge and the pure layers offer; the manager wires them to the caches.

- ``scope``: the ``snapready-scope`` matchCondition of snapready's webhook configurations (every
  replica).
- ``config_watch``: metadata-only Secret/ConfigMap watches where snapshots read configuration
  (every replica; never writes).
- ``origins``: one SnapshotRecord per PodSnapshot (leader).
- ``restores``: restore outcomes, their Events and the readiness gate (leader).
- ``checkpoints``: failed and stalled checkpoints as Events, finished ones to the metrics (leader).
- ``snapshot_warnings``: stale snapshots after a node-pool upgrade, stuck deletions (leader).
- ``snapshot_lifecycle``: refresh triggers and prunes (decided everywhere, written by the leader).
- ``audit``: the audit of existing objects and its policy reports (leader).
"""
