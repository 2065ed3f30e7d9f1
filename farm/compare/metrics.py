"""Compare a rendered frame with its golden: exact digest first, then SSIM and a pixel gate.

`compare(new, golden, thresholds)` returns a `Comparison`:

1. Size. Frames of different width or height fail at once, with a reason naming both sizes (never
   an exception).
2. Exact match. `image_digest` is the sha256 of the canonical RGBA bytes (uint8, row-major, with
   the width and height in the hashed header; an RGB image counts as RGBA with alpha 255), so it
   does not depend on how a PNG was encoded. Equal digests -> status "identical".
3. Alpha rule (premultiplied colour, alpha compared on its own). Both frames are premultiplied in
   8 bits: each colour channel becomes round(c * a / 255), alpha stays as it is.
   - SSIM is computed on the three premultiplied colour channels (mean over channels). When
     either frame has any alpha below 255, SSIM is also computed on the alpha channel, and the
     score is the smaller of the two; for two fully opaque frames the alpha SSIM is 1 and the
     score is exactly skimage's RGB SSIM of the frames.
   - The pixel gate uses the largest absolute difference over the four premultiplied channels.
   So fully transparent pixels compare equal whatever colour they carry (they all premultiply to
   0, 0, 0, 0), the same colours under a different alpha do not (alpha differs, and so does the
   premultiplied colour unless it is black), and an alpha channel that did not change can never
   average a colour difference away: a threshold means the same for opaque and transparent renders.
4. SSIM with pinned settings (`farm.compare.ssim`: Gaussian window sigma 1.5, 11 taps, data range 255,
   population covariance, borders cropped by 5 pixels), equal to
   `skimage.metrics.structural_similarity(..., gaussian_weights=True, sigma=1.5,
   use_sample_covariance=False, data_range=255, channel_axis=-1)`.
5. Pixel gate: `pixels_over` is the share of pixels whose largest channel difference exceeds
   `Thresholds.pixel_delta`. A mean SSIM can hide a small broken region; the gate does not.

The frame passes when SSIM >= `min_ssim` and `pixels_over` <= `max_pixels_over` (defaults 0.99,
16 and 0.001, i.e. at most 0.1% of pixels off by more than 16). Frames smaller than 11 x 11 have no
SSIM (`ssim` is None) and are judged by the pixel gate alone.

Checks. Each of the two is a *check* (`Comparison.checks`, in `Comparison.to_dict()` as
``"checks"``): ``{"ssim": {...}, "pixels_over": {...}}``, each with the row's ``name``, the metric's
``value``, the ``limit`` held against it as text (``">= 0.99"``, ``"<= 0.1%"``) and ``passed``
(True, False, or None when the metric does not exist, such as the SSIM of a tiny frame). `compare`
decides with the same checks, and the reports only show them: they hold no threshold of their own.
Results written before checks were recorded get them from `metric_checks`, the one place that
derives them from the values and thresholds a results document keeps.

The heatmaps of a comparison are farm.compare.heatmaps; the pixel digest is farm.images.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from farm.compare.ssim import WIN_SIZE, ssim_channels
from farm.images import as_rgba, image_digest
from farm.plan.thresholds import Thresholds

__all__ = [
    "Comparison",
    "compare",
    "metric_checks",
    "premultiply",
    "recorded_thresholds",
    "thresholds_text",
]

Status = Literal["identical", "pass", "fail"]


@functools.lru_cache(maxsize=4096)
def _checks(ssim: float | None, pixels_over: float, th: Thresholds) -> dict[str, dict[str, Any]]:
    """The checks of a comparison (see the module docstring): the one place a metric meets its threshold.
    Cached: every exact match of a run with the same thresholds shares one dict (read it, never change it)."""
    return {
        "ssim": {"name": "SSIM (min of colour and alpha)", "value": ssim, "limit": f">= {th.min_ssim}",
                 "passed": None if ssim is None else bool(ssim >= th.min_ssim)},
        "pixels_over": {"name": f"pixels off by more than {th.pixel_delta}", "value": pixels_over,
                        "limit": f"<= {100 * th.max_pixels_over:g}%",
                        "passed": bool(pixels_over <= th.max_pixels_over)},
    }


@functools.cache
def recorded_thresholds(th: Thresholds) -> dict[str, float | int]:
    """`th` as a results document records it: one dict for every trace with these thresholds (a run of 100k
    traces has a few distinct ones), shared by the trace and its metrics; read it, never change it."""
    return th.to_dict()


def metric_checks(metrics: Mapping[str, Any] | None, thresholds: Mapping[str, Any] | None) -> dict[str, dict]:
    """A trace's checks from its results: the recorded ``metrics["checks"]``, or for results written
    before checks were recorded, derived from the metrics and the thresholds they were held against
    ({} when the trace has no metrics)."""
    if not metrics:
        return {}
    if isinstance(metrics.get("checks"), Mapping):
        return dict(metrics["checks"])
    return _checks(metrics.get("ssim"), metrics.get("pixels_over") or 0.0, Thresholds.read(thresholds))


def thresholds_text(thresholds: Mapping[str, Any] | None) -> str:
    """The thresholds of a trace in words, for a trace that has no checks (a new one, one that did not render)."""
    th = Thresholds.read(thresholds)
    return (f"SSIM >= {th.min_ssim}, at most {round(100 * th.max_pixels_over, 4)}% of pixels off by more"
            f" than {th.pixel_delta}")


@dataclass
class Comparison:
    """The outcome of one comparison and every metric behind it."""

    status: Status
    thresholds: Thresholds
    ssim: float | None = None  # the score held against min_ssim: min(ssim_rgb, ssim_alpha)
    ssim_rgb: float | None = None  # SSIM of the premultiplied colour channels
    ssim_alpha: float | None = None  # SSIM of the alpha channel (1.0 when both frames are opaque)
    pixels_over: float = 0.0  # share of pixels off by more than thresholds.pixel_delta (1.0 if sizes differ)
    max_diff: int = 0  # largest channel difference, premultiplied RGBA, 0 .. 255 (255 if sizes differ)
    reason: str | None = None  # a sentence saying why, when status is "fail"
    digest: str | None = None  # image_digest of the new frame
    golden_digest: str | None = None
    size: tuple[int, int] | None = None  # (width, height) of the new frame
    golden_size: tuple[int, int] | None = None
    ssim_map: np.ndarray | None = field(default=None, repr=False)  # (H, W) float32, when asked for

    @property
    def passed(self) -> bool:
        return self.status != "fail"

    @property
    def checks(self) -> dict[str, dict[str, Any]]:
        """Each threshold's check: name, value, limit, passed (see the module docstring)."""
        return _checks(self.ssim, self.pixels_over, self.thresholds)

    def to_dict(self) -> dict[str, Any]:
        """Every metric and every check, JSON-ready (the map is left out)."""
        return {
            "status": self.status,
            "ssim": self.ssim,
            "ssim_rgb": self.ssim_rgb,
            "ssim_alpha": self.ssim_alpha,
            "pixels_over": self.pixels_over,
            "max_diff": self.max_diff,
            "reason": self.reason,
            "digest": self.digest,
            "golden_digest": self.golden_digest,
            "size": list(self.size) if self.size else None,
            "golden_size": list(self.golden_size) if self.golden_size else None,
            "thresholds": recorded_thresholds(self.thresholds),
            "checks": self.checks,
        }


