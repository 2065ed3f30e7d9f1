"""The layers hold: the import graph of farm/ and renderer/, read from the source, has no cycle,
renderer never imports farm, renderer.gl imports nothing else of ours, and an import inside a
function, in farm/ or renderer/, says why (a comment on its line or above its run of imports) and
exists only to keep GL, Celery or another heavy library out of a process that must not load it.

Every import counts, at module level or inside a function: a lazy import that closes a cycle is a
cycle all the same. Names registered as "module:attribute" strings (renderer.formats.READERS,
farm.run.execute.BATCH_KINDS, farm.run.dispatch.RUNNERS) are not imports and are not edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("farm", "renderer")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, node.module] if node.module else base)


def _target(name: str, modules: dict) -> str | None:
    """The module of ours that importing `name` loads (the longest known prefix)."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in modules:
            return cand
        parts.pop()
    return None


def _visit(node, in_func: bool, mod: str, is_pkg: bool, modules: dict, edges: list) -> None:
    for child in ast.iter_child_nodes(node):
        inner = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        if isinstance(child, ast.Import):
            for a in child.names:
                t = _target(a.name, modules)
                if t and t != mod:
                    edges.append((t, child.lineno, in_func))
        elif isinstance(child, ast.ImportFrom):
            base = _resolve(mod, is_pkg, child)
            for a in child.names:
                t = _target(f"{base}.{a.name}", modules) or _target(base, modules)
                if t and t != mod:
                    edges.append((t, child.lineno, in_func))
        _visit(child, inner, mod, is_pkg, modules, edges)


def imports(modules: dict[str, Path]) -> dict[str, list[tuple[str, int, bool]]]:
    """module -> [(imported module of ours, line, inside a function)]."""
    graph: dict[str, list[tuple[str, int, bool]]] = {}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text("utf-8"), str(path))
        is_pkg = path.name == "__init__.py"
        edges = []

        _visit(tree, False, mod, is_pkg, modules, edges)
        # Importing a submodule runs its parent packages' __init__ first.
        for i in range(1, mod.count(".") + 1):
            parent = mod.rsplit(".", i)[0]
            if parent in modules and parent != mod:
                edges.append((parent, 0, False))
        graph[mod] = edges
    return graph


def find_cycle(graph: dict[str, list[tuple[str, int, bool]]]) -> list[str] | None:
    # A submodule's edge to its own parent packages is how Python loads it, not a dependency.
    adj = {m: sorted({t for t, _, _ in e if not m.startswith(t + ".")}) for m, e in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in adj.get(m, []):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = dfs(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(adj):
        if m not in state:
            found = dfs(m)
            if found:
                return found
    return None


def test_no_import_cycle():
    cycle = find_cycle(imports(_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_checker_finds_a_cycle():
    g = {"a": [("b", 1, False)], "b": [("c", 1, True)], "c": [("a", 1, False)], "d": [("a", 1, False)]}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert find_cycle({"a": [("b", 1, False)], "b": []}) is None


def test_layers():
    graph = imports(_modules())
    bad = [(m, t, line) for m, e in graph.items() if m.startswith("renderer") for t, line, _ in e
           if t.startswith("farm")]
    assert not bad, f"renderer imports farm: {bad}"
    bad = [(m, t, line) for m, e in graph.items() if m.startswith("renderer.gl") for t, line, _ in e
           if not t.startswith("renderer.gl") and not m.startswith(t + ".")]  # (a parent package's __init__)
    assert not bad, f"renderer.gl imports the rest of the renderer: {bad}"


def _says_why(lines: list[str], line: int) -> bool:
    """A comment on the import's line, or on the line above the run of imports it is part of."""
    if "#" in lines[line - 1]:
        return True
    i = line - 2
    while i >= 0 and (not lines[i].strip() or lines[i].lstrip().startswith(("from ", "import "))):
        if "#" in lines[i]:
            return True
        i -= 1
    return i >= 0 and lines[i].strip().startswith("#")


def test_imports_inside_functions_say_why():
    """In farm/ and in the renderer alike (issue 25): a lazy import of our own modules says why."""
    modules = _modules()
    missing = []
    for mod, edges in imports(modules).items():
        lines = modules[mod].read_text("utf-8").splitlines()
        for _, line, in_func in edges:
            if in_func and not _says_why(lines, line):
                missing.append(f"{modules[mod].relative_to(ROOT)}:{line}: {lines[line - 1].strip()}")
    assert not missing, "imports inside functions without a reason:\n" + "\n".join(sorted(set(missing)))


def test_a_frame_in_five_lines(tmp_path):
    """renderer/__init__'s example, as a user would run it, in a fresh process (no GL at import)."""
    import subprocess
    import sys

    from renderer.samples import write_samples

    write_samples(tmp_path)
    code = (
        "import sys\n"
        "import renderer\n"
        "assert not any(m.startswith('OpenGL') for m in sys.modules), 'importing renderer loaded GL'\n"
        "from renderer import FrameSpec, Renderer, load_model, read_png, write_png\n"
        "model = load_model('crate.mdx')\n"
        "with Renderer() as r:\n"
        "    frame = r.render(model, FrameSpec(sequence='Stand', time_ms=500, width=64, height=48))\n"
        "write_png('crate.png', frame.rgba, frame.trace)\n"
        "rgba, trace = read_png('crate.png')\n"
        "assert rgba.shape == (48, 64, 4) and rgba[..., 3].any() and trace['time_ms'] == 500\n"
        "print('ok', trace['sequence'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok Stand", out.stderr
