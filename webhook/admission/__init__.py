"""The admission engine: one dispatch table (``engine``) naming the handlers for pods
(``pods``), pod templates (``templates``) and the snapshot CRDs (``governance``), which share
``context`` and turn findings into decisions (``decision``). Pure (no HTTP, no I/O); the edges
call ``engine.admit``."""
