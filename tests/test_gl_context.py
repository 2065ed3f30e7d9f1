"""Offscreen GL contexts: real EGL (llvmpipe here), no mocks.

PyOpenGL binds its platform once per process, so this module sets PYOPENGL_PLATFORM=egl (when
nothing has imported OpenGL yet) and EGL_PLATFORM=surfaceless before anything GL is imported.
Whatever depends on a fresh process (import purity, auto pick with a clean environment, OSMesa,
LP_NUM_THREADS) runs in a subprocess.
"""

import os
import sys

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
if "OpenGL.platform" not in sys.modules:
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import ctypes.util  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from renderer.gl import context as glcontext  # noqa: E402
from renderer.gl.context import GLContextError, GLInfo, create_context, parse_driver_version  # noqa: E402
from renderer.gl.threads import gl_driver_loaded, llvmpipe_threads, set_llvmpipe_threads  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GL_LIBS = ("libEGL", "libGL.", "libGLX", "libOpenGL", "libGLdispatch", "libOSMesa", "libglfw", "_dri.so", "libgallium")


def run_python(code: str, env_set: dict | None = None, env_unset=(), timeout: float = 120) -> str:
    """Run `code` in a fresh interpreter at the repo root; return stdout (fail on non-zero exit)."""
    env = dict(os.environ)
    for key in env_unset:
        env.pop(key, None)
    env.update(env_set or {})
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def last_json(stdout: str):
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ctx():
    context = create_context("auto")
    yield context
    context.release()


# -- no GL at import time ----------------------------------------------------------------------


def test_importing_renderer_gl_loads_no_gl_library():
    out = run_python(
        f"""
        import importlib, json, sys
        import renderer.gl
        for name in ("context", "egl", "osmesa", "glfw_window", "framebuffer", "shaders", "threads"):
            importlib.import_module("renderer.gl." + name)
        with open("/proc/self/maps") as f:
            libs = sorted({{line.split()[-1] for line in f if "/" in line}})
        bad = [lib for lib in libs if any(m in lib for m in {GL_LIBS!r})]
        mods = sorted(m for m in sys.modules if m == "OpenGL" or m.startswith("OpenGL.") or m == "glfw")
        print(json.dumps({{"bad": bad, "modules": mods}}))
        """,
        env_unset=("PYOPENGL_PLATFORM",),
    )
    result = last_json(out)
    assert result == {"bad": [], "modules": []}


# -- pure helpers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "version, expected",
    [
        ("4.5 (Core Profile) Mesa 22.3.6", ("Mesa", "22.3.6")),
        ("4.6 (Core Profile) Mesa 23.2.0-devel (git-1234abcd)", ("Mesa", "23.2.0-devel")),
        ("3.3 (Core Profile) Mesa 25.1", ("Mesa", "25.1")),
        ("4.6.0 NVIDIA 535.104.05", ("NVIDIA", "535.104.05")),
        ("4.6.14761 Compatibility Profile Context 21.30.25.01", ("", "")),
        ("", ("", "")),
    ],
)
def test_parse_driver_version(version, expected):
    assert parse_driver_version(version) == expected


def test_cpu_vendor_reads_vendor_id(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n")
    assert glcontext.cpu_vendor(str(cpuinfo)) == "GenuineIntel"
    fallback = glcontext.cpu_vendor(str(tmp_path / "missing"))
    assert isinstance(fallback, str) and fallback


def test_glinfo_as_dict_has_stable_keys():
    info = GLInfo("egl", "surfaceless", "Mesa", "llvmpipe (LLVM 15.0.6, 256 bits)", "4.5 (Core Profile) Mesa 22.3.6",
                  "4.50", "Mesa", "22.3.6", "AuthenticAMD", 4)  # fmt: skip
    d = info.as_dict()
    assert tuple(d) == GLInfo.KEYS
    assert d["max_samples"] == 4 and d["driver_version"] == "22.3.6"
    assert info.is_software
    with pytest.raises(AttributeError):
        info.renderer = "x"  # frozen


def test_llvmpipe_threads():
    assert llvmpipe_threads(1, cores=16) == 16
    assert llvmpipe_threads(4, cores=16) == 4
    assert llvmpipe_threads(3, cores=16) == 5
    assert llvmpipe_threads(32, cores=16) == 1
    assert llvmpipe_threads(1) >= 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            llvmpipe_threads(bad, cores=4)


def test_set_llvmpipe_threads_into_a_mapping():
    env = {}
    assert set_llvmpipe_threads(3, environ=env) == 3
    assert env == {"LP_NUM_THREADS": "3"}
    with pytest.raises(ValueError):
        set_llvmpipe_threads(-1, environ=env)


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="unknown GL backend"):
        create_context("vulkan")


