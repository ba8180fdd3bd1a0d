"""The settings flags shared by subcommands (``--config``, ``--policies``) and their settings."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from webhook.base.config import Settings, load_settings
from webhook.base.errors import ConfigError
from webhook.base.settings_errors import env_not_json, invalid_settings


def add_settings_arguments(parser: argparse.ArgumentParser, *, policies: bool = True) -> None:
    """``--config`` and (unless ``policies`` is False: commands that read the cluster, not
    policy files) ``--policies``, shared by commands that need settings."""
    parser.add_argument("--config", type=Path, help="YAML settings file (same keys as the env).")
    if not policies:
        return
    parser.add_argument(
        "--policies",
        "--policy-dir",
        dest="policy_dir",
        type=Path,
        help="directory of PodSnapshotPolicy/StorageConfig YAML files",
    )


def settings_from(args: argparse.Namespace, **extra: Any) -> Settings:
    """Settings from ``--config``, env and flags (flags win).

    Raises:
        ConfigError: invalid settings (message names the field).
    """
    source: dict[str, Any] = {}
    if getattr(args, "policy_dir", None) is not None:
        source["policy_dir"] = args.policy_dir
    overrides: dict[str, Any] = dict(extra)
    if source:
        overrides["source"] = source
    try:
        return load_settings(getattr(args, "config", None), **overrides)
    except ValidationError as exc:
        raise ConfigError(invalid_settings(exc)) from None
    except SettingsError as exc:  # an env value that is not the JSON its field needs
        raise ConfigError(env_not_json(exc, os.environ, Settings)) from None
