"""Detectors with NMS inside the model: YOLOv10, YOLO26 and Ultralytics ``nms=True``
exports.

Output [1, K, 6]: x1, y1, x2, y2 in model-input pixels, score, class id (K = the
export's maximum number of boxes; unused rows score 0).  Defaults as Ultralytics:
centred letterbox padded with 114, RGB / 255, score > 0.25, at most 300 boxes.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pipeline.frame import Detections

from .detector_base import FamilyDefaults, Layout, ModelDetector, generic
from .model_info import ModelInfo
from .yolo_common import ULTRALYTICS_INPUT, anchor_count, single_head

__all__ = ["YoloEnd2End"]


@generic("yolo_end2end")
class YoloEnd2End(ModelDetector):
    defaults: ClassVar[FamilyDefaults] = FamilyDefaults(**ULTRALYTICS_INPUT, threshold=0.25, iou=None, max_det=300)
    tflite_normalized: ClassVar[bool] = True
    layout_text: ClassVar[str] = "[1,K,6] (x1,y1,x2,y2,score,class)"

    @classmethod
    def layout(cls, info: ModelInfo, input_hw: tuple[int, int], options: dict[str, Any] | None = None
               ) -> Layout | None:
        out = single_head(info)
        if out is None or out.shape[2] != 6:
            return None
        k = out.shape[1]
        if k > 0 and k in (anchor_count(input_hw), anchor_count(input_hw, per_cell=3)):
            return None  # as many rows as grid cells: a raw head, not a list of boxes
        return Layout(out.index, False, None)

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        """Boxes in model-input pixels."""
        p = outputs[self.layout_used.output].reshape(-1, 6)
        keep = np.flatnonzero(p[:, 4] > self.threshold)
        picked = np.asarray(p[keep], np.float32)
        ids = np.rint(picked[:, 5]).astype(np.int64)
        return self.finish(picked[:, :4].copy(), picked[:, 4].copy(), ids, input_hw)
