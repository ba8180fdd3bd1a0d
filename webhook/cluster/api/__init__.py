"""The API-server edge of cluster mode: everything that talks to the API server, and nothing more.

``client`` (configuration, ``connect``) and ``transport`` (``KubeTransport``) are the only
importers of ``kubernetes`` with ``leader`` (Lease election); ``syncing`` holds the transport
contract, timing and worker threads; ``watched`` the collections every reader reads;
``reflector`` the list-then-watch loops; ``caches`` the ``ClusterSource`` that folds them into
one immutable ``ClusterState``, ``hooks`` who it tells about changes; ``snapshot_reader`` the
one-shot reads of ``snapready status``/``explain`` (same collections, no cache); ``records``
what the pod cache keeps of a pod; ``fence`` the one lease-fenced write path; ``events`` the
Event recorder; ``heap`` the garbage-collector tuning around the first sync; ``templates`` the
workload lists read on demand. Nothing here decides anything about snapshots: the controllers
(``cluster.controllers``) do, above this edge (an import-linter contract holds it).
"""