def test_auto_order_follows_pyopengl_platform(monkeypatch):
    monkeypatch.setattr(glcontext, "pyopengl_platform", lambda: ("osmesa", False))
    assert glcontext.auto_order() == ["osmesa", "egl", "glfw"]
    monkeypatch.setattr(glcontext, "pyopengl_platform", lambda: ("egl", True))
    assert glcontext.auto_order() == ["egl", "osmesa", "glfw"]
    monkeypatch.setattr(glcontext, "pyopengl_platform", lambda: (None, False))
    assert glcontext.auto_order() == ["egl", "osmesa", "glfw"]


# -- real contexts -------------------------------------------------------------------------------


@pytest.mark.gl
def test_context_info(ctx):
    info = ctx.info
    assert info.backend in ("egl", "osmesa")
    assert info.renderer and info.vendor and info.version and info.glsl_version
    assert info.max_samples >= 1
    assert info.cpu_vendor
    if info.driver == "Mesa":
        assert info.driver_version and info.driver_version in info.version
    if info.is_software:
        assert "llvmpipe" in info.renderer
    major, minor = (int(x) for x in info.version.split()[0].split(".")[:2])
    assert (major, minor) >= (3, 3)
    assert "Core Profile" in info.version or info.driver != "Mesa"
    assert set(info.as_dict()) == set(GLInfo.KEYS)


@pytest.mark.gl
def test_egl_context_on_this_machine(ctx):
    """This machine has no GPU: EGL must come up on llvmpipe via a surfaceless display."""
    from renderer.gl.egl import query_devices

    if ctx.info.backend != "egl":
        pytest.skip(f"module context is {ctx.info.backend} (PYOPENGL_PLATFORM set for the run)")
    gpus = [d for d in query_devices() if not d.is_software]
    if gpus:
        assert ctx.info.platform.startswith("device:")
    else:
        assert ctx.info.platform in ("surfaceless", "default-display")
        assert "llvmpipe" in ctx.info.renderer


@pytest.mark.gl
def test_second_context_release_and_make_current(ctx):
    other = create_context(ctx.info.backend)
    try:
        assert other.info.renderer == ctx.info.renderer
        other.make_current()
        ctx.make_current()
    finally:
        other.release()
        other.release()  # idempotent
    with pytest.raises(GLContextError, match="released"):
        other.make_current()
    ctx.make_current()


@pytest.mark.gl
def test_context_refuses_use_in_forked_child(ctx):
    pid = os.fork()
    if pid == 0:  # child: must raise before touching the driver
        code = 1
        try:
            ctx.make_current()
        except GLContextError as exc:
            code = 0 if "cannot be used in process" in str(exc) else 2
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.gl
def test_egl_device_platform_explicit_index():
    code = """
        import json
        from renderer.gl.egl import EGLContext, query_devices
        devices = query_devices()
        if not devices:
            print(json.dumps(None))
        else:
            ctx = EGLContext(device_index=0)
            print(json.dumps([ctx.info.platform, ctx.info.renderer]))
            ctx.release()
    """
    result = last_json(run_python(code, env_set={"PYOPENGL_PLATFORM": "egl"}))
    if result is None:
        pytest.skip("EGL reports no devices (EGL_EXT_device_enumeration)")
    assert result[0].startswith("device:")


@pytest.mark.gl
def test_auto_in_a_clean_process_picks_egl_and_claims_the_platform():
    code = """
        import json, os
        from renderer.gl import create_context
        ctx = create_context()
        print(json.dumps({"info": ctx.info.as_dict(), "env": os.environ.get("PYOPENGL_PLATFORM")}))
        ctx.release()
    """
    result = last_json(run_python(code, env_unset=("PYOPENGL_PLATFORM", "EGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")))
    assert result["env"] == "egl"
    assert result["info"]["backend"] == "egl"
    assert result["info"]["max_samples"] >= 1


