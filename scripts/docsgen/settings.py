"""The configuration reference, from the settings model (every field, its default and description).

Nested pydantic sections are walked, so a new section or field shows up without touching the docs;
``missing_descriptions`` lists the fields without a description (the docs could not say what they
mean), which tests/docs/ holds at none.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


@dataclass(frozen=True)
class Setting:
    """One leaf setting: ``rules.gpu_driver.severity``."""

    name: str
    env: str
    type: str
    default: str
    description: str


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(arg) for arg in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(arg) for arg in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The checkout: paths under it are shown relative to it (``webhook/assets/examples``)."""


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, PurePath):
        # A default inside the package (the embedded example policies) reads as the package's
        # path, never as the absolute path of the checkout that built the docs.
        try:
            return str(PurePath(value).relative_to(PACKAGE_ROOT))
        except ValueError:
            return str(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    return value


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "(required)"
    else:
        value = info.default
    return json.dumps(_plain(value), sort_keys=False)


def walk(model: type[BaseModel], prefix: str = "") -> Iterator[Setting]:
    """Every leaf field of ``model``, depth first, in declaration order."""
    for name, info in model.model_fields.items():
        dotted = prefix + name
        if _is_model(info.annotation):
            yield from walk(info.annotation, dotted + ".")  # type: ignore[arg-type]
            continue
        env = "SNAPREADY_" + dotted.upper().replace(".", "__")
        description = " ".join((info.description or "").split())
        yield Setting(dotted, env, _type_name(info.annotation), _default(info), description)


def sections(model: type[BaseModel]) -> list[tuple[str, str, list[Setting]]]:
    """The top-level fields, then one section per nested model: (name, docstring, settings)."""
    top = [s for s in walk(model) if "." not in s.name]
    found: list[tuple[str, str, list[Setting]]] = [("top level", "", top)]
    for name, info in model.model_fields.items():
        if _is_model(info.annotation):
            sub: type[BaseModel] = info.annotation  # type: ignore[assignment]
            doc = " ".join((sub.__doc__ or "").split())
            found.append((name, doc, list(walk(sub, name + "."))))
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(model: type[BaseModel]) -> str:
    """Markdown: one table per section, each row a setting with its env var and default."""
    out: list[str] = []
    for name, doc, rows in sections(model):
        out += [f"### `{name}`" if name != "top level" else "### Top level", ""]
        if doc:
            out += [doc, ""]
        out += ["| setting | type | default | description |", "|---|---|---|---|"]
        for s in rows:
            setting = f"`{s.name}`<br>`{s.env}`"
            default = (
                f"`{_cell(s.default)}`"
                if len(s.default) <= 60
                else (f"<code>{_cell(s.default)}</code>")
            )
            out.append(f"| {setting} | {_cell(s.type)} | {default} | {_cell(s.description)} |")
        out.append("")
    return "\n".join(out)


def missing_descriptions(model: type[BaseModel]) -> list[str]:
    """Settings the reference could not describe: no ``description``."""
    return [s.name for s in walk(model) if not s.description]
