"""Comparison: a frame against its golden (metrics, ssim), heatmaps for the report, and whole runs
against the goldens or against each other (runs: compare_run, diff_runs, verdict).

This package's namespace holds the frame-level pieces; `farm.compare.runs` is imported on its own
(it reads job state and goldens).
"""

from farm.compare.heatmaps import RAMP, diff_heatmap, ssim_heatmap
from farm.compare.metrics import Comparison, compare, premultiply
from farm.images import as_rgba, image_digest
from farm.plan.thresholds import Thresholds

__all__ = ["RAMP", "Comparison", "Thresholds", "as_rgba", "compare", "diff_heatmap", "image_digest", "premultiply",
           "ssim_heatmap"]
