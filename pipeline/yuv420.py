"""Arithmetic on the planes of 4:2:0 video (yuv420p and full-range yuvj420p decoder frames).

Luma (Y) is full size; the two chroma planes (U = Cb, V = Cr) have half the width and
height, rounded up.  Planes are (rows, columns) uint8 arrays, often views into a decoder
frame's buffers (owned by the frame: do not keep them past it).  Colour follows BT.601,
as FFmpeg's scaler does for streams that do not name their colour space.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

__all__ = ["plane_array", "yuv420_planes", "warp_yuv420", "resize_yuv420", "source_window"]


def plane_array(plane: Any, width: int) -> np.ndarray:
    """View of one decoder plane as (height, width) uint8 without a copy."""
    arr = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
    return arr[:, :width]


def yuv420_planes(av_frame: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Views (no copy) of the Y, U and V planes of a yuv420p/yuvj420p decoder frame, else None."""
    if av_frame is None or av_frame.format.name not in ("yuv420p", "yuvj420p"):
        return None
    cw = (av_frame.width + 1) // 2
    return (plane_array(av_frame.planes[0], av_frame.width), plane_array(av_frame.planes[1], cw),
            plane_array(av_frame.planes[2], cw))


def warp_yuv420(planes: tuple[np.ndarray, np.ndarray, np.ndarray], full_range: bool, m: np.ndarray,
                width: int, height: int, fmt: str, mode: int, chroma_shift: tuple[int, int] = (0, 0)) -> np.ndarray:
    """Y, U, V planes of 4:2:0 video (chroma of half size, rounded up) mapped through the 2x3
    affine ``m`` (luma pixels -> output pixels) to (height, width) in ``fmt``; ``mode`` is an
    OpenCV border mode.  ``chroma_shift`` (0 or 1 per axis): the luma plane starts that many
    pixels after the first chroma sample's first pixel (a slice of a frame at odd x or y).
    See :meth:`Frame.warped`."""
    flags = dict(flags=cv2.INTER_LINEAR, borderMode=mode)
    planes, m = source_window(planes, m, width, height)
    luma, u_plane, v_plane = planes
    centre = np.array([0.5 - chroma_shift[0], 0.5 - chroma_shift[1]])  # chroma sample 0 in luma pixels
    if not full_range and fmt != "gray" and width % 2 == 0 and height % 2 == 0:
        # Limited range, even size: chroma warped to half the output size and one
        # I420 conversion.  Output chroma o covers output pixels 2o and 2o+1, as a
        # source chroma sample c covers luma pixels 2c and 2c+1 (centre 2c + 0.5):
        # FFmpeg's scaler replicates chroma that way when it converts 4:2:0 to RGB.
        mh = np.empty((2, 3))
        mh[:, :2] = m[:, :2]
        mh[:, 2] = (m[:, :2] @ centre + m[:, 2] - 0.5) / 2.0
        i420, y, u, v = _i420_buffer(width, height)
        cv2.warpAffine(luma, m, (width, height), dst=y, borderValue=16, **flags)
        for plane, out in ((u_plane, u), (v_plane, v)):
            cv2.warpAffine(plane, mh, (width // 2, height // 2), dst=out, borderValue=128, **flags)
        return cv2.cvtColor(i420, cv2.COLOR_YUV2RGB_I420 if fmt == "rgb24" else cv2.COLOR_YUV2BGR_I420)
    y = cv2.warpAffine(luma, m, (width, height), borderValue=0 if full_range else 16, **flags)
    if fmt == "gray":
        return y if full_range else cv2.LUT(y, _LUT_Y)
    # chroma warped to full output size (full range, odd sizes)
    mc = m.copy()
    mc[:, :2] *= 2.0
    mc[:, 2] += m[:, :2] @ centre
    u = cv2.warpAffine(u_plane, mc, (width, height), borderValue=128, **flags)
    v = cv2.warpAffine(v_plane, mc, (width, height), borderValue=128, **flags)
    return _ycrcb_to(y, u, v, full_range, fmt)


def source_window(planes: tuple[np.ndarray, np.ndarray, np.ndarray], m: np.ndarray, width: int, height: int
                  ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """The part of the planes that a warp to (height, width) through ``m`` reads, copied, and
    ``m`` for it; the planes and ``m`` as given when that part is over a quarter of the frame.

    A warp that turns a small region (a face, a text line) reads it along turned lines, which
    the CPU cannot fetch ahead; copying the region row by row first halves the time of such a
    warp on a frame that is no longer in the core's cache (192x192 from a 1080p frame: 0.11
    against 0.20 ms).  The copy starts 4 pixels before the first pixel read and at an even
    column and row, so chroma stays aligned with luma; where the region meets the frame's
    edge the copy ends there too, so borders are filled exactly as from the whole frame.
    OpenCV computes source positions in float32, and those are smaller in the copy, so a
    value may round one level differently (about 2 in 100,000).
    """
    luma = planes[0]
    rows, cols = luma.shape
    # plain floats: this runs for every warp, also the whole-frame ones that it leaves alone
    (a, b, tx), (c, d, ty) = cv2.invertAffineTransform(m).tolist()
    w1, h1 = width - 1, height - 1
    xs = (0.0, a * w1, b * h1, a * w1 + b * h1)  # the output's corners in the source, less (tx, ty)
    ys = (0.0, c * w1, d * h1, c * w1 + d * h1)
    margin = 4
    x0 = max(0, (math.floor(tx + min(xs)) - margin) & ~1)
    y0 = max(0, (math.floor(ty + min(ys)) - margin) & ~1)
    x1 = min(cols, math.ceil(tx + max(xs)) + margin + 1)
    y1 = min(rows, math.ceil(ty + max(ys)) + margin + 1)
    if x1 <= x0 or y1 <= y0 or (x1 - x0) * (y1 - y0) * 4 > rows * cols:
        return planes, m
    crows, ccols = planes[1].shape
    cx1, cy1 = min(ccols, x1 // 2 + 2), min(crows, y1 // 2 + 2)
    window = (np.ascontiguousarray(luma[y0:y1, x0:x1]),
              np.ascontiguousarray(planes[1][y0 // 2:cy1, x0 // 2:cx1]),
              np.ascontiguousarray(planes[2][y0 // 2:cy1, x0 // 2:cx1]))
    shifted = np.array(m, np.float64)
    shifted[:, 2] += shifted[:, :2] @ np.array([x0, y0], np.float64)
    return window, shifted


def _i420_buffer(width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """An I420 image (height * 3 / 2, width) and views of its Y, U and V planes (even sizes)."""
    buf = np.empty((height * 3 // 2, width), np.uint8)
    flat = buf.reshape(-1)
    n = width * height
    return (buf, buf[:height], flat[n:n + n // 4].reshape(height // 2, width // 2),
            flat[n + n // 4:].reshape(height // 2, width // 2))


def resize_yuv420(planes: tuple[np.ndarray, np.ndarray, np.ndarray], full_range: bool, width: int, height: int,
                  fmt: str) -> np.ndarray:
    """Y, U, V planes of 4:2:0 video scaled to (height, width), bilinear, each on its own; only the
    small result is colour-converted to ``fmt``.  See :meth:`Frame.resized`."""
    y, u, v = planes
    ys = cv2.resize(y, (width, height), interpolation=cv2.INTER_LINEAR)
    if fmt == "gray":  # full range, as from a BGR image and as warp_yuv420 gives it
        return ys if full_range else cv2.LUT(ys, _LUT_Y)
    u = cv2.resize(u, (width, height), interpolation=cv2.INTER_LINEAR)
    v = cv2.resize(v, (width, height), interpolation=cv2.INTER_LINEAR)
    return _ycrcb_to(ys, u, v, full_range, fmt)


def _ycrcb_to(y: np.ndarray, u: np.ndarray, v: np.ndarray, full_range: bool, fmt: str) -> np.ndarray:
    """BT.601 Y, Cb (u), Cr (v) planes of equal size -> BGR or RGB (as FFmpeg's scaler does
    for streams that do not name their colour space)."""
    ycrcb = cv2.merge((y, v, u))
    if not full_range:  # limited range (16-235/240): expand before the conversion
        ycrcb = cv2.LUT(ycrcb, _LUT_YUV)
    return cv2.cvtColor(ycrcb, cv2.COLOR_YCrCb2RGB if fmt == "rgb24" else cv2.COLOR_YCrCb2BGR)


_LUT_Y = np.clip((np.arange(256) - 16) * 255.0 / 219.0, 0, 255).astype(np.uint8)
_LUT_C = np.clip((np.arange(256) - 128) * 255.0 / 224.0 + 128, 0, 255).astype(np.uint8)
_LUT_YUV = np.stack([_LUT_Y, _LUT_C, _LUT_C], axis=1).reshape(256, 1, 3)
