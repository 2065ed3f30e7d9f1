"""Offscreen framebuffer, readback orientation, MSAA and shaders on a real context (llvmpipe here).

PyOpenGL binds its platform once per process: set PYOPENGL_PLATFORM=egl (when nothing imported
OpenGL yet) and EGL_PLATFORM=surfaceless before anything GL is imported.
"""

import os
import sys

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
if "OpenGL.platform" not in sys.modules:
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from renderer.gl.context import create_context  # noqa: E402
from renderer.gl.framebuffer import Framebuffer, FramebufferError  # noqa: E402
from renderer.gl.shaders import ShaderError, build_program, compile_shader  # noqa: E402

VERTEX = """#version 330 core
layout(location = 0) in vec2 position;
void main() { gl_Position = vec4(position, 0.0, 1.0); }
"""
FRAGMENT = """#version 330 core
uniform vec4 color;
out vec4 frag_color;
void main() { frag_color = color; }
"""
RED = (1.0, 0.0, 0.0, 1.0)
BLUE = (0.0, 0.0, 1.0, 1.0)
RED_BYTES = [255, 0, 0, 255]
BLUE_BYTES = [0, 0, 255, 255]
# Top-left half of the viewport: corners top-left, top-right, bottom-left (NDC, y up).
TOP_LEFT_TRIANGLE = np.array([-1.0, 1.0, 1.0, 1.0, -1.0, -1.0], dtype=np.float32)


@pytest.fixture(scope="module")
def ctx():
    context = create_context("auto")
    yield context
    context.release()


@pytest.fixture(scope="module")
def triangle(ctx):
    """A draw function: fills the top-left half of the bound framebuffer with a flat colour."""
    from OpenGL import GL

    program = build_program(VERTEX, FRAGMENT, label="flat")
    vao = GL.glGenVertexArrays(1)
    GL.glBindVertexArray(vao)
    vbo = GL.glGenBuffers(1)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, vbo)
    GL.glBufferData(GL.GL_ARRAY_BUFFER, TOP_LEFT_TRIANGLE.nbytes, TOP_LEFT_TRIANGLE, GL.GL_STATIC_DRAW)
    GL.glEnableVertexAttribArray(0)
    GL.glVertexAttribPointer(0, 2, GL.GL_FLOAT, GL.GL_FALSE, 0, None)
    GL.glBindVertexArray(0)
    location = GL.glGetUniformLocation(program, "color")

    def draw(color=RED):
        GL.glUseProgram(program)
        GL.glUniform4f(location, *color)
        GL.glBindVertexArray(vao)
        GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    yield draw
    ctx.make_current()
    GL.glDeleteBuffers(1, [vbo])
    GL.glDeleteVertexArrays(1, [vao])
    GL.glDeleteProgram(program)


def render(samples: int, draw, size=(64, 64)) -> tuple[np.ndarray, Framebuffer]:
    fb = Framebuffer(*size, samples=samples)
    fb.clear(BLUE)
    draw()
    image = fb.read_rgba()
    fb.delete()
    return image, fb


def colours(image: np.ndarray) -> list[list[int]]:
    return np.unique(image.reshape(-1, 4), axis=0).tolist()


# -- validation (no GL needed) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "width, height", [(0, 4), (4, 0), (-1, 4), (8193, 4), (4, 10_000), (4.0, 4), (True, 4), ("8", 4)]
)
def test_size_validation(width, height):
    with pytest.raises(ValueError):
        Framebuffer(width, height)


@pytest.mark.parametrize("samples", [-1, 2.5, None])
def test_samples_validation(samples):
    with pytest.raises(ValueError):
        Framebuffer(4, 4, samples=samples)


# -- real framebuffers ---------------------------------------------------------------------------


@pytest.mark.gl
def test_clear_reads_back_exact_bytes(ctx):
    fb = Framebuffer(37, 19)  # odd sizes: rows are 148 bytes, packed
    try:
        fb.clear((51 / 255, 102 / 255, 1.0, 204 / 255))
        image = fb.read_rgba()
        assert image.shape == (19, 37, 4) and image.dtype == np.uint8
        assert image.flags["C_CONTIGUOUS"]
        assert colours(image) == [[51, 102, 255, 204]]
        fb.clear((0.0, 0.0, 0.0))  # alpha defaults to 1
        assert colours(fb.read_rgba()) == [[0, 0, 0, 255]]
    finally:
        fb.delete()


