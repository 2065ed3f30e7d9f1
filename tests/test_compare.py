"""farm.compare: digest, status transitions, pixel gate, alpha rule, thresholds, heatmaps."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import CORPUS
from skimage.metrics import structural_similarity

from farm.compare import (
    RAMP,
    Comparison,
    Thresholds,
    as_rgba,
    compare,
    diff_heatmap,
    image_digest,
    premultiply,
    ssim_heatmap,
)

VIEWER_PNGS = sorted((CORPUS / "flowtsohg__mdx-m3-viewer" / "clients" / "tests" / "compare").glob("*.png"))


def sk_ssim(a: np.ndarray, b: np.ndarray) -> float:
    return float(
        structural_similarity(
            a,
            b,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
            data_range=255,
            channel_axis=-1 if a.ndim == 3 else None,
        )
    )


def render(h: int = 256, w: int = 256, seed: int = 0, alpha: bool = False) -> np.ndarray:
    """A frame with what renders have: smooth shading, texture, hard edges; opaque unless `alpha`."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / 17 + seed) * np.cos(y / 23)
    g = 40 + 180 * (x / w) + 8 * np.sin(x * 0.9) * np.sin(y * 1.1)
    b = 90 + 60 * np.cos((x + y) / 9)
    img = np.stack([r, g, b], axis=2)
    cy, cx = h * 0.45, w * 0.55
    disc = (y - cy) ** 2 + (x - cx) ** 2 < (min(h, w) * 0.25) ** 2
    img[disc] = img[disc] * 0.4 + np.array([200, 40, 20]) * 0.6
    img += rng.normal(0, 6, img.shape)
    out = np.empty((h, w, 4), np.uint8)
    out[..., :3] = np.clip(np.rint(img), 0, 255)
    out[..., 3] = 255
    if alpha:
        out[..., 3] = np.where(disc, 255, 0)
        edge = np.abs(np.sqrt((y - cy) ** 2 + (x - cx) ** 2) - min(h, w) * 0.25) < 2
        out[edge, 3] = 128
    return out


# --- digest ----------------------------------------------------------------------------------


def test_digest_is_of_pixels_and_size_only():
    a = render(32, 48)
    assert image_digest(a) == image_digest(a.copy())
    assert image_digest(a) == image_digest(np.asfortranarray(a))  # memory layout does not matter
    assert image_digest(a[..., :3]) == image_digest(a)  # RGB counts as opaque RGBA
    b = a.copy()
    b[3, 4, 1] ^= 1
    assert image_digest(b) != image_digest(a)
    flat = np.arange(64, dtype=np.uint8)
    assert image_digest(flat.reshape(2, 8, 4)) != image_digest(flat.reshape(4, 4, 4))  # same bytes, other size
    assert len(image_digest(a)) == 64 and int(image_digest(a), 16) >= 0


def test_digest_and_compare_reject_wrong_arrays():
    with pytest.raises(ValueError, match="uint8"):
        image_digest(np.zeros((4, 4, 4), np.float32))
    with pytest.raises(ValueError, match="shape"):
        image_digest(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="golden frame"):
        compare(render(16, 16), np.zeros((16, 16, 2), np.uint8))


# --- status transitions ----------------------------------------------------------------------


def test_identical():
    a = render()
    result = compare(a, a.copy(), with_map=True)
    assert result.status == "identical" and result.passed
    assert result.ssim == 1.0 and result.pixels_over == 0.0 and result.max_diff == 0
    assert result.reason is None
    assert result.digest == result.golden_digest == image_digest(a)
    assert result.ssim_map.dtype == np.float32 and result.ssim_map.shape == a.shape[:2]


def test_pass_with_tiny_noise():
    """Off-by-one noise on a few percent of pixels (llvmpipe across CPUs) passes."""
    a = render(seed=1)
    rng = np.random.default_rng(1)
    b = a.astype(np.int16)
    hit = rng.random(a.shape[:2]) < 0.03
    b[hit, :3] += rng.choice([-1, 1], size=(int(hit.sum()), 3))
    b = np.clip(b, 0, 255).astype(np.uint8)
    result = compare(b, a)
    assert result.status == "pass" and result.passed
    assert result.reason is None
    assert 0.99 <= result.ssim < 1.0
    assert result.max_diff == 1 and result.pixels_over == 0.0
    assert result.digest != result.golden_digest


