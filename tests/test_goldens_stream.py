"""The golden index read and hashed a line at a time (a 100k-trace index is about 50 MB of text): the lines
`str.splitlines` gives, and the digest of the whole text."""

from __future__ import annotations

import hashlib
import random

from farm.goldens.index import GoldenIndex, _lines


def test_lines_are_splitlines():
    rng = random.Random(33)
    pieces = ["a", "b", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", ""]
    for _ in range(50_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert list(_lines(text)) == text.splitlines(), repr(text)


def test_digest_is_the_text_digest(tmp_path):
    index = GoldenIndex(tmp_path)
    for i in range(50):
        index.entries[(f"m{i}.mdx|Stand|{i}ms|auto|8x8|msaa0|team0|transparent", "*")] = {
            "trace": f"m{i}.mdx|Stand|{i}ms|auto|8x8|msaa0|team0|transparent", "env": "*",
            "approved": [{"digest": f"{i:064x}", "png": f"{i + 1:064x}", "size": [8, 8], "by": "x é y", "at": "t",
                          "run": "a", "gl": {"renderer": "r"}}], "rejected": []}
    text = index.text()
    assert index.digest() == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert text.count("\n") == 51 and GoldenIndex.parse(text) == index.entries
