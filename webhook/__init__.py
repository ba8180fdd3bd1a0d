"""snapready: an admission webhook that makes GKE Pod snapshots safe to rely on."""

__version__ = "0.1.0"