def test_small_broken_region_passes_mean_ssim_but_fails_the_pixel_gate():
    a = render(512, 512, seed=2)
    b = a.copy()
    b[200:218, 300:318, :3] = 255 - b[200:218, 300:318, :3]  # 18 x 18 = 324 pixels, 0.12%
    result = compare(b, a, with_map=True)
    assert result.ssim >= 0.99  # the mean hides it ...
    assert result.ssim == pytest.approx(sk_ssim(b[..., :3], a[..., :3]), abs=1e-6)
    assert result.status == "fail"  # ... the gate does not
    assert result.pixels_over == pytest.approx(324 / 512**2)
    assert result.max_diff > 16
    assert "324 of 262144 pixels" in result.reason and "more than 16" in result.reason
    assert "SSIM" not in result.reason
    # the SSIM map shows where
    m = result.ssim_map
    assert m[209, 309] < 0.5 and m[50, 50] > 0.9


def test_ssim_fails_while_the_pixel_gate_passes():
    """Noise everywhere, never more than the gate's 16: SSIM catches it."""
    a = render(seed=3)
    rng = np.random.default_rng(3)
    b = a.astype(np.int16)
    b[..., :3] += rng.integers(-12, 13, a[..., :3].shape)
    b = np.clip(b, 0, 255).astype(np.uint8)
    result = compare(b, a)
    assert result.status == "fail"
    assert result.pixels_over == 0.0 and result.max_diff <= 12
    assert result.ssim < 0.99
    assert result.reason.startswith("SSIM ") and "below the minimum 0.99" in result.reason


def test_thresholds_change_the_verdict_and_are_recorded():
    a = render(512, 512, seed=2)
    b = a.copy()
    b[200:218, 300:318, :3] = 255 - b[200:218, 300:318, :3]
    loose = {"max_pixels_over": 0.01}
    result = compare(b, a, loose)
    assert result.status == "pass"
    assert result.thresholds == Thresholds(max_pixels_over=0.01)
    assert compare(b, a, Thresholds(pixel_delta=255)).status == "pass"
    strict = compare(b, a, {"min_ssim": 0.9999, "max_pixels_over": 0.01})
    assert strict.status == "fail" and "below the minimum 0.9999" in strict.reason


def test_size_mismatch_fails_with_a_reason():
    a, b = render(64, 80), render(64, 81)
    result = compare(b, a)
    assert result.status == "fail" and not result.passed
    assert "81x64" in result.reason and "80x64" in result.reason
    assert result.size == (81, 64) and result.golden_size == (80, 64)
    assert result.ssim is None
    json.dumps(result.to_dict())


def test_rgb_and_rgba_frames_compare():
    a = render(40, 40)
    assert compare(a[..., :3], a).status == "identical"


def test_frames_too_small_for_ssim_use_the_gate_alone():
    a = render(8, 8)
    b = a.copy()
    b[0, 0, 0] ^= 1
    result = compare(b, a)
    assert result.status == "pass" and result.ssim is None
    b[:4, :4, :3] = 0
    b[:4, :4, 1] = 255
    result = compare(b, a)
    assert result.status == "fail" and "no SSIM" in result.reason


def test_to_dict_holds_every_metric():
    a = render(seed=4)
    b = a.copy()
    b[10:20, 10:20, 0] = 0
    result = compare(b, a, with_map=True)
    d = json.loads(json.dumps(result.to_dict()))
    assert set(d) >= {"status", "ssim", "ssim_rgb", "ssim_alpha", "pixels_over", "max_diff", "reason", "thresholds"}
    assert d["thresholds"] == {"min_ssim": 0.99, "pixel_delta": 16, "max_pixels_over": 0.001}
    assert d["ssim"] == result.ssim and d["digest"] == image_digest(b)
    assert isinstance(result, Comparison) and "ssim_map" not in d


def test_opaque_ssim_is_skimage_rgb_ssim_and_map_mean():
    a = render(seed=5)
    b = np.roll(a, 1, axis=1)
    result = compare(b, a, with_map=True)
    want = sk_ssim(b[..., :3], a[..., :3])
    assert abs(result.ssim - want) <= 1e-6 and result.ssim_alpha == 1.0 and result.ssim == result.ssim_rgb
    assert abs(float(result.ssim_map[5:-5, 5:-5].astype(np.float64).mean()) - want) <= 1e-6


# --- the alpha rule --------------------------------------------------------------------------


