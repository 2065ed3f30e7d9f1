"""Per-vertex tangents for normal mapping when a geoset has no TANG chunk (rules.HD_TANGENTS).

For each triangle, the tangent T and bitangent B solve the UV gradient (the direction in which u
and v grow across the face); they are summed per vertex (area-weighted, as the unnormalised cross
products are), then T is made orthogonal to the vertex normal (Gram-Schmidt) and normalised. The
handedness w is the sign of dot(cross(N, T), B) (+1 or -1), so B = cross(N, T) * w, as TANG stores.
A vertex whose UVs give no gradient gets any unit vector orthogonal to its normal, with w = +1.
"""

from __future__ import annotations

import numpy as np


def generate_tangents(positions, normals, uvs, triangles) -> np.ndarray:
    """(n, 4) float32 tangents (xyz, handedness w) from (n, 3) positions / normals, (n, 2) uvs and
    (t, 3) triangles."""
    p = np.asarray(positions, np.float64).reshape(-1, 3)
    n = np.asarray(normals, np.float64).reshape(-1, 3)
    uv = np.asarray(uvs, np.float64).reshape(-1, 2)
    tri = np.asarray(triangles, np.int64).reshape(-1, 3)
    count = len(p)
    t_sum, b_sum = np.zeros((count, 3)), np.zeros((count, 3))
    if len(tri):
        e1, e2 = p[tri[:, 1]] - p[tri[:, 0]], p[tri[:, 2]] - p[tri[:, 0]]
        d1, d2 = uv[tri[:, 1]] - uv[tri[:, 0]], uv[tri[:, 2]] - uv[tri[:, 0]]
        det = d1[:, 0] * d2[:, 1] - d2[:, 0] * d1[:, 1]
        r = np.where(np.abs(det) > 1e-20, 1.0 / np.where(det == 0, 1.0, det), 0.0)[:, None]
        t = (e1 * d2[:, 1:2] - e2 * d1[:, 1:2]) * r
        b = (e2 * d1[:, 0:1] - e1 * d2[:, 0:1]) * r
        for k in range(3):
            np.add.at(t_sum, tri[:, k], t)
            np.add.at(b_sum, tri[:, k], b)
    t = t_sum - n * np.einsum("ij,ij->i", n, t_sum)[:, None]
    length = np.linalg.norm(t, axis=1)
    bad = length < 1e-12
    if bad.any():  # any vector orthogonal to the normal
        helper = np.where(np.abs(n[bad, 0:1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
        t[bad] = helper - n[bad] * np.einsum("ij,ij->i", n[bad], helper)[:, None]
        length[bad] = np.linalg.norm(t[bad], axis=1)
    t = t / np.where(length > 0, length, 1.0)[:, None]
    w = np.where(np.einsum("ij,ij->i", np.cross(n, t), b_sum) < 0.0, -1.0, 1.0)
    return np.concatenate([t, w[:, None]], axis=1).astype(np.float32)
