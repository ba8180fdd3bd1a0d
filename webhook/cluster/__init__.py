"""Edges that feed facts in: the API server (client, reflectors, caches), policy files, and GCS.
The only importer of ``kubernetes`` (``client``, ``caches``) and of ``google.cloud.storage``
(``gcs``)."""
