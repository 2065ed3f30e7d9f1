"""GL blend, depth and culling state from a `renderer.blending.BlendState` (shared by every pass)."""

from __future__ import annotations

_FACTORS: dict[str, int] = {}


def blend_factor(name: str) -> int:
    """GL enum of a blend factor named as in renderer.blending ("SRC_ALPHA", ...)."""
    if not _FACTORS:
        from OpenGL import GL

        for n in ("ZERO", "ONE", "SRC_ALPHA", "ONE_MINUS_SRC_ALPHA", "SRC_COLOR", "DST_COLOR"):
            _FACTORS[n] = getattr(GL, f"GL_{n}")
    return _FACTORS[name]


def apply_state(state, depth_test: bool = True, depth_write: bool | None = None, cull: bool = False) -> None:
    """Blending per `state`, depth test (LEQUAL) on or off, depth writes (default: the state's own),
    and back-face culling on or off."""
    from OpenGL import GL

    if state.blend is None:
        GL.glDisable(GL.GL_BLEND)
    else:
        GL.glEnable(GL.GL_BLEND)
        GL.glBlendFuncSeparate(*(blend_factor(f) for f in state.blend))
    if depth_test:
        GL.glEnable(GL.GL_DEPTH_TEST)
        GL.glDepthFunc(GL.GL_LEQUAL)
    else:
        GL.glDisable(GL.GL_DEPTH_TEST)
    write = state.depth_write if depth_write is None else depth_write
    GL.glDepthMask(GL.GL_TRUE if write else GL.GL_FALSE)
    if cull:
        GL.glEnable(GL.GL_CULL_FACE)
        GL.glCullFace(GL.GL_BACK)
    else:
        GL.glDisable(GL.GL_CULL_FACE)
