"""``webhook.pod.fields.differing_fields``: every path whose digest differs or that one side
lacks, in natural order (``spec.containers[2]`` before ``spec.containers[10]``)."""

from __future__ import annotations

import hashlib
from types import MappingProxyType
from typing import Any

import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from webhook.pod.context import join_path
from webhook.pod.distill import Distilled
from webhook.pod.fields import differing_fields, digests_of

PATHS = st.sampled_from(
    [f"spec.containers[{i}].{f}" for i in (0, 1, 2, 10) for f in ("image", "args")]
    + ["spec.dnsPolicy", 'metadata.annotations["dev.gvisor.x"]']
)
DIGESTS = st.dictionaries(PATHS, st.sampled_from(["aaaaaaaaaaaa", "bbbbbbbbbbbb"]), max_size=10)


@given(ours=DIGESTS, theirs=DIGESTS)
def test_the_differing_paths_are_those_with_another_digest_or_on_one_side(
    ours: dict[str, str], theirs: dict[str, str]
) -> None:
    expected = {p for p in {*ours, *theirs} if ours.get(p) != theirs.get(p)}
    found = differing_fields(MappingProxyType(ours), theirs)
    assert set(found) == expected and len(found) == len(expected)


def test_natural_order() -> None:
    ours = {f"spec.containers[{i}].image": "a" for i in (10, 2, 1)}
    assert differing_fields(ours, {}) == [
        "spec.containers[1].image",
        "spec.containers[2].image",
        "spec.containers[10].image",
    ]


KEYS = st.one_of(
    st.sampled_from(["name", "image", "emptyDir", "hostPath", "", "a.b", "x/y", "nvidia.com/gpu"]),
    st.text(max_size=6),
    st.integers(-3, 3),  # YAML (``snapready check``) may give a volume a number as a key
)
ITEMS = st.lists(
    st.one_of(st.dictionaries(KEYS, st.text(max_size=4), max_size=4), st.text(max_size=3)),
    max_size=3,
)


@given(
    volumes=ITEMS,
    containers=ITEMS,
    extra=st.dictionaries(st.sampled_from(["a.b", "dnsPolicy"]), st.text(max_size=3)),
)
def test_every_digest_is_filed_under_join_paths_own_path(
    volumes: list[Any], containers: list[Any], extra: dict[str, str]
) -> None:
    """``digests_of`` builds the common paths itself (it runs for a new template's prediction
    miss); each must be exactly ``join_path``'s, odd keys included, or a record's paths would
    never match a pod's; each value's digest is SHA-256 of its RFC 8785 bytes (``rfc8785``)."""
    value = {"spec": {"volumes": volumes, "containers": containers, **extra}}
    expected: dict[str, Any] = {}
    for key in ("volumes", "containers"):
        for index, item in enumerate(value["spec"][key]):
            if isinstance(item, dict):
                for sub, sub_value in item.items():
                    expected[join_path("spec", key, index, sub)] = sub_value
            else:
                expected[join_path("spec", key, index)] = item
    for key, item in extra.items():
        expected[join_path("spec", key)] = item
    found = digests_of(Distilled(value, plain=False))
    assert found == {
        path: hashlib.sha256(rfc8785.dumps(item)).hexdigest()[:12]
        for path, item in expected.items()
    }
