"""Transformed views of frames (what a ``preprocess`` stage hands on) and privacy masks.

A :class:`TransformedFrame` is a crop, quarter turn, mirror and/or scaling of a
source frame, described by a :class:`~pipeline.geometry.ViewGeometry`.  It has
the whole :class:`~pipeline.frame.Frame` API in its own pixels: ``width`` and
``height`` are the view's, ``image()``, ``resized()`` and ``warped()`` return the
view's pixels, and its detections are in view pixels.  No full-size pixels are
made for it: ``resized`` and ``warped`` read the decoder's YUV planes of the
source (slices of them for a crop) and fold the view into their own resize or
warp; ``image()`` cuts, scales and turns the source's BGR image, or scales a
scaled-down view from the planes.
:meth:`TransformedFrame.original` gives the source frame with the detections
mapped back to its pixels, which is what sinks write by default.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import av
import cv2
import numpy as np

from .frame import PIXEL_FORMATS, Detections, Frame
from .yuv420 import resize_yuv420, warp_yuv420, yuv420_planes
from .geometry import ViewGeometry

__all__ = ["TransformedFrame", "BufferPool", "masked", "detached", "SinkView", "SINK_VIEW_HELP", "sink_picture"]

#: what a sink writes: the decoded frame (detections mapped back) or the transformed view
SinkView = Literal["source", "preprocessed"]
SINK_VIEW_HELP = ("source: the decoded frame with masks applied and detections in its pixels; preprocessed: "
                  "the frame as a preprocess stage handed it on (cropped, turned, scaled), in its pixels")

_ROTATE_CODES = {(True, True, False): cv2.ROTATE_90_CLOCKWISE, (True, False, True): cv2.ROTATE_90_COUNTERCLOCKWISE,
                 (False, True, True): cv2.ROTATE_180}
_FLIP_CODES = {(True, False): 1, (False, True): 0, (True, True): -1}


@dataclass(slots=True, eq=False)
class TransformedFrame(Frame):
    """A view of ``source`` through ``geometry`` (see the module docstring).

    ``source`` is private to the view (its pixels are shared with the frame it was
    made from, or a masked copy of them); its own detections are not used.
    """

    source: Frame | None = None
    geometry: ViewGeometry | None = None
    _turned: tuple[np.ndarray, ...] | None = None

    @classmethod
    def view_of(cls, frame: Frame, source: Frame, geometry: ViewGeometry, detections: Detections) -> TransformedFrame:
        """A view with ``frame``'s identity and timing, ``geometry.size`` pixels and ``detections``
        (view pixels)."""
        w, h = geometry.size
        return cls(source_id=frame.source_id, seq=frame.seq, width=w, height=h, pts=frame.pts,
                   time_base=frame.time_base, captured_ns=frame.captured_ns, detections=detections,
                   attrs=frame.attrs, source=source, geometry=geometry)

    def original(self) -> Frame:
        """The source frame with this view's detections mapped back to source pixels (mapped
        again on every call; the returned frame is shared by the calls) and this view's attrs
        (what stages after the view added: records, events)."""
        src = self.source
        src.detections = self.geometry.detections_to_source(self.detections)
        src.attrs = self.attrs
        return src

    def image(self) -> np.ndarray:
        """The view as BGR uint8 (height, width, 3); cached.  Cut, scaled and turned from the
        source's BGR image (FFmpeg converts the whole frame faster than the planes of a crop
        are converted), except for a view scaled to less than half its window's pixels, which
        is scaled from the planes (measured 2.4 against 3.6 ms for 1080p analysed at 720 rows)."""
        if self._image is None:
            g = self.geometry
            win = _window(g)
            scaled_down = 2 * g.size[0] * g.size[1] < (win.x1 - win.x0) * (win.y1 - win.y0)
            self._image = _render(self.source, g, "bgr24", from_image=not scaled_down)
        return self._image

    def resized(self, width: int, height: int, fmt: str = "bgr24") -> np.ndarray:
        """The view scaled to (height, width), bilinear, in ``fmt``; from the source's planes
        (a slice of them for a crop), turned after scaling; cached per size and format."""
        if self._image is not None:
            return Frame.resized(self, width, height, fmt)
        _check_format(fmt)
        key = (width, height, fmt)
        hit = self._resized.get(key)
        if hit is None:
            turned = self._turned_window()
            if turned is not None:
                hit = _resize_turned(self.source, turned, width, height, fmt)
            else:
                hit = _render(self.source, self.geometry.resize(width, height), fmt)
            self._resized[key] = hit
        return hit

    def warped(self, matrix: np.ndarray, width: int, height: int, fmt: str = "bgr24",
               border: str = "constant") -> np.ndarray:
        """As :meth:`Frame.warped` in view pixels: ``matrix`` maps view pixels to output pixels
        and the border applies at the view's edges (also inside the source for a crop)."""
        if self._image is not None:
            return Frame.warped(self, matrix, width, height, fmt, border)
        _check_format(fmt)
        if border not in ("constant", "replicate"):
            raise ValueError(f"unknown border {border!r}; valid: constant, replicate")
        m = np.asarray(matrix, np.float64).reshape(2, 3)
        g = self.geometry
        mode = cv2.BORDER_CONSTANT if border == "constant" else cv2.BORDER_REPLICATE
        turned = self._turned_window()
        if turned is not None:
            return _warp_turned(self.source, turned, m @ _view_scale(g, turned), width, height, fmt, mode)
        composite = m[:, :2] @ g.cv_matrix()
        composite[:, 2] += m[:, 2]
        return _warp(self.source, g, composite, width, height, fmt, mode)

    def _turned_window(self) -> tuple[np.ndarray, ...] | None:
        """For a turned or mirrored view: the source's window turned into the view's
        orientation by exact pixel moves, unscaled, as Y, U, V planes (4:2:0) or one BGR
        image; cached.  Scaling and warping then read the same pixels as they would from a
        clip turned beforehand (a mirrored warp rounds its sampling grid the other way).
        None for views that are not turned, and for windows with odd or fractional edges
        (their chroma samples do not turn onto samples)."""
        if self._turned is not None:
            return self._turned
        g = self.geometry
        m = g.matrix
        if not g.transposed and m[0, 0] > 0 and m[1, 1] > 0:
            return None
        win = _window(g)
        if not win.exact or any(v % 2 for v in (win.x0, win.y0, win.x1, win.y1)):
            return None
        src = self.source
        planes = None if src.has_image else yuv420_planes(src.av_frame)
        if planes is None:  # a picture made already, or a decoder format other than 4:2:0
            self._turned = (_orient(win.image(src.image()), g),)
        else:
            self._turned = tuple(_orient(p, g) for p in win.planes(planes))
        return self._turned


