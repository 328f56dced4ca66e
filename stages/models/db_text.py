"""PP-OCR text detection (DB, "differentiable binarisation").

Model: ``ppocr/ch_PP-OCRv4_det_infer`` - input N x 3 x H x W with H and W
multiples of 32, BGR (PaddleOCR feeds OpenCV images as they are decoded);
output N x 1 x H x W, the probability that a pixel belongs to text.

Normalisation (option ``normalize``): ``"half"`` (default) is
``(x / 255 - 0.5) / 0.5`` as RapidOCR's default configuration uses;
``"imagenet"`` is PaddleOCR's training statistics (ImageNet mean/std applied
in B, G, R order).  On the ``testsrc://ticker`` scenes ``"half"`` matches
RapidOCR's boxes to about a pixel and splits fewer lines into words.

The input size follows the source size (see :meth:`DbTextAdapter.input_size`):
the frame is stretched (no letterbox) so that its short side is at least
``limit_side_len`` pixels, as PP-OCR's reference pipeline does.
"""

from __future__ import annotations

from typing import ClassVar

import cv2
import numpy as np
import pyclipper

from pipeline.engine import InputSpec
from pipeline.frame import Detections

from .base import DetectorAdapter, register

__all__ = ["DbTextAdapter", "order_quad", "reading_order", "input_size_for"]

# ImageNet statistics in 0..255 units, applied in PaddleOCR's channel order (B, G, R).
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)
NORMALIZATIONS = {
    "imagenet": InputSpec("BGR", "BGR", IMAGENET_MEAN, IMAGENET_STD),            # PaddleOCR's det config
    "half": InputSpec("BGR", "BGR", (127.5, 127.5, 127.5), (127.5, 127.5, 127.5)),  # RapidOCR's default
}


def _round32(value: float) -> int:
    return max(32, int(round(value / 32) * 32))


def input_size_for(src_wh: tuple[int, int], limit_side_len: int = 736, limit_type: str = "min",
                   max_side_len: int = 2000) -> tuple[int, int]:
    """Model input (height, width), multiples of 32, for a source of (width, height) pixels.

    First the long side is brought down to ``max_side_len`` if it is larger.
    Then, with ``limit_type="min"`` the short side is raised to ``limit_side_len``
    when smaller (small text stays large enough to detect); with ``"max"`` the
    long side is lowered to ``limit_side_len`` when larger.  Each side is then
    rounded to the nearest multiple of 32.
    """
    w, h = float(src_wh[0]), float(src_wh[1])
    if max(w, h) > max_side_len:
        s = max_side_len / max(w, h)
        w, h = float(_round32(int(w * s))), float(_round32(int(h * s)))
    if limit_type == "min":
        s = limit_side_len / min(w, h) if min(w, h) < limit_side_len else 1.0
    elif limit_type == "max":
        s = limit_side_len / max(w, h) if max(w, h) > limit_side_len else 1.0
    else:
        raise ValueError(f"limit_type must be 'min' or 'max', got {limit_type!r}")
    return _round32(int(h * s)), _round32(int(w * s))


def order_quad(points: np.ndarray) -> np.ndarray:
    """Order 4 points (4, 2) as top-left, top-right, bottom-right, bottom-left.

    The two left-most points give the left edge (upper one first), the two
    right-most the right edge.
    """
    pts = np.asarray(points, np.float32).reshape(4, 2)
    by_x = pts[np.argsort(pts[:, 0], kind="stable")]
    left = by_x[:2][np.argsort(by_x[:2, 1], kind="stable")]
    right = by_x[2:][np.argsort(by_x[2:, 1], kind="stable")]
    return np.stack([left[0], right[0], right[1], left[1]])


def reading_order(quads: list[np.ndarray], same_line_px: float = 10.0) -> list[int]:
    """Indices of ``quads`` (each (4, 2), top-left first) top-to-bottom, left-to-right.

    Sorted by the top-left corner's (y, x); then neighbours whose top-left y
    differ by less than ``same_line_px`` are put left to right.
    """
    order = sorted(range(len(quads)), key=lambda k: (float(quads[k][0, 1]), float(quads[k][0, 0])))
    for i in range(len(order) - 1):
        for j in range(i, -1, -1):
            a, b = quads[order[j]][0], quads[order[j + 1]][0]
            if abs(float(b[1] - a[1])) < same_line_px and b[0] < a[0]:
                order[j], order[j + 1] = order[j + 1], order[j]
            else:
                break
    return order


def _min_rect(points: np.ndarray) -> tuple[np.ndarray, float]:
    """Minimum-area rotated rectangle of points (K, 2) as an ordered quad, and its short side."""
    rect = cv2.minAreaRect(np.asarray(points, np.float32).reshape(-1, 1, 2))
    return order_quad(cv2.boxPoints(rect)), float(min(rect[1]))


