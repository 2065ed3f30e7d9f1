"""The layers hold: the import graph of farm/ and renderer/, read from the source, has no cycle,
renderer never imports farm, renderer.gl imports nothing else of ours, and an import inside a
function, in farm/ or renderer/, says why (a comment on its line or above its run of imports) and
exists only to keep GL, Celery or another heavy library out of a process that must not load it.

Every import counts, at module level or inside a function: a lazy import that closes a cycle is a
cycle all the same. So does a name registered as a "module:attribute" string (renderer.formats.READERS,
farm.run.execute.BATCH_KINDS, farm.run.dispatch.RUNNERS): importlib imports it when it is used, so
each such string naming a module of ours is an edge too (the loop dispatch -> the Celery runner ->
the tasks -> the nightly -> jobs -> dispatch hid in one).
"""

from __future__ import annotations

import ast
import re
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


# String edges that close a loop on purpose, each with why. A batch kind is a plug-in of the batch
# skeleton: it subclasses farm.run.execute.BatchKind, and the skeleton looks it up by the name a
# batch carries. (To remove it: the skeleton's types below execute.py, or the lookup in the runners.)
PLUGIN_EDGES = {("farm.run.execute", "farm.thumbs.work"): "a batch kind (BATCH_KINDS) subclasses BatchKind"}
REGISTERED = re.compile(r"((?:farm|renderer)(?:\.\w+)*):\w+")  # "farm.run.local:run_local"


def _visit(node, in_func: bool, mod: str, is_pkg: bool, modules: dict, edges: list) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            m = REGISTERED.fullmatch(child.value)
            if m and m.group(1) in modules and m.group(1) != mod and (mod, m.group(1)) not in PLUGIN_EDGES:
                # a string registry: importlib imports it when it is used
                edges.append((m.group(1), child.lineno, False))
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


def test_string_registries_are_edges_and_would_show_the_runner_loop():
    """The runners, batch kinds and readers registered as strings are edges; the Celery runner sends
    tasks by name, so it imports neither the tasks nor the nightly: were it to import the tasks
    again (as farm.celery.client did), the loop would be found only through the string edge."""
    graph = imports(_modules())
    assert {"farm.run.celery", "farm.run.local"} <= {t for t, _, _ in graph["farm.run.dispatch"]}
    assert all(t not in {e for e, _, _ in graph[m]} for m, t in PLUGIN_EDGES)  # the one exception, named
    assert "renderer.formats.mdx" in {t for t, _, _ in graph["renderer.formats"]}
    assert not {t for t, _, _ in graph["farm.run.celery"]} & {"farm.celery.tasks", "farm.flows.nightly"}
    old = {m: [*e, *([("farm.celery.tasks", 0, False)] if m == "farm.run.celery" else [])] for m, e in graph.items()}
    cycle = find_cycle(old)
    assert cycle and {"farm.run.dispatch", "farm.run.celery", "farm.flows.nightly"} <= set(cycle)
    strings = [m for m, e in graph.items() for t, line, _ in e if line and _is_string_edge(m, line)]
    assert strings and find_cycle({m: [(t, line, f) for t, line, f in e if not _is_string_edge(m, line)]
                                   for m, e in old.items()}) is None  # without them it stays hidden


def _is_string_edge(mod: str, line: int) -> bool:
    path = _modules()[mod]
    return bool(line) and bool(REGISTERED.search(path.read_text("utf-8").splitlines()[line - 1]))


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


def test_the_celery_runner_loads_neither_the_nightly_nor_the_report():
    """Issue 35: importing the Celery client loaded the nightly, the pipeline and the HTML report."""
    import subprocess
    import sys

    code = ("import sys, farm.run.celery, farm.run.dispatch\n"
            "print(sorted(m for m in ('farm.flows.nightly', 'farm.flows.pipeline', 'farm.report.html',"
            " 'farm.celery.tasks') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout, out.stderr)
