"""MediaPipe person (pose) detector: whole-body regions from ``pose_detection``.

Input 224x224 RGB scaled to [-1, 1], letterboxed with zero padding.  The model's
box surrounds the face; like MediaPipe's pose graphs, the body region is
derived from keypoint 0 (mid-hip centre) and keypoint 1 (a point fixing size
and rotation): a square centred on the hip centre with side
``2 * |kp1 - kp0| * 1.25``, rotated so that kp0 -> kp1 points up.  The
reported box is the axis-aligned bound of that rotated square.

Keypoints (4, 2): mid-hip centre, full-body size/rotation point, mid-shoulder
centre, upper-body size/rotation point.  ``attributes["rotation"]`` is the
square's rotation in radians (image axes, clockwise positive, 0 = upright).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from pipeline.engine import InputSpec
from pipeline.frame import Detections

from .base import register
from .blazeface import MediaPipeSsd
from .ssd_anchors import POSE_DETECTION, SsdAnchorConfig

__all__ = ["PoseDetector", "POSE_KEYPOINTS", "body_square"]

POSE_KEYPOINTS = ("hip_center", "body_scale", "shoulder_center", "upper_body_scale")

# Settings of MediaPipe's pose-detection-to-ROI step.
_TARGET_ANGLE = math.pi / 2  # kp0 -> kp1 must point up
_ROI_SCALE = 1.25


def body_square(kps: np.ndarray, scale: float = _ROI_SCALE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rotated body squares from pose keypoints (N, 4, 2) in pixels.

    Returns centres (N, 2), sides (N,) in the same pixels, and rotations (N,)
    in radians normalised to [-pi, pi).
    """
    kps = np.asarray(kps, np.float64).reshape(-1, 4, 2)
    c = kps[:, 0]
    d = kps[:, 1] - c
    side = 2.0 * np.hypot(d[:, 0], d[:, 1]) * scale
    rot = _TARGET_ANGLE - np.arctan2(-d[:, 1], d[:, 0])
    rot = (rot + math.pi) % (2 * math.pi) - math.pi
    return c, side, rot


@register("pose")
class PoseDetector(MediaPipeSsd):
    """People as whole-body boxes (label "person") with 4 keypoints; MediaPipe's settings by default."""

    input_spec: ClassVar[InputSpec] = InputSpec(host_color="RGB", model_color="RGB",
                                                mean=(127.5,) * 3, scale=(127.5,) * 3)
    letterbox: ClassVar[bool] = True
    anchor_config: ClassVar[SsdAnchorConfig] = POSE_DETECTION
    num_keypoints: ClassVar[int] = 4

    def __init__(self, score_threshold: float = 0.5, iou_threshold: float = 0.3, max_objects: int | None = None,
                 sample_offset: float = 0.5, roi_scale: float = _ROI_SCALE, label: str = "person") -> None:
        super().__init__(score_threshold, iou_threshold, max_objects, sample_offset)
        if roi_scale <= 0:
            raise ValueError(f"roi_scale must be > 0, got {roi_scale}")
        self.roi_scale = float(roi_scale)
        self.label = label

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        """People in model-input pixels: body boxes, keypoints (4, 2), rotation attribute."""
        _, scores, kps = self.candidates(outputs, input_hw)
        if len(scores) == 0:
            return Detections()
        c, side, rot = body_square(kps, self.roi_scale)
        half = side / 2 * (np.abs(np.cos(rot)) + np.abs(np.sin(rot)))
        xyxy = np.stack([c[:, 0] - half, c[:, 1] - half, c[:, 0] + half, c[:, 1] + half], axis=1)
        attrs = [{"rotation": float(r)} for r in rot]
        return Detections(xyxy=xyxy, score=scores, label=self.label, keypoints=list(kps), attributes=attrs)
