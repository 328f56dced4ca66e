"""Moving points that belong to a box along with the box."""

from __future__ import annotations

import numpy as np

__all__ = ["follow_box"]


def follow_box(points: np.ndarray, old_box: np.ndarray, new_box: np.ndarray) -> np.ndarray:
    """(K, 2+) points (keypoints, landmarks) of an object whose box moved from ``old_box`` to
    ``new_box`` (``[x1, y1, x2, y2]``): x and y scaled about the box centre by the change of
    width and height and moved with the centre; further columns (z) are scaled by the mean
    of both factors.  Returns a new float32 array."""
    pts = np.array(points, np.float32, copy=True)
    if pts.ndim != 2 or pts.shape[1] < 2 or not len(pts):
        return pts
    ob = np.asarray(old_box, np.float64)
    nb = np.asarray(new_box, np.float64)
    old_c = (ob[:2] + ob[2:]) / 2
    new_c = (nb[:2] + nb[2:]) / 2
    old_wh = np.maximum(ob[2:] - ob[:2], 1e-6)
    scale = (nb[2:] - nb[:2]) / old_wh
    pts[:, :2] = (pts[:, :2] - old_c) * scale + new_c
    if pts.shape[1] > 2:
        pts[:, 2:] *= float(scale.mean())
    return pts
