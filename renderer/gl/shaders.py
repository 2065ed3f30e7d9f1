"""Compile and link GLSL programs; failures raise `ShaderError` naming the stage and the info log.

    program = build_program(vertex=VS, fragment=FS, label="unlit")

Needs a current context; nothing here touches GL at import time.
"""

from __future__ import annotations

import re

STAGE_NAMES = ("vertex", "fragment", "geometry", "tess_control", "tess_evaluation", "compute")


class ShaderError(RuntimeError):
    """A shader failed to compile, or a program failed to link.

    `stage` is the stage name ("vertex", "fragment", ...) or "link"; `log` the driver's info
    log; `label` the caller's name for the program; `source` the stage's source (None for link).
    """

    def __init__(self, stage: str, log: str, label: str | None = None, source: str | None = None):
        self.stage = stage
        self.log = log
        self.label = label
        self.source = source
        super().__init__(self._message())

    def _message(self) -> str:
        who = f"{self.label}: " if self.label else ""
        what = "program failed to link" if self.stage == "link" else f"{self.stage} shader failed to compile"
        text = f"{who}{what}:\n{self.log.strip() or '(empty info log)'}"
        lines = _quoted_lines(self.log, self.source)
        if lines:
            text += "\nsource:\n" + "\n".join(lines)
        return text


# Mesa: "0:12(5): error: ..."; NVIDIA: "0(12) : error ..."; ANGLE/others: "ERROR: 0:12: ..."
_LINE_RE = re.compile(r"\b\d+[:(](\d+)\)?[(:]")


def _quoted_lines(log: str, source: str | None) -> list[str]:
    if not source:
        return []
    src = source.splitlines()
    seen: list[int] = []
    for m in _LINE_RE.finditer(log or ""):
        n = int(m.group(1))
        if 1 <= n <= len(src) and n not in seen:
            seen.append(n)
    return [f"{n:4d} | {src[n - 1]}" for n in seen[:10]]


def _gl_stage(stage: str):
    from OpenGL import GL

    table = {
        "vertex": GL.GL_VERTEX_SHADER,
        "fragment": GL.GL_FRAGMENT_SHADER,
        "geometry": GL.GL_GEOMETRY_SHADER,
        "tess_control": GL.GL_TESS_CONTROL_SHADER,
        "tess_evaluation": GL.GL_TESS_EVALUATION_SHADER,
        "compute": GL.GL_COMPUTE_SHADER,
    }
    try:
        return table[stage]
    except KeyError:
        raise ValueError(f"unknown shader stage {stage!r}; expected one of {STAGE_NAMES}") from None


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def compile_shader(source: str, stage: str, *, label: str | None = None) -> int:
    """Compile one stage; returns the shader id. Raises `ShaderError` with the info log."""
    gl_stage = _gl_stage(stage)
    from OpenGL import GL

    shader = int(GL.glCreateShader(gl_stage))
    if shader == 0:
        raise ShaderError(stage, "glCreateShader returned 0 (is a GL context current?)", label, source)
    GL.glShaderSource(shader, source)
    GL.glCompileShader(shader)
    if not GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS):
        log = _text(GL.glGetShaderInfoLog(shader))
        GL.glDeleteShader(shader)
        raise ShaderError(stage, log, label, source)
    return shader


def link_program(shaders, *, label: str | None = None, delete_shaders: bool = True) -> int:
    """Link compiled shaders into a program; returns the program id.

    The shaders are detached and (by default) deleted afterwards, whether linking worked or not.
    """
    from OpenGL import GL

    shaders = list(shaders)
    program = int(GL.glCreateProgram())
    try:
        for shader in shaders:
            GL.glAttachShader(program, shader)
        GL.glLinkProgram(program)
        ok = GL.glGetProgramiv(program, GL.GL_LINK_STATUS)
        log = "" if ok else _text(GL.glGetProgramInfoLog(program))
        for shader in shaders:
            GL.glDetachShader(program, shader)
    finally:
        if delete_shaders:
            for shader in shaders:
                GL.glDeleteShader(shader)
    if not ok:
        GL.glDeleteProgram(program)
        raise ShaderError("link", log, label)
    return program


def build_program(
    vertex: str,
    fragment: str,
    *,
    geometry: str | None = None,
    label: str | None = None,
) -> int:
    """Compile the given stages and link them; returns the program id."""
    from OpenGL import GL

    stages = [("vertex", vertex), ("fragment", fragment)]
    if geometry is not None:
        stages.insert(1, ("geometry", geometry))
    compiled: list[int] = []
    try:
        for stage, source in stages:
            compiled.append(compile_shader(source, stage, label=label))
    except ShaderError:
        for shader in compiled:
            GL.glDeleteShader(shader)
        raise
    return link_program(compiled, label=label)
