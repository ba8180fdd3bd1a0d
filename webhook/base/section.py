"""The base of every settings section: an unknown key is an error, as at the top level.

``Settings`` forbids unknown top-level keys (``extra="forbid"``); pydantic's default for a nested
model is to ignore them, so ``lifecycle: {unused_day: 3}`` (a typo of ``unused_days``) or a
key from a newer chart would be dropped and the default used without a word. Every section
model derives from ``Section`` so the process refuses to start on such a file or environment
variable (``SNAPREADY_OUTCOMES__SETTLE_SECOND``), naming the key, as Kubernetes' strict
field validation does for an object with an unknown field (``kubectl --validate=strict``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A nested settings model that refuses keys it does not define (``ValidationError``,
    ``extra_forbidden``, naming the dotted path); subclasses add their own ``model_config``
    (``frozen=True``), which pydantic merges with this one."""

    model_config = ConfigDict(extra="forbid")