def test_auto_failure_lists_every_backend():
    code = """
        import json
        from renderer.gl import GLContextError, create_context
        try:
            create_context()
        except GLContextError as exc:
            print(json.dumps({"message": str(exc), "failures": exc.failures}))
        else:
            print(json.dumps(None))
    """
    result = last_json(
        run_python(code, env_set={"PYOPENGL_PLATFORM": "bogus"}, env_unset=("DISPLAY", "WAYLAND_DISPLAY"))
    )
    assert result is not None, "a context was created although PyOpenGL is bound to no usable platform"
    names = [name for name, _reason in result["failures"]]
    assert names == ["egl", "osmesa", "glfw"]
    for name, reason in result["failures"]:
        assert name in result["message"] and reason in result["message"]
    assert "PYOPENGL_PLATFORM=bogus" in result["failures"][0][1]
    assert "DISPLAY" in result["failures"][2][1]


@pytest.mark.gl
def test_lp_num_threads_is_honoured_and_guarded():
    code = """
        import json, os
        from renderer.gl import create_context, set_llvmpipe_threads
        from renderer.gl.threads import gl_driver_loaded
        before = gl_driver_loaded()
        set_llvmpipe_threads(1)
        ctx = create_context()
        names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
        try:
            set_llvmpipe_threads(2)
            late = "accepted"
        except RuntimeError as exc:
            late = str(exc)
        set_llvmpipe_threads(1)  # same value: fine
        print(json.dumps({"before": before, "after": gl_driver_loaded(), "renderer": ctx.info.renderer,
                          "lp": sum(n.startswith("llvmpipe") for n in names), "late": late}))
    """
    result = last_json(run_python(code, env_unset=("LP_NUM_THREADS",)))
    assert result["before"] is False and result["after"] is True
    assert "before create_context" in result["late"]
    if "llvmpipe" not in result["renderer"]:
        pytest.skip(f"not llvmpipe: {result['renderer']}")
    assert result["lp"] == 1


def test_gl_driver_loaded_reads_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    assert gl_driver_loaded(str(maps)) is False
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/dri/swrast_dri.so\n")
    assert gl_driver_loaded(str(maps)) is True


OSMESA_LIB = ctypes.util.find_library("OSMesa")


@pytest.mark.gl
@pytest.mark.skipif(OSMESA_LIB is None, reason="libOSMesa not installed (Debian: apt-get install libosmesa6)")
def test_osmesa_backend_in_its_own_process():
    code = """
        import json
        from renderer.gl import create_context
        from renderer.gl.framebuffer import Framebuffer
        ctx = create_context()
        fb = Framebuffer(8, 4)
        fb.clear((1.0, 128 / 255, 0.0, 1.0))
        px = fb.read_rgba()
        egl_error = None
        try:
            create_context("egl")
        except Exception as exc:
            egl_error = str(exc)
        print(json.dumps({"info": ctx.info.as_dict(), "px": px[0, 0].tolist(), "shape": list(px.shape),
                          "egl_error": egl_error}))
        fb.delete()
        ctx.release()
    """
    result = last_json(run_python(code, env_set={"PYOPENGL_PLATFORM": "osmesa"}))
    assert result["info"]["backend"] == "osmesa"
    assert result["info"]["max_samples"] >= 1
    assert result["shape"] == [4, 8, 4]
    assert result["px"] == [255, 128, 0, 255]
    assert result["egl_error"] and "osmesa" in result["egl_error"]


@pytest.mark.gl
@pytest.mark.skipif(
    not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")), reason="no DISPLAY/WAYLAND_DISPLAY"
)
@pytest.mark.parametrize("pyopengl_platform", [None, "egl"])
def test_glfw_backend_in_its_own_process(pyopengl_platform):
    code = """
        import json
        from renderer.gl import create_context
        from renderer.gl.framebuffer import Framebuffer
        ctx = create_context("glfw")
        fb = Framebuffer(8, 4, samples=4)
        fb.clear((0.0, 1.0, 0.0, 1.0))
        print(json.dumps({"info": ctx.info.as_dict(), "px": fb.read_rgba()[3, 7].tolist()}))
        fb.delete()
        ctx.release()
    """
    if pyopengl_platform is None:
        out = run_python(code, env_unset=("PYOPENGL_PLATFORM",))
    else:
        out = run_python(code, env_set={"PYOPENGL_PLATFORM": pyopengl_platform})
    result = last_json(out)
    assert result["info"]["backend"] == "glfw"
    assert result["px"] == [0, 255, 0, 255]
