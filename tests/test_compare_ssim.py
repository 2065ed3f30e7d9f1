"""farm.compare.ssim gives skimage's SSIM (pinned Wang et al. settings) to within 1e-6, value and map."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skimage.metrics import structural_similarity

from farm.compare.ssim import ssim, ssim_channels

TOL = 1e-6

PILLOW_PNGS = sorted((CORPUS / "python-pillow__Pillow" / "Tests" / "images").glob("*.png"))
VIEWER_PNGS = sorted((CORPUS / "flowtsohg__mdx-m3-viewer" / "clients" / "tests" / "compare").glob("*.png"))


def reference(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    value, smap = structural_similarity(
        a,
        b,
        gaussian_weights=True,
        sigma=1.5,
        use_sample_covariance=False,
        data_range=255,
        channel_axis=-1 if a.ndim == 3 else None,
        full=True,
    )
    return float(value), smap


def assert_same_as_skimage(a: np.ndarray, b: np.ndarray) -> float:
    want, want_map = reference(a, b)
    got, got_map = ssim(a, b, full=True)
    assert isinstance(got, float)
    assert abs(got - want) <= TOL, (got, want)
    assert got_map.shape == want_map.shape
    assert np.abs(got_map - want_map).max() <= TOL
    assert ssim(a, b) == got  # the same value without the map
    return got


def noisy(a: np.ndarray, rng: np.random.Generator, amount: int) -> np.ndarray:
    return np.clip(a.astype(np.int16) + rng.integers(-amount, amount + 1, a.shape), 0, 255).astype(np.uint8)


SHAPES = [
    (11, 11, 3),  # the smallest skimage accepts
    (11, 12, 3),
    (12, 11, 3),
    (16, 16, 3),
    (17, 33, 3),
    (31, 17, 3),  # taller than a strip and not a multiple of it
    (64, 64, 3),
    (97, 65, 3),
    (100, 21, 3),
    (23, 257, 3),
    (255, 129, 3),
    (256, 256, 4),
    (40, 50, 1),
    (45, 61),  # grey, 2-D
    (513, 301, 3),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_random_images_match_skimage(shape):
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    assert_same_as_skimage(a, rng.integers(0, 256, shape, dtype=np.uint8))  # unrelated
    assert_same_as_skimage(a, noisy(a, rng, 6))  # similar
    assert_same_as_skimage(a, a)  # equal


def test_float_inputs_match_skimage():
    rng = np.random.default_rng(7)
    a = rng.uniform(0, 255, (40, 57, 3))
    b = np.clip(a + rng.normal(0, 5, a.shape), 0, 255)
    assert_same_as_skimage(a, b)


@pytest.mark.parametrize(
    "va, vb",
    [(0, 0), (255, 255), (128, 128), (0, 255), (10, 11), (200, 90)],
)
def test_constant_images_match_skimage(va, vb):
    a = np.full((37, 29, 3), va, np.uint8)
    b = np.full((37, 29, 3), vb, np.uint8)
    got = assert_same_as_skimage(a, b)
    if va == vb:
        assert got == pytest.approx(1.0, abs=1e-12)


def test_constant_against_random_matches_skimage():
    rng = np.random.default_rng(3)
    a = np.full((50, 70, 3), 128, np.uint8)
    assert_same_as_skimage(a, rng.integers(0, 256, a.shape, dtype=np.uint8))


def test_structured_changes_match_skimage():
    """Edges, a shifted copy, a broken block: the kinds of difference renders have."""
    y, x = np.mgrid[0:120, 0:150]
    a = np.stack([(x * 2) % 256, (y * 3) % 256, ((x + y) // 4 % 2) * 255], axis=2).astype(np.uint8)
    shifted = np.roll(a, 1, axis=1)
    broken = a.copy()
    broken[40:60, 70:90] = 255 - broken[40:60, 70:90]
    assert_same_as_skimage(a, shifted)
    assert_same_as_skimage(a, broken)


def test_value_does_not_depend_on_threads():
    rng = np.random.default_rng(11)
    a = rng.integers(0, 256, (300, 280, 3), dtype=np.uint8)
    b = noisy(a, rng, 10)
    values = {ssim(a, b, threads=n) for n in (1, 2, 3)}
    assert len(values) == 1


def test_per_channel_values_match_skimage():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (60, 80, 4), dtype=np.uint8)
    b = noisy(a, rng, 20)
    per_channel, smap = ssim_channels(a, b)
    assert smap is None
    for ch in range(4):
        want, _ = reference(a[..., ch], b[..., ch])
        assert abs(per_channel[ch] - want) <= TOL


def test_rejects_what_skimage_rejects():
    a = np.zeros((10, 40, 3), np.uint8)
    with pytest.raises(ValueError, match="at least 11"):
        ssim(a, a)
    with pytest.raises(ValueError, match="shape"):
        ssim(np.zeros((20, 20, 3), np.uint8), np.zeros((20, 21, 3), np.uint8))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    h=st.integers(11, 48),
    w=st.integers(11, 48),
    c=st.sampled_from([1, 3]),
    seed=st.integers(0, 2**32 - 1),
    amount=st.sampled_from([1, 8, 64, 255]),
)
def test_property_matches_skimage(h, w, c, seed, amount):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    assert_same_as_skimage(a, noisy(a, rng, amount))


def _load(path, mode: str) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert(mode))


def _distort(a: np.ndarray, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    blurred = (a.astype(np.uint16) + np.roll(a, 1, axis=0) + np.roll(a, 1, axis=1) + np.roll(a, -1, axis=1)) // 4
    broken = a.copy()
    broken[20:40, 30:45] = rng.integers(0, 256, broken[20:40, 30:45].shape)
    return [noisy(a, rng, 3), blurred.astype(np.uint8), np.roll(a, 2, axis=0), broken]


@pytest.mark.corpus
@pytest.mark.parametrize("path", PILLOW_PNGS + VIEWER_PNGS, ids=lambda p: p.name)
def test_real_images_match_skimage(path):
    if not path.exists():
        pytest.skip(f"{path} is not present")
    from PIL import Image

    with Image.open(path) as im:
        mode = "L" if im.mode in ("L", "I", "1") else "RGB"
    a = _load(path, mode)
    for i, b in enumerate(_distort(a, seed=len(path.name))):
        assert_same_as_skimage(a, b)
        if i == 0 and a.ndim == 3:
            assert_same_as_skimage(_load(path, "RGBA"), np.dstack([b, _load(path, "RGBA")[..., 3]]))


@pytest.mark.corpus
def test_real_image_pairs_match_skimage():
    """Two different real renders of the same size (the viewer's comparison images)."""
    if len(VIEWER_PNGS) < 2:
        pytest.skip("the mdx-m3-viewer comparison images are not present")
    images = [_load(p, "RGB") for p in VIEWER_PNGS]
    for a, b in zip(images, images[1:], strict=False):
        if a.shape == b.shape:
            assert_same_as_skimage(a, b)


def test_corpus_lists_are_found_when_the_corpus_exists():
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present")
    assert PILLOW_PNGS or VIEWER_PNGS
