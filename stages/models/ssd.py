"""SSD-style detectors whose model ends in NMS: Open Model Zoo, TF Object Detection API
exports converted to OpenVINO.

Layouts:

* ``DetectionOutput`` [1, 1, N, 7]: image_id, class id, score, x1, y1, x2, y2 with
  coordinates normalised to the model input; the rows end at the first image_id < 0.
* ``boxes`` [N, 5] (x1, y1, x2, y2 in model-input pixels, score) with ``labels`` [N]
  (Open Model Zoo's newer detectors), or alone (every box class 0).
* three outputs named ``bboxes`` [N, 4] (normalised x1, y1, x2, y2), ``scores`` [N] and
  ``labels`` [N] (a leading batch dimension of 1 is allowed on each), as model_api's
  ``SSD`` reads them.

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
from .model_info import ModelInfo, OutputInfo

__all__ = ["Ssd"]


@generic("ssd")
class Ssd(ModelDetector):
    defaults: ClassVar[FamilyDefaults] = FamilyDefaults(
        resize_type="standard", pad_value=0, reverse_input_channels=False, scale_values=None,
        threshold=0.5, iou=None, max_det=None)
    layout_text: ClassVar[str] = ("[1,1,N,7] (DetectionOutput), boxes [N,5] (+ labels [N]) or bboxes [N,4] + "
                                  "scores [N] + labels [N]")

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
        boxes = [o for o in info.outputs if _rows_of(o, 5)]
        labels = [o for o in info.outputs if o not in boxes and len(o.shape) in (1, 2) and "label" in o.name]
        if len(info.outputs) == 2 and len(boxes) == 1 and len(labels) == 1:
            return Layout(boxes[0].index, False, None, extra=(labels[0].index,), note="boxes")
        # alone, every box is of class 0; a [1, N, 5] output must be named as boxes, or a
        # one-class YOLO head [1, N, 4 + 1] would read as one
        if len(info.outputs) == 1 and len(boxes) == 1 and (len(boxes[0].shape) == 2 or "box" in boxes[0].name):
            return Layout(boxes[0].index, False, None, note="boxes")
        corners = [o for o in info.outputs if _rows_of(o, 4) and "bboxes" in o.name]
        scores = [o for o in info.outputs if _rows_of(o, None) and "score" in o.name]
        if len(info.outputs) == 3 and len(corners) == 1 and len(scores) == 1 and len(labels) == 1:
            return Layout(corners[0].index, False, None, extra=(scores[0].index, labels[0].index), note="bboxes")
        return None

    def _background_id(self) -> int | None:
        note = self.layout_used.note
        return int(note) if note.lstrip("-").isdigit() else None

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        """Boxes in model-input pixels."""
        h, w = input_hw
        scale = np.array([w, h, w, h], np.float32)
        used = self.layout_used
        if used.note == "boxes":
            table = outputs[used.output].reshape(-1, 5)
            classes = outputs[used.extra[0]].reshape(-1) if used.extra else np.zeros(len(table))
            keep = np.flatnonzero(table[:, 4] > self.threshold)
            boxes = np.asarray(table[keep, :4], np.float32)
            return self.finish(boxes, np.asarray(table[keep, 4], np.float32), np.rint(classes[keep]).astype(np.int64),
                               input_hw)
        if used.note == "bboxes":
            corners = outputs[used.output].reshape(-1, 4)
            scores = outputs[used.extra[0]].reshape(-1)
            classes = outputs[used.extra[1]].reshape(-1)
            if not len(corners) == len(scores) == len(classes):
                raise ValueError(f"bboxes, scores and labels have {len(corners)}, {len(scores)} and "
                                 f"{len(classes)} rows")
            keep = np.flatnonzero(scores > self.threshold)
            return self.finish(np.asarray(corners[keep], np.float32) * scale, np.asarray(scores[keep], np.float32),
                               np.rint(classes[keep]).astype(np.int64), input_hw)
        table = outputs[used.output].reshape(-1, 7)
        ended = np.flatnonzero(table[:, 0] < 0)
        table = table[: ended[0]] if len(ended) else table
        keep = np.flatnonzero(table[:, 2] > self.threshold)
        boxes = np.asarray(table[keep, 3:7], np.float32) * scale
        return self.finish(boxes, np.asarray(table[keep, 2], np.float32), np.rint(table[keep, 1]).astype(np.int64),
                           input_hw)


def _rows_of(out: OutputInfo, width: int | None) -> bool:
    """Whether ``out`` is [N, width] or [1, N, width] (``width`` None: [N] or [1, N])."""
    shape = out.shape
    if width is None:
        return len(shape) == 1 or (len(shape) == 2 and shape[0] in (1, -1))
    return shape[-1:] == (width,) and (len(shape) == 2 or (len(shape) == 3 and shape[0] in (1, -1)))
