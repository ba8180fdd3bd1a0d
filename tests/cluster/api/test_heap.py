"""``webhook.cluster.api.heap``: the garbage collector around the caches' first sync (issue 35)."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pytest

from webhook.cluster.api import heap


@pytest.fixture
def fresh_heap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process that has not synced yet; the collector as it was afterwards."""
    monkeypatch.setattr(heap, "_HEAP", heap._Heap())
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_the_first_sync_runs_with_a_high_young_threshold_then_freezes_the_caches(
    fresh_heap: None, caplog: pytest.LogCaptureFixture
) -> None:
    before = gc.get_threshold()
    heap.begin_sync()
    assert gc.get_threshold() == (heap.SYNC_THRESHOLD0, *before[1:])
    heap.begin_sync()  # idempotent: the saved thresholds stay the original ones
    caches = [{"pod": number} for number in range(10_000)]  # what the lists keep
    with caplog.at_level(logging.INFO, logger="snapready.kube"):
        heap.end_sync()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() >= len(caches)  # the caches are out of every later scan
    assert any("objects frozen after the first sync" in r.message for r in caplog.records)


def test_end_sync_runs_once_and_a_later_begin_changes_nothing(fresh_heap: None) -> None:
    heap.begin_sync()
    heap.end_sync()
    frozen, thresholds = gc.get_freeze_count(), gc.get_threshold()
    heap.begin_sync()  # a relist later runs with the normal thresholds
    heap.end_sync()
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() == frozen
