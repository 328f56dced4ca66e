"""Text-line crops for the OCR adapters.

A detected text line is a quadrilateral (4, 2) float32 in source pixels,
ordered top-left, top-right, bottom-right, bottom-left.  :func:`crop_quad`
warps it to an upright rectangle; :func:`resize_pad` scales a crop to the
fixed height the recognition and direction models expect and pads it on the
right.  All images are uint8 (H, W, 3) in BGR order.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

__all__ = ["crop_quad", "line_crop", "resize_pad", "cls_input", "rec_input", "rec_width",
           "CLS_HW", "REC_HEIGHT", "REC_MIN_WIDTH", "PAD_VALUE"]

CLS_HW = (48, 192)        # direction model input (height, width), pixels
REC_HEIGHT = 48           # recognition model input height, pixels
REC_MIN_WIDTH = 320       # narrowest recognition input, pixels (PP-OCR's 3x48x320 shape)
PAD_VALUE = 128           # u8 grey that normalises to ~0 with (x - 127.5) / 127.5
TALL_RATIO = 1.5          # crops at least this much taller than wide are turned on their side


def crop_quad(image: np.ndarray, quad: np.ndarray) -> np.ndarray:
    """Perspective-warp the quad (4, 2) of ``image`` (H, W, 3) to an upright crop.

    The crop is as wide as the longer of the top/bottom edges and as tall as
    the longer of the left/right edges (truncated to whole pixels, at least 1);
    bicubic sampling, border pixels replicated.  A crop whose height/width is
    >= 1.5 is rotated 90 degrees counter-clockwise (vertical text lines).
    """
    q = np.asarray(quad, np.float32).reshape(4, 2)
    width = int(max(np.linalg.norm(q[0] - q[1]), np.linalg.norm(q[2] - q[3])))
    height = int(max(np.linalg.norm(q[0] - q[3]), np.linalg.norm(q[1] - q[2])))
    width, height = max(1, width), max(1, height)
    dst = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    m = cv2.getPerspectiveTransform(q, dst)
    crop = cv2.warpPerspective(image, m, (width, height), flags=cv2.INTER_CUBIC,
                               borderMode=cv2.BORDER_REPLICATE)
    if height / width >= TALL_RATIO:
        crop = np.ascontiguousarray(np.rot90(crop))
    return crop


#: ``frame.attrs`` key of the crops made from a frame, shared by the OCR stages
CROPS_KEY = ("text_crop", "crops")


def line_crop(frame: Any, quad: np.ndarray) -> np.ndarray:
    """:func:`crop_quad` of ``frame``'s BGR image, made once per frame and quad: the direction
    and recognition stages read the same line.  The crop is read-only (shared)."""
    q = np.asarray(quad, np.float32).reshape(4, 2)
    crops = frame.attrs.setdefault(CROPS_KEY, {})
    key = q.tobytes()
    crop = crops.get(key)
    if crop is None:
        crop = crops[key] = crop_quad(frame.image(), q)
        crop.flags.writeable = False
    return crop


def resize_pad(crop: np.ndarray, height: int, width: int, pad_value: int = PAD_VALUE) -> np.ndarray:
    """Scale ``crop`` to ``height`` keeping its aspect ratio (width rounded up,
    at most ``width``), then pad on the right with ``pad_value`` to (height, width, 3)."""
    h, w = crop.shape[:2]
    scaled_w = min(width, max(1, math.ceil(height * w / h)))
    out = np.full((height, width, 3), pad_value, np.uint8)
    out[:, :scaled_w] = cv2.resize(crop, (scaled_w, height))
    return out


def rec_width(crop_hw: tuple[int, int], height: int = REC_HEIGHT, min_width: int = REC_MIN_WIDTH) -> int:
    """Recognition input width (pixels) for a crop of (height, width):
    the crop's width at ``height`` (truncated), but never below ``min_width``."""
    h, w = crop_hw
    return max(min_width, int(height * max(w / h, min_width / height)))


def cls_input(crop: np.ndarray) -> np.ndarray:
    """Direction-model input: (48, 192, 3) uint8 BGR."""
    return resize_pad(crop, *CLS_HW)


def rec_input(crop: np.ndarray, height: int = REC_HEIGHT, min_width: int = REC_MIN_WIDTH) -> np.ndarray:
    """Recognition-model input: (height, rec_width(crop), 3) uint8 BGR."""
    return resize_pad(crop, height, rec_width(crop.shape[:2], height, min_width))
