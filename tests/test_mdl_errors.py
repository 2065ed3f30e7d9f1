"""Bad MDL text: one FormatError naming the line, column and block; never another exception."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from renderer.errors import FormatError
from renderer.formats.mdl import read_mdl, write_mdl
from renderer.formats.mdl.tokens import _TOKEN
from renderer.formats.mdx import write_mdx

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"

BASE = """Version {
	FormatVersion 800,
}
Model "base" {
	BlendTime 150,
	MinimumExtent { -10, -10, 0 },
}
Sequences 1 {
	Anim "Stand" {
		Interval { 0, 1000 },
	}
}
Textures 1 {
	Bitmap {
		Image "Textures\\Stone.blp",
	}
}
Materials 1 {
	Material {
		Layer {
			FilterMode Blend,
			static TextureID 0,
			Alpha 2 {
				Linear,
				0: 1,
				1000: 0,
			}
		}
	}
}
Geoset {
	Vertices 3 {
		{ -10, -10, 0 },
		{ 10, -10, 0 },
		{ 0, 10, 0 },
	}
	Normals 3 {
		{ 0, 0, 1 },
		{ 0, 0, 1 },
		{ 0, 0, 1 },
	}
	TVertices 3 {
		{ 0, 1 },
		{ 1, 1 },
		{ 0.5, 0 },
	}
	VertexGroup {
		0,
		0,
		0,
	}
	Faces 1 3 {
		Triangles {
			{ 0, 1, 2 },
		}
	}
	Groups 1 1 {
		Matrices { 0 },
	}
	MaterialID 0,
}
Bone "Root" {
	ObjectId 0,
	Translation 2 {
		Hermite,
		0: { 0, 0, 0 },
			InTan { 0, 0, 0 },
			OutTan { 0, 0, 0 },
		1000: { 0, 0, 5 },
			InTan { 0, 0, 0 },
			OutTan { 0, 0, 0 },
	}
}
PivotPoints 1 {
	{ 0, 0, 0 },
}
"""


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_the_base_text_is_valid():
    m = read_mdl(BASE, "base.mdl")
    assert len(m.geosets[0].vertices) == 3 and m.diagnostics == []


CASES = [
    # (what, old, new, problem, line of the error)
    ("too few vertices", "Vertices 3 {", "Vertices 4 {", "Vertices declares 4 entries but the block ends after 3", 36),
    ("too many vertices", "Vertices 3 {", "Vertices 2 {", "Vertices declares 2 entries but holds more", 35),
    ("vertex with two numbers", "{ 10, -10, 0 }", "{ 10, -10 }", "entry 1 of Vertices has 2 numbers, expected 3", 34),
    ("unterminated string", '"Textures\\Stone.blp"', '"Textures\\Stone.blp', "found an unterminated string", 15),
    ("unterminated block", "PivotPoints 1 {\n\t{ 0, 0, 0 },\n}\n", "PivotPoints 1 {\n\t{ 0, 0, 0 },\n",
     "expected '}' to close PivotPoints, found the end of the text", 76),
    ("unknown top-level block", "Bone \"Root\"", "Bode \"Root\"", "'Bode' is not a top-level MDL block", 62),
    ("unknown property", "BlendTime 150", "BlendTme 150", "'BlendTme' is not a property of Model", 5),
    ("number where a string belongs", 'Image "Textures\\Stone.blp"', "Image 12", "expected a quoted string for Image",
     15),
    ("string where a number belongs", "BlendTime 150", 'BlendTime "150"', "expected the value of BlendTime", 5),
    ("word in a vector", "{ -10, -10, 0 },\n}", "{ -10, ten, 0 },\n}", "expected a number in the MinimumExtent", 6),
    ("bad filter mode", "FilterMode Blend", "FilterMode Blended", "expected a filter mode", 21),
    ("missing interpolation", "\t\t\t\tLinear,\n", "", "expected DontInterp, Linear, Hermite or Bezier, found '0'", 24),
    ("missing OutTan", "\t\t\tOutTan { 0, 0, 0 },\n\t\t1000", "\t\t1000", "OutTan", 68),
    ("face index past u16", "{ 0, 1, 2 },", "{ 0, 1, 70000 },", "Triangles indices holds 70000, outside 0..65535", 54),
    ("faces count", "Faces 1 3", "Faces 1 4", "Faces declares 4 indices but holds 3", 52),
    ("groups count", "Groups 1 1", "Groups 2 1", "Groups declares 2 matrix groups but holds 1", 57),
    ("matrix group past u8", "VertexGroup {\n\t\t0,", "VertexGroup {\n\t\t256,", "VertexGroup holds 256", 48),
    ("stray character", "BlendTime 150,", "BlendTime 150; ", "found ';'", 5),
    ("unterminated comment", "BlendTime 150,", "BlendTime 150, /* no end", "unterminated /* comment", 5),
    ("negative key count", "Alpha 2 {", "Alpha -2 {", "the key count of Alpha is -2, outside 0..", 23),
    ("name too long", 'Bone "Root"', 'Bone "' + "R" * 80 + '"', "bone name is 80 bytes long", 62),
    ("wrong shape vertices", "PivotPoints 1 {", "CollisionShape \"c\" { ObjectId 1, Sphere, Vertices 2 { { 0, 0, 0 }, "
     "{ 1, 1, 1 }, } }\nPivotPoints 1 {", "needs 1 vertices, not 2", 74),
    ("static track-only property", "Translation 2 {", "static Translation 2 {", "Translation has no static form", 64),
    ("texture index", "static TextureID 0", "static TextureID 3", "texture id 3 names a texture past the 1", 18),
    ("missing node", "Matrices { 0 }", "Matrices { 4 }", "Groups names node 4", 31),
]


@pytest.mark.parametrize("what, old, new, problem, line", CASES, ids=[c[0] for c in CASES])
def test_bad_text_raises_format_error_with_line_and_column(what, old, new, problem, line):
    assert old in BASE
    text = BASE.replace(old, new, 1)
    with pytest.raises(FormatError) as info:
        read_mdl(text, "bad.mdl")
    e = info.value
    assert problem in e.problem
    assert e.path == "bad.mdl" and e.offset is not None and 0 <= e.offset <= len(text)
    m = re.match(r"(?:end of text \()?line (\d+), column (\d+)", e.where)
    assert m, e.where
    assert int(m.group(1)) == line, str(e)
    # The offset is the character offset of that line and column.
    ln, col = int(m.group(1)), int(m.group(2))
    assert text.count("\n", 0, e.offset) + 1 == ln and e.offset - (text.rfind("\n", 0, e.offset) + 1) + 1 == col


def test_where_names_the_enclosing_blocks():
    with pytest.raises(FormatError) as info:
        read_mdl(BASE.replace("{ 10, -10, 0 }", "{ 10, x, 0 }"), "bad.mdl")
    assert info.value.where == "line 34, column 9 (in Geoset 0, Vertices)"
    with pytest.raises(FormatError) as info:
        read_mdl(BASE.replace("1000: 0,", "1000: zero,"))
    assert "(in Materials, Material 0, Layer 0, Alpha)" in info.value.where


def test_index_problems_become_diagnostics_without_index_checks():
    m = read_mdl(BASE.replace("{ 0, 1, 2 },", "{ 0, 1, 7 },"), check_indices=False)
    assert any("face index 2 is vertex 7" in d.message for d in m.diagnostics)


def test_empty_and_whitespace_text():
    m = read_mdl("")
    assert m.version == 800 and any("no Version" in d.message for d in m.diagnostics)
    with pytest.raises(FormatError, match="expected a top-level block"):
        read_mdl("{ }")


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(FormatError):
        read_mdl("Model \"m\" " + "{ " * 50_000)


# -- fuzz -------------------------------------------------------------------------------------------
def _bases() -> list[str]:
    out = [BASE]
    for rel in ("stijnherfst__HiveWE/tests/fixtures/mdl/minimal_v800.mdl",
                "stijnherfst__HiveWE/tests/fixtures/mdl/minimal_v1100.mdl"):
        p = CORPUS / rel
        if p.exists():
            out.append(p.read_text())
    return out


BASES = _bases()
SPANS = [[m.span(1) for m in _TOKEN.finditer(t) if m.group(1)] for t in BASES]
JUNK = ["{", "}", '"', '""', "<=", "0", "-1", "3", "65536", "4294967296", "1e39", "nan", "-0", "2.5", "static",
        "Linear", "Hermite", "InTan", "Flags", "Triangles", "Matrices", "Bone", "Geoset", "/*", "//", "@",
        '"x"', "Multiple", "None", "Vertices", "TextureID", "GlobalSeqId", "ObjectId"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_mdl_only_raises_format_error(data):
    k = data.draw(st.integers(0, len(BASES) - 1))
    text, spans = BASES[k], SPANS[k]
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(spans) - 1))
        a, b = spans[i]
        op = data.draw(st.sampled_from(["delete", "duplicate", "replace", "swap"]))
        if op == "delete":
            text = text[:a] + " " + text[b:]
        elif op == "duplicate":
            text = text[:b] + " " + text[a:b] + text[b:]
        elif op == "replace":
            text = text[:a] + data.draw(st.sampled_from(JUNK)) + text[b:]
        else:
            c, d = spans[data.draw(st.integers(0, len(spans) - 1))]
            text = text[:a] + text[c:d] + text[b:]
        spans = [m.span(1) for m in _TOKEN.finditer(text) if m.group(1)] or [(0, 0)]
    for check in (True, False):
        try:
            m = read_mdl(text, "fuzz.mdl", check_indices=check)
        except FormatError as e:
            assert not e.problem.startswith("internal error"), e
            assert e.offset is not None and "line " in e.where
            continue
        # Whatever loads can be written back, as MDL and as MDX.
        assert read_mdl(write_mdl(m), check_indices=False) == m
        write_mdx(m)
