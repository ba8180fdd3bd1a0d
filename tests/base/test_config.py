"""Settings precedence: defaults < YAML file < SNAPREADY_* env < flags."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from webhook.base import rule_ids
from webhook.base.config import Settings, load_settings
from webhook.base.errors import ConfigError
from webhook.base.settings_errors import invalid_settings


def test_defaults_are_the_documented_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SNAPREADY_CONFIG_FILE", raising=False)
    settings = Settings()
    assert settings.server.port == 8443
    assert settings.server.max_body_bytes == 7 * 1024 * 1024
    assert settings.failure_policy == "Fail"
    assert settings.prefix == "snapready.io/"


def test_file_then_env_then_flags_override_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("server: {port: 9000, host: 0.0.0.0}\nenforcement: audit\n")
    monkeypatch.setenv("SNAPREADY_SERVER__PORT", "9100")
    settings = load_settings(config)
    assert settings.server.port == 9100  # env beats the file
    assert settings.server.host == "0.0.0.0"  # file beats the default
    assert settings.enforcement == "audit"
    flagged = load_settings(config, server={"port": 9200})
    assert flagged.server.port == 9200  # flags beat env
    assert flagged.server.host == "0.0.0.0"  # nested groups merge, not replace


@pytest.mark.parametrize(
    ("env", "value"),
    [
        pytest.param("SNAPREADY_FAILURE_POLICY", "Maybe", id="rejects-unknown-failure-policy"),
        pytest.param("SNAPREADY_SERVER__PORT", "70000", id="rejects-port-out-of-range"),
        pytest.param("SNAPREADY_PREFIX", "snapready.io", id="rejects-prefix-without-slash"),
        pytest.param("SNAPREADY_ENFORCEMENT", "deny", id="rejects-unknown-mode"),
    ],
)
def test_invalid_values_are_rejected_at_start(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ValidationError):
        Settings()


def test_a_settings_file_does_not_leak_into_later_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SNAPREADY_CONFIG_FILE", raising=False)
    config = tmp_path / "settings.yaml"
    config.write_text("enforcement: audit\n")
    assert load_settings(config).enforcement == "audit"
    assert load_settings().enforcement == "enforce"
    assert Settings().enforcement == "enforce"


def test_the_chart_points_at_its_file_through_the_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("enforcement: warn\n")
    monkeypatch.setenv("SNAPREADY_CONFIG_FILE", str(config))
    assert Settings().enforcement == "warn"


def _sections(model: type[BaseModel], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The dotted paths of every settings section nested (as a model, not in a list) in
    ``model``, found from the annotations, so a section added later is covered too."""
    found = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found.append((*path, name))
            found.extend(_sections(kind, (*path, name)))
    return found


def _nested(path: tuple[str, ...], leaf: dict[str, object]) -> dict[str, object]:
    for key in reversed(path):
        leaf = {key: leaf}
    return leaf


SECTIONS = _sections(Settings)


def test_every_section_is_found() -> None:
    # The walk reaches the sections of every settings module, two levels deep included.
    for path in [("server",), ("lifecycle",), ("outcomes",), ("rules",), ("rules", "gpu_driver"),
                 ("injection",), ("storage",), ("workloads",), ("reports",)]:  # fmt: skip
        assert path in SECTIONS


@pytest.mark.parametrize("path", SECTIONS, ids=".".join)
def test_an_unknown_key_in_any_section_is_refused_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...]
) -> None:
    # A typo (or a key of a newer chart) must stop the process, naming the key, never fall
    # back to the default without a word.
    monkeypatch.delenv("SNAPREADY_CONFIG_FILE", raising=False)
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(_nested(path, {"pruneAfterTypo": 1})))
    with pytest.raises(ValidationError) as raised:
        load_settings(config)
    [error] = raised.value.errors()
    assert error["type"] == "extra_forbidden"
    assert error["loc"] == (*path, "pruneAfterTypo")


