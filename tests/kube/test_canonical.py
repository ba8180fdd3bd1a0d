"""``webhook.kube.canonical``: the orjson fast path writes exactly the bytes of
``rfc8785.dumps``."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from webhook.kube.canonical import canonical_json


@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_property_fast_path_is_byte_identical_to_rfc8785(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except ValueError:
        with pytest.raises(ValueError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected
