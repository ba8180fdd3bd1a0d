"""Bytes stored under object prefixes of a bucket (``snapready status --sizes``).

``PrefixUsage`` of one prefix is the sum of the ``size`` of every live object whose name starts
with it (``objects.list`` with ``prefix``, every page, ``fields`` trimmed to names and sizes).
A prefix should end with ``/`` so that ``snap-1/`` does not also count ``snap-10/``; the
caller builds it (``cli.status.sizes.snapshot_prefix``). Soft-deleted and noncurrent object versions
are not listed, so a deleted snapshot still billed during the bucket's soft-delete window
(docs/gke-facts.md#section-9) is not counted.

The client comes from ``cluster.gcs.new_client`` (ADC, or anonymous against
``STORAGE_EMULATOR_HOST``); this module calls it but imports nothing of google itself. Every
request runs with ``timeout_seconds`` (never more than what is left of the deadline) and retries
off; past the deadline, prefixes not yet listed are answered "no answer ..." without a request.
Nothing raises: a failure is the ``error`` of the prefixes it concerns (a missing bucket, HTTP
403 without ``storage.objects.list``, an unreachable endpoint, no credentials), in words from
``cluster.gcs.describe``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from webhook.base.sections import StorageSettings
from webhook.cluster.gcs import describe, emulator_endpoint, new_client

PAGE_SIZE = 1000
"""Objects per ``objects.list`` page (GCS's maximum; a snapshot is a handful of files)."""
FIELDS = "items(name,size),nextPageToken"


@dataclass(frozen=True)
class PrefixUsage:
    """What is stored under one prefix.

    Attributes:
        bucket, prefix: where it was listed (``prefix`` as sent, e.g. ``snaps/llm/snap-1/``).
        bytes: the sum of the objects' ``size`` in bytes; None when unknown (``error``).
        objects: how many objects were counted (0 when unknown).
        error: why the size is unknown, one line (None when listed completely).
    """

    bucket: str
    prefix: str
    bytes: int | None
    objects: int = 0
    error: str | None = None


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    return int(code) if isinstance(code, int) else None


class UsageReader:
    """Lists prefixes of buckets through one GCS client, within one overall deadline.

    Args:
        settings: ``settings.storage`` (``project``; ``sizes_timeout_seconds``: the deadline for
            all listings of this reader together, and the cap of one request).
        emulator_host: GCS endpoint of an emulator; default ``$STORAGE_EMULATOR_HOST``.
        clock: monotonic seconds (the deadline starts at the first ``usage`` call).
        client_factory: builds the client (default ``cluster.gcs.new_client``).
    """

    def __init__(
        self,
        settings: StorageSettings,
        *,
        emulator_host: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        client_factory: Callable[[StorageSettings, str], Any] = new_client,
    ) -> None:
        self.settings = settings
        self.emulator_host = emulator_endpoint(emulator_host)
        self._clock = clock
        self._factory = client_factory
        self._client: Any = None
        self._client_error: str | None = None
        self._deadline: float | None = None
        self._missing: dict[str, str] = {}  # bucket -> error, so one 404 answers every prefix

    def usage(self, bucket: str, prefixes: Iterable[str]) -> dict[str, PrefixUsage]:
        """``{prefix: PrefixUsage}`` for every prefix of ``bucket`` (listed one by one, in
        order, until the deadline). Never raises."""
        timeout = self.settings.sizes_timeout_seconds
        if self._deadline is None:
            self._deadline = self._clock() + timeout
        found: dict[str, PrefixUsage] = {}
        for prefix in prefixes:
            found[prefix] = self._one(bucket, prefix, timeout)
        return found

    def _one(self, bucket: str, prefix: str, timeout: float) -> PrefixUsage:
        client = self._get_client()
        error = self._client_error or self._missing.get(bucket)
        if client is None or error is not None:
            return PrefixUsage(bucket, prefix, None, error=error or "no GCS client")
        total = objects = 0
        token: str | None = None
        while True:
            assert self._deadline is not None
            left = self._deadline - self._clock()
            if left <= 0:
                return PrefixUsage(bucket, prefix, None, error=f"no answer within {timeout:g}s")
            try:
                page = self._page(client, bucket, prefix, token, min(timeout, left))
            except Exception as exc:  # any failure: this size is unknown, said in words
                if _status(exc) == 404:
                    self._missing[bucket] = f"bucket {bucket} not found"
                    return PrefixUsage(bucket, prefix, None, error=self._missing[bucket])
                return PrefixUsage(bucket, prefix, None, error=describe(exc))
            items, token = page
            objects += len(items)
            total += sum(int(size) for size in items)
            if not token:
                return PrefixUsage(bucket, prefix, total, objects)

    def _page(
        self, client: Any, bucket: str, prefix: str, token: str | None, timeout: float
    ) -> tuple[list[int], str | None]:
        """One ``objects.list`` page: the objects' sizes and the next page token."""
        iterator = client.list_blobs(
            bucket,
            prefix=prefix,
            page_token=token,
            page_size=PAGE_SIZE,
            max_results=None,
            fields=FIELDS,
            timeout=timeout,
            retry=None,
        )
        page = next(iterator.pages, None)
        sizes = [int(blob.size or 0) for blob in page] if page is not None else []
        return sizes, iterator.next_page_token

    def _get_client(self) -> Any:
        if self._client is None and self._client_error is None:
            try:
                self._client = self._factory(self.settings, self.emulator_host)
            except Exception as exc:  # no credentials: every size is unknown, once
                self._client_error = describe(exc)
        return self._client
