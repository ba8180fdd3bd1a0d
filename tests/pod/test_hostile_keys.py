"""A tenant's huge keys are answered, never kept (helper trial: 40 pods with one 2.9 MB
nodeSelector key left 221 MiB in ``join_path``'s cache, 128 pods of 1,000 ~2.9 KB
``dev.gvisor.*`` keys 395 MiB in the field-digest memo; the chart's limit is 256 MiB).

Admission sees a pod before the API server validates it, so a key may be megabytes long.
"""

from __future__ import annotations

from webhook.base.text import CACHED_KEY_CHARS, _cached_natural_key, natural_key
from webhook.pod import memo
from webhook.pod.context import CACHED_PATH_CHARS, _cached_join_path, join_path
from webhook.pod.fields import field_digests
from webhook.pod.memo import DIGESTS_MAX_PATH_CHARS, admitted_field_digests


def test_join_path_answers_a_huge_key_without_caching_it() -> None:
    _cached_join_path.cache_clear()
    key = "k" * (CACHED_PATH_CHARS + 1)
    assert join_path("spec", "nodeSelector", key) == f"spec.nodeSelector.{key}"
    assert join_path("x" * (CACHED_PATH_CHARS + 1), "a") == "x" * (CACHED_PATH_CHARS + 1) + ".a"
    assert _cached_join_path.cache_info().currsize == 0
    assert join_path("spec", "nodeSelector", "zone", 1) == "spec.nodeSelector.zone[1]"
    assert _cached_join_path.cache_info().currsize == 1  # short paths are still cached


def test_natural_key_answers_a_huge_text_without_caching_it() -> None:
    _cached_natural_key.cache_clear()
    text = "a1" * CACHED_KEY_CHARS
    assert natural_key(text)[:3] == ("a", 1, "a")
    assert _cached_natural_key.cache_info().currsize == 0
    assert natural_key("containers[2]") < natural_key("containers[10]")
    assert _cached_natural_key.cache_info().currsize == 2


def test_a_pod_of_huge_annotation_keys_has_its_digests_computed_not_kept() -> None:
    memo._digests.clear()
    key = "dev.gvisor." + "k" * DIGESTS_MAX_PATH_CHARS
    pod = {"metadata": {"annotations": {key: "v"}}, "spec": {"containers": [{"name": "a"}]}}
    digests = admitted_field_digests("v1:sha256:huge", pod)
    assert dict(digests) == field_digests(pod)
    assert not memo._digests
    small = {"metadata": {"annotations": {"dev.gvisor.a": "v"}}, "spec": pod["spec"]}
    admitted_field_digests("v1:sha256:small", small)
    assert "v1:sha256:small" in memo._digests
