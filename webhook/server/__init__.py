"""The HTTPS edge: ASGI app, HTTP protocol hardening, graceful lifecycle, TLS reload, metrics, logs,
certificates (the only importer of ``cryptography``) and the ``runner`` that wires a process."""
