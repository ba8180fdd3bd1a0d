"""The GKE snapshot domain, pure: PodSnapshot views and their index, snapready's origin records,
restore evidence and outcomes, checkpoint reports, prune and refresh decisions, and the immutable
cluster model (``state``, ``facts``) that admission, the leader and the CLI all read.

Between ``kube/`` (Kubernetes semantics) and ``pod/``: it imports ``kube/`` and ``base/`` only.
"""
