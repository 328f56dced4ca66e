"""Ultralytics YOLOv8 / YOLO11 detection head (also model_api's exports of them).

Output [1, 4+nc, N] (or transposed [1, N, 4+nc]), N = cells over strides 8/16/32:
centre x, centre y, width, height in model-input pixels, then nc class scores that
are already sigmoid probabilities; no objectness.  Each row's class is its best
score (Ultralytics' default, not multi-label); Ultralytics' TensorFlow Lite exports give
the box as fractions of the input size.  Defaults as Ultralytics ships them:
centred letterbox padded with 114, RGB / 255, score > 0.25, per-class NMS at IoU
0.7, at most 300 boxes.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pipeline.frame import Detections

from .detector_base import FamilyDefaults, Layout, ModelDetector, generic
from .model_info import ModelInfo
from .yolo_common import ULTRALYTICS_INPUT, anchor_count, grid_head, rows, xywh_to_xyxy

__all__ = ["Yolo"]


@generic("yolo")
class Yolo(ModelDetector):
    defaults: ClassVar[FamilyDefaults] = FamilyDefaults(**ULTRALYTICS_INPUT, threshold=0.25, iou=0.7, max_det=300)
    tflite_normalized: ClassVar[bool] = True
    layout_text: ClassVar[str] = "[1,4+nc,N] or [1,N,4+nc]"

    @classmethod
    def layout(cls, info: ModelInfo, input_hw: tuple[int, int], options: dict[str, Any] | None = None
               ) -> Layout | None:
        return grid_head(info, 4, anchor_count(input_hw), either_way=True)

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        """Boxes in model-input pixels."""
        p = rows(outputs[self.layout_used.output], self.layout_used.channels_first)
        scores = p[:, 4:]
        best = scores.max(axis=1)
        cand = np.flatnonzero(best > self.threshold)
        picked = np.asarray(p[cand], np.float32)
        ids = picked[:, 4:].argmax(axis=1)
        return self.finish(xywh_to_xyxy(picked[:, :4]), best[cand].astype(np.float32), ids, input_hw)
