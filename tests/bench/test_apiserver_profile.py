# ruff: noqa: E501  (TOP is go tool pprof output, kept as printed)
"""The API-server CPU profile summary of ``make bench-cluster --profile``: ``go tool pprof -top
-cum`` text read into milliseconds of API-server CPU per created pod."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.cluster.profile import (
    APISERVER_FRAMES,
    apiserver_table,
    cumulative_ms,
    per_pod,
    pprof_top,
)

# Rows as `go tool pprof -top -cum` (Go 1.26) prints them for a kube-apiserver profile: a zero has
# no unit, an inlined function ends in " (inline)", units go from s to ms.
TOP = """File: kube-apiserver
Type: cpu
Duration: 10.01s, Total samples = 13.10s (130.93%)
Showing nodes accounting for 8.16s, 62.29% of 13.10s total
      flat  flat%   sum%        cum   cum%
         0     0%     0%      6.13s 46.79%  k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1.2
     0.01s 0.076%  0.38%      3.28s 25.04%  k8s.io/apiserver/pkg/admission/plugin/webhook/mutating.(*mutatingDispatcher).Dispatch
         0     0%  0.46%      1.78s 13.59%  k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions.(*matcher).Match
         0     0% 28.17%      0.35s  2.67%  gopkg.in/evanphx/json-patch%2ev4.Patch.Apply (inline)
         0     0% 28.17%      0.35s  2.67%  gopkg.in/evanphx/json-patch%2ev4.Patch.ApplyIndent
      10ms 0.076% 24.66%      510ms  3.89%  k8s.io/apiserver/pkg/endpoints/handlers.(*watchEncoder).Encode
         0     0% 30.00%          0     0%  runtime.gcBgMarkWorker
"""


def test_cumulative_ms_reads_every_unit_and_the_total() -> None:
    cumulative = cumulative_ms(TOP)
    assert cumulative[""] == pytest.approx(13_100)
    handler = "k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1.2"
    assert cumulative[handler] == pytest.approx(6_130)
    assert cumulative["gopkg.in/evanphx/json-patch%2ev4.Patch.Apply"] == pytest.approx(350)
    assert cumulative["k8s.io/apiserver/pkg/endpoints/handlers.(*watchEncoder).Encode"] == (
        pytest.approx(510)
    )
    assert cumulative["runtime.gcBgMarkWorker"] == 0.0
    assert "File: kube-apiserver" not in " ".join(cumulative)


def test_per_pod_divides_by_the_pods_and_names_every_frame() -> None:
    rows = dict(per_pod(cumulative_ms(TOP), 100))
    assert rows["pods created while profiled"] == 100
    assert rows["API server, all CPU"] == pytest.approx(131.0)
    assert rows["pod CREATE handler (all of it)"] == pytest.approx(61.3)
    assert rows["  mutating webhooks (and reinvocation)"] == pytest.approx(32.8)
    assert rows["      applying the patch"] == pytest.approx(3.5)
    assert rows["  matchConditions (CEL), every webhook"] == pytest.approx(17.8)
    assert rows["watch events encoded for watchers"] == pytest.approx(5.1)
    assert rows["  validating webhooks"] == 0.0  # not in this profile
    assert len(rows) == len(APISERVER_FRAMES) + 2


def test_the_table_puts_scenarios_side_by_side() -> None:
    rows = per_pod(cumulative_ms(TOP), 100)
    table = apiserver_table({"constant": rows, "snapready": rows}).splitlines()
    assert table[0].split()[-2:] == ["constant", "snapready"]
    assert table[1].split()[-2:] == ["100", "100"]
    assert table[2].split()[-2:] == ["131.000", "131.000"]


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go")
def test_pprof_top_gives_none_for_a_file_that_is_no_profile(tmp_path: Path) -> None:
    bogus = tmp_path / "apiserver-x.pb.gz"
    bogus.write_bytes(b"not a profile")
    assert pprof_top(bogus) is None
