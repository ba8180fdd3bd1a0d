"""Settings precedence: defaults < YAML file < SNAPREADY_* env < flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from webhook.base.config import Settings, load_settings


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
