"""One-line messages for settings that cannot be loaded (the CLI and ``serve`` print them).

pydantic's own messages span lines and end in a documentation URL; pydantic-settings names only
the section of an environment value that is not JSON. These say which key or variable, what is
wrong and how to write it, and never show a value (a variable may hold a secret).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, get_origin

from pydantic import BaseModel, ValidationError

from webhook.base.config import ENV_PREFIX


def invalid_settings(exc: ValidationError) -> str:
    """One line for invalid settings, each error as ``<dotted key>: <message>``
    (``lifecycle.unused_day: Extra inputs are not permitted``), pydantic's URLs and the
    ``Value error,`` before our validators' own messages left out."""
    parts = [
        f"{'.'.join(str(part) for part in error['loc']) or '(root)'}: "
        f"{error['msg'].removeprefix('Value error, ')}"
        for error in exc.errors()
    ]
    return "invalid settings: " + "; ".join(parts)


def _is_json(value: str) -> bool:
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def _needs_json(name: str, settings_cls: type[BaseModel]) -> bool:
    """Whether ``SNAPREADY_<A>__<B>...`` names a section, list or mapping (JSON in a variable);
    True when the path names no field."""
    model: Any = settings_cls
    parts = name[len(ENV_PREFIX) :].lower().split("__")
    for index, part in enumerate(parts):
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            return True
        annotation = fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            if index == len(parts) - 1:
                return True
            continue
        return index == len(parts) - 1 and get_origin(annotation) in (list, dict)
    return True


def env_not_json(exc: Exception, environ: Mapping[str, str], settings_cls: type[BaseModel]) -> str:
    """One line for pydantic-settings' ``SettingsError`` on an environment value that is not
    the JSON its field needs (``error parsing value for field "rules" from source
    "EnvSettingsSource"``): it names the ``SNAPREADY_<FIELD>`` variables that are set (never
    their values) and how a list or mapping is written."""
    found = re.search(r'field "([A-Za-z0-9_]+)"', str(exc))
    field = ENV_PREFIX + found.group(1).upper() if found else ""
    names = sorted(
        name
        for name in environ
        if field and (name.upper() == field or name.upper().startswith(field + "__"))
    )
    # pydantic-settings names only the section: keep the variables that cannot be what their
    # field needs (no JSON where a list, mapping or section is), else all of the section's.
    which = ", ".join(
        [n for n in names if _needs_json(n, settings_cls) and not _is_json(environ[n])] or names
    ) or (field or "a SNAPREADY_ variable")
    example = ENV_PREFIX + """RULES__DISABLED='["gpu-mig"]'"""
    return (
        f"invalid settings: {which}: not the JSON its field needs (a list or a mapping is "
        f"JSON, e.g. {example}; a {ENV_PREFIX}<SECTION> variable holds a JSON object, or set "
        f"one field: {ENV_PREFIX}<SECTION>__<FIELD>)"
    )
