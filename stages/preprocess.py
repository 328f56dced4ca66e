"""The ``preprocess`` stage: privacy masks, a region of interest, quarter turns,
mirroring and scaling, before any model sees the frame.

Steps run in this order, each in the pixels of the previous one: ``masks``
(polygons filled black, in the pixels of the incoming frame), ``crop``,
``rotate`` (clockwise), ``flip``, then ``width``/``height``.  Several
preprocess stages in a row compose into one view of the decoded frame.

Later stages see the result as if the camera delivered it: ``frame.width``,
``frame.height``, ``image()``, ``resized()``, ``warped()`` and the coordinates
of detections are the transformed frame's
(:class:`~pipeline.frame_view.TransformedFrame`).  No full-size pixels are made
for that: model inputs are scaled straight from (slices of) the decoder's
planes.  Sinks write and draw ``frame.original()``, the decoded frame with the
masks applied and every detection mapped back to its pixels, unless told
``view: preprocessed``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from pipeline.frame import OVERLAY, TRACK_BOXES, Frame
from pipeline.frame_view import BufferPool, TransformedFrame, detached, masked
from pipeline.geometry import ViewGeometry, scaled_size
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage

from .motion import BOXES as MOTION_BOXES

__all__ = ["Preprocess"]

MAX_SIDE = 16384
MAX_COORD = 1e6  # mask coordinates (pixels); far beyond any frame, within the rasteriser's range


def _is_fraction(values: list[float]) -> bool:
    """Coordinates given as fractions of the frame: every value within [0, 1]."""
    return all(0.0 <= v <= 1.0 for v in values)


class Preprocess(Stage):
    """Masks, crops, turns, mirrors and scales frames for the stages after it."""

    kind: ClassVar[str] = "transform"
    #: this stage hands on new frame objects (views): joins need it before their branches split
    makes_views: ClassVar[bool] = True

    class Params(StageParams):
        crop: list[float] | None = Field(
            None, description="[x1, y1, x2, y2] region kept, in pixels of the incoming frame, or as fractions "
            "of its width and height when all four are within [0, 1]; rounded to whole pixels")
        rotate: Literal[0, 90, 180, 270] = Field(0, description="clockwise quarter turns after the crop, degrees")
        flip: Literal["none", "horizontal", "vertical"] = Field(
            "none", description="mirror after rotating: horizontal (left-right) or vertical (top-bottom)")
        width: int | None = Field(None, ge=2, le=MAX_SIDE, description="width of the result; with height "
                                  "unset, the height follows the aspect ratio (rounded to even)")
        height: int | None = Field(None, ge=2, le=MAX_SIDE, description="height of the result; with width "
                                   "unset, the width follows the aspect ratio (rounded to even)")
        masks: list[list[list[float]]] = Field(
            default_factory=list, description="privacy polygons filled black before anything else, each "
            "[[x, y], ...] (at least 3 points) in pixels of the incoming frame, or fractions when all its "
            "coordinates are within [0, 1]")

        @field_validator("crop")
        @classmethod
        def _crop(cls, value: list[float] | None) -> list[float] | None:
            if value is None:
                return None
            if len(value) != 4:
                raise PydanticCustomError("crop", f"crop needs 4 numbers [x1, y1, x2, y2], got {len(value)}")
            if not all(math.isfinite(v) for v in value):
                raise PydanticCustomError("crop", "crop coordinates must be finite numbers")
            x1, y1, x2, y2 = value
            if min(value) < 0:
                raise PydanticCustomError("crop", "crop is outside the frame: coordinates must be >= 0")
            if x2 <= x1 or y2 <= y1:
                raise PydanticCustomError("crop", "crop is empty: needs x1 < x2 and y1 < y2")
            return value

        @field_validator("masks")
        @classmethod
        def _masks(cls, value: list[list[list[float]]]) -> list[list[list[float]]]:
            for i, poly in enumerate(value):
                if len(poly) < 3:
                    raise PydanticCustomError("mask", f"mask {i} has {len(poly)} point(s); a polygon needs at least 3")
                for point in poly:
                    if len(point) != 2 or not all(math.isfinite(c) and abs(c) <= MAX_COORD for c in point):
                        raise PydanticCustomError("mask", f"mask {i}: point {point} is not [x, y] (two numbers "
                                                  f"within +-{MAX_COORD:g})")
                if _area(np.asarray(poly, np.float64)) <= 0:
                    raise PydanticCustomError("mask", f"mask {i} has no area (its points are on one line)")
            return value

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open()  # only caches: ``process`` works before ``open`` too

    def open(self) -> None:
        """Start with empty caches (geometry per frame size, mask buffers)."""
        self._pool = BufferPool()
        self._plans: dict[tuple[int, int], tuple[ViewGeometry, list[np.ndarray]]] = {}
        self._chains: dict[tuple[int, int], tuple[ViewGeometry, ViewGeometry, ViewGeometry]] = {}

    def process(self, frame: Frame) -> Frame | None:
        step, polygons = self._plan(frame.width, frame.height)
        if isinstance(frame, TransformedFrame):  # an earlier view: compose, mask the decoded frame
            before: ViewGeometry = frame.geometry  # type: ignore[assignment]
            geometry = self._chain(before, step)
            polygons = [before.to_source(p) for p in polygons]
            base = frame.source
        else:
            if step.is_identity and not polygons:
                return frame
            geometry, base = step, frame
        source = masked(base, polygons, self._pool) if polygons else detached(base)
        if not isinstance(frame, TransformedFrame) and step.is_identity:
            source.detections = frame.detections  # masks only: the frame keeps its geometry
            return source
        view = TransformedFrame.view_of(frame, source, geometry, step.detections_to_view(frame.detections))
        view.attrs = _attrs_to_view(frame.attrs, step)
        return view

    # geometry per incoming frame size ------------------------------------------------------
    def _plan(self, width: int, height: int) -> tuple[ViewGeometry, list[np.ndarray]]:
        hit = self._plans.get((width, height))
        if hit is None:
            hit = self._plans[(width, height)] = (self._geometry(width, height), self._polygons(width, height))
        return hit

    def _chain(self, before: ViewGeometry, step: ViewGeometry) -> ViewGeometry:
        key = (id(before), id(step))
        hit = self._chains.get(key)
        if hit is None or hit[0] is not before or hit[1] is not step:  # the entry keeps both alive
            hit = self._chains[key] = (before, step, before.then(step))
        return hit[2]

    def _geometry(self, width: int, height: int) -> ViewGeometry:
        p = self.params
        g = ViewGeometry.identity(width, height)
        if p.crop is not None:
            g = g.crop(*_crop_pixels(p.crop, width, height))
        g = g.rotate(p.rotate).flip(p.flip)
        if p.width is not None or p.height is not None:
            g = g.resize(*scaled_size(g.size, p.width, p.height))
        return g

    def _polygons(self, width: int, height: int) -> list[np.ndarray]:
        out = []
        for poly in self.params.masks:
            pts = np.asarray(poly, np.float64)
            if _is_fraction(list(pts.reshape(-1))):
                pts = pts * (width, height)
            out.append(pts)
        return out


def _crop_pixels(crop: list[float], width: int, height: int) -> tuple[int, int, int, int]:
    """The crop in whole pixels of a ``width`` x ``height`` frame; errors name the frame size."""
    fraction = _is_fraction(crop)
    scale = (width, height, width, height) if fraction else (1, 1, 1, 1)
    x1, y1, x2, y2 = (int(round(v * s)) for v, s in zip(crop, scale))
    shown = "[" + ", ".join(f"{v:g}" for v in crop) + "]" + (" (fractions)" if fraction else " (pixels)")
    if x2 > width or y2 > height:
        raise ValueError(f"crop {shown} is outside the {width}x{height} frame")
    if x2 <= x1 or y2 <= y1:
        raise ValueError(f"crop {shown} is less than a pixel wide or high on the {width}x{height} frame")
    return x1, y1, x2, y2


def _area(points: np.ndarray) -> float:
    x, y = points[:, 0], points[:, 1]
    return abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))) / 2


def _attrs_to_view(attrs: dict[Any, Any], step: ViewGeometry) -> dict[Any, Any]:
    """The frame's shared attributes for the view: those in pixels that earlier stages set (a
    motion stage's regions, a tracker's estimates, shapes to draw) mapped into it; the incoming
    frame keeps its own."""
    out = dict(attrs)
    for key, value in attrs.items():
        if key[1] == MOTION_BOXES and isinstance(value, np.ndarray) and value.ndim == 2 and value.shape[1] == 4:
            out[key] = step.boxes_to_view(value).astype(np.float32)
        elif key[1] == TRACK_BOXES:
            out[key] = {tid: step.boxes_to_view(box)[0] for tid, box in value.items()}
        elif key[1] == OVERLAY:
            out[key] = [shape.mapped(step.to_view) for shape in value]
    return out
