"""``bench.lifecycle``: its two scenarios are what its docstring says (so its figures time the
pass the docs describe), on a small state."""

from __future__ import annotations

from bench.lifecycle import pass_millis, synthetic_state


def test_in_use_decides_nothing_and_upgrade_prunes_and_refreshes() -> None:
    state = synthetic_state(2_000, 500, upgrade=False)
    assert (len(state.pods), len(state.snapshots.by_name)) == (2_000, 500)
    passes = pass_millis(state, 2)
    worker = passes.worker
    assert len(passes.later) == 2 and all(m >= 0 for m in (passes.first, *passes.later))
    assert (worker.prunable, worker.refreshes) == ({}, [])
    upgraded = pass_millis(synthetic_state(2_000, 500, upgrade=True), 1).worker
    # prunable now: the unused ones; the unrunnable ones wait for their grace (clocks started)
    assert {p.reason for p in upgraded.prunable.values()} == {"unused"}
    assert len(upgraded._since) == 50
    assert upgraded.refreshes and all(r.what == "version" for r in upgraded.refreshes)


def test_changes_touch_as_many_policies_before_each_pass() -> None:
    """The "changed" figures time passes that find that many policies changed: each policy's
    digest is computed once in the first pass, then once per changed policy."""
    state = synthetic_state(2_000, 500, upgrade=False)
    policies = len(state.snapshots.by_policy)
    passes = pass_millis(state, 3, changes=4)
    assert passes.worker.prune_digests.computed == policies + 3 * 4
    assert passes.worker.refresh_digests.computed == policies + 3 * 4
    assert pass_millis(state, 3).worker.prune_digests.computed == policies