def _mean_inside(prob: np.ndarray, quad: np.ndarray) -> float:
    """Mean of ``prob`` (H, W) over the pixels inside the quad."""
    h, w = prob.shape
    x0 = int(np.clip(np.floor(quad[:, 0].min()), 0, w - 1))
    x1 = int(np.clip(np.ceil(quad[:, 0].max()), 0, w - 1))
    y0 = int(np.clip(np.floor(quad[:, 1].min()), 0, h - 1))
    y1 = int(np.clip(np.ceil(quad[:, 1].max()), 0, h - 1))
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
    cv2.fillPoly(mask, [(quad - (x0, y0)).astype(np.int32)], 1)
    return float(cv2.mean(prob[y0:y1 + 1, x0:x1 + 1], mask)[0])


def _unclip(quad: np.ndarray, ratio: float) -> np.ndarray:
    """Grow the quad outwards by area * ratio / perimeter pixels (rounded joins); (K, 2)."""
    area = abs(cv2.contourArea(quad))
    perimeter = float(np.linalg.norm(quad - np.roll(quad, 1, axis=0), axis=1).sum())
    if perimeter <= 0:
        return quad
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(np.round(quad).astype(np.int64).tolist(), pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    paths = offset.Execute(area * ratio / perimeter)
    if not paths:
        return quad
    return np.concatenate([np.asarray(p, np.float32).reshape(-1, 2) for p in paths])


@register("db_text")
class DbTextAdapter(DetectorAdapter):
    """Text lines as rotated quads: label "text", keypoints = quad (4, 2)
    (top-left, top-right, bottom-right, bottom-left), xyxy = its bounding box,
    score = mean text probability inside the detected region."""

    input_spec: InputSpec = NORMALIZATIONS["half"]
    letterbox: ClassVar[bool] = False

    def __init__(self, normalize: str = "half", thresh: float = 0.3, box_thresh: float = 0.5, unclip_ratio: float = 1.6,
                 min_size: float = 3.0, max_candidates: int = 1000, dilate: bool = True,
                 limit_side_len: int = 736, limit_type: str = "min", max_side_len: int = 2000) -> None:
        if normalize not in NORMALIZATIONS:
            raise ValueError(f"normalize must be one of {', '.join(NORMALIZATIONS)}, got {normalize!r}")
        if limit_type not in ("min", "max"):
            raise ValueError(f"limit_type must be 'min' or 'max', got {limit_type!r}")
        self.input_spec = NORMALIZATIONS[normalize]
        self.thresh = thresh
        self.box_thresh = box_thresh
        self.unclip_ratio = unclip_ratio
        self.min_size = min_size
        self.max_candidates = max_candidates
        self.dilate = dilate
        self.limit_side_len = limit_side_len
        self.limit_type = limit_type
        self.max_side_len = max_side_len

    @classmethod
    def output_problem(cls, shapes: list[tuple[int, ...]]) -> str | None:
        if len(shapes) != 1 or len(shapes[0]) != 4 or shapes[0][1] not in (1, -1):
            return "reads one [N,1,H,W] probability map"
        return None

    def input_size(self, src_wh: tuple[int, int]) -> tuple[int, int]:
        """(height, width) to run the model at for a source of (width, height)."""
        return input_size_for(src_wh, self.limit_side_len, self.limit_type, self.max_side_len)

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        if len(outputs) != 1 or outputs[0].ndim != 4 or outputs[0].shape[1] != 1:
            shapes = ", ".join(str(list(o.shape)) for o in outputs)
            raise ValueError(f"decoder 'db_text' reads one N x 1 x H x W probability map; the outputs are {shapes}")
        prob = np.asarray(outputs[0], np.float32).reshape(outputs[0].shape[-2:])
        h, w = prob.shape
        mask = (prob > self.thresh).astype(np.uint8)
        if self.dilate:
            mask = cv2.dilate(mask, np.ones((2, 2), np.uint8))
        contours, _ = cv2.findContours(mask, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
        quads: list[np.ndarray] = []
        scores: list[float] = []
        for contour in contours[: self.max_candidates]:
            quad, short = _min_rect(contour.reshape(-1, 2))
            if short < self.min_size:
                continue
            score = _mean_inside(prob, quad)
            if score < self.box_thresh:
                continue
            quad, short = _min_rect(_unclip(quad, self.unclip_ratio))
            if short < self.min_size + 2:
                continue
            # Map from probability-map pixels to model-input pixels (same size for this model).
            quad = quad * np.array([input_hw[1] / w, input_hw[0] / h], np.float32)
            quad[:, 0] = quad[:, 0].clip(0, input_hw[1] - 1)
            quad[:, 1] = quad[:, 1].clip(0, input_hw[0] - 1)
            quad = order_quad(quad)
            if np.linalg.norm(quad[0] - quad[1]) <= 3 or np.linalg.norm(quad[0] - quad[3]) <= 3:
                continue
            quads.append(quad)
            scores.append(score)
        if not quads:
            return Detections()
        order = reading_order(quads)
        quads = [quads[k] for k in order]
        xyxy = np.array([[q[:, 0].min(), q[:, 1].min(), q[:, 0].max(), q[:, 1].max()] for q in quads], np.float32)
        return Detections(xyxy=xyxy, score=np.array([scores[k] for k in order], np.float32),
                          label="text", keypoints=quads)
