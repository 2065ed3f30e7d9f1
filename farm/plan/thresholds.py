"""When a frame that is not byte-identical to its golden still passes: the thresholds a manifest
sets (per job and per model) and a results document records. They are plan settings, so they live
with the plan; farm.compare.metrics holds them against a comparison's metrics."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

__all__ = ["Thresholds"]


@dataclass(frozen=True)
class Thresholds:
    """When a frame that is not byte-identical to its golden still passes.

    min_ssim: the lowest accepted SSIM score (-1 .. 1).
    pixel_delta: a pixel is "off" when its largest channel difference exceeds this (0 .. 255).
    max_pixels_over: the largest accepted share of off pixels (0 .. 1; 0.001 = 0.1%).
    """

    min_ssim: float = 0.99
    pixel_delta: int = 16
    max_pixels_over: float = 0.001

    def __post_init__(self) -> None:
        # Validated here, so direct construction is checked as strictly as from_dict; stored as plain
        # Python numbers so the values serialise as they read.
        object.__setattr__(self, "min_ssim", _number("min_ssim", self.min_ssim, -1.0, 1.0, integer=False))
        object.__setattr__(self, "pixel_delta", _number("pixel_delta", self.pixel_delta, 0, 255, integer=True))
        object.__setattr__(
            self, "max_pixels_over", _number("max_pixels_over", self.max_pixels_over, 0.0, 1.0, integer=False)
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, base: Thresholds | None = None) -> Thresholds:
        """Thresholds from a manifest table; keys not given keep the values of `base` (or the defaults).

        Unknown keys and values of the wrong type or out of range raise ValueError naming the key.
        """
        base = base or cls()
        if data is None:
            return base
        if not isinstance(data, Mapping):
            raise ValueError(f"thresholds must be a table of {', '.join(cls.keys())}, not {type(data).__name__}")
        known = cls.keys()
        values = {k: getattr(base, k) for k in known}
        for key, value in data.items():
            if not isinstance(key, str) or key not in known:
                raise ValueError(f"unknown threshold {key!r}; known thresholds are {', '.join(known)}")
            values[key] = value
        return cls(**values)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def to_dict(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in self.keys()}

    @classmethod
    def read(cls, data: Mapping[str, Any] | None) -> Thresholds:
        """The thresholds a results document recorded (the defaults for what it lacks or got wrong).
        Read once per distinct table (a comparison reads one for each of its traces, nearly all alike)."""
        try:
            # the type with each value: True and 1 are equal keys to a cache, not to from_dict
            return _read(cls, tuple(sorted((k, type(v).__name__, v) for k, v in (data or {}).items())))
        except (TypeError, AttributeError):  # not a table, or a key or value not hashable or sortable
            return cls._read(data)

    @classmethod
    def _read(cls, data) -> Thresholds:
        try:
            return cls.from_dict(data or {})
        except ValueError:
            return cls()


@functools.lru_cache(maxsize=256)
def _read(cls: type[Thresholds], items: tuple) -> Thresholds:
    return cls._read({k: v for k, _, v in items})


def _number(key: str, value: Any, lo: float, hi: float, *, integer: bool) -> int | float:
    allowed = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, allowed):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"threshold {key!r} must be {kind}, not {type(value).__name__} {value!r}")
    value = int(value) if integer else float(value)
    if not math.isfinite(value) or not lo <= value <= hi:
        raise ValueError(f"threshold {key!r} must be between {lo:g} and {hi:g}, not {value!r}")
    return value