@pytest.mark.gl
def test_clear_rejects_bad_colours(ctx):
    fb = Framebuffer(2, 2)
    try:
        for bad in [(1.0, 0.0), (0.0, 0.0, 2.0, 1.0), (255, 0, 0, 255)]:
            with pytest.raises(ValueError):
                fb.clear(bad)
    finally:
        fb.delete()


@pytest.mark.gl
def test_row_zero_is_the_top_of_the_image(ctx, triangle):
    image, _ = render(0, triangle)
    assert image[0, 0].tolist() == RED_BYTES  # top-left: inside the triangle
    assert image[-1, -1].tolist() == BLUE_BYTES  # bottom-right: clear colour
    assert image[0, -2].tolist() == RED_BYTES  # top edge is covered almost to the right
    assert image[-2, 0].tolist() == RED_BYTES  # left edge almost to the bottom
    assert image[-1, 1].tolist() == BLUE_BYTES


@pytest.mark.gl
def test_single_sample_has_exactly_two_colours(ctx, triangle):
    image, fb = render(0, triangle)
    assert fb.requested_samples == 0 and fb.granted_samples == 0 and fb.actual_samples == 0
    assert colours(image) == [BLUE_BYTES, RED_BYTES]


@pytest.mark.gl
def test_msaa_4_antialiases_the_diagonal(ctx, triangle):
    image, fb = render(4, triangle)
    assert fb.requested_samples == 4
    assert fb.granted_samples == min(4, ctx.info.max_samples)
    assert fb.actual_samples >= fb.granted_samples
    assert image[0, 0].tolist() == RED_BYTES and image[-1, -1].tolist() == BLUE_BYTES
    # Pixel centres with column + row == 63 lie exactly on the hypotenuse (y = x in NDC).
    edge = image[10, 53]
    assert 0 < edge[0] < 255 and 0 < edge[2] < 255 and edge[1] == 0 and edge[3] == 255
    diagonal = np.array([image[r, 63 - r] for r in range(64)])
    assert np.all((diagonal[:, 0] > 0) & (diagonal[:, 0] < 255))
    assert len(colours(image)) > 2


@pytest.mark.gl
def test_msaa_request_is_clamped_to_max_samples(ctx, triangle):
    image, fb = render(1000, triangle)
    assert fb.requested_samples == 1000
    assert fb.max_samples == ctx.info.max_samples
    assert fb.granted_samples == ctx.info.max_samples
    assert fb.actual_samples == ctx.info.max_samples
    assert image[0, 0].tolist() == RED_BYTES and image[-1, -1].tolist() == BLUE_BYTES


@pytest.mark.gl
@pytest.mark.parametrize("samples", [0, 4])
def test_same_frame_twice_gives_identical_bytes(ctx, triangle, samples):
    first, _ = render(samples, triangle)
    second, _ = render(samples, triangle)
    assert first.tobytes() == second.tobytes()
    fb = Framebuffer(64, 64, samples=samples)  # and re-rendering into the same framebuffer
    try:
        for _ in range(2):
            fb.clear(BLUE)
            triangle()
            assert fb.read_rgba().tobytes() == first.tobytes()
    finally:
        fb.delete()


@pytest.mark.gl
@pytest.mark.parametrize("samples", [0, 4])
def test_an_asynchronous_read_back_gives_the_synchronous_bytes_while_another_frame_is_drawn(ctx, triangle, samples):
    """start_read fences the copy into the pixel buffer; drawing into a second framebuffer before
    finish_read changes nothing in the first one's pixels (two frames in flight)."""
    expected, _ = render(samples, triangle, size=(40, 24))
    first, second = Framebuffer(40, 24, samples=samples), Framebuffer(40, 24, samples=samples)
    try:
        for _ in range(2):  # the pixel buffer is made once and reused
            first.clear(BLUE)
            triangle()
            first.start_read()
            assert first.reading
            second.clear(RED)  # the next frame, issued before this one is read
            triangle(BLUE)
            second.start_read()
            image = first.finish_read()
            assert not first.reading and image.tobytes() == expected.tobytes()
            other = colours(second.finish_read())  # blue on red (MSAA: blends on the edge)
            assert BLUE_BYTES in other and RED_BYTES in other
    finally:
        first.delete()
        second.delete()


