"""Plane geometry for zones and lines, in pixels (x right, y down).

Polygons are (K, 2) vertex arrays (closed implicitly); segments are pairs of
points; boxes are ``[x1, y1, x2, y2]``.  Functions taking many points are
vectorised over a leading axis.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = ["ANCHORS", "Anchor", "anchors", "box_sides", "signed_distance", "inside_polygon", "segments_cross",
           "self_intersection"]

Anchor = Literal["bottom_center", "center", "top_center", "bottom_left", "bottom_right"]
#: where on its box an object is: fraction of the box width and height from its top-left corner
ANCHORS: dict[str, tuple[float, float]] = {"bottom_center": (0.5, 1.0), "center": (0.5, 0.5), "top_center": (0.5, 0.0),
                                           "bottom_left": (0.0, 1.0), "bottom_right": (1.0, 1.0)}


def anchors(boxes: np.ndarray, anchor: str) -> np.ndarray:
    """(N, 2) anchor points of (N, 4) boxes."""
    fx, fy = ANCHORS[anchor]
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    return np.stack([b[:, 0] + fx * (b[:, 2] - b[:, 0]), b[:, 1] + fy * (b[:, 3] - b[:, 1])], axis=1)


def signed_distance(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N,) distance of points from the line through a and b, positive on the right of the
    directed line a -> b as seen on screen (y down), negative on its left (a != b)."""
    p = np.asarray(points, np.float64).reshape(-1, 2)
    d = np.asarray(b, np.float64) - np.asarray(a, np.float64)
    q = p - np.asarray(a, np.float64)
    return (d[0] * q[:, 1] - d[1] * q[:, 0]) / np.hypot(d[0], d[1])


def box_sides(boxes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N,) +1 for (N, 4) boxes wholly on the right of the directed line through a and b as seen
    on screen (y down), -1 wholly on its left, 0 for boxes that meet the line (anywhere along it,
    also beyond the segment's ends)."""
    x1, y1, x2, y2 = np.asarray(boxes, np.float64).reshape(-1, 4).T
    corners = np.stack([np.stack([x1, y1], 1), np.stack([x2, y1], 1), np.stack([x1, y2], 1),
                        np.stack([x2, y2], 1)], axis=1)
    d = signed_distance(corners.reshape(-1, 2), a, b).reshape(-1, 4)
    return np.where((d > 0).all(axis=1), 1, np.where((d < 0).all(axis=1), -1, 0)).astype(np.int64)


def inside_polygon(points: np.ndarray, polygon: np.ndarray, tolerance: float = 1e-6) -> np.ndarray:
    """(N,) bool: points inside the polygon or on its boundary (within ``tolerance`` pixels;
    even-odd rule inside).  An edge counts as inside so that a zone drawn to the frame's edge
    holds the anchors of boxes clipped to that edge."""
    p = np.asarray(points, np.float64).reshape(-1, 2)
    v = np.asarray(polygon, np.float64).reshape(-1, 2)
    x, y = p[:, :1], p[:, 1:]
    x1, y1 = v[:, 0][None, :], v[:, 1][None, :]
    x2, y2 = np.roll(v[:, 0], -1)[None, :], np.roll(v[:, 1], -1)[None, :]
    spans = (y1 > y) != (y2 > y)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_cross = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
    inside = (spans & (x < x_cross)).sum(axis=1) % 2 == 1
    # on an edge: the nearest point of some edge is within the tolerance
    ex, ey = x2 - x1, y2 - y1
    length2 = np.maximum(ex * ex + ey * ey, 1e-12)
    t = np.clip(((x - x1) * ex + (y - y1) * ey) / length2, 0.0, 1.0)
    near = np.hypot(x1 + t * ex - x, y1 + t * ey - y) <= tolerance
    return inside | near.any(axis=1)


def _orient(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    return float((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))


def segments_cross(p1: np.ndarray, p2: np.ndarray, q1: np.ndarray, q2: np.ndarray) -> bool:
    """True if segment p1-p2 meets segment q1-q2 (touching counts)."""
    p1, p2, q1, q2 = (np.asarray(v, np.float64) for v in (p1, p2, q1, q2))
    d1, d2 = _orient(q1, q2, p1), _orient(q1, q2, p2)
    d3, d4 = _orient(p1, p2, q1), _orient(p1, p2, q2)
    if ((d1 > 0) != (d2 > 0)) and d1 != 0 and d2 != 0 and ((d3 > 0) != (d4 > 0)) and d3 != 0 and d4 != 0:
        return True

    def on(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: float) -> bool:  # c on segment a-b
        return d == 0 and min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])

    return on(q1, q2, p1, d1) or on(q1, q2, p2, d2) or on(p1, p2, q1, d3) or on(p1, p2, q2, d4)


def self_intersection(polygon: np.ndarray) -> tuple[int, int] | None:
    """Indices (i, j) of two edges that cross (edge i runs from vertex i to i + 1), or None
    for a simple polygon."""
    v = np.asarray(polygon, np.float64).reshape(-1, 2)
    n = len(v)
    for i in range(n):
        for j in range(i + 1, n):
            if j == i + 1 or (i == 0 and j == n - 1):
                continue  # neighbours share a vertex
            if segments_cross(v[i], v[(i + 1) % n], v[j], v[(j + 1) % n]):
                return i, j
    return None