def test_premultiply_rounds_and_keeps_alpha():
    px = np.array([[[255, 128, 1, 255], [255, 128, 1, 0], [255, 128, 3, 128], [200, 100, 50, 64]]], np.uint8)
    want = np.array([[[255, 128, 1, 255], [0, 0, 0, 0], [128, 64, 2, 128], [50, 25, 13, 64]]], np.uint8)
    np.testing.assert_array_equal(premultiply(px), want)
    c, a = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    grid = np.zeros((256, 256, 4), np.uint8)
    grid[..., 0], grid[..., 3] = c, a
    np.testing.assert_array_equal(premultiply(grid)[..., 0], np.rint(c * a / 255).astype(np.uint8))


def test_same_rgb_different_alpha_is_not_equal():
    a = render(seed=6)
    b = a.copy()
    b[..., 3] = 128
    result = compare(b, a)
    assert result.status == "fail"
    assert result.ssim_alpha < 1.0 and result.max_diff > 16
    # also in a small region, and for black, whose premultiplied colour cannot change
    c = a.copy()
    c[100:140, 100:140, :3] = 0
    d = c.copy()
    d[100:140, 100:140, 3] = 0
    result = compare(d, c)
    assert result.status == "fail" and result.ssim_alpha < 0.99
    assert result.ssim_rgb == pytest.approx(1.0, abs=1e-12)
    assert result.ssim == result.ssim_alpha


def test_fully_transparent_pixels_compare_equal_whatever_their_colour():
    a = render(seed=7, alpha=True)
    b = a.copy()
    clear = b[..., 3] == 0
    assert clear.any()
    b[clear, :3] = np.random.default_rng(7).integers(0, 256, (int(clear.sum()), 3))
    result = compare(b, a, with_map=True)
    assert result.digest != result.golden_digest  # not byte-identical ...
    assert result.status == "pass"  # ... but equal under the alpha rule
    assert result.ssim == 1.0 and result.pixels_over == 0.0 and result.max_diff == 0
    np.testing.assert_array_equal(diff_heatmap(a, b), np.broadcast_to(RAMP[0], a.shape))


def test_ssim_with_alpha_is_the_smaller_of_colour_and_alpha():
    a = render(seed=8, alpha=True)
    b = np.roll(a, 1, axis=0)
    result = compare(b, a)
    pa, pb = premultiply(a), premultiply(b)
    rgb, alpha = sk_ssim(pb[..., :3], pa[..., :3]), sk_ssim(pb[..., 3], pa[..., 3])
    assert abs(result.ssim_rgb - rgb) <= 1e-6 and abs(result.ssim_alpha - alpha) <= 1e-6
    assert result.ssim == min(result.ssim_rgb, result.ssim_alpha)


def test_unchanged_alpha_does_not_dilute_a_colour_change():
    """Translucent frames: the score is the colour SSIM, not a mean with a perfect alpha channel."""
    a = render(seed=9, alpha=True)
    a[..., 3] = np.maximum(a[..., 3], 200)
    b = a.copy()
    rng = np.random.default_rng(9)
    b[..., :3] = np.clip(b[..., :3] + rng.integers(-12, 13, b[..., :3].shape), 0, 255).astype(np.uint8)
    result = compare(b, a)
    assert result.ssim_alpha == pytest.approx(1.0, abs=1e-12)
    assert result.ssim == pytest.approx(result.ssim_rgb, abs=1e-12)


# --- thresholds ------------------------------------------------------------------------------


def test_threshold_defaults_and_overrides():
    t = Thresholds()
    assert (t.min_ssim, t.pixel_delta, t.max_pixels_over) == (0.99, 16, 0.001)
    assert Thresholds.from_dict(None) == t and Thresholds.from_dict({}) == t
    t2 = Thresholds.from_dict({"min_ssim": 0.95, "pixel_delta": 3})
    assert (t2.min_ssim, t2.pixel_delta, t2.max_pixels_over) == (0.95, 3, 0.001)
    t3 = Thresholds.from_dict({"max_pixels_over": 0}, base=t2)  # a trace's table over its model's
    assert (t3.min_ssim, t3.pixel_delta, t3.max_pixels_over) == (0.95, 3, 0.0)
    assert isinstance(t3.max_pixels_over, float) and isinstance(Thresholds(min_ssim=1).min_ssim, float)
    assert Thresholds.from_dict(t2.to_dict()) == t2


