"""What a pod says: the ``PodContext`` view, the distilled spec and fingerprint, node pins and
resource readings. Pure; imports only ``base`` and ``kube``."""
