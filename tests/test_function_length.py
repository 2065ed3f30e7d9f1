"""No function in farm/ or renderer/ is over 80 lines (issue 25: one job per function; the team
guide's rule). Generated tables would be listed in GENERATED; functions still being split by work
in progress elsewhere are listed in PENDING, each of which must still be over the limit (so the
entry goes when the function is split)."""

from __future__ import annotations

import ast

from conftest import ROOT

MAX_LINES = 80
GENERATED: dict[str, str] = {}  # "path:function" -> the generator; none today
PENDING: dict[str, str] = {}  # "path:function" -> why it is not split yet; none today


def long_functions() -> dict[str, int]:
    found = {}
    for folder in ("farm", "renderer"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(f.read_text("utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_LINES:
                        found[f"{f.relative_to(ROOT)}:{node.name}"] = lines
    return found


def test_no_function_is_over_80_lines():
    found = long_functions()
    over = {k: v for k, v in found.items() if k not in GENERATED and k not in PENDING}
    assert over == {}, "functions over 80 lines (split them into named steps):\n" + "\n".join(
        f"  {k}: {v} lines" for k, v in sorted(over.items()))
    split = sorted(set(PENDING) - set(found))
    assert split == [], f"no longer over {MAX_LINES} lines: remove from PENDING: {split}"