@pytest.mark.parametrize(
    "table, key",
    [
        ({"min_ssim": 0.9, "max_ssim": 1.0}, "max_ssim"),
        ({"pixel_delta": "16"}, "pixel_delta"),
        ({"pixel_delta": 16.0}, "pixel_delta"),
        ({"pixel_delta": True}, "pixel_delta"),
        ({"pixel_delta": 256}, "pixel_delta"),
        ({"pixel_delta": -1}, "pixel_delta"),
        ({"min_ssim": None}, "min_ssim"),
        ({"min_ssim": "0.99"}, "min_ssim"),
        ({"min_ssim": 1.5}, "min_ssim"),
        ({"min_ssim": float("nan")}, "min_ssim"),
        ({"max_pixels_over": 2}, "max_pixels_over"),
        ({"max_pixels_over": [0.1]}, "max_pixels_over"),
        ({"max_pixels_over": False}, "max_pixels_over"),
    ],
)
def test_bad_thresholds_name_the_key(table, key):
    with pytest.raises(ValueError, match=key):
        Thresholds.from_dict(table)
    if key in Thresholds.keys():
        with pytest.raises(ValueError, match=key):
            Thresholds(**table)
        with pytest.raises(ValueError, match=key):
            compare(render(16, 16), render(16, 16), table)


def test_thresholds_must_be_a_table():
    with pytest.raises(ValueError, match="table"):
        Thresholds.from_dict([("min_ssim", 0.9)])


# --- heatmaps --------------------------------------------------------------------------------


def test_ramp_is_fixed_and_brightens():
    assert RAMP.shape == (256, 4) and RAMP.dtype == np.uint8
    assert tuple(RAMP[0]) == (0, 0, 0, 255) and tuple(RAMP[255]) == (255, 255, 200, 255)
    luma = RAMP[:, :3].astype(np.float64) @ [0.2126, 0.7152, 0.0722]
    assert np.all(np.diff(luma) >= -1e-9)
    with pytest.raises(ValueError):
        RAMP[0, 0] = 1


def test_diff_heatmap():
    a = render(40, 50)
    b = a.copy()
    b[5, 6, :3] = 255 - b[5, 6, :3]
    b[7, 8, 2] = b[7, 8, 2] ^ 16
    hm = diff_heatmap(b, a)
    assert hm.shape == (40, 50, 4) and hm.dtype == np.uint8
    assert (hm[..., 3] == 255).all()
    assert tuple(hm[0, 0]) == tuple(RAMP[0])
    d = int(np.abs(b[5, 6].astype(int) - a[5, 6]).max())
    assert tuple(hm[5, 6]) == tuple(RAMP[int(np.rint(np.sqrt(d / 255) * 255))])
    assert tuple(hm[7, 8]) == tuple(RAMP[64])  # a difference of 16 sits a quarter along
    np.testing.assert_array_equal(hm, diff_heatmap(b, a))  # deterministic
    np.testing.assert_array_equal(hm, diff_heatmap(a, b))  # symmetric
    with pytest.raises(ValueError, match="size"):
        diff_heatmap(a, render(40, 51))


def test_ssim_heatmap():
    m = np.array([[1.0, 0.99, 0.0], [-0.5, np.nan, 0.75]])
    hm = ssim_heatmap(m)
    assert hm.shape == (2, 3, 4) and hm.dtype == np.uint8
    assert tuple(hm[0, 0]) == tuple(RAMP[0])
    assert tuple(hm[0, 1]) == tuple(RAMP[26])  # sqrt(0.01) = 0.1
    assert tuple(hm[0, 2]) == tuple(hm[1, 0]) == tuple(hm[1, 1]) == tuple(RAMP[255])
    assert tuple(hm[1, 2]) == tuple(RAMP[128])
    np.testing.assert_array_equal(ssim_heatmap(np.dstack([m, m, m])), hm)
    with pytest.raises(ValueError):
        ssim_heatmap(np.zeros(5))


def test_heatmaps_from_a_comparison():
    a = render(seed=10)
    b = a.copy()
    b[60:80, 60:80, :3] = 0
    result = compare(b, a, with_map=True)
    hm = ssim_heatmap(result.ssim_map)
    assert hm.shape == a.shape
    assert hm[70, 70, :3].sum() > hm[200, 200, :3].sum()


# --- real frames -----------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("path", VIEWER_PNGS, ids=lambda p: p.name)
def test_real_frames(path):
    if not path.exists():
        pytest.skip(f"{path} is not present")
    from PIL import Image

    with Image.open(path) as im:
        a = as_rgba(np.asarray(im.convert("RGBA")))
    assert compare(a, a.copy()).status == "identical"
    b = a.copy()
    b[128, 128, :3] ^= 1
    b[128, 128, 3] = max(int(b[128, 128, 3]), 1)
    assert compare(b, a).status == "pass"
    c = a.copy()
    c[100:140, 100:140] = [255, 0, 255, 255]
    broken = compare(c, a)
    assert broken.status == "fail" and broken.pixels_over == pytest.approx(1600 / 65536)
