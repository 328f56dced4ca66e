"""Frames and detections: the data that flows between stages.

Colour order is BGR unless a name says otherwise; coordinates are pixels of
the source frame (x to the right, y down); boxes are ``[x1, y1, x2, y2]``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Sequence

import cv2
import numpy as np

from .yuv420 import resize_yuv420, warp_yuv420, yuv420_planes

__all__ = ["Detections", "Frame", "PIXEL_FORMATS", "DETECTION_RAN", "GATE", "STILL", "TRACKS_ENDED", "TRACK_BOXES", "EVENTS",
           "RECORD", "OVERLAY", "attr_values"]

PIXEL_FORMATS = ("bgr24", "rgb24", "gray")

# Keys of ``frame.attrs`` that stages share; a key is ``(name of the stage that set it, KEY)``.
#: bool on every frame a detector saw: True when its model ran on the frame, False when it let it pass
DETECTION_RAN = "detection_ran"
#: bool set by gating stages (motion): False asks detectors to let the frame pass without inference
GATE = "gate"
#: bool: nothing moved since the previous frame (trackers keep their boxes where they are)
STILL = "still"
#: list of track ids (int) a tracker forgot on this frame (lost for longer than its buffer)
TRACKS_ENDED = "tracks_ended"
#: dict track id (int) -> (4,) float64 box the tracker's filter estimates for the object on this
#: frame, in source pixels, unclipped: smooth where detected boxes jitter, so the difference of two
#: frames' estimates is how the object moved (region results carried between frames follow it)
TRACK_BOXES = "track_boxes"
#: list of JSON-ready dicts, events that happened on this frame (``{"event": NAME, ...}``); sinks write them
EVENTS = "events"
#: JSON-ready dict of fields a stage adds to this frame's record (sinks merge it; fixed fields win)
RECORD = "record"
#: list of drawables (``stages.annotate.Shape``) in source pixels; the video sink draws them
OVERLAY = "overlay"


def attr_values(frame: Frame, key: str) -> list[Any]:
    """The values every stage set under ``key`` on ``frame``, in the order they were set."""
    return [value for (_, k), value in frame.attrs.items() if k == key]


@dataclass(slots=True)
class Detections:
    """Columnar set of N objects.

    xyxy:       (N, 4) float32, box corners in source pixels.
    score:      (N,) float32 in [0, 1].
    label:      (N,) object array of str.
    track_id:   (N,) int64, -1 where the object is not tracked.
    keypoints:  list of N arrays (K, 2) float32 in source pixels, or None.
    attributes: list of N dicts (free-form, JSON-serialisable values).
    class_id:   (N,) int64, the model's class index of the label; -1 where unknown.
    """

    xyxy: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))
    score: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.float32))
    label: np.ndarray = field(default_factory=lambda: np.zeros((0,), object))
    track_id: np.ndarray | None = None
    keypoints: list[np.ndarray | None] | None = None
    attributes: list[dict[str, Any]] | None = None
    class_id: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("xyxy", "score", "label"):
            if getattr(self, name) is None:
                raise TypeError(f"Detections.{name} is None; give one entry per box (an empty list for none)")
        xyxy = np.asarray(self.xyxy, np.float32)
        if xyxy.size == 0:
            xyxy = np.zeros((0, 4), np.float32)
        elif xyxy.shape == (4,):
            xyxy = xyxy.reshape(1, 4)  # one box
        elif xyxy.ndim != 2 or xyxy.shape[1] != 4:
            raise ValueError(f"Detections.xyxy must be (N, 4) box corners [x1, y1, x2, y2], got shape {xyxy.shape}")
        self.xyxy = xyxy
        n = len(xyxy)
        self.score = np.asarray(self.score, np.float32).reshape(-1)
        labels = np.empty(n, object)
        if isinstance(self.label, str):
            labels[:] = self.label
        else:
            given = list(self.label)
            if len(given) != n:
                raise ValueError(f"Detections.label has {len(given)} entries but xyxy has {n} boxes")
            labels[:] = given
        self.label = labels
        self.track_id = (np.full(n, -1, np.int64) if self.track_id is None
                         else np.asarray(self.track_id, np.int64).reshape(-1))
        self.keypoints = [None] * n if self.keypoints is None else list(self.keypoints)
        self.attributes = [{} for _ in range(n)] if self.attributes is None else list(self.attributes)
        self.class_id = (np.full(n, -1, np.int64) if self.class_id is None
                         else np.asarray(self.class_id, np.int64).reshape(-1))
        for name in ("score", "label", "track_id", "keypoints", "attributes", "class_id"):
            got = len(getattr(self, name))
            if got != n:
                raise ValueError(f"Detections.{name} has {got} entries but xyxy has {n} boxes (shape {self.xyxy.shape})")

    def __len__(self) -> int:
        return len(self.xyxy)

    def __getitem__(self, index: int | slice | np.ndarray | Sequence[int]) -> Detections:
        """Subset by integer index, slice, index array or boolean mask."""
        if isinstance(index, (int, np.integer)):
            index = [int(index)]
        idx = np.arange(len(self))[index]
        return Detections(
            xyxy=self.xyxy[idx], score=self.score[idx], label=self.label[idx],
            track_id=self.track_id[idx],
            keypoints=[self.keypoints[i] for i in idx],
            attributes=[self.attributes[i] for i in idx],
            class_id=self.class_id[idx],
        )

    @staticmethod
    def merge(parts: Iterable[Detections]) -> Detections:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Detections()
        return Detections(
            xyxy=np.concatenate([p.xyxy for p in parts]),
            score=np.concatenate([p.score for p in parts]),
            label=np.concatenate([p.label for p in parts]),
            track_id=np.concatenate([p.track_id for p in parts]),
            keypoints=[k for p in parts for k in p.keypoints],
            attributes=[a for p in parts for a in p.attributes],
            class_id=np.concatenate([p.class_id for p in parts]),
        )

    def with_label(self, labels: Iterable[str]) -> np.ndarray:
        """Indices of objects whose label is in ``labels``."""
        wanted = set(labels)
        return np.array([i for i, lab in enumerate(self.label) if lab in wanted], np.int64)

    def to_records(self) -> list[dict[str, Any]]:
        """JSON-ready list of objects (see the metadata sink's schema)."""
        out = []
        for i in range(len(self)):
            rec: dict[str, Any] = {
                "label": str(self.label[i]),
                "score": round(float(self.score[i]), 4),
                "box": [round(float(v), 2) for v in self.xyxy[i]],
                "track_id": int(self.track_id[i]) if self.track_id[i] >= 0 else None,
            }
            if self.class_id[i] >= 0:
                rec["class_id"] = int(self.class_id[i])
            kp = self.keypoints[i]
            if kp is not None:
                rec["keypoints"] = [[round(float(x), 2), round(float(y), 2)] for x, y in np.asarray(kp)[:, :2]]
            rec["attributes"] = _jsonable(self.attributes[i])
            out.append(rec)
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        return round(float(value), 4)
    if isinstance(value, np.integer):
        return int(value)
    return value


@dataclass(slots=True, eq=False)
class Frame:
    """One video frame and everything the stages learned about it.

    The pixels stay in the decoder's format (``av.VideoFrame``) until a stage
    asks for them: :meth:`image` converts the full frame once (cached),
    :meth:`resized` scales straight from the decoder's planes when that is
    cheaper than converting first.  Arrays returned by both are owned by the
    frame: treat them as read-only (copy before drawing, except the encoder,
    which owns the frame at the end of a graph).
    """

    source_id: str
    seq: int
    width: int
    height: int
    pts: int | None = None
    time_base: Fraction | None = None
    captured_ns: int = field(default_factory=time.monotonic_ns)
    detections: Detections = field(default_factory=Detections)
    attrs: dict[tuple[str, str], Any] = field(default_factory=dict)
    av_frame: Any = None
    _image: np.ndarray | None = None
    _resized: dict[tuple[int, int, str], np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_image(cls, image: np.ndarray, source_id: str = "image", seq: int = 0,
                   pts: int | None = None, time_base: Fraction | None = None) -> Frame:
        """Wrap a BGR uint8 image (H, W, 3), H and W at least 1; the frame takes ownership of the
        array.  Convert other images first (``cv2.cvtColor`` with ``COLOR_GRAY2BGR``,
        ``COLOR_BGRA2BGR`` or ``COLOR_RGB2BGR``).  ``seq`` is the frame's number in its source
        (0, 1, 2, ...): without ``pts`` and ``time_base``, stages that keep time (the MP4's
        timing, motion's refresh, zone dwell times, the tracker's ``lost_s``) read it from ``seq``
        at the source's rate, so number the frames of a stream."""
        if not isinstance(image, np.ndarray):
            raise TypeError(f"Frame.from_image expects a BGR uint8 numpy array (H, W, 3), got {type(image).__name__}")
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8 or 0 in image.shape:
            raise ValueError(f"Frame.from_image expects a BGR uint8 array (H, W, 3), got {image.dtype} {image.shape}"
                             + _conversion_hint(image))
        h, w = image.shape[:2]
        return cls(source_id=source_id, seq=seq, width=w, height=h, pts=pts, time_base=time_base, _image=image)

    @property
    def pts_time(self) -> float | None:
        if self.pts is None or self.time_base is None:
            return None
        return float(self.pts * self.time_base)

    @property
    def has_image(self) -> bool:
        """True once full-resolution BGR pixels exist (converted or given)."""
        return self._image is not None

    def image(self) -> np.ndarray:
        """Full-resolution BGR uint8 (H, W, 3), converted once and cached."""
        if self._image is None:
            if self.av_frame is None:
                raise ValueError(f"frame {self.source_id}#{self.seq} has no pixels")
            self._image = self.av_frame.to_ndarray(format="bgr24")
        return self._image

    def set_image(self, image: np.ndarray) -> None:
        """Replace the pixels (e.g. after drawing); drops cached resized copies."""
        self._image = image
        self._resized.clear()
        self.av_frame = None

    def original(self) -> Frame:
        """This frame as the source delivered it, with its detections in the source's pixels.

        The frame itself, unless a ``preprocess`` stage handed on a transformed view
        (:class:`pipeline.frame_view.TransformedFrame`): sinks write and draw this one.
        """
        return self

    def resized(self, width: int, height: int, fmt: str = "bgr24") -> np.ndarray:
        """The whole frame scaled to (height, width) with bilinear filtering.

        fmt is one of PIXEL_FORMATS; the result is cached per size and format.
        From a planar YUV 4:2:0 decoder frame, each plane is scaled on its own
        and only the small result is colour-converted, which avoids converting
        the full frame.
        """
        if fmt not in PIXEL_FORMATS:
            raise ValueError(f"unknown pixel format {fmt!r}; valid: {', '.join(PIXEL_FORMATS)}")
        key = (width, height, fmt)
        hit = self._resized.get(key)
        if hit is not None:
            return hit
        planes = None if self._image is not None else yuv420_planes(self.av_frame)
        if planes is not None:
            out = resize_yuv420(planes, self.av_frame.format.name == "yuvj420p", width, height, fmt)
        else:
            img = self.image()
            if (img.shape[1], img.shape[0]) != (width, height):
                img = cv2.resize(img, (width, height), interpolation=cv2.INTER_LINEAR)
            if fmt == "rgb24":
                img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
            elif fmt == "gray":
                img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
            out = img
        self._resized[key] = out
        return out

    def warped(self, matrix: np.ndarray, width: int, height: int, fmt: str = "bgr24",
               border: str = "constant") -> np.ndarray:
        """The frame mapped through the 2x3 affine ``matrix`` (source pixels -> output
        pixels, OpenCV convention) into a (height, width) image, bilinear; outside the
        frame black (``border="constant"``) or the nearest edge pixel (``"replicate"``).

        From a planar YUV 4:2:0 decoder frame each plane is warped on its own
        (the chroma planes with the matrix adjusted to their half resolution), so
        only output pixels are computed and no full-frame conversion happens.  For
        limited-range frames and even output sizes the chroma is warped to half the
        output size and the result converted once as I420 (each chroma sample then
        covers 2x2 output pixels, as FFmpeg's scaler does for 4:2:0).
        """
        if fmt not in PIXEL_FORMATS:
            raise ValueError(f"unknown pixel format {fmt!r}; valid: {', '.join(PIXEL_FORMATS)}")
        m = np.asarray(matrix, np.float64).reshape(2, 3)
        if border not in ("constant", "replicate"):
            raise ValueError(f"unknown border {border!r}; valid: constant, replicate")
        mode = cv2.BORDER_CONSTANT if border == "constant" else cv2.BORDER_REPLICATE
        planes = None if self._image is not None else yuv420_planes(self.av_frame)
        if planes is not None:
            return warp_yuv420(planes, self.av_frame.format.name == "yuvj420p", m, width, height, fmt, mode)
        out = cv2.warpAffine(self.image(), m, (width, height), flags=cv2.INTER_LINEAR,
                             borderMode=mode, borderValue=(0, 0, 0))
        if fmt == "rgb24":
            return cv2.cvtColor(out, cv2.COLOR_BGR2RGB)
        if fmt == "gray":
            return cv2.cvtColor(out, cv2.COLOR_BGR2GRAY)
        return out


def _conversion_hint(image: np.ndarray) -> str:
    """How to turn a common non-BGR image into one :meth:`Frame.from_image` takes."""
    channels = 1 if image.ndim == 2 else image.shape[2] if image.ndim == 3 else 0
    if image.dtype == np.uint8 and channels == 1:
        return " (grayscale: convert with cv2.cvtColor(image, cv2.COLOR_GRAY2BGR))"
    if image.dtype == np.uint8 and channels == 4:
        return " (4 channels: convert with cv2.cvtColor(image, cv2.COLOR_BGRA2BGR), or COLOR_RGBA2BGR)"
    return ""
