"""timeless_key and model_and_rest parse a model, sequence and settings once for all its times (cached):
they answer what parse_key answers for every key, odd spellings and non-keys included."""

from __future__ import annotations

import pytest

from farm.plan.keys import TraceKeyError, _join, model_and_rest, parse_key, timeless_key

KEYS = ["models/a.mdx|Stand|0ms|auto|8x8|msaa0|team0|transparent",
        "models/a.mdx|*|50%|auto|8x8|msaa0|team0|transparent",
        "m%7Cx.mdx|St%25and|007ms|auto|8x8|msaa0|team0|transparent",  # escapes; a time spelled with zeros
        "m.mdx|-|-5ms|*|8x8|msaa0|team0|transparent",
        "m.mdx|Stand|12.5%|auto|16x8|msaa4|team3|#ff00ff",
        "bad|key", "m.mdx|Stand|50.0%|auto|8x8|msaa0|team0|transparent",
        "m.mdx|Stand|0ms|auto|8x8|msaa0|team0|transparent|nosuch=1",
        "m.mdx|Stand|zz|auto|8x8|msaa0|team0|transparent", "m.mdx|Stand|0ms|auto|8x8"]


@pytest.mark.parametrize("key", KEYS)
def test_cached_parts_are_parse_keys(key):
    try:
        k = parse_key(key)
    except TraceKeyError as e:
        with pytest.raises(TraceKeyError) as got:
            timeless_key(key)
        assert str(got.value) == str(e)  # the error names the key itself, not the cached parse's
        with pytest.raises(TraceKeyError):
            model_and_rest(key)
        return
    assert timeless_key(key) == _join(k.model, k.sequence, "*", k)
    assert model_and_rest(key) == (k.model, k.rest)
