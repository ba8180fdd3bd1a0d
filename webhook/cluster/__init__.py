"""Cluster mode: the edges that feed facts in, and the controllers that act on them.

Three rooms, top to bottom (import-linter holds the direction, ``pyproject.toml``):

- ``manager``: builds the edge and every controller and returns them typed (``Cluster``).
- ``controllers/``: each controller is a ``controllers.base.Reconciler`` (its ``reconcile`` and
  its options); independent of each other.
- ``api/``: the API-server edge (client, transport, reflectors, caches, leader election, the
  fenced write path, Events): the only importer of ``kubernetes``.

Beside them, the two sources that are not the API server stay modules of their own: ``files``
(policy files: the embedded default, ``snapready check``, tests) and ``gcs``/``gcs_usage``
(Google Cloud Storage: the only importers of ``google.cloud.storage``). They import neither room
and neither room imports them, so a folder would only lengthen their callers' imports.
"""
