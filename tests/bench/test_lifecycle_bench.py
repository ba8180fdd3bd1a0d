"""``bench.lifecycle``: its two scenarios are what its docstring says (so its figures time the
pass the docs describe), on a small state."""

from __future__ import annotations

from bench.lifecycle import pass_millis, synthetic_state


def test_in_use_decides_nothing_and_upgrade_prunes_and_refreshes() -> None:
    state = synthetic_state(2_000, 500, upgrade=False)
    assert (len(state.pods), len(state.snapshots.by_name)) == (2_000, 500)
    millis, worker = pass_millis(state, 2)
    assert len(millis) == 2 and all(m >= 0 for m in millis)
    assert (worker.prunable, worker.refreshes) == ({}, [])
    _, upgraded = pass_millis(synthetic_state(2_000, 500, upgrade=True), 1)
    # prunable now: the unused ones; the unrunnable ones wait for their grace (clocks started)
    assert {p.reason for p in upgraded.prunable.values()} == {"unused"}
    assert len(upgraded._since) == 50
    assert upgraded.refreshes and all(r.what == "version" for r in upgraded.refreshes)
