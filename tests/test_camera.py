"""The documented auto camera and camera specs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from renderer.camera import CameraError, auto_camera, look_at, perspective, resolve_camera
from renderer.model import Extent, Model
from renderer.model import ModelCamera as CamsCamera
from renderer.samples.build import crate


def test_auto_camera_follows_the_documented_formula():
    m = Model(extent=Extent(10.0, (-10.0, -20.0, 0.0), (10.0, 20.0, 60.0)))
    cam = auto_camera(m)
    c = np.array([0.0, 0.0, 30.0])
    r = max(10.0, np.linalg.norm([20.0, 40.0, 60.0]) / 2)
    d = 1.1 * r / math.sin(math.radians(22.5))
    az, el = math.radians(30), math.radians(20)
    eye = c + d * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
    np.testing.assert_allclose(cam.eye, eye, rtol=1e-9)
    np.testing.assert_allclose(cam.target, c)
    assert cam.near == pytest.approx(d / 100) and cam.far == pytest.approx(10 * d)
    assert cam.source == "auto:model-extent"


def test_bounds_fall_back_to_sequence_extent_then_vertices_then_default():
    m, _ = crate()
    m.extent = Extent()
    assert auto_camera(m).source == "auto:geoset-vertices"
    m.sequences[0].extent = Extent(5.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    assert auto_camera(m, 0).source == "auto:sequence-extent"
    empty = Model()
    cam = auto_camera(empty)
    assert cam.source == "auto:default" and cam.target == (0.0, 0.0, 0.0)


def test_look_at_maps_the_target_onto_the_view_axis():
    v = look_at((100, 0, 0), (0, 0, 0), (0, 0, 1))
    p = v @ np.array([0, 0, 0, 1.0])
    np.testing.assert_allclose(p[:3], [0, 0, -100], atol=1e-9)
    right = v @ np.array([0, 10, 0, 1.0])  # +Y is to the right when looking down -X with Z up
    assert right[0] > 0
    proj = perspective(45, 1.0, 1, 100)
    clip = proj @ p
    assert -1 < clip[2] / clip[3] < 1


def test_camera_specs():
    m, _ = crate()
    m.cameras = [CamsCamera(name="Portrait", position=(50, 0, 40), field_of_view=0.7853982, far_clip=900,
                            near_clip=4, target=(0, 0, 40))]
    cam = resolve_camera("portrait", m)
    assert cam.source == "cams:Portrait" and cam.fov_deg == pytest.approx(45.0, abs=1e-4)
    explicit = resolve_camera("100,0,0:0,0,0:0,0,1:30", m)
    assert explicit.eye == (100.0, 0.0, 0.0) and explicit.fov_deg == 30.0
    with pytest.raises(CameraError, match="no camera named 'Nope'.*'Portrait'"):
        resolve_camera("Nope", m)
    with pytest.raises(CameraError, match="cannot parse camera"):
        resolve_camera("1,2:3,4,5", m)
