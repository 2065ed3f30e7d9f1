"""Vertex, strip and node maths for Halo model tags, vectorised with numpy.

- Compressed vertices (halo-tags.md §2): 11/11/10-bit ones'-complement normals, binormals and
  tangents; 16-bit texture coordinates over 32767; node indices stored times three; one weight.
- Triangle strips (§3): one strip per part, cut into 3-index records, padded with 0xFFFF.
- Nodes (§4.1): default translation and conjugated rotation quaternion, relative to the parent.
"""

from __future__ import annotations

import numpy as np

NONE_INDEX = 0xFFFF


def unit_fixed(raw: np.ndarray, bits: int) -> np.ndarray:
    """Ones'-complement fixed point to float: raw & mask over mask, minus 1 when the sign bit is set."""
    raw = raw.astype(np.int64)
    mask = (1 << (bits - 1)) - 1
    v = (raw & mask).astype(np.float32) / np.float32(mask)
    return np.where(raw & (1 << (bits - 1)), v - np.float32(1.0), v).astype(np.float32)


def decompress_vector(packed: np.ndarray) -> np.ndarray:
    """(n,) packed u32 -> (n, 3) float32: i = bits 0-10, j = bits 11-21, k = bits 22-31."""
    p = packed.astype(np.int64)
    out = np.empty((len(p), 3), np.float32)
    out[:, 0] = unit_fixed(p & 0x7FF, 11)
    out[:, 1] = unit_fixed((p >> 11) & 0x7FF, 11)
    out[:, 2] = unit_fixed((p >> 22) & 0x3FF, 10)
    return out


def compress_vector(v: np.ndarray) -> np.ndarray:
    """Inverse of `decompress_vector` (for tests and hand-made tags): (n, 3) -> (n,) u32."""
    v = np.clip(np.asarray(v, np.float64), -1.0, 1.0)
    i = np.round(v[:, 0] * 1023).astype(np.int64) % 2047
    j = np.round(v[:, 1] * 1023).astype(np.int64) % 2047
    k = np.round(v[:, 2] * 511).astype(np.int64) % 1023
    return (i | (j << 11) | (k << 22)).astype(np.uint32)


def normalize(v: np.ndarray) -> np.ndarray:
    """Unit vectors; zero-length rows stay zero."""
    v = np.asarray(v, np.float32)
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, n, out=np.zeros_like(v), where=n > 0)


