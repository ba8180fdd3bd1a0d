# ruff: noqa: E501  (TOP is go tool pprof output, kept as printed)
"""The API-server CPU profile summary of ``make bench-cluster --profile``: ``go tool pprof -top
-cum`` text read into milliseconds of API-server CPU per created pod."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.cluster import profile
from bench.cluster.__main__ import parse_args
from bench.cluster.profile import (
    APISERVER_FRAMES,
    apiserver_table,
    cumulative_ms,
    per_pod,
    pprof_top,
)

# Lines of real `go tool pprof -top -cum -nodefraction=0` output (Go 1.26.8) of a kube-apiserver
# v1.36.3 profile taken by `make bench-cluster --profile` behind snapready (Build ID and Time
# lines left out): one unit per listing, " (inline)" and " (partial-inline)" suffixes.
TOP = """File: kube-apiserver
Type: cpu
Duration: 10.02s, Total samples = 12.88s (128.54%)
Showing nodes accounting for 12.88s, 100% of 12.88s total
      flat  flat%   sum%        cum   cum%
         0     0%     0%      5.65s 43.87%  k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1.2
         0     0%  0.23%      2.83s 21.97%  k8s.io/apiserver/pkg/admission/plugin/webhook/mutating.(*mutatingDispatcher).Dispatch
         0     0%  0.47%      1.82s 14.13%  runtime.gcBgMarkWorker
         0     0%  1.24%      1.48s 11.49%  k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions.(*matcher).Match
     0.01s 0.078%  5.43%      1.02s  7.92%  k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1
     0.01s 0.078% 12.58%      0.57s  4.43%  k8s.io/apiserver/pkg/admission/plugin/webhook/validating.(*validatingDispatcher).Dispatch
         0     0% 16.46%      0.46s  3.57%  k8s.io/apiserver/pkg/endpoints/handlers.(*watchEncoder).Encode
         0     0% 22.75%      0.35s  2.72%  k8s.io/apimachinery/third_party/forked/golang/reflect.Equalities.DeepEqual (partial-inline)
         0     0% 26.24%      0.29s  2.25%  gopkg.in/evanphx/json-patch%2ev4.Patch.Apply (inline)
         0     0% 26.24%      0.29s  2.25%  gopkg.in/evanphx/json-patch%2ev4.Patch.ApplyIndent
"""

# The same listing's rows as pprof prints them for a short profile: ms, and a zero without unit.
TOP_MS = """      flat  flat%   sum%        cum   cum%
      10ms  1.00%  1.00%      510ms 51.00%  k8s.io/apiserver/pkg/endpoints/handlers.(*watchEncoder).Encode
         0     0%  1.00%          0     0%  runtime.gcBgMarkWorker
"""


def test_cumulative_ms_reads_the_total_and_strips_inline_suffixes() -> None:
    cumulative = cumulative_ms(TOP)
    assert cumulative[""] == pytest.approx(12_880)
    handler = "k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1.2"
    assert cumulative[handler] == pytest.approx(5_650)
    assert cumulative["gopkg.in/evanphx/json-patch%2ev4.Patch.Apply"] == pytest.approx(290)
    equal = "k8s.io/apimachinery/third_party/forked/golang/reflect.Equalities.DeepEqual"
    assert cumulative[equal] == pytest.approx(350)
    assert not any("inline" in name or name.startswith("File") for name in cumulative)


def test_cumulative_ms_reads_milliseconds_and_a_zero_without_unit() -> None:
    cumulative = cumulative_ms(TOP_MS)
    assert cumulative["k8s.io/apiserver/pkg/endpoints/handlers.(*watchEncoder).Encode"] == (
        pytest.approx(510)
    )
    assert cumulative["runtime.gcBgMarkWorker"] == 0.0


def test_per_pod_divides_by_the_pods_and_names_every_frame() -> None:
    rows = dict(per_pod(cumulative_ms(TOP), 2050))
    assert rows["pods created while profiled"] == 2050
    assert rows["API server, all CPU"] == pytest.approx(12_880 / 2050)
    assert rows["decoding the request, encoding the answer"] == pytest.approx(1_020 / 2050)
    assert rows["admission and storage (the finisher)"] == pytest.approx(5_650 / 2050)
    assert rows["  mutating webhooks (and reinvocation)"] == pytest.approx(2_830 / 2050)
    assert rows["      applying the patch"] == pytest.approx(290 / 2050)
    assert rows["  validating webhooks"] == pytest.approx(570 / 2050)
    assert rows["  matchConditions (CEL), every webhook"] == pytest.approx(1_480 / 2050)
    assert rows["watch events encoded for watchers"] == pytest.approx(460 / 2050)
    assert rows["garbage collection (background mark)"] == pytest.approx(1_820 / 2050)
    assert rows["    calling one, applying its patch"] == 0.0  # not in this excerpt
    assert len(rows) == len(APISERVER_FRAMES) + 2


def test_the_table_puts_scenarios_side_by_side() -> None:
    rows = per_pod(cumulative_ms(TOP), 2050)
    table = apiserver_table({"constant": rows, "snapready": rows}).splitlines()
    assert table[0].split()[-2:] == ["constant", "snapready"]
    assert table[1].split()[-2:] == ["2050", "2050"]
    assert table[2].split()[-2:] == ["6.283", "6.283"]


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go")
def test_pprof_top_gives_none_for_a_file_that_is_no_profile(tmp_path: Path) -> None:
    bogus = tmp_path / "apiserver-x.pb.gz"
    bogus.write_bytes(b"not a profile")
    assert pprof_top(bogus) is None


def test_without_go_the_profiles_are_kept_and_that_is_said_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken: list[str] = []

    def phase(bench: object, scenario: str, out: Path) -> tuple[Path, int]:
        taken.append(scenario)
        path = out / f"apiserver-{scenario}.pb.gz"
        path.write_bytes(b"profile")
        return path, 100

    monkeypatch.setattr(profile, "apiserver_phase", phase)
    monkeypatch.setattr("bench.cluster.profile.shutil.which", lambda name: None)
    table = profile.profile_apiserver(
        object(),  # type: ignore[arg-type]
        ["none", "constant", "snapready"],
        tmp_path,
    )
    out = capsys.readouterr().out
    assert table is None
    assert taken == ["constant", "snapready"]  # none has no webhook; both profiles kept
    assert out.count("go is not on PATH") == 1
    assert str(tmp_path) in out and "could not read" not in out


def test_a_profile_folder_that_is_a_file_is_refused_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regular = tmp_path / "a-file"
    regular.write_text("")
    monkeypatch.setattr("sys.argv", ["bench.cluster", "--quick", "--profile", str(regular)])
    with pytest.raises(SystemExit) as exited:
        parse_args()
    assert exited.value.code == 2
    assert "exists and is not a directory" in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", ["bench.cluster", "--quick", "--profile", str(tmp_path)])
    assert parse_args().profile == tmp_path
