"""``webhook.base.lru.Lru``: the bounded memo under the fingerprint, digest and selection memos."""

from __future__ import annotations

import threading

from webhook.base.lru import Lru


def test_the_least_recently_used_entry_goes_first() -> None:
    memo: Lru[str, int] = Lru(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # read: "b" is now the least recently used
    memo.put("c", 3)
    assert "b" not in memo and "a" in memo and "c" in memo
    memo.put("a", 10)  # written again: most recent, new value
    memo.put("d", 4)
    assert (memo.get("a"), memo.get("c"), memo.get("d")) == (10, None, 4)
    assert len(memo) == 2


def test_clear_and_a_missing_key() -> None:
    memo: Lru[str, int] = Lru(4)
    assert memo.get("x") is None and not memo
    memo.put("x", 0)  # a falsy value is still remembered
    assert memo.get("x") == 0 and memo
    memo.clear()
    assert memo.get("x") is None and len(memo) == 0


def test_threads_never_exceed_the_bound() -> None:
    memo: Lru[int, int] = Lru(64)

    def fill(offset: int) -> None:
        for number in range(5000):
            memo.put(offset + number, number)
            memo.get(offset + number // 2)

    workers = [threading.Thread(target=fill, args=(k * 10_000,)) for k in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(memo) == 64
