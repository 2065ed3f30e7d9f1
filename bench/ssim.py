"""SSIM speed: scikit-image against farm.compare.ssim on the same 1024 x 1024 RGB pair, in one process.

    .venv/bin/python bench/ssim.py [--runs 7] [--size 1024]

Runs are interleaved (skimage, ours, skimage, ours, ...) so both see the same machine load; the
best run of each counts. Prints both times, the ratio (target: at least 5x), and checks that the
two values agree to 1e-6 (exit status 1 if they do not). Also times ours on one thread, since
the machine may be shared and a second core is not always free.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from farm.compare.ssim import ssim  # noqa: E402

TARGET_RATIO = 5.0
TOLERANCE = 1e-6


def make_pair(size: int) -> tuple[np.ndarray, np.ndarray]:
    """A render-like RGB frame (shading, texture, edges, noise) and a slightly different copy."""
    rng = np.random.default_rng(2024)
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    img = np.stack(
        [
            128 + 100 * np.sin(x / 37) * np.cos(y / 53),
            40 + 180 * x / size + 10 * np.sin(x * 0.7) * np.sin(y * 0.9),
            90 + 60 * np.cos((x + y) / 19),
        ],
        axis=2,
    )
    disc = (y - size * 0.45) ** 2 + (x - size * 0.55) ** 2 < (size * 0.25) ** 2
    img[disc] = img[disc] * 0.4 + np.array([200, 40, 20]) * 0.6
    a = np.clip(np.rint(img + rng.normal(0, 4, img.shape)), 0, 255).astype(np.uint8)
    b = np.clip(a.astype(np.int16) + rng.integers(-3, 4, a.shape), 0, 255).astype(np.uint8)
    b[300:340, 500:540] = 255 - b[300:340, 500:540]
    return a, b


def skimage_ssim(a: np.ndarray, b: np.ndarray) -> float:
    from skimage.metrics import structural_similarity

    return float(
        structural_similarity(
            a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255, channel_axis=-1
        )
    )


def timed(fn) -> tuple[float, float]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each (best counts); default 7")
    parser.add_argument("--size", type=int, default=1024, help="image side in pixels; default 1024")
    args = parser.parse_args(argv)

    a, b = make_pair(args.size)
    print(f"SSIM benchmark: {args.size}x{args.size} RGB uint8, best of {args.runs} interleaved runs")
    print("settings: gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255, channel_axis=-1")
    print(f"machine: {os.cpu_count()} CPUs, 1-minute load average {os.getloadavg()[0]:.2f}")

    ssim(a, b)  # warm-up: imports, band matrices
    skimage_ssim(a[:64, :64], b[:64, :64])
    t_sk, t_ours, t_one = [], [], []
    v_sk = v_ours = v_one = None
    for _ in range(args.runs):
        dt, v_sk = timed(lambda: skimage_ssim(a, b))
        t_sk.append(dt)
        dt, v_ours = timed(lambda: ssim(a, b))
        t_ours.append(dt)
        dt, v_one = timed(lambda: ssim(a, b, threads=1))
        t_one.append(dt)

    best_sk, best_ours, best_one = min(t_sk), min(t_ours), min(t_one)
    diff = max(abs(v_ours - v_sk), abs(v_one - v_sk))
    ratio, ratio_one = best_sk / best_ours, best_sk / best_one
    rows = [
        ("skimage structural_similarity", f"{best_sk * 1e3:8.1f} ms   SSIM {v_sk:.12f}"),
        ("farm.compare.ssim (default threads)", f"{best_ours * 1e3:8.1f} ms   SSIM {v_ours:.12f}"),
        ("farm.compare.ssim (one thread)", f"{best_one * 1e3:8.1f} ms   SSIM {v_one:.12f}"),
        None,
        ("ratio skimage / farm.compare.ssim", f"{ratio:8.1f}x   (one thread: {ratio_one:.1f}x)"),
        (f"target: at least {TARGET_RATIO:g}x", "met" if ratio >= TARGET_RATIO else "NOT MET"),
        ("values agree to 1e-6", f"{'yes' if diff <= TOLERANCE else 'NO'} (|difference| = {diff:.1e})"),
    ]
    print()
    for row in rows:
        print(f"  {row[0]:<30}: {row[1]}" if row else "")
    return 0 if diff <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
