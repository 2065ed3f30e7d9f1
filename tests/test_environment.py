"""Every FARM_* default is written once, in farm.environment.FARM_VARIABLES (issue 25): the Celery
app, the local pool, the nightly run, the worker budgets and the job caps read theirs from it, and
no module restates one (`env_int(NAME, <number>)`, `env.get(NAME, <text>)`, `env.get(NAME) or <text>`)."""

from __future__ import annotations

import ast

from conftest import ROOT

from farm.environment import FARM_VARIABLES, INT_BOUNDS, default_int, env_int, env_str, variable_default


def _restated_defaults(tree: ast.AST, path: str) -> list[str]:
    """Calls that give a FARM_* variable a default of their own: a literal where the table's belongs."""
    found = []

    def farm_name(node) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("FARM_")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and farm_name(node.args[0]):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("env_int", "_int_env", "get", "getenv") and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value is not None:
                found.append(f"{path}:{node.lineno}: {name}({node.args[0].value!r}, {node.args[1].value!r})")
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2:
            left, right = node.values
            if isinstance(left, ast.Call) and left.args and farm_name(left.args[0]) \
                    and isinstance(right, ast.Constant) and right.value not in (None, ""):
                found.append(f"{path}:{node.lineno}: {left.args[0].value} or {right.value!r}")
    return found


def test_no_module_restates_a_farm_default():
    found = []
    for folder in ("farm", "renderer"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            found += _restated_defaults(ast.parse(f.read_text("utf-8")), str(f.relative_to(ROOT)))
    assert found == [], "FARM_* defaults written outside FARM_VARIABLES:\n" + "\n".join(found)


def test_the_readers_take_the_tables_defaults():
    from farm.celery.app import config_from_env
    from farm.environment import nightly_settings
    from farm.plan.batches import batch_frames, max_frames
    from farm.run.budget import Budgets

    conf = config_from_env({})
    assert conf["task_default_queue"] == variable_default("FARM_QUEUE") == "farm"
    assert conf["worker_max_tasks_per_child"] == default_int("FARM_MAX_TASKS_PER_CHILD") == 100
    assert conf["worker_max_memory_per_child"] == default_int("FARM_MAX_MEMORY_PER_CHILD")
    assert conf["farm_max_deliveries"] == default_int("FARM_MAX_DELIVERIES")
    assert conf["broker_transport_options"]["visibility_timeout"] == default_int("FARM_SOFT_TIME_LIMIT") + 120
    night = nightly_settings({"FARM_NIGHTLY_MANIFEST": "nightly.toml", "FARM_OUT": "/srv/out"})
    assert (night["hour"], night["minute"], night["queue"], night["time_limit"]) == (
        default_int("FARM_NIGHTLY_HOUR"), default_int("FARM_NIGHTLY_MINUTE"), variable_default("FARM_NIGHTLY_QUEUE"),
        default_int("FARM_NIGHTLY_TIME_LIMIT"))
    budgets = Budgets.from_env({})
    assert (budgets.frame_seconds, budgets.memory_mib) == (default_int("FARM_FRAME_TIME_LIMIT"),
                                                           default_int("FARM_MEMORY_LIMIT_MB"))
    assert (batch_frames({}), max_frames({})) == (default_int("FARM_BATCH_FRAMES"), default_int("FARM_MAX_FRAMES"))


def test_every_integer_variable_has_a_default_and_the_bounds_hold(monkeypatch):
    derived = {"FARM_TIME_LIMIT", "FARM_VISIBILITY_TIMEOUT"}  # soft + 60, hard + 60: passed by the app
    for name in INT_BOUNDS:
        if name not in derived:
            assert env_int(name, environ={}) == default_int(name)
    assert env_int("FARM_TIME_LIMIT", 660, {}) == 660
    assert env_str("FARM_RENDERER", {}) == "gl" and env_str("FARM_GL_BACKEND", {}) == "auto"
    assert env_str("FARM_RESULT_BACKEND", {}) is None  # "the broker URL": the caller's to apply
    assert env_str("FARM_QUEUE", {"FARM_QUEUE": "other"}) == "other"
    assert {n for n, _, _ in FARM_VARIABLES} >= set(INT_BOUNDS)


def test_no_module_but_farm_environment_reads_a_farm_variable():
    """Issue 35: FARM_* is read in farm/environment.py alone (env_int, env_str, env_given, ...)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    read = re.compile(r"""(?:\.get\(|getenv\(|environ\[)\s*["']FARM_\w+["'](?!\]\s*=[^=])""")
    found = [f"{p.relative_to(root)}:{n}" for p in sorted((root / "farm").rglob("*.py"))
             if p.name != "environment.py" or p.parent.name != "farm"
             for n, line in enumerate(p.read_text("utf-8").splitlines(), 1) if read.search(line)]
    assert not found, found
    assert read.search('os.environ.get("FARM_OUT")') and not read.search('env["FARM_OUT"] = x')


def test_the_renderers_variables_are_in_farm_help_with_the_renderers_defaults():
    from farm.environment import RENDERER_VARIABLES, variables_help
    from renderer.assets.cache import DEFAULT_MAX_BYTES
    from renderer.gl.calls import CHECK_ENV

    text = variables_help()
    assert {n for n, _, _ in RENDERER_VARIABLES} == {"DECODE_CACHE_MB", CHECK_ENV}
    assert all(f"  {n} " in text for n, _, _ in RENDERER_VARIABLES)
    assert dict((n, d) for n, _, d in RENDERER_VARIABLES)["DECODE_CACHE_MB"] == str(DEFAULT_MAX_BYTES // 2**20)