def premultiply(rgba: np.ndarray) -> np.ndarray:
    """8-bit premultiplied RGBA: colour round(c * a / 255), alpha unchanged (the alpha rule).

    An opaque image comes back as `as_rgba` gives it (possibly the input array itself).
    """
    px = as_rgba(rgba)
    alpha = px[..., 3]
    if alpha.min() == 255:
        return px  # opaque: premultiplied is the same
    # round(c * a / 255) exactly, for every c and a in 0..255 (c * a / 255 never ends in .5):
    # with t = c * a + 128, it is (t + (t >> 8)) >> 8.
    t = px[..., :3] * alpha[..., None].astype(np.uint16)
    t += 128
    t += t >> 8
    t >>= 8
    out = np.empty_like(px)
    out[..., :3] = t
    out[..., 3] = alpha
    return out


def max_channel_diff(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(H, W) uint8: the largest absolute difference over the four channels of two RGBA images."""
    d = np.maximum(p, q)
    d -= np.minimum(p, q)
    return np.maximum(np.maximum(d[..., 0], d[..., 1]), np.maximum(d[..., 2], d[..., 3]))


def compare(
    new_rgba: np.ndarray,
    golden_rgba: np.ndarray,
    thresholds: Thresholds | Mapping[str, Any] | None = None,
    *,
    with_map: bool = False,
    threads: int | None = None,
) -> Comparison:
    """Compare a new frame with its golden (see the module docstring for the rules)."""
    th = thresholds if isinstance(thresholds, Thresholds) else Thresholds.from_dict(thresholds)
    new = as_rgba(new_rgba, "new frame")
    gold = as_rgba(golden_rgba, "golden frame")
    size, golden_size = (new.shape[1], new.shape[0]), (gold.shape[1], gold.shape[0])
    result = Comparison(status="fail", thresholds=th, size=size, golden_size=golden_size)

    if new.shape != gold.shape:
        result.reason = (
            f"The frame is {size[0]}x{size[1]} pixels but its golden is {golden_size[0]}x{golden_size[1]}; "
            "frames of different sizes are not compared."
        )
        result.pixels_over = 1.0
        result.max_diff = 255
        return result

    result.digest, result.golden_digest = image_digest(new), image_digest(gold)
    h, w = new.shape[:2]
    if result.digest == result.golden_digest:
        result.status = "identical"
        result.ssim = result.ssim_rgb = result.ssim_alpha = 1.0
        if with_map:
            result.ssim_map = np.ones((h, w), np.float32)
        return result

    p, q = premultiply(new), premultiply(gold)
    diff = max_channel_diff(p, q)
    result.max_diff = int(diff.max())
    result.pixels_over = float(np.count_nonzero(diff > th.pixel_delta)) / (h * w)

    if result.max_diff == 0:
        # Equal under the alpha rule (e.g. only invisible colour under alpha 0 changed).
        result.ssim = result.ssim_rgb = result.ssim_alpha = 1.0
        if with_map:
            result.ssim_map = np.ones((h, w), np.float32)
    elif h >= WIN_SIZE and w >= WIN_SIZE:
        with_alpha = bool(p[..., 3].min() < 255 or q[..., 3].min() < 255)
        channels = 4 if with_alpha else 3
        per_channel, smap = ssim_channels(p[..., :channels], q[..., :channels], full=with_map, threads=threads)
        result.ssim_rgb = float(per_channel[:3].mean())
        result.ssim_alpha = float(per_channel[3]) if with_alpha else 1.0
        result.ssim = min(result.ssim_rgb, result.ssim_alpha)
        if with_map:
            m = smap[..., :3].mean(axis=2)
            if with_alpha:
                np.minimum(m, smap[..., 3], out=m)
            result.ssim_map = m.astype(np.float32)

    problems = []
    checks = result.checks
    if checks["ssim"]["passed"] is False:
        problems.append(f"SSIM {result.ssim:.6f} is below the minimum {th.min_ssim}")
    if checks["pixels_over"]["passed"] is False:
        n = int(np.count_nonzero(diff > th.pixel_delta))
        problems.append(
            f"{n} of {h * w} pixels ({100 * result.pixels_over:.3f}%) differ by more than {th.pixel_delta} "
            f"in some channel (largest difference {result.max_diff}), more than the "
            f"{100 * th.max_pixels_over:g}% allowed"
        )
    if problems:
        if result.ssim is None:
            problems.append(f"the frame is smaller than {WIN_SIZE}x{WIN_SIZE}, so it has no SSIM")
        result.reason = "; ".join(problems) + "."
        result.reason = result.reason[0].upper() + result.reason[1:]
    else:
        result.status = "pass"
    return result
