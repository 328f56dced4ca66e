"""YOLOv5 / YOLOv7 anchor-based head.

Output [1, N, 5+nc], N = 3 anchors x cells over strides 8/16/32: centre x, centre y,
width, height in model-input pixels, objectness, nc class probabilities; a row's
score is objectness x its best class probability.  Defaults as the YOLOv5
repository's detect.py: centred letterbox padded with 114, RGB / 255, objectness and
score > 0.25, per-class NMS at IoU 0.45, at most 1000 boxes.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pipeline.frame import Detections

from .detector_base import FamilyDefaults, Layout, ModelDetector, generic
from .model_info import ModelInfo
from .yolo_common import (ULTRALYTICS_INPUT, anchor_count, best_class_times_objectness, grid_head, rows,
                          xywh_to_xyxy)

__all__ = ["YoloV5"]


@generic("yolov5")
class YoloV5(ModelDetector):
    defaults: ClassVar[FamilyDefaults] = FamilyDefaults(**ULTRALYTICS_INPUT, threshold=0.25, iou=0.45, max_det=1000)
    layout_text: ClassVar[str] = "[1,N,5+nc] (N = 3 anchors per cell)"

    @classmethod
    def layout(cls, info: ModelInfo, input_hw: tuple[int, int], options: dict[str, Any] | None = None
               ) -> Layout | None:
        return grid_head(info, 5, anchor_count(input_hw, per_cell=3))

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        """Boxes in model-input pixels."""
        p = rows(outputs[self.layout_used.output], False)
        cand = np.flatnonzero(p[:, 4] > self.threshold)
        picked = np.asarray(p[cand], np.float32)
        ids, best, keep = best_class_times_objectness(picked, self.threshold)
        return self.finish(xywh_to_xyxy(picked[keep, :4]), best[keep], ids[keep], input_hw)