@pytest.mark.gl
def test_an_asynchronous_read_back_is_one_at_a_time_and_can_be_forgotten(ctx):
    fb = Framebuffer(8, 8)
    try:
        with pytest.raises(FramebufferError, match="no read-back"):
            fb.finish_read()
        fb.clear(RED)
        fb.start_read()
        with pytest.raises(FramebufferError, match="already in flight"):
            fb.start_read()
        fb.cancel_read()
        assert not fb.reading
        fb.clear(BLUE)
        fb.start_read()
        assert colours(fb.finish_read()) == [BLUE_BYTES]
        fb.start_read()
    finally:
        fb.delete()  # a read-back in flight is freed with it
    assert not fb.reading
    with pytest.raises(FramebufferError, match="deleted"):
        fb.start_read()


@pytest.mark.gl
def test_readback_restores_bindings_and_pack_alignment(ctx):
    from OpenGL import GL

    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 8)
    fb = Framebuffer(3, 3, samples=4)
    try:
        fb.clear(BLUE)
        fb.read_rgba()
        assert int(GL.glGetIntegerv(GL.GL_PACK_ALIGNMENT)) == 8
        assert int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING)) == fb.fbo
    finally:
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        fb.delete()


@pytest.mark.gl
def test_delete_frees_everything_and_is_idempotent(ctx):
    from OpenGL import GL

    fb = Framebuffer(16, 16, samples=4)
    fbos, rbos = list(fb._fbos), list(fb._rbos)
    assert len(fbos) == 2 and len(rbos) == 3  # MSAA colour + depth-stencil, resolve colour
    fb.delete()
    fb.delete()
    assert fb.deleted
    assert not any(GL.glIsFramebuffer(f) for f in fbos)
    assert not any(GL.glIsRenderbuffer(r) for r in rbos)
    with pytest.raises(FramebufferError):
        fb.read_rgba()
    with pytest.raises(FramebufferError):
        fb.bind()


@pytest.mark.gl
def test_largest_size_is_accepted(ctx):
    fb = Framebuffer(8192, 1)
    try:
        fb.clear(RED)
        image = fb.read_rgba()
        assert image.shape == (1, 8192, 4)
        assert colours(image) == [RED_BYTES]
    finally:
        fb.delete()


# -- shaders ---------------------------------------------------------------------------------------


@pytest.mark.gl
def test_shader_compile_error_names_stage_and_log(ctx):
    broken = FRAGMENT.replace("frag_color = color;", "frag_color = colr;")
    with pytest.raises(ShaderError) as info:
        build_program(VERTEX, broken, label="flat")
    err = info.value
    assert err.stage == "fragment" and err.label == "flat"
    assert "colr" in err.log
    message = str(err)
    assert "fragment shader" in message and "flat" in message and err.log.strip() in message
    assert "frag_color = colr;" in message  # the offending source line is quoted


@pytest.mark.gl
def test_shader_link_error(ctx):
    # Both stages compile, but the varying's type differs between them.
    vertex = """#version 330 core
    out vec2 normal;
    void main() { normal = vec2(1.0); gl_Position = vec4(0.0); }
    """
    fragment = """#version 330 core
    in vec3 normal;
    out vec4 frag_color;
    void main() { frag_color = vec4(normal, 1.0); }
    """
    with pytest.raises(ShaderError) as info:
        build_program(vertex, fragment, label="mismatch")
    assert info.value.stage == "link"
    assert "link" in str(info.value)


@pytest.mark.gl
def test_unknown_stage(ctx):
    with pytest.raises(ValueError):
        compile_shader(VERTEX, "pixel")