def decode_compressed(c: np.ndarray) -> dict[str, np.ndarray]:
    """A ModelVertexCompressed array -> position, normal, binormal, tangent, uv, nodes (n,2), weights (n,2).

    Nodes are global node indices (raw // 3; negative -> -1); weight 1 = 1 - weight 0. Normals,
    binormals and tangents are as decoded (not renormalised); uv are not yet scaled by the base map scale.
    """
    raw_nodes = np.stack([c["node0"], c["node1"]], axis=1).astype(np.int32)
    nodes = np.where(raw_nodes < 0, -1, raw_nodes // 3).astype(np.int32)
    w0 = c["weight0"].astype(np.float32) / np.float32(32767)
    return {
        "position": np.asarray(c["position"], np.float32),
        "normal": decompress_vector(c["normal"]),
        "binormal": decompress_vector(c["binormal"]),
        "tangent": decompress_vector(c["tangent"]),
        "uv": c["uv"].astype(np.float32) / np.float32(32767),
        "nodes": nodes,
        "weights": np.stack([w0, np.float32(1.0) - w0], axis=1).astype(np.float32),
    }


def decode_uncompressed(u: np.ndarray) -> dict[str, np.ndarray]:
    """A ModelVertexUncompressed array -> the same keys as `decode_compressed` (nodes possibly local)."""
    return {
        "position": np.asarray(u["position"], np.float32),
        "normal": np.asarray(u["normal"], np.float32),
        "binormal": np.asarray(u["binormal"], np.float32),
        "tangent": np.asarray(u["tangent"], np.float32),
        "uv": np.asarray(u["uv"], np.float32),
        "nodes": np.asarray(u["node"], np.int32),
        "weights": np.asarray(u["weight"], np.float32),
    }


def strip_to_triangles(indices: np.ndarray) -> tuple[np.ndarray, int]:
    """A part's strip (flat u16, trailing 0xFFFF padding allowed) -> ((t, 3) triangles, positions skipped).

    Position k of the strip gives (s[k], s[k+2], s[k+1]) when k is even and (s[k], s[k+1], s[k+2])
    when k is odd: counter-clockwise in Halo's right-handed, Z-up model space, as OpenGL expects
    with glFrontFace(GL_CCW). Triangles with 0xFFFF or a repeated index are skipped; parity is
    counted over every position, skipped ones included.
    """
    s = np.asarray(indices, np.uint16).ravel()
    n = len(s)
    while n and s[n - 1] == NONE_INDEX:
        n -= 1
    s = s[:n]
    if n < 3:
        return np.zeros((0, 3), np.uint16), max(0, n - 2)
    a, b, c = s[:-2], s[1:-1], s[2:]
    odd = (np.arange(n - 2) & 1).astype(bool)
    tri = np.empty((n - 2, 3), np.uint16)
    tri[:, 0] = a
    tri[:, 1] = np.where(odd, b, c)
    tri[:, 2] = np.where(odd, c, b)
    keep = (a != b) & (b != c) & (a != c) & (a != NONE_INDEX) & (b != NONE_INDEX) & (c != NONE_INDEX)
    return tri[keep], int((~keep).sum())


def quaternion_matrix(q: np.ndarray) -> np.ndarray:
    """(n, 4) i, j, k, w -> (n, 3, 3): the column-vector rotation Halo's stored quaternion means.

    Halo stores the conjugate of the usual child-into-parent rotation, so this is R(q̄) = R(q)ᵀ
    (INV/REC quaternion_to_matrix used directly as a column-vector matrix). Quaternions are
    normalised first; a zero quaternion gives the identity.
    """
    q = np.asarray(q, np.float64).reshape(-1, 4)
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    q = np.where(norm > 0, q / np.where(norm > 0, norm, 1), np.array([0.0, 0.0, 0.0, 1.0]))
    i, j, k, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    m = np.empty((len(q), 3, 3))
    m[:, 0, 0] = 1 - 2 * (j * j + k * k)
    m[:, 0, 1] = 2 * (i * j + k * w)
    m[:, 0, 2] = 2 * (i * k - j * w)
    m[:, 1, 0] = 2 * (i * j - k * w)
    m[:, 1, 1] = 1 - 2 * (i * i + k * k)
    m[:, 1, 2] = 2 * (j * k + i * w)
    m[:, 2, 0] = 2 * (i * k + j * w)
    m[:, 2, 1] = 2 * (j * k - i * w)
    m[:, 2, 2] = 1 - 2 * (i * i + j * j)
    return m


def local_matrices(translations: np.ndarray, rotations: np.ndarray) -> np.ndarray:
    """(n, 4, 4) local transforms L = T(t) · R(q̄) of the node default pose."""
    n = len(translations)
    m = np.zeros((n, 4, 4))
    m[:, :3, :3] = quaternion_matrix(rotations)
    m[:, :3, 3] = np.asarray(translations, np.float64)
    m[:, 3, 3] = 1.0
    return m


def world_matrices(local: np.ndarray, parents: list[int]) -> tuple[np.ndarray, list[str]]:
    """W[n] = W[parent] · L[n], resolving parents recursively in any order.

    A parent index out of range, or a cycle, makes the node a root; each such case is described in
    the returned list of problems.
    """
    n = len(local)
    world = np.zeros_like(local)
    state = [0] * n  # 0 unvisited, 1 in progress, 2 done
    problems: list[str] = []
    for start in range(n):
        chain = []
        node = start
        while node != -1 and state[node] == 0:
            state[node] = 1
            chain.append(node)
            p = parents[node]
            if p == -1:
                node = -1
            elif not 0 <= p < n:
                problems.append(f"node {node} has parent index {p}, outside 0..{n - 1}; treated as a root")
                parents[node] = -1
                node = -1
            elif state[p] == 1:
                problems.append(f"node {node}'s parent chain loops back to node {p}; node {node} treated as a root")
                parents[node] = -1
                node = -1
            else:
                node = p
        for c in reversed(chain):
            p = parents[c]
            world[c] = local[c] if p == -1 else world[p] @ local[c]
            state[c] = 2
    return world, problems
