"""Drawing helpers for detections.

Every annotator has ``annotate(image, detections) -> image``: it draws *in
place* on a BGR uint8 array (H, W, 3) and returns the same array.  The caller
owns the image: copy ``frame.image()`` before drawing on it.  Coordinates are
source pixels (the detections' own units); colours are BGR tuples.  Text uses
OpenCV's Hershey fonts, which only cover ASCII: other characters show as ``?``.
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from typing import Any, Protocol

import cv2
import numpy as np

from pipeline.frame import Detections

__all__ = ["Annotator", "BoxAnnotator", "KeypointAnnotator", "TextAnnotator", "AttributeAnnotator", "PALETTE",
           "color_for", "default_annotators", "annotate_all", "draw_outline", "OUTLINE_COLOR", "scale_detections"]

Color = tuple[int, int, int]

# BGR, chosen to stay distinct from each other on typical scenes.
PALETTE: tuple[Color, ...] = (
    (56, 56, 255), (151, 157, 255), (31, 112, 255), (29, 178, 255), (49, 210, 207), (10, 249, 72),
    (23, 204, 146), (134, 219, 61), (52, 147, 26), (187, 212, 0), (168, 153, 44), (255, 194, 0),
    (147, 69, 52), (255, 115, 100), (236, 24, 0), (255, 56, 132), (133, 0, 82), (255, 56, 203),
)
_FONT = cv2.FONT_HERSHEY_SIMPLEX


class Annotator(Protocol):
    def annotate(self, image: np.ndarray, detections: Detections) -> np.ndarray: ...


def color_for(label: str) -> Color:
    """Stable colour of a label (same label, same colour, across runs)."""
    return PALETTE[zlib.crc32(str(label).encode()) % len(PALETTE)]


def _line_width(image: np.ndarray) -> int:
    return max(1, round(max(image.shape[:2]) / 640))


def _font_scale(image: np.ndarray) -> float:
    return max(0.4, min(image.shape[:2]) / 1000)


def _ascii(text: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 else "?" for c in str(text))


def _check(image: np.ndarray) -> None:
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"annotators draw on BGR uint8 (H, W, 3) images, got {image.dtype} {image.shape}")
    if not image.flags.c_contiguous or not image.flags.writeable:
        raise ValueError("annotators draw in place: the image must be a writeable, C-contiguous array")


def _caption(image: np.ndarray, text: str, x: int, y: int, color: Color, scale: float,
             below: bool = False) -> None:
    """Text on a filled ``color`` background with its bottom-left near (x, y).

    The caption sits above y; when that leaves the image (or ``below``) it
    goes under y instead.  It is shifted left to stay inside the image.
    """
    thick = 1 if scale < 0.8 else 2
    (tw, th), base = cv2.getTextSize(text, _FONT, scale, thick)
    h, w = image.shape[:2]
    pad = 2
    box_h = th + base + 2 * pad
    top = y + 1 if (below or y - box_h < 0) else y - box_h
    top = min(max(top, 0), max(h - box_h, 0))
    left = min(max(x, 0), max(w - tw - 2 * pad, 0))
    cv2.rectangle(image, (left, top), (left + tw + 2 * pad, top + box_h), color, -1)
    luma = 0.114 * color[0] + 0.587 * color[1] + 0.299 * color[2]
    fg = (0, 0, 0) if luma > 140 else (255, 255, 255)
    cv2.putText(image, text, (left + pad, top + pad + th), _FONT, scale, fg, thick, cv2.LINE_AA)


@lru_cache(maxsize=16)
def _disk(radius: int) -> np.ndarray:
    r = max(0, int(radius))
    dy, dx = np.mgrid[-r:r + 1, -r:r + 1]
    keep = dx * dx + dy * dy <= r * r + r  # slightly fuller than a strict circle at small radii
    return np.stack([dx[keep], dy[keep]], axis=1).astype(np.int32)


def _stamp(image: np.ndarray, points: np.ndarray, color: Color, radius: int) -> None:
    """Filled dots of ``radius`` and one ``color`` at float (M, 2) ``points``.

    Vectorised: all dots are written with one flat fancy-indexed assignment;
    non-finite points and pixels outside the image are skipped.
    """
    if not len(points):
        return
    pts = points[np.isfinite(points).all(axis=1)]
    h, w = image.shape[:2]
    pts = np.rint(pts.clip(-radius - 1, [w + radius, h + radius])).astype(np.int32)
    xy = (pts[:, None, :] + _disk(radius)[None, :, :]).reshape(-1, 2)
    x, y = xy[:, 0], xy[:, 1]
    inside = (x >= 0) & (x < w) & (y >= 0) & (y < h)
    offset = (y[inside].astype(np.int64) * w + x[inside]) * 3
    flat = image.reshape(-1)  # a view: image is contiguous (checked by the caller)
    for channel, value in enumerate(color):  # scalar fills are the cheapest fancy assignment
        flat[offset + channel] = value


class BoxAnnotator:
    """Box outline per object plus a ``"label score #track"`` caption.

    The colour follows the label (:func:`color_for`); ``#track`` only appears
    for tracked objects (track id >= 0).  ``thickness``/``font_scale`` None
    scale with the image size.
    """

    def __init__(self, thickness: int | None = None, font_scale: float | None = None,
                 show_score: bool = True, show_track: bool = True) -> None:
        self.thickness = thickness
        self.font_scale = font_scale
        self.show_score = show_score
        self.show_track = show_track

    def annotate(self, image: np.ndarray, detections: Detections) -> np.ndarray:
        _check(image)
        if not len(detections):
            return image
        h, w = image.shape[:2]
        lw = self.thickness or _line_width(image)
        scale = self.font_scale or _font_scale(image)
        boxes = np.nan_to_num(detections.xyxy, nan=0.0, posinf=0.0, neginf=0.0)
        boxes = np.rint(boxes).astype(np.int64)
        boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, w - 1)
        boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, h - 1)
        for i, (x1, y1, x2, y2) in enumerate(boxes.tolist()):
            label = str(detections.label[i])
            color = color_for(label)
            cv2.rectangle(image, (x1, y1), (x2, y2), color, lw)
            parts = [_ascii(label)]
            if self.show_score:
                parts.append(f"{float(detections.score[i]):.2f}")
            tid = int(detections.track_id[i])
            if self.show_track and tid >= 0:
                parts.append(f"#{tid}")
            _caption(image, " ".join(parts), x1, y1, color, scale)
        return image


class KeypointAnnotator:
    """Dots for ``detections.keypoints`` and, when present, ``attributes["landmarks"]``.

    Keypoints use the object's label colour and ``radius``; landmarks ((N, 2+)
    arrays, e.g. 468 face-mesh points, source pixels) are small dots of
    ``landmark_color``.  ``radius`` None scales with the image size.
    """

    def __init__(self, radius: int | None = None, landmark_radius: int = 1,
                 landmark_color: Color = (255, 255, 0)) -> None:
        self.radius = radius
        self.landmark_radius = landmark_radius
        self.landmark_color = landmark_color

    def annotate(self, image: np.ndarray, detections: Detections) -> np.ndarray:
        _check(image)
        radius = self.radius if self.radius is not None else _line_width(image) + 1
        lms = []
        for i in range(len(detections)):
            lm = detections.attributes[i].get("landmarks")
            if lm is not None:
                arr = np.asarray(lm, np.float32)
                if arr.ndim == 2 and arr.shape[1] >= 2 and len(arr):
                    lms.append(arr[:, :2])
        if lms:
            _stamp(image, np.concatenate(lms), self.landmark_color, self.landmark_radius)
        for i in range(len(detections)):
            kp = detections.keypoints[i]
            if kp is not None and len(kp):
                pts = np.asarray(kp, np.float32).reshape(len(kp), -1)[:, :2]
                _stamp(image, pts, color_for(str(detections.label[i])), radius)
        return image


class TextAnnotator:
    """Recognised text (``attributes["text"]``) next to its object.

    Text objects (label ``"text"`` or a ``"text"`` attribute) whose keypoints
    are a 4-point quad get the quad drawn as a closed polygon.  The text is
    placed under the box (box captions go above, so both stay readable).
    """

    def __init__(self, color: Color = (0, 220, 255), thickness: int | None = None,
                 font_scale: float | None = None) -> None:
        self.color = color
        self.thickness = thickness
        self.font_scale = font_scale

    def annotate(self, image: np.ndarray, detections: Detections) -> np.ndarray:
        _check(image)
        lw = self.thickness or _line_width(image)
        scale = self.font_scale or _font_scale(image)
        h, w = image.shape[:2]
        for i in range(len(detections)):
            attrs: dict[str, Any] = detections.attributes[i]
            text = attrs.get("text")
            if text is None and str(detections.label[i]) != "text":
                continue
            kp = detections.keypoints[i]
            if kp is not None and len(kp) == 4:
                quad = np.asarray(kp, np.float32).reshape(4, -1)[:, :2]
                if np.isfinite(quad).all():
                    cv2.polylines(image, [np.rint(quad).astype(np.int32).reshape(-1, 1, 2)], True,
                                  self.color, lw, cv2.LINE_AA)
            if text:
                x1, _, _, y2 = np.nan_to_num(detections.xyxy[i]).tolist()
                x = int(np.clip(round(x1), 0, w - 1))
                y = int(np.clip(round(y2), 0, h - 1))
                _caption(image, _ascii(text), x, y, self.color, scale, below=True)
        return image


class AttributeAnnotator:
    """Classifier attributes as caption lines under the box, in the label's colour:
    ``name: value`` for text and numbers (a ``name_score`` beside ``name`` is appended as
    ``0.93``), ``name`` for true flags; false flags, lists, other ``*_score`` values and
    the attributes other drawers show (text, landmarks, ...) are left out."""

    SKIP = frozenset({"text", "text_score", "angle", "angle_score", "landmarks", "face_presence", "rotation"})

    def __init__(self, font_scale: float | None = None, max_lines: int = 8) -> None:
        self.font_scale = font_scale
        self.max_lines = max_lines

    def lines(self, attrs: dict[str, Any]) -> list[str]:
        out = []
        for key, value in attrs.items():
            if key in self.SKIP or (key.endswith("_score") and key[:-6] in attrs):
                continue
            if isinstance(value, (bool, np.bool_)):
                if value:
                    out.append(_ascii(key))
            elif isinstance(value, (str, int, float, np.integer, np.floating)):
                text = f"{value:.3g}" if isinstance(value, (float, np.floating)) else str(value)
                score = attrs.get(f"{key}_score")
                if isinstance(score, (float, np.floating)):
                    text += f" {float(score):.2f}"
                out.append(_ascii(f"{key}: {text}"))
        return out[: self.max_lines]

    def annotate(self, image: np.ndarray, detections: Detections) -> np.ndarray:
        _check(image)
        scale = self.font_scale or _font_scale(image)
        h, w = image.shape[:2]
        step = cv2.getTextSize("Ag", _FONT, scale, 1 if scale < 0.8 else 2)[0][1] + 10
        for i in range(len(detections)):
            lines = self.lines(detections.attributes[i])
            if not lines:
                continue
            x1, _, _, y2 = np.nan_to_num(detections.xyxy[i]).tolist()
            x = int(np.clip(round(x1), 0, w - 1))
            y = int(np.clip(round(y2), 0, h - 1))
            color = color_for(str(detections.label[i]))
            for k, text in enumerate(lines):
                _caption(image, text, x, min(y + k * step, h - 1), color, scale, below=True)
        return image


def default_annotators() -> list[Annotator]:
    """Boxes, then keypoints/landmarks, then text, then attributes: the encoder's default drawing."""
    return [BoxAnnotator(), KeypointAnnotator(), TextAnnotator(), AttributeAnnotator()]