def sink_picture(frame: Frame, view: SinkView) -> tuple[Frame, np.ndarray | None]:
    """The frame a sink writes for ``view``, and the outline ((4, 2) pixels of that frame) of
    the region the models saw when it is a crop of it, else None."""
    if view == "preprocessed" or not isinstance(frame, TransformedFrame):
        return frame, None
    g = frame.geometry
    return frame.original(), None if g.covers_source() else g.outline()


def _check_format(fmt: str) -> None:
    if fmt not in PIXEL_FORMATS:
        raise ValueError(f"unknown pixel format {fmt!r}; valid: {', '.join(PIXEL_FORMATS)}")


@dataclass(frozen=True)
class _Window:
    """Integer source rectangle [x0, x1) x [y0, y1) holding the view; ``exact``: the view
    shows exactly this rectangle (no fractional edges)."""

    x0: int
    y0: int
    x1: int
    y1: int
    exact: bool

    def is_whole(self, size: tuple[int, int]) -> bool:
        return (self.x0, self.y0, self.x1, self.y1) == (0, 0, *size)

    def planes(self, planes: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
        """Slices (views) of 4:2:0 planes: luma exactly, chroma from the sample holding (x0, y0)."""
        y, u, v = planes
        cs = np.s_[self.y0 // 2:(self.y1 + 1) // 2, self.x0 // 2:(self.x1 + 1) // 2]
        return y[self.y0:self.y1, self.x0:self.x1], u[cs], v[cs]

    def image(self, image: np.ndarray) -> np.ndarray:
        return image[self.y0:self.y1, self.x0:self.x1]


def _window(g: ViewGeometry) -> _Window:
    """The window of the source a view reads; cached on the geometry."""
    hit = g._cache.get("window")
    if hit is not None:
        return hit
    sw, sh = g.source_size
    rx0, ry0, rx1, ry1 = g.region()
    x0, y0 = max(0, math.floor(rx0 + 1e-6)), max(0, math.floor(ry0 + 1e-6))
    x1, y1 = min(sw, math.ceil(rx1 - 1e-6)), min(sh, math.ceil(ry1 - 1e-6))
    exact = all(abs(a - b) < 1e-6 for a, b in zip((rx0, ry0, rx1, ry1), (x0, y0, x1, y1)))
    hit = g._cache["window"] = _Window(x0, y0, x1, y1, exact)
    return hit


def _orient(image: np.ndarray, g: ViewGeometry) -> np.ndarray:
    """Turn/mirror an image of the view's unturned size into the view's orientation."""
    m = g.matrix
    t = g.transposed
    fx, fy = (m[0, 1] < 0, m[1, 0] < 0) if t else (m[0, 0] < 0, m[1, 1] < 0)
    code = _ROTATE_CODES.get((t, fx, fy))
    if code is not None:
        return cv2.rotate(image, code)
    if t:
        image = cv2.transpose(image)
    flip = _FLIP_CODES.get((fx, fy))
    return image if flip is None else cv2.flip(image, flip)


def _convert(bgr: np.ndarray, fmt: str) -> np.ndarray:
    if fmt == "rgb24":
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    if fmt == "gray":
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    return bgr


def _render(source: Frame, g: ViewGeometry, fmt: str, from_image: bool = False) -> np.ndarray:
    """The whole view ``g`` (``g.size``) of ``source`` in ``fmt``: the window is scaled to the
    view's unturned size, then turned; views with fractional edges are warped instead.  From
    4:2:0 planes, a window at an odd corner scales the chroma samples that hold it (off by at
    most half a chroma sample, as for frames of odd width).  ``from_image``: read the source's
    BGR image (converted once) rather than its planes."""
    planes = None if from_image or source.has_image else yuv420_planes(source.av_frame)
    win = _window(g)
    if not win.exact:
        return _warp(source, g, g.cv_matrix(), g.size[0], g.size[1], fmt, cv2.BORDER_REPLICATE)
    w, h = (g.size[1], g.size[0]) if g.transposed else g.size
    if planes is not None:
        if win.is_whole(g.source_size):
            out = source.resized(w, h, fmt)  # the whole frame scaled: the source's own cached path
        else:
            out = resize_yuv420(win.planes(planes), source.av_frame.format.name == "yuvj420p", w, h, fmt)
    else:
        img = win.image(source.image())
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR) if img.shape[:2] != (h, w) else img
        out = _convert(img, fmt)
    if not g.transposed and g.matrix[0, 0] > 0 and g.matrix[1, 1] > 0:
        return out if out.flags.c_contiguous else np.ascontiguousarray(out)
    return _orient(out, g)


def _view_scale(g: ViewGeometry, turned: tuple[np.ndarray, ...]) -> np.ndarray:
    """The 3x3 map from pixel centres of the turned window ``turned`` to the view's pixel centres."""
    th, tw = turned[0].shape[:2]
    sx, sy = g.size[0] / tw, g.size[1] / th
    return np.array([[sx, 0.0, 0.5 * sx - 0.5], [0.0, sy, 0.5 * sy - 0.5], [0.0, 0.0, 1.0]])


def _resize_turned(source: Frame, turned: tuple[np.ndarray, ...], width: int, height: int, fmt: str) -> np.ndarray:
    """The turned window (see :meth:`TransformedFrame._turned_window`) scaled to (height, width)."""
    if len(turned) == 3:
        return resize_yuv420(turned, source.av_frame.format.name == "yuvj420p", width, height, fmt)
    image = turned[0]
    if image.shape[:2] != (height, width):
        image = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
    return _convert(image, fmt)


def _warp_turned(source: Frame, turned: tuple[np.ndarray, ...], m: np.ndarray, width: int, height: int,
                 fmt: str, mode: int) -> np.ndarray:
    """The turned window (see :meth:`TransformedFrame._turned_window`) through the affine ``m``
    (its pixel centres -> output pixel centres)."""
    m = np.asarray(m, np.float64)[:2]
    if len(turned) == 3:
        return warp_yuv420(turned, source.av_frame.format.name == "yuvj420p", m, width, height, fmt, mode)
    out = cv2.warpAffine(turned[0], m, (width, height), flags=cv2.INTER_LINEAR, borderMode=mode,
                         borderValue=(0, 0, 0))
    return _convert(out, fmt)


def _warp(source: Frame, g: ViewGeometry, m: np.ndarray, width: int, height: int, fmt: str, mode: int) -> np.ndarray:
    """``source`` pixels inside the view's window through the OpenCV affine ``m`` (source pixel
    centres -> output pixel centres); the border ``mode`` applies at the window's edges."""
    win = _window(g)
    if win.is_whole(g.source_size):
        return source.warped(m, width, height, fmt, "constant" if mode == cv2.BORDER_CONSTANT else "replicate")
    local = m.copy()
    local[:, 2] += m[:, :2] @ np.array([win.x0, win.y0], np.float64)
    planes = None if source.has_image else yuv420_planes(source.av_frame)
    if planes is not None:
        return warp_yuv420(win.planes(planes), source.av_frame.format.name == "yuvj420p", local, width, height,
                           fmt, mode, chroma_shift=(win.x0 % 2, win.y0 % 2))
    out = cv2.warpAffine(win.image(source.image()), local, (width, height), flags=cv2.INTER_LINEAR,
                         borderMode=mode, borderValue=(0, 0, 0))
    return _convert(out, fmt)


# sources: shared or masked -------------------------------------------------------------------

def detached(frame: Frame) -> Frame:
    """A new frame sharing ``frame``'s pixels (read-only) and attrs, without its detections."""
    return Frame(source_id=frame.source_id, seq=frame.seq, width=frame.width, height=frame.height, pts=frame.pts,
                 time_base=frame.time_base, captured_ns=frame.captured_ns, attrs=frame.attrs,
                 av_frame=None if frame.has_image else frame.av_frame,
                 _image=frame.image() if frame.has_image else None)


class BufferPool:
    """uint8 arrays reused once nothing references them any more.

    A fresh multi-megabyte array costs page faults on first touch (measured 2 ms per
    1080p frame with a few frames in flight, against 0.3 ms to copy into a reused
    one).  :meth:`take` returns an array of ``shape`` that only the pool holds; the
    caller's references (and any frame or view made from it) keep it busy.  At most
    ``limit`` arrays are kept per shape.
    """

    def __init__(self, limit: int = 32) -> None:
        self.limit = limit
        self._arrays: dict[tuple[int, ...], list[np.ndarray]] = {}

    def take(self, shape: tuple[int, ...]) -> np.ndarray:
        arrays = self._arrays.setdefault(tuple(shape), [])
        for i in range(len(arrays)):
            if sys.getrefcount(arrays[i]) == 2:  # the list's reference and getrefcount's argument
                return arrays[i]
        out = np.empty(shape, np.uint8)
        if len(arrays) < self.limit:
            arrays.append(out)
        return out


def masked(frame: Frame, polygons: Sequence[np.ndarray], pool: BufferPool | None = None) -> Frame:
    """A new frame with ``frame``'s pixels, the ``polygons`` ((K, 2) float, frame pixels) filled
    black, and no detections.  The decoder's 4:2:0 planes are copied and filled (Y black, U/V
    neutral) unless the frame already has its BGR image, which is copied and filled instead;
    other pixel formats are converted to BGR first."""
    pool = pool or BufferPool(limit=0)
    w, h = frame.width, frame.height
    planes = None if frame.has_image else yuv420_planes(frame.av_frame)
    base = dict(source_id=frame.source_id, seq=frame.seq, width=w, height=h, pts=frame.pts,
                time_base=frame.time_base, captured_ns=frame.captured_ns, attrs=frame.attrs)
    if planes is not None and w % 2 == 0 and h % 2 == 0:
        src = frame.av_frame
        full = src.format.name == "yuvj420p"
        buf = pool.take((h * 3 // 2, w))
        flat = buf.reshape(-1)
        n = w * h
        y, u, v = buf[:h], flat[n:n + n // 4].reshape(h // 2, w // 2), flat[n + n // 4:].reshape(h // 2, w // 2)
        for dst, plane in zip((y, u, v), planes):
            np.copyto(dst, plane)
        _fill(y, polygons, 1.0, 0 if full else 16)
        _fill(u, polygons, 0.5, 128)
        _fill(v, polygons, 0.5, 128)
        out = av.VideoFrame.from_numpy_buffer(buf, format=src.format.name)
        out.pts = src.pts
        if src.time_base is not None:
            out.time_base = src.time_base
        for prop in ("color_range", "colorspace"):
            try:
                setattr(out, prop, getattr(src, prop))
            except (AttributeError, ValueError):  # older PyAV: read-only
                pass
        return Frame(**base, av_frame=out)
    image = frame.image()
    buf = pool.take(image.shape)
    np.copyto(buf, image)
    _fill(buf, polygons, 1.0, (0, 0, 0))
    return Frame(**base, _image=buf)


_SHIFT = 4  # fractional bits of polygon vertices given to cv2.fillPoly


def _fill(plane: np.ndarray, polygons: Sequence[np.ndarray], scale: float, value: Any) -> None:
    """Fill ``polygons`` (frame pixels, continuous) on a plane of ``scale`` x the frame's size.
    Each polygon is filled on its own: where polygons overlap, the overlap is filled too (one
    ``fillPoly`` call over several contours would leave it open, as a hole)."""
    for p in polygons:
        pts = np.rint((np.asarray(p, np.float64) * scale - 0.5) * (1 << _SHIFT)).astype(np.int32).reshape(-1, 1, 2)
        cv2.fillPoly(plane, [pts], value, lineType=cv2.LINE_8, shift=_SHIFT)
