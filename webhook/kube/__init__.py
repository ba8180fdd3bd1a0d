"""Kubernetes semantics, pure: quantities, API-server defaults, label selectors, canonical JSON,
redaction, manifest reading, the AdmissionReview envelope and response constructors, GKE label keys
and the immutable cluster model (``state``, ``facts``). No I/O, no clock, no ``kubernetes``
client."""
