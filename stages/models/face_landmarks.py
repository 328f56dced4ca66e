"""MediaPipe face mesh: 468 landmarks on a face crop (``face_landmark``).

The crop follows MediaPipe's face-detection-to-ROI step: a square centred on
the detection box, side ``1.5 * max(box w, box h)``, rotated so that the line
from keypoint 0 (right eye, image left) to keypoint 1 (left eye) is
horizontal.  It is warped straight from the full-resolution frame to 192x192
(bilinear, edge pixels replicated) and fed as RGB in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import cv2
import numpy as np

from pipeline.engine import InputSpec
from pipeline.frame import Detections

from ..tracking.boxes import follow_box
from .base import RoiAdapter, register

__all__ = ["FaceLandmarks", "FaceMesh", "face_roi", "roi_warp"]

NUM_LANDMARKS = 468
_ROI_SCALE = 1.5


@dataclass(frozen=True)
class FaceMesh:
    """Landmarks (468, 3) float32: x, y in source pixels, z (relative depth) in the
    same pixel units; presence: face-presence probability in [0, 1]."""

    landmarks: np.ndarray
    presence: float


def face_roi(box: np.ndarray, kps: np.ndarray | None, scale: float = _ROI_SCALE) -> tuple[float, float, float, float]:
    """(cx, cy, side, rotation) of the face crop in source pixels; rotation in radians.

    box: ``[x1, y1, x2, y2]``; kps: (6, 2) detector keypoints or None (no rotation).
    """
    x1, y1, x2, y2 = (float(v) for v in box)
    rot = 0.0
    if kps is not None and len(kps) >= 2:
        (ax, ay), (bx, by) = np.asarray(kps, np.float64)[:2]
        rot = -math.atan2(-(by - ay), bx - ax)
        rot = (rot + math.pi) % (2 * math.pi) - math.pi
    side = max(x2 - x1, y2 - y1) * scale
    return (x1 + x2) / 2, (y1 + y2) / 2, side, rot


def roi_warp(cx: float, cy: float, side: float, rot: float, out_hw: tuple[int, int]) -> np.ndarray:
    """2x3 affine mapping crop pixels (u, v) to source pixels.

    The crop's corners map onto the rotated square's corners (MediaPipe's
    convention: crop pixel (0, 0) samples the square's top-left corner).
    """
    oh, ow = out_hw
    c, s = math.cos(rot), math.sin(rot)
    kx, ky = side / ow, side / oh
    ax = np.array([c * kx, s * kx])    # source step per crop pixel along u
    ay = np.array([-s * ky, c * ky])   # ... along v
    t = np.array([cx, cy]) - ax * ow / 2 - ay * oh / 2
    return np.array([[ax[0], ay[0], t[0]], [ax[1], ay[1], t[1]]], np.float64)


@register("face_landmarks")
class FaceLandmarks(RoiAdapter):
    """Writes ``attributes["landmarks"]`` ((468, 2) float32, source pixels) and
    ``attributes["face_presence"]`` (float) into face objects."""

    input_spec: ClassVar[InputSpec] = InputSpec(host_color="BGR", model_color="RGB", mean=None, scale=(255.0,) * 3)
    needs_image: ClassVar[bool] = False  # crops are warped straight from the decoder's planes

    def __init__(self, roi_scale: float = _ROI_SCALE, presence_threshold: float = 0.5) -> None:
        if roi_scale <= 0:
            raise ValueError(f"roi_scale must be > 0, got {roi_scale}")
        if not 0.0 <= presence_threshold <= 1.0:
            raise ValueError(f"presence_threshold must be in [0, 1], got {presence_threshold}")
        self.roi_scale = float(roi_scale)
        self.presence_threshold = float(presence_threshold)

    def prepare(self, frame: Any, dets: Detections, i: int, input_hw: tuple[int, int]) -> tuple[np.ndarray, Any]:
        """Crop (H, W, 3) of the face's ROI in ``input_spec.host_color`` order, warped straight
        from the decoder's planes when the frame has not been converted; context: the
        crop-to-source affine (2, 3)."""
        kps = dets.keypoints[i]
        warp = roi_warp(*face_roi(dets.xyxy[i], kps, self.roi_scale), input_hw)
        fmt = "rgb24" if self.input_spec.host_color == "RGB" else "bgr24"
        crop = frame.warped(cv2.invertAffineTransform(warp), input_hw[1], input_hw[0], fmt, border="replicate")
        return crop, warp

    def decode(self, outputs: list[np.ndarray], context: Any) -> FaceMesh:
        """Landmarks mapped to source pixels and the presence probability (sigmoid of the logit)."""
        warp: np.ndarray = context
        pts = logit = None
        for out in outputs:
            arr = np.asarray(out)
            if arr.size == NUM_LANDMARKS * 3:
                pts = arr.reshape(NUM_LANDMARKS, 3).astype(np.float64)
            elif arr.size == 1:
                logit = float(arr.reshape(-1)[0])
        if pts is None or logit is None:
            raise ValueError(f"expected outputs of {NUM_LANDMARKS * 3} and 1 values, "
                             f"got shapes {[tuple(np.asarray(o).shape) for o in outputs]}")
        xy = pts[:, :2] @ warp[:, :2].T + warp[:, 2]
        z = pts[:, 2:3] * math.hypot(warp[0, 0], warp[1, 0])
        presence = 1.0 / (1.0 + math.exp(-min(max(logit, -100.0), 100.0)))
        return FaceMesh(landmarks=np.concatenate([xy, z], axis=1).astype(np.float32), presence=presence)

    def carry(self, result: FaceMesh, old_box: np.ndarray, new_box: np.ndarray) -> FaceMesh:
        """The mesh moved and scaled with the face's box."""
        return FaceMesh(landmarks=follow_box(result.landmarks, old_box, new_box), presence=result.presence)

    def apply(self, dets: Detections, i: int, result: FaceMesh) -> None:
        attrs = dets.attributes[i]
        attrs["face_presence"] = float(result.presence)
        if result.presence >= self.presence_threshold:
            attrs["landmarks"] = result.landmarks[:, :2].copy()
        else:
            attrs.pop("landmarks", None)
