"""Motion detection that gates detection, for static cameras.

Works on a small copy of the decoder's luma (Y) plane (``height`` rows; no
colour conversion; the plane also when a sink had the frame converted, so the
threshold means the same with and without an MP4): blurred, compared with a running-average background
(``alpha`` per frame), thresholded (``threshold`` luma levels), dilated;
connected regions of at least ``min_area`` (fraction of the frame) are motion.

* **Dark scenes**: luma differences shrink with the light, so when the
  background's median luma is below ``exposure`` the threshold is lowered in
  proportion (down to a quarter): a scene at a third of the light sees a third
  of the difference.

* **Calibration**: for ``calibration_frames`` frames after the start, and after
  a sudden global change (lights, camera exposure: more than ``global_change``
  of the frame changed at once), the background is rebuilt from the frames and
  no motion is reported; the gate stays open meanwhile.
* **Gate**: ``frame.attrs[(name, GATE)]`` is True on frames with motion, while
  calibrating, and at least every ``refresh_s`` seconds of source time (so
  objects that stopped moving are detected again); detect stages let frames
  with a closed gate pass without inference, and the tracker carries the
  objects through them.
* ``frame.attrs[(name, STILL)]`` is True when nothing moved (trackers keep
  boxes in place); ``frame.attrs[(name, BOXES)]`` holds the motion regions,
  (N, 4) float32 ``[x1, y1, x2, y2]`` in source pixels; ``draw: true`` draws them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import cv2
import numpy as np
from pydantic import Field, field_validator

from pipeline.frame import GATE, OVERLAY, STILL, Frame
from pipeline.yuv420 import plane_array
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage

from .annotate import Shape

__all__ = ["Motion", "BOXES"]

BOXES = "boxes"
DEFAULT_FPS = 25.0
#: frames between two measurements of the background's median luma (dark-scene threshold)
LEVEL_EVERY = 16
#: the dark-scene threshold never falls below this share of ``threshold``
MIN_THRESHOLD_SCALE = 0.25
MOTION_COLOR = (0, 0, 255)  # BGR


class Motion(Stage):
    """Finds moving regions and opens the detection gate only when something moves."""

    provides: ClassVar[frozenset[str]] = frozenset({"motion"})

    class Params(StageParams):
        height: int = Field(100, ge=16, description="rows of the downscaled luma plane (columns keep the aspect)")
        threshold: int = Field(25, ge=1, le=255, description="luma difference from the background that counts "
                               "as change, in a scene lit at least as `exposure`")
        exposure: int = Field(100, ge=0, le=255, description="median background luma below which the threshold "
                              "is lowered in proportion, down to a quarter (dark scenes, night); 0: never")
        alpha: float = Field(0.1, gt=0, le=1, description="background update rate per frame (running average); "
                             "an object that stops becomes background after about 2 / alpha frames")
        blur: int = Field(3, ge=0, description="Gaussian blur kernel (odd; 0: none) before comparing")
        dilate: int = Field(2, ge=0, description="dilation iterations (3x3) joining nearby changed pixels")
        min_area: float = Field(0.0005, ge=0, lt=1, description="smallest motion region, fraction of the frame")
        calibration_frames: int = Field(10, ge=1, description="frames of background rebuilding after the start "
                                        "and after a global change")
        global_change: float = Field(0.5, gt=0, le=1, description="fraction of the frame changing at once that "
                                     "means lights or exposure changed (recalibrate), not motion")
        refresh_s: float = Field(5.0, gt=0, description="open the gate at least this often (seconds of source "
                                 "time)")
        draw: bool = Field(False, description="draw the motion regions in the video")

        @field_validator("blur")
        @classmethod
        def _odd_kernel(cls, value: int) -> int:
            if value and value % 2 == 0:
                raise ValueError("valid: 0 (none) or an odd kernel size: 1, 3, 5, ...")
            return value

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source_fps: float | None = None  # set by the runtime
        self._states: dict[str, _State] = {}
        self.stats = {"frames": 0, "motion_frames": 0, "gate_open_frames": 0, "calibrations": 0}

    def open(self) -> None:
        self._states = {}
        self.stats = dict.fromkeys(self.stats, 0)

    def process(self, frame: Frame) -> Frame:
        p = self.params
        st = self._states.get(frame.source_id)
        t = frame.pts_time if frame.pts_time is not None else frame.seq / float(self.source_fps or DEFAULT_FPS)
        small = self._luma(frame)
        if st is None or st.background.shape != small.shape:  # a new source, or its size changed
            st = self._states[frame.source_id] = _State(small.astype(np.float32), p.calibration_frames)
            self.stats["calibrations"] += 1
        boxes = np.zeros((0, 4), np.float32)
        if st.level_due <= 0:
            st.level_due = LEVEL_EVERY
            st.threshold = self._threshold(st.background)
        st.level_due -= 1
        changed = np.abs(small.astype(np.float32) - st.background) > st.threshold
        if st.calibrating == 0 and changed.mean() > p.global_change:
            st.calibrating = p.calibration_frames
            self.stats["calibrations"] += 1
        calibrated = st.calibrating == 0
        if not calibrated:
            st.calibrating -= 1
            cv2.accumulateWeighted(small, st.background, 0.5)  # follow the new scene quickly
            st.level_due = 0  # and its light
        else:
            boxes = self._regions(changed, frame.width / small.shape[1], frame.height / small.shape[0])
            cv2.accumulateWeighted(small, st.background, p.alpha)
        calibrating = not calibrated
        moving = len(boxes) > 0
        gate = moving or calibrating or st.last_open is None or t - st.last_open >= p.refresh_s
        if gate:
            st.last_open = t
        frame.attrs[(self.name, GATE)] = gate
        frame.attrs[(self.name, STILL)] = not moving and not calibrating
        frame.attrs[(self.name, BOXES)] = boxes
        if p.draw:
            frame.attrs[(self.name, OVERLAY)] = [
                Shape(np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]]), MOTION_COLOR, closed=True)
                for x1, y1, x2, y2 in boxes.tolist()]
        self.stats["frames"] += 1
        self.stats["motion_frames"] += moving
        self.stats["gate_open_frames"] += gate
        return frame

    def counters(self) -> dict[str, Any]:
        return dict(self.stats)

    def _threshold(self, background: np.ndarray) -> float:
        """``threshold`` scaled by the background's median luma against ``exposure``."""
        p = self.params
        if not p.exposure:
            return float(p.threshold)
        level = float(np.median(background))
        return p.threshold * min(1.0, max(MIN_THRESHOLD_SCALE, level / p.exposure))

    def _luma(self, frame: Frame) -> np.ndarray:
        """The Y plane at ``height`` rows: bilinear to twice that size, then 2x2 averages (cheap,
        and each pixel averages several source pixels), then blurred."""
        h = self.params.height
        w = max(1, round(frame.width * h / frame.height))
        av_frame = frame.av_frame
        if av_frame is not None and av_frame.format.name in ("yuv420p", "yuvj420p", "nv12",
                                                                                     "gray"):
            y = plane_array(av_frame.planes[0], av_frame.width)
        else:
            y = frame.resized(2 * w, 2 * h, "gray")
        small = cv2.resize(cv2.resize(y, (2 * w, 2 * h), interpolation=cv2.INTER_LINEAR), (w, h),
                           interpolation=cv2.INTER_AREA)
        k = self.params.blur
        if k:
            small = cv2.GaussianBlur(small, (k, k), 0)
        return small

    def _regions(self, changed: np.ndarray, sx: float, sy: float) -> np.ndarray:
        """Bounding boxes (source pixels) of changed regions of at least ``min_area``."""
        mask = changed.astype(np.uint8)
        if self.params.dilate:
            mask = cv2.dilate(mask, np.ones((3, 3), np.uint8), iterations=self.params.dilate)
        n, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
        min_px = self.params.min_area * mask.size
        keep = [s for s in stats[1:n] if s[cv2.CC_STAT_AREA] >= max(min_px, 1)]
        if not keep:
            return np.zeros((0, 4), np.float32)
        k = np.array(keep, np.float32)
        return np.stack([k[:, 0] * sx, k[:, 1] * sy, (k[:, 0] + k[:, 2]) * sx, (k[:, 1] + k[:, 3]) * sy], axis=1)


class _State:
    def __init__(self, background: np.ndarray, calibrating: int) -> None:
        self.background = background
        self.calibrating = calibrating
        self.last_open: float | None = None
        self.threshold = 0.0  # luma levels, for the current light (set before first use)
        self.level_due = 0  # frames until the median luma is measured again
