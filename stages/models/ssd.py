"""SSD-style detectors whose model ends in NMS: Open Model Zoo, TF Object Detection API
exports converted to OpenVINO.

Two layouts:

* ``DetectionOutput`` [1, 1, N, 7]: image_id, class id, score, x1, y1, x2, y2 with
  coordinates normalised to the model input; the rows end at the first image_id < 0.
* ``boxes`` [N, 5] (x1, y1, x2, y2 in model-input pixels, score) with ``labels`` [N]
  (Open Model Zoo's newer detectors, model_api's boxes/labels layout).

Class ids are the model's own (with a background class 0 in ``DetectionOutput``
models, e.g. 1 = person): a label list may name every id (background included) or
every id but the background.  Defaults as Open Model Zoo's demos: BGR without
scaling, stretched to the input size, score > 0.5; no NMS of our own.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pipeline.frame import Detections

from .detector_base import FamilyDefaults, Layout, ModelDetector, generic
from .model_info import ModelInfo

__all__ = ["Ssd"]


@generic("ssd")
class Ssd(ModelDetector):
    defaults: ClassVar[FamilyDefaults] = FamilyDefaults(
        resize_type="standard", pad_value=0, reverse_input_channels=False, scale_values=None,
        threshold=0.5, iou=None, max_det=None)
    layout_text: ClassVar[str] = "[1,1,N,7] (DetectionOutput) or boxes [N,5] + labels [N]"

    @classmethod
    def layout(cls, info: ModelInfo, input_hw: tuple[int, int], options: dict[str, Any] | None = None
               ) -> Layout | None:
        det = [o for o in info.outputs if o.op.startswith("DetectionOutput")
               or (len(o.shape) == 4 and o.shape[:2] == (1, 1) and o.shape[3] == 7)]
        if len(det) == 1 and len(info.outputs) == 1:
            attrs = det[0].op_attrs
            nc = attrs.get("num_classes")
            return Layout(det[0].index, False, int(nc) if isinstance(nc, int) and nc > 0 else None,
                          note=str(attrs.get("background_label_id", 0)))
        if len(info.outputs) == 2:
            boxes = [o for o in info.outputs if len(o.shape) in (2, 3) and o.shape[-1] == 5]
            labels = [o for o in info.outputs if o not in boxes and len(o.shape) in (1, 2) and "label" in o.name]
            if len(boxes) == 1 and len(labels) == 1:
                return Layout(boxes[0].index, False, None, extra=(labels[0].index,), note="boxes")
        return None

    def _background_id(self) -> int | None:
        note = self.layout_used.note
        return int(note) if note.lstrip("-").isdigit() else None

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        """Boxes in model-input pixels."""
        h, w = input_hw
        if self.layout_used.note == "boxes":
            table = outputs[self.layout_used.output].reshape(-1, 5)
            classes = outputs[self.layout_used.extra[0]].reshape(-1)
            keep = np.flatnonzero(table[:, 4] > self.threshold)
            boxes = np.asarray(table[keep, :4], np.float32)
            return self.finish(boxes, np.asarray(table[keep, 4], np.float32), np.rint(classes[keep]).astype(np.int64),
                               input_hw)
        table = outputs[self.layout_used.output].reshape(-1, 7)
        ended = np.flatnonzero(table[:, 0] < 0)
        table = table[: ended[0]] if len(ended) else table
        keep = np.flatnonzero(table[:, 2] > self.threshold)
        boxes = np.asarray(table[keep, 3:7], np.float32) * np.array([w, h, w, h], np.float32)
        return self.finish(boxes, np.asarray(table[keep, 2], np.float32), np.rint(table[keep, 1]).astype(np.int64),
                           input_hw)
