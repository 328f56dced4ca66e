"""Where a transformed view of a frame lies in that frame: a crop, quarter turns,
mirroring and scaling, composed into one affine map.

Coordinates are continuous pixels, the convention of boxes: pixel (i, j) covers
[i, i + 1) x [j, j + 1), so a W x H frame spans [0, W] x [0, H] and a pixel's
centre is (i + 0.5, j + 0.5).  OpenCV's warps put pixel centres at integers;
:meth:`ViewGeometry.cv_matrix` converts.  Every map here is axis-aligned (a
quarter turn or mirror of a scaled crop), so boxes map to boxes exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .frame import Detections

__all__ = ["ViewGeometry", "ROTATIONS", "FLIPS", "PixelPoint", "map_points", "map_detections", "invert", "scaled_size",
           "nearest_even"]

ROTATIONS = (0, 90, 180, 270)
FLIPS = ("none", "horizontal", "vertical")
_EPS = 1e-6


def scaled_size(size: tuple[int, int], width: int | None, height: int | None) -> tuple[int, int]:
    """(width, height) of ``size`` scaled to ``width`` and/or ``height``: a missing side
    follows the aspect ratio, rounded to the nearest even number (halves up, at least 2)."""
    w, h = size
    if width is not None and height is not None:
        return width, height
    if width is not None:
        return width, nearest_even(width * h / w)
    if height is None:
        raise ValueError("scaled_size needs a width or a height")
    return nearest_even(height * w / h), height


def nearest_even(value: float) -> int:
    """The even number nearest ``value`` (halves up), at least 2: a picture size 4:2:0 chroma fits."""
    return max(2, 2 * math.floor(value / 2 + 0.5))


def _h(m: np.ndarray) -> np.ndarray:
    """2x3 affine -> 3x3 homogeneous."""
    return np.vstack([m, [0.0, 0.0, 1.0]])


def invert(m: np.ndarray) -> np.ndarray:
    """Inverse of a 2x3 affine."""
    return np.linalg.inv(_h(m))[:2]


def map_points(m: np.ndarray, points: Any) -> np.ndarray:
    """(..., 2+) points through the 2x3 affine ``m``; columns after x, y are kept (float32)."""
    pts = np.array(points, np.float32, copy=True)
    if pts.size == 0:
        return pts
    xy = pts[..., :2].astype(np.float64)
    pts[..., :2] = xy @ m[:, :2].T + m[:, 2]
    return pts


def _map_boxes(m: np.ndarray, xyxy: np.ndarray) -> np.ndarray:
    """(N, 4) boxes -> the (N, 4) bounds of their mapped corners (exact for axis-aligned maps)."""
    x1, y1, x2, y2 = (xyxy[:, i] for i in range(4))
    corners = np.stack([np.stack([x1, y1], 1), np.stack([x2, y1], 1), np.stack([x2, y2], 1),
                        np.stack([x1, y2], 1)], 1)
    mapped = map_points(m, corners)
    return np.concatenate([mapped.min(1), mapped.max(1)], 1).astype(np.float32)


def _map_rotation(m: np.ndarray, angle: float) -> float:
    """A clockwise angle from upright (radians, image axes) seen through the map ``m``."""
    alpha = math.pi / 2 - float(angle)
    d = m[:, :2] @ np.array([math.cos(alpha), -math.sin(alpha)])
    out = math.pi / 2 - math.atan2(-d[1], d[0])
    return (out + math.pi) % (2 * math.pi) - math.pi


class PixelPoint(list):
    """An attribute value that is a position ``[x, y]`` in the pixels of the frame its object
    is in; :func:`map_detections` maps it with the boxes.  Serialises as a plain list."""


def map_detections(m: np.ndarray, dets: Detections) -> Detections:
    """``dets`` with boxes, keypoints and the geometric attributes ``landmarks`` ((N, 2+)
    points), ``rotation`` (radians, clockwise from upright) and every :class:`PixelPoint`
    value mapped through the 2x3 affine ``m``.  Labels, scores, track ids and other
    attributes are kept (attribute dicts are shared unless one of those keys changed)."""
    if not len(dets):
        return Detections()
    attrs = []
    for a in dets.attributes:
        points = [k for k, v in a.items() if isinstance(v, PixelPoint)]
        if "landmarks" in a or "rotation" in a or points:
            a = dict(a)
            if a.get("landmarks") is not None:
                a["landmarks"] = map_points(m, a["landmarks"])
            if isinstance(a.get("rotation"), (int, float, np.floating)):
                a["rotation"] = _map_rotation(m, a["rotation"])
            for k in points:
                a[k] = PixelPoint(float(c) for c in map_points(m, a[k][:2]))
        attrs.append(a)
    return Detections(xyxy=_map_boxes(m, dets.xyxy), score=dets.score, label=dets.label,
                      track_id=dets.track_id,
                      keypoints=[None if k is None else map_points(m, k) for k in dets.keypoints],
                      attributes=attrs, class_id=dets.class_id)


@dataclass(frozen=True, eq=False)
class ViewGeometry:
    """A view of a ``source_size`` frame: ``matrix`` (2x3, float64) maps source pixels to
    view pixels (continuous coordinates), ``size`` is the view's (width, height).

    Build it from :meth:`identity` with :meth:`crop`, :meth:`rotate`, :meth:`flip` and
    :meth:`resize`; each step works in the pixels of the view so far.
    """

    matrix: np.ndarray
    size: tuple[int, int]
    source_size: tuple[int, int]
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def identity(cls, width: int, height: int) -> ViewGeometry:
        return cls(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), (int(width), int(height)),
                   (int(width), int(height)))

    # building ------------------------------------------------------------------------------
    def _then(self, step: np.ndarray, size: tuple[int, int]) -> ViewGeometry:
        return ViewGeometry((_h(step) @ _h(self.matrix))[:2], (int(size[0]), int(size[1])), self.source_size)

    def crop(self, x1: int, y1: int, x2: int, y2: int) -> ViewGeometry:
        """Keep view pixels [x1, x2) x [y1, y2) (integers inside the view)."""
        w, h = self.size
        if not (0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h):
            raise ValueError(f"crop [{x1}, {y1}, {x2}, {y2}] is not inside the {w}x{h} frame")
        return self._then(np.array([[1.0, 0.0, -x1], [0.0, 1.0, -y1]]), (x2 - x1, y2 - y1))

    def rotate(self, degrees: int) -> ViewGeometry:
        """Turn the view clockwise by 0, 90, 180 or 270 degrees."""
        w, h = self.size
        if degrees == 0:
            return self
        if degrees == 90:
            return self._then(np.array([[0.0, -1.0, h], [1.0, 0.0, 0.0]]), (h, w))
        if degrees == 180:
            return self._then(np.array([[-1.0, 0.0, w], [0.0, -1.0, h]]), (w, h))
        if degrees == 270:
            return self._then(np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, w]]), (h, w))
        raise ValueError(f"rotation {degrees!r} is not one of {', '.join(map(str, ROTATIONS))}")

    def flip(self, axis: Literal["none", "horizontal", "vertical"]) -> ViewGeometry:
        """Mirror the view left-right (``horizontal``) or top-bottom (``vertical``)."""
        w, h = self.size
        if axis == "none":
            return self
        if axis == "horizontal":
            return self._then(np.array([[-1.0, 0.0, w], [0.0, 1.0, 0.0]]), (w, h))
        if axis == "vertical":
            return self._then(np.array([[1.0, 0.0, 0.0], [0.0, -1.0, h]]), (w, h))
        raise ValueError(f"flip {axis!r} is not one of {', '.join(FLIPS)}")

    def resize(self, width: int, height: int) -> ViewGeometry:
        """Scale the view to (width, height); cached per size (views ask for the same sizes
        on every frame)."""
        key = ("resize", int(width), int(height))
        hit = self._cache.get(key)
        if hit is None:
            w, h = self.size
            hit = self._then(np.array([[width / w, 0.0, 0.0], [0.0, height / h, 0.0]]), (width, height))
            self._cache[key] = hit
        return hit

    def then(self, other: ViewGeometry) -> ViewGeometry:
        """This view followed by ``other`` (a view of this view's pixels)."""
        if other.source_size != self.size:
            raise ValueError(f"cannot chain a view of a {other.source_size} frame after a {self.size} view")
        return self._then(other.matrix, other.size)

    # reading ----------------------------------------------------------------------------------
    @property
    def inverse(self) -> np.ndarray:
        """2x3 map from view pixels back to source pixels."""
        inv = self._cache.get("inverse")
        if inv is None:
            inv = self._cache["inverse"] = invert(self.matrix)
        return inv

    @property
    def is_identity(self) -> bool:
        return self.size == self.source_size and bool(np.allclose(self.matrix, np.eye(2, 3), atol=_EPS))

    @property
    def transposed(self) -> bool:
        """True if view x follows source y (a quarter turn)."""
        return abs(self.matrix[0, 0]) < _EPS

    def cv_matrix(self) -> np.ndarray:
        """The map for ``cv2.warpAffine`` (pixel centres at integers): source -> view."""
        m = self.matrix
        out = m.copy()
        out[:, 2] = m[:, :2] @ np.array([0.5, 0.5]) + m[:, 2] - 0.5
        return out

    def region(self) -> tuple[float, float, float, float]:
        """(x1, y1, x2, y2): the part of the source the view shows, source pixels."""
        corners = self.outline()
        (x1, y1), (x2, y2) = corners.min(0), corners.max(0)
        return float(x1), float(y1), float(x2), float(y2)

    def outline(self) -> np.ndarray:
        """(4, 2) float32: the view's corners (top-left, top-right, bottom-right, bottom-left
        of the view) in source pixels."""
        w, h = self.size
        return map_points(self.inverse, [[0, 0], [w, 0], [w, h], [0, h]])

    def covers_source(self) -> bool:
        """True if the view shows the whole source frame (no crop)."""
        sw, sh = self.source_size
        return bool(np.allclose(self.region(), (0, 0, sw, sh), atol=1e-3))

    def to_view(self, points: Any) -> np.ndarray:
        return map_points(self.matrix, points)

    def to_source(self, points: Any) -> np.ndarray:
        return map_points(self.inverse, points)

    def detections_to_view(self, dets: Detections) -> Detections:
        return map_detections(self.matrix, dets)

    def boxes_to_view(self, xyxy: Any) -> np.ndarray:
        """(N, 4) boxes in source pixels -> the (N, 4) boxes around their corners in the view."""
        return _map_boxes(self.matrix, np.asarray(xyxy, np.float64).reshape(-1, 4))

    def detections_to_source(self, dets: Detections) -> Detections:
        return map_detections(self.inverse, dets)
