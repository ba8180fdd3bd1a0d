"""``webhook.pod.fields.differing_fields``: every path whose digest differs or that one side
lacks, in natural order (``spec.containers[2]`` before ``spec.containers[10]``)."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st

from webhook.pod.fields import differing_fields

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