def annotate_all(image: np.ndarray, detections: Detections,
                 annotators: list[Annotator] | None = None) -> np.ndarray:
    """Apply ``annotators`` (default: :func:`default_annotators`) in place, in order."""
    for ann in annotators if annotators is not None else default_annotators():
        image = ann.annotate(image, detections)
    return image


OUTLINE_COLOR: Color = (255, 255, 255)


def draw_outline(image: np.ndarray, polygon: np.ndarray, color: Color = OUTLINE_COLOR) -> np.ndarray:
    """A closed outline through ``polygon`` ((K, 2) pixels), e.g. the region a preprocess stage
    cropped; in place, line width as the boxes'."""
    _check(image)
    pts = np.rint(np.asarray(polygon, np.float64) - 0.5).astype(np.int32).reshape(-1, 1, 2)
    cv2.polylines(image, [pts], True, color, _line_width(image), cv2.LINE_AA)
    return image


def scale_detections(detections: Detections, sx: float, sy: float) -> Detections:
    """A copy of ``detections`` with boxes, keypoints and landmarks scaled by (sx, sy) (to draw
    on a resized image)."""
    det = detections[np.arange(len(detections))]
    scale = np.array([sx, sy], np.float32)
    det.xyxy = det.xyxy * np.tile(scale, 2)
    det.keypoints = [None if k is None else np.asarray(k, np.float32)[:, :2] * scale for k in det.keypoints]
    det.attributes = [
        {**a, "landmarks": np.asarray(a["landmarks"], np.float32)[:, :2] * scale} if "landmarks" in a else a
        for a in det.attributes
    ]
    return det