def test_an_unknown_nested_key_is_refused_from_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SNAPREADY_CONFIG_FILE", raising=False)
    monkeypatch.setenv("SNAPREADY_RULES__GPU_DRIVER__TYPO", "5")
    with pytest.raises(ValidationError, match=r"rules\.gpu_driver\.typo"):
        Settings()


def test_an_unknown_key_in_an_extra_workload_is_refused() -> None:
    workload = {"group": "example.com", "kind": "Pool", "resource": "pools",
                "templates": ["spec.template"]}  # fmt: skip
    assert Settings(workloads={"extra": [workload]}).workloads.extra[0].kind == "Pool"
    with pytest.raises(ValidationError, match="extra_forbidden"):
        Settings(workloads={"extra": [{**workload, "template": "spec.template"}]})


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        pytest.param({"modes": {"machine-familly": "audit"}},
                     r"rules\.modes: 'machine-familly' is no rule id \(did you mean "
                     r"'machine-family'\?\)", id="mode-typo"),
        pytest.param({"disabled": ["gpu-driver", "gvisor-runtme"]},
                     r"rules\.disabled: 'gvisor-runtme' is no rule id \(did you mean "
                     r"'gvisor-runtime'\?\)", id="disabled-typo"),
        pytest.param({"disabled": ["GVISOR-RUNTIME"]},
                     r"rules\.disabled: 'GVISOR-RUNTIME' is no rule id \(did you mean "
                     r"'gvisor-runtime'\?\)", id="upper-case"),
        pytest.param({"disabled": ["frobnicate"]}, r"rules\.disabled: 'frobnicate' is no rule id; ",
                     id="no-near-id"),
    ],
)  # fmt: skip
def test_a_rule_id_no_rule_raises_is_refused(rules: dict[str, Any], message: str) -> None:
    # Such an id did nothing: `modes: {machine-familly: audit}` left machine-family enforcing.
    with pytest.raises(ValidationError) as raised:
        Settings(rules=rules)
    assert re.search(message, invalid_settings(raised.value))


def test_every_rule_id_is_accepted_in_disabled_and_modes() -> None:
    ids = sorted(rule_ids.RULE_IDS)
    settings = Settings(rules={"disabled": ids, "modes": dict.fromkeys(ids, "audit")})
    assert settings.rules.disabled == ids and set(settings.rules.modes) == set(ids)


def test_a_missing_settings_file_is_refused_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pydantic-settings skips a missing YAML file: `--config ci.yml` for ci.yaml ran on the
    # defaults (a CI job then judged manifests with rules its settings had turned off).
    with pytest.raises(ConfigError, match=r"ci\.yml: not found"):
        load_settings(tmp_path / "ci.yml")
    monkeypatch.setenv("SNAPREADY_CONFIG_FILE", str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match=r"gone\.yaml: not found"):
        Settings()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("a: [1\n", "expected ',' or ']'", id="not-yaml"),
        pytest.param("- enforcement: audit\n", "a mapping of settings is expected, not a list",
                     id="a-list"),
        pytest.param("audit\n", "not a str", id="a-string"),
    ],
)  # fmt: skip
def test_a_settings_file_that_is_no_mapping_is_refused_clearly(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(config)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_settings(empty).enforcement == "enforce"  # an empty file: the defaults


def test_an_env_variable_naming_no_section_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SNAPREADY_CONFIG_FILE", raising=False)
    monkeypatch.setenv("SNAPREADY_LIFECYCLES__PRUNE", "on")
    with pytest.raises(ConfigError, match="SNAPREADY_LIFECYCLES__PRUNE"):
        Settings()
    monkeypatch.delenv("SNAPREADY_LIFECYCLES__PRUNE")
    # What Kubernetes sets for a Service named snapready is no setting and is left alone.
    for name in ("SNAPREADY_PORT", "SNAPREADY_SERVICE_HOST", "SNAPREADY_PORT_443_TCP_ADDR"):
        monkeypatch.setenv(name, "10.0.0.1")
    monkeypatch.setenv("SNAPREADY_LIFECYCLE__PRUNE", "on")
    assert Settings().lifecycle.prune == "on"
