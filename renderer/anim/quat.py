"""Vectorised quaternion helpers. Quaternions are stored x, y, z, w (as MDX stores them).

Every function takes arrays of shape (..., 4) and works in float64.
"""

from __future__ import annotations

import numpy as np

IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])

# gl-matrix's `quat.slerp` switches to plain linear interpolation when 1 - cos(angle) is below this.
SLERP_LINEAR_EPSILON = 1e-6


def components(q: np.ndarray):
    """The x, y, z, w components of (..., 4) quaternions, as views (what np.moveaxis(q, -1, 0)
    unpacks to, without its Python overhead)."""
    q = np.asarray(q, np.float64)
    return q[..., 0], q[..., 1], q[..., 2], q[..., 3]


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b (apply b first, then a)."""
    ax, ay, az, aw = components(a)
    bx, by, bz, bw = components(b)
    return np.stack([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ], axis=-1)


def conjugate(q: np.ndarray) -> np.ndarray:
    q = np.array(q, np.float64)
    q[..., :3] *= -1
    return q


def normalize(q: np.ndarray) -> np.ndarray:
    """Unit quaternions; a zero (or non-finite-length) quaternion becomes the identity."""
    q = np.asarray(q, np.float64)
    n = np.sqrt(np.sum(q * q, axis=-1, keepdims=True))
    ok = (n > 0) & np.isfinite(n)
    return np.where(ok, q / np.where(ok, n, 1.0), IDENTITY)


def to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation matrices (column vectors) of the normalised quaternions."""
    x, y, z, w = components(normalize(q))
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    m = np.empty(x.shape + (3, 3))
    m[..., 0, 0] = 1 - 2 * (yy + zz)
    m[..., 0, 1] = 2 * (xy - wz)
    m[..., 0, 2] = 2 * (xz + wy)
    m[..., 1, 0] = 2 * (xy + wz)
    m[..., 1, 1] = 1 - 2 * (xx + zz)
    m[..., 1, 2] = 2 * (yz - wx)
    m[..., 2, 0] = 2 * (xz - wy)
    m[..., 2, 1] = 2 * (yz + wx)
    m[..., 2, 2] = 1 - 2 * (xx + yy)
    return m


def from_matrix(m: np.ndarray) -> np.ndarray:
    """Quaternion of one 3x3 rotation matrix (Shepperd's method)."""
    m = np.asarray(m, np.float64)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = np.sqrt(tr + 1.0) * 2
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = [0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s]
    elif m[1, 1] > m[2, 2]:
        s = np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = [(m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s]
    else:
        s = np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = [(m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s]
    return normalize(np.array(q))


def axis_angle(axis, angle) -> np.ndarray:
    """Quaternion(s) rotating by `angle` radians about the unit `axis` (right-handed)."""
    angle = np.asarray(angle, np.float64)
    axis = np.asarray(axis, np.float64)
    h = angle[..., None] / 2
    return np.concatenate([axis * np.sin(h), np.cos(h)], axis=-1)


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors v (..., 3) by the normalised quaternions q (..., 4)."""
    return np.einsum("...ij,...j->...i", to_matrix(q), np.asarray(v, np.float64))


def slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Shortest-arc spherical interpolation, exactly as gl-matrix `quat.slerp`.

    a, b: (n, 4); t: (n,). The result is not renormalised (neither is gl-matrix's); t outside
    [0, 1] extrapolates along the same great circle.
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    t = np.asarray(t, np.float64)
    cos = np.sum(a * b, axis=-1)
    flip = cos < 0
    b = np.where(flip[..., None], -b, b)
    cos = np.abs(cos)
    curved = (1.0 - cos) > SLERP_LINEAR_EPSILON
    omega = np.arccos(np.clip(cos, -1.0, 1.0))
    sin = np.sin(omega)
    safe = np.where(curved, sin, 1.0)
    s0 = np.where(curved, np.sin((1.0 - t) * omega) / safe, 1.0 - t)
    s1 = np.where(curved, np.sin(t * omega) / safe, t)
    return s0[..., None] * a + s1[..., None] * b
