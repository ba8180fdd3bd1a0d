"""The admission engine: dispatch of one request by kind/operation, decisions from findings, and the
governance hook for the snapshot CRDs. Pure (no HTTP, no I/O); the edges call ``engine.admit``."""
