"""The ``fit`` camera rule: the auto camera's view around what the frame draws (posed geometry, live
particles and ribbons), not around the extent the file declares; ``auto`` is unchanged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from render_util import box_fraction, renderer, touches_border

from renderer.camera import FIT_RULE
from renderer.frame import FrameSpec
from renderer.model import Extent
from renderer.samples.build import crate, effects

pytestmark = pytest.mark.filterwarnings("ignore")
SIZE = 96


def frame(model, camera, **kw):
    spec = FrameSpec(width=SIZE, height=SIZE, camera=camera, background="#000000", **kw)
    return renderer().render(model, spec)


def drawn(rgba) -> np.ndarray:
    """Pixels that differ from the black background."""
    return np.any(rgba[..., :3] > 8, axis=-1)


def test_a_declared_extent_smaller_than_the_model_clips_auto_but_not_fit():
    model, _ = crate()
    model.extent = Extent(20.0, (-20.0, -20.0, 20.0), (20.0, 20.0, 60.0))  # half the crate
    auto, fit = frame(model, "auto"), frame(model, "fit")
    assert touches_border(drawn(auto.rgba))  # the crate spills out of the auto frame
    mask = drawn(fit.rgba)
    assert not touches_border(mask) and box_fraction(mask) > 0.5
    assert fit.trace["camera"]["source"] == "fit:drawn" and fit.trace["camera_rule"] == FIT_RULE
    assert auto.trace["camera"]["source"] == "auto:model-extent" and "camera_rule" not in auto.trace


def test_a_declared_extent_far_larger_than_the_model_leaves_auto_tiny_and_fit_full():
    model, _ = crate()
    model.extent = Extent(600.0, (-300.0, -300.0, -300.0), (300.0, 300.0, 300.0))
    small, fit = box_fraction(drawn(frame(model, "auto").rgba)), box_fraction(drawn(frame(model, "fit").rgba))
    assert small < 0.1 and fit > 0.5 and not touches_border(drawn(frame(model, "fit").rgba))


def test_fit_follows_the_pose():
    """The lid scaled down in Death: the posed geometry is smaller, so the fitted camera comes closer."""
    model, _ = crate()
    death = model.sequences.index(next(s for s in model.sequences if s.name == "Death"))
    first = frame(model, "fit", sequence=death, time_ms=0).trace["camera"]
    last = frame(model, "fit", sequence=death, time_ms=1000).trace["camera"]
    dist = [np.linalg.norm(np.subtract(c["eye"], c["target"])) for c in (first, last)]
    assert dist[1] < dist[0] * 0.9


def _particles_only():
    model, _ = effects()
    model.geosets, model.ribbon_emitters, model.helpers = [], [], []
    model.pivots = model.pivots[:3]
    model.extent = Extent(2000.0, (-1000.0, -1000.0, 0.0), (1000.0, 1000.0, 2000.0))
    return model


def test_live_particles_are_framed():
    model = _particles_only()
    spec = {"sequence": 0, "time_ms": 1500}
    auto, fit = frame(model, "auto", **spec), frame(model, "fit", **spec)
    assert drawn(auto.rgba).sum() > 0, "the effect is there, only small"
    assert box_fraction(drawn(fit.rgba)) > 3 * box_fraction(drawn(auto.rgba))
    assert fit.trace["camera"]["source"] == "fit:drawn"


def test_nothing_drawn_falls_back_to_the_auto_camera():
    model = _particles_only()  # at 0 ms no particle has been emitted and there is no geometry
    fit, auto = frame(model, "fit", sequence=0, time_ms=0), frame(model, "auto", sequence=0, time_ms=0)
    assert fit.trace["camera"] == auto.trace["camera"] and fit.trace["camera"]["source"].startswith("auto:")
    assert np.array_equal(fit.rgba, auto.rgba)


def test_fit_ignores_points_that_are_not_finite():
    model, _ = crate()
    model.geosets[1] = dataclasses.replace(model.geosets[1], vertices=np.full_like(model.geosets[1].vertices, np.nan))
    cam = frame(model, "fit").trace["camera"]
    assert cam["source"] == "fit:drawn" and np.all(np.isfinite(cam["eye"]))


def test_fit_frames_are_deterministic_in_any_order():
    model, _ = effects()
    times = [2500, 500, 1500, 500]
    r = renderer()
    first = {t: frame(model, "fit", sequence=0, time_ms=t).rgba.tobytes() for t in times}
    r.reset_effects()
    again = {t: frame(model, "fit", sequence=0, time_ms=t).rgba.tobytes() for t in sorted(times)}
    assert first == again
