"""Bucket facts from Google Cloud Storage (edge: the only importer of ``google.cloud.storage``).

``BucketInspector`` answers ``BucketFacts`` for one bucket name within a hard deadline:
- credentials: Application Default Credentials (Workload Identity in a cluster); with
  ``STORAGE_EMULATOR_HOST`` set, anonymous credentials against that endpoint, as
  google-cloud-storage itself does for emulators;
- two read-only calls (buckets.get, buckets.getIamPolicy), each with ``timeout_seconds`` and
  retries off, run in a daemon worker thread; the caller waits at most ``timeout_seconds`` in
  total, then gets "unreachable" facts (the thread finishes later and fills the cache);
- results are cached per bucket for ``cache_ttl_seconds`` (failures for
  ``failure_cache_ttl_seconds``), and concurrent lookups of one bucket share one call.

Trade-off: the admission handler is synchronous code called from the async app, so a cache miss
holds the event loop for up to ``timeout_seconds``. Only PodSnapshotStorageConfig admissions do
GCS I/O (rare, cluster-admin operations), the deadline bounds the stall, and the cache makes
repeats free; pod admissions never reach this module.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from webhook.base.sections import StorageSettings
from webhook.governance.storage import BucketFacts

log = logging.getLogger("snapready.gcs")

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
READ_ONLY_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
PUBLIC_MEMBERS = frozenset({"allUsers", "allAuthenticatedUsers"})
_REQUEST_PREFIX = re.compile(r"^[A-Z]+ \S+: ")
MAX_IN_FLIGHT = 8
"""Distinct buckets looked up at once; more answer "busy" (bounds threads stuck on a dead GCS)."""
MAX_CACHED = 1024
"""Cached buckets; the oldest entry is dropped beyond this (storage configs are few)."""


class BucketInspector:
    """Callable ``BucketLookup``: ``inspector("my-bucket") -> BucketFacts``; never raises.

    Args:
        settings: ``settings.storage`` (timeout, cache TTLs, project).
        emulator_host: GCS endpoint of an emulator, e.g. ``http://127.0.0.1:4443``; default: the
            ``STORAGE_EMULATOR_HOST`` environment variable read once, here.
        clock: monotonic seconds (tests pass a fake one to expire the cache).
    """

    def __init__(
        self,
        settings: StorageSettings,
        *,
        emulator_host: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emulator_host = emulator_endpoint(emulator_host)
        self.settings = settings
        self._clock = clock
        self._lock = threading.RLock()
        self._cache: dict[str, tuple[float, BucketFacts]] = {}
        self._in_flight: dict[str, Future[BucketFacts]] = {}
        self._client: Any = None
        self._client_lock = threading.Lock()

    def __call__(self, bucket: str) -> BucketFacts:
        """Facts for ``bucket``: cached, or fetched within ``settings.timeout_seconds``."""
        with self._lock:
            cached = self._cache.get(bucket)
            if cached is not None and cached[0] > self._clock():
                return cached[1]
            future = self._in_flight.get(bucket)
            if future is None:
                if len(self._in_flight) >= MAX_IN_FLIGHT:
                    return BucketFacts(bucket, error="too many GCS lookups in flight")
                future = self._start(bucket)
        timeout = self.settings.timeout_seconds
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            with self._lock:
                if future.done():  # finished between the deadline and the lock
                    return future.result()
                facts = BucketFacts(bucket, error=f"no answer from GCS within {timeout:g}s")
                self._remember(facts)  # the late answer replaces it when it arrives
            return facts

    def _start(self, bucket: str) -> Future[BucketFacts]:
        future: Future[BucketFacts] = Future()
        self._in_flight[bucket] = future

        def run() -> None:
            try:
                facts = self._inspect(bucket)
            except Exception as exc:  # a bug here must not leave the bucket "in flight" forever
                log.exception("inspecting bucket %s failed", bucket)
                facts = BucketFacts(bucket, error=describe(exc))
            with self._lock:
                self._in_flight.pop(bucket, None)
                self._remember(facts)
                future.set_result(facts)

        # A daemon thread, not an executor: a call stuck past the deadline must not delay exit.
        threading.Thread(target=run, name=f"snapready-gcs-{bucket}", daemon=True).start()
        return future

    def _remember(self, facts: BucketFacts) -> None:
        failed = facts.exists is None
        ttl = self.settings.failure_cache_ttl_seconds if failed else self.settings.cache_ttl_seconds
        if ttl <= 0:
            return
        with self._lock:
            self._cache.pop(facts.name, None)
            if len(self._cache) >= MAX_CACHED:
                del self._cache[next(iter(self._cache))]
            self._cache[facts.name] = (self._clock() + ttl, facts)

    def _inspect(self, bucket: str) -> BucketFacts:
        """One bucket, read-only: metadata, then the IAM policy. Never raises."""
        timeout = self.settings.timeout_seconds
        try:
            found = self._get_client().get_bucket(bucket, timeout=timeout, retry=None)
        except Exception as exc:  # any failure means "cannot verify", said in the finding
            if _status(exc) == 404:
                return BucketFacts(bucket, exists=False)
            log.info("GCS lookup of bucket %s failed: %s", bucket, describe(exc))
            return BucketFacts(bucket, error=describe(exc))
        facts = facts_from_bucket(bucket, found)
        try:
            policy = found.get_iam_policy(requested_policy_version=3, timeout=timeout, retry=None)
        except Exception as exc:
            return replace(facts, iam_error=describe(exc))
        return replace(
            facts,
            public_members=public_bindings(policy.bindings),
            agent_roles=service_agent_roles(policy.bindings),
        )

    def _get_client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = self._new_client()
            return self._client

    def _new_client(self) -> Any:
        return new_client(self.settings, self.emulator_host)


def emulator_endpoint(emulator_host: str | None = None) -> str:
    """The emulator endpoint with a scheme (``""``: real GCS); default ``$STORAGE_EMULATOR_HOST``.

    The Go client accepts ``host:port``; google-cloud-storage needs the scheme.
    """
    host = emulator_host if emulator_host is not None else os.environ.get(EMULATOR_ENV, "")
    return host if not host or "://" in host else f"http://{host}"


def new_client(settings: StorageSettings, emulator_host: str = "") -> Any:
    """A ``google.cloud.storage.Client``, read-only scope: anonymous credentials against
    ``emulator_host`` when set, else Application Default Credentials (project:
    ``settings.project``, else the ADC project).

    Raises:
        google.auth.exceptions.DefaultCredentialsError: no ADC (``describe`` words it).
    """
    # Imported here: keeps CLI and server start-up light; only storage configs need it.
    from google.cloud import storage  # noqa: PLC0415

    project = settings.project
    if emulator_host:
        from google.auth.credentials import AnonymousCredentials  # noqa: PLC0415

        options = {"api_endpoint": emulator_host}
        return storage.Client(
            project=project,
            credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            client_options=options,
        )
    import google.auth  # noqa: PLC0415

    credentials, adc_project = google.auth.default(scopes=[READ_ONLY_SCOPE])
    return storage.Client(project=project or adc_project, credentials=credentials)


def facts_from_bucket(name: str, bucket: Any) -> BucketFacts:
    """``BucketFacts`` from a loaded ``google.cloud.storage.Bucket`` (IAM not included).

    Absent ``iamConfiguration`` reads as GCS's defaults (``inherited``, uniform access off);
    absent ``softDeletePolicy``/``hierarchicalNamespace`` stay None ("not reported").
    """
    iam = bucket.iam_configuration
    return BucketFacts(
        name,
        exists=True,
        location=bucket.location,
        data_locations=tuple(bucket.data_locations or ()),
        public_access_prevention=iam.public_access_prevention,
        uniform_access=bool(iam.uniform_bucket_level_access_enabled),
        soft_delete_seconds=bucket.soft_delete_policy.retention_duration_seconds,
        hierarchical_namespace=bucket.hierarchical_namespace_enabled,
    )


def public_bindings(bindings: Any) -> tuple[str, ...]:
    """``"role: member"`` for every binding member that is allUsers/allAuthenticatedUsers.

    Args:
        bindings: ``Policy.bindings``: ``[{"role": str, "members": set[str], ...}]``.
    """
    found = {
        f"{binding.get('role')}: {member}"
        for binding in bindings or ()
        for member in binding.get("members") or ()
        if member in PUBLIC_MEMBERS
    }
    return tuple(sorted(found))


SERVICE_AGENT = re.compile(
    r"serviceAccount:service-[0-9]+@container-engine-robot\.iam\.gserviceaccount\.com"
)
"""The GKE service agent of a project, as an IAM member (``service-<project number>@...``)."""


def service_agent_roles(bindings: Any) -> tuple[str, ...]:
    """Roles of the bindings naming a GKE service agent (sorted, unique;
    docs/gke-facts.md#section-9)."""
    found = {
        str(binding.get("role"))
        for binding in bindings or ()
        for member in binding.get("members") or ()
        if isinstance(member, str) and SERVICE_AGENT.fullmatch(member)
    }
    return tuple(sorted(found))


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    return int(code) if isinstance(code, int) else None


def describe(exc: BaseException) -> str:
    """A short, secret-free reason: ``HTTP 403: ...``, ``ConnectionError: ...`` (<= 120 chars,
    so that a warning carrying it stays within the API server's 256 characters)."""
    name = type(exc).__name__
    if name == "DefaultCredentialsError":
        return "no Application Default Credentials (give the webhook a Workload Identity)"
    status = _status(exc)
    if status is not None:
        # api_core messages start with "GET <url>: "; the reason after it is what helps.
        text = f"HTTP {status}: {_REQUEST_PREFIX.sub('', str(getattr(exc, 'message', exc)))}"
    else:
        url = getattr(getattr(exc, "request", None), "url", None)
        where = f"{urlsplit(url).netloc} " if isinstance(url, str) else ""
        text = f"{name}: {where}{'did not answer' if 'Timeout' in name else 'unreachable'}"
        if not where:
            text = f"{name}: {exc}"
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."
