"""Base layer: type aliases (``types``), the two error families (``errors``), text bounds
(``text``) and the settings model (``config``). Imports nothing else from the package."""
