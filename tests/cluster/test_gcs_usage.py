"""``webhook.cluster.gcs_usage.UsageReader`` against the real GCS emulator (fake-gcs-server).

Objects of known sizes are uploaded through the emulator's JSON API (plain HTTP, not the code
under test); the reader lists them through google-cloud-storage. Sizes expected are the bytes
uploaded, summed here by the test.
"""

from __future__ import annotations

import secrets

import pytest

from tests.support.gcs_emulator import FakeGcs, create_bucket, serving_recorded, upload_object
from tests.support.ports import free_port
from webhook.base.sections import StorageSettings
from webhook.cluster import gcs_usage
from webhook.cluster.gcs_usage import UsageReader


class StuckClock:
    """Monotonic seconds that jump past any deadline after ``calls`` reads."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def __call__(self) -> float:
        self.calls -= 1
        return 0.0 if self.calls >= 0 else 1e9


def fresh_bucket(server: FakeGcs, objects: dict[str, int]) -> str:
    """A new bucket holding ``objects`` ({name: size in bytes}, random content)."""
    bucket = f"usage-{secrets.token_hex(4)}"
    create_bucket(server, bucket)
    for name, size in objects.items():
        upload_object(server, bucket, name, secrets.token_bytes(size))
    return bucket


def test_sums_only_the_objects_under_each_prefix(fake_gcs: FakeGcs) -> None:
    objects = {
        "snaps/ns/snap-1/checkpoint.img": 1500,
        "snaps/ns/snap-1/pages.img": 40_000,
        "snaps/ns/snap-1/pages_meta.img": 321,
        "snaps/ns/snap-10/pages.img": 9999,  # shares the text "snap-1" but not the folder
        "snaps/ns/snap-1.bak": 77,
        "snaps/other/snap-1/pages.img": 5,
    }
    bucket = fresh_bucket(fake_gcs, objects)
    reader = UsageReader(StorageSettings(), emulator_host=fake_gcs.url)
    found = reader.usage(bucket, ["snaps/ns/snap-1/", "snaps/ns/snap-10/", "snaps/ns/nope/"])
    one, ten, nope = (found[p] for p in ("snaps/ns/snap-1/", "snaps/ns/snap-10/", "snaps/ns/nope/"))
    assert (one.bytes, one.objects, one.error) == (1500 + 40_000 + 321, 3, None)
    assert (ten.bytes, ten.objects) == (9999, 1)
    assert (nope.bytes, nope.objects, nope.error) == (0, 0, None)


def test_follows_every_page(fake_gcs: FakeGcs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcs_usage, "PAGE_SIZE", 2)
    sizes = [10, 200, 3000, 40_000, 5]
    bucket = fresh_bucket(fake_gcs, {f"p/s/part-{i}": size for i, size in enumerate(sizes)})
    usage = UsageReader(StorageSettings(), emulator_host=fake_gcs.url).usage(bucket, ["p/s/"])
    assert (usage["p/s/"].bytes, usage["p/s/"].objects) == (sum(sizes), len(sizes))


def test_a_missing_bucket_is_an_error_not_zero(fake_gcs: FakeGcs) -> None:
    reader = UsageReader(StorageSettings(), emulator_host=fake_gcs.url)
    found = reader.usage("no-such-bucket-x1", ["a/", "b/"])
    assert {p: (u.bytes, u.error) for p, u in found.items()} == {
        "a/": (None, "bucket no-such-bucket-x1 not found"),
        "b/": (None, "bucket no-such-bucket-x1 not found"),
    }


def test_an_unreachable_endpoint_is_an_error() -> None:
    reader = UsageReader(
        StorageSettings(sizes_timeout_seconds=5), emulator_host=f"127.0.0.1:{free_port()}"
    )
    (usage,) = reader.usage("bucket", ["a/"]).values()
    assert usage.bytes is None
    assert usage.error is not None and "ConnectionError" in usage.error


def test_a_403_is_an_error_in_words() -> None:
    body = {"error": {"code": 403, "message": "caller lacks storage.objects.list", "errors": []}}
    with serving_recorded({"/storage/v1/b/locked/o": (403, body)}) as gcs:
        reader = UsageReader(StorageSettings(), emulator_host=gcs.url)
        (usage,) = reader.usage("locked", ["a/"]).values()
    assert (usage.bytes, usage.error) == (None, "HTTP 403: caller lacks storage.objects.list")


def test_past_the_deadline_nothing_more_is_listed(fake_gcs: FakeGcs) -> None:
    bucket = fresh_bucket(fake_gcs, {"a/x": 4, "b/x": 8})
    reader = UsageReader(
        StorageSettings(sizes_timeout_seconds=3), emulator_host=fake_gcs.url, clock=StuckClock(2)
    )
    found = reader.usage(bucket, ["a/", "b/"])
    assert (found["a/"].bytes, found["a/"].error) == (4, None)
    assert (found["b/"].bytes, found["b/"].error) == (None, "no answer within 3s")


def test_no_credentials_makes_every_size_unknown() -> None:
    def refuse(settings: StorageSettings, host: str) -> object:
        raise RuntimeError("no credentials here")

    reader = UsageReader(StorageSettings(), client_factory=refuse, emulator_host="")
    found = reader.usage("b", ["a/", "c/"])
    assert [u.error for u in found.values()] == ["RuntimeError: no credentials here"] * 2
    assert [u.bytes for u in found.values()] == [None, None]
