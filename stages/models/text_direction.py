"""PP-OCR text-line direction classifier (upright or upside down).

Model: ``ppocr/ch_ppocr_mobile_v2.0_cls_infer`` - input N x 3 x 48 x 192 BGR,
``(x / 255 - 0.5) / 0.5``; output N x 2, probabilities of (0 deg, 180 deg).
Runs on objects with a quad in ``keypoints`` (e.g. from the ``db_text``
detector); the line is cropped upright, scaled to height 48 and padded to
width 192.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pipeline.engine import InputSpec
from pipeline.frame import Detections

from .base import RoiAdapter, register
from .text_crop import CLS_HW, cls_input, line_crop

__all__ = ["TextDirectionAdapter", "line_quad"]


def line_quad(dets: Detections, i: int) -> np.ndarray:
    """Quad (4, 2) of object i in source pixels: its keypoints, else its box corners."""
    kp = dets.keypoints[i]
    if kp is not None and len(kp) == 4:
        return np.asarray(kp, np.float32)[:, :2]
    x1, y1, x2, y2 = (float(v) for v in dets.xyxy[i])
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float32)


@register("text_direction")
class TextDirectionAdapter(RoiAdapter):
    """Sets ``attributes["angle"]`` (0 or 180) and ``attributes["angle_score"]``.

    180 is reported only when the model's 180-degree probability is at least
    ``threshold``; otherwise the line is taken as upright.  ``angle_score`` is
    the model's probability of the reported angle.
    """

    input_spec: ClassVar[InputSpec] = InputSpec(host_color="BGR", model_color="BGR",
                                                mean=(127.5, 127.5, 127.5), scale=(127.5, 127.5, 127.5),
                                                size=CLS_HW)

    def __init__(self, threshold: float = 0.9) -> None:
        self.threshold = threshold

    def prepare(self, frame: Any, dets: Detections, i: int, input_hw: tuple[int, int]) -> tuple[np.ndarray, Any]:
        return cls_input(line_crop(frame, line_quad(dets, i))), None

    def decode(self, outputs: list[np.ndarray], context: Any) -> tuple[int, float]:
        probs = np.asarray(outputs[0], np.float32).reshape(-1)
        flipped = bool(probs[1] >= self.threshold and probs[1] >= probs[0])
        return (180, float(probs[1])) if flipped else (0, float(probs[0]))

    def apply(self, dets: Detections, i: int, result: tuple[int, float]) -> None:
        angle, score = result
        dets.attributes[i]["angle"] = angle
        dets.attributes[i]["angle_score"] = score
