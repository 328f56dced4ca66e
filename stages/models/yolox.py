"""YOLOX (Megvii) exported without box decoding, as its ONNX/OpenVINO exports are.

Output [1, N, 5+nc], N = cells over strides 8/16/32 (``options: {strides: [...]}``
for other heads): x, y offsets in cells, log width and height in cells, objectness,
nc class probabilities.  Decoded as YOLOX does: centre = (offset + cell) x stride,
size = exp(log size) x stride; score = objectness x best class probability.
Defaults as YOLOX's ONNX/OpenVINO demos: letterbox at the top-left padded with 114,
BGR without scaling, score > 0.3, class-agnostic NMS at IoU 0.45.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pipeline.frame import Detections

from .detector_base import FamilyDefaults, Layout, ModelDetector, generic, grid_cells
from .model_info import ModelInfo
from .yolo_common import STRIDES, best_class_times_objectness, cell_grid, grid_head, rows, xywh_to_xyxy

__all__ = ["YoloX"]


@generic("yolox")
class YoloX(ModelDetector):
    defaults: ClassVar[FamilyDefaults] = FamilyDefaults(
        resize_type="fit_to_window", pad_value=114, reverse_input_channels=False, scale_values=None,
        threshold=0.3, iou=0.45, max_det=300, agnostic_nms=True)
    layout_text: ClassVar[str] = "[1,N,5+nc] (raw grid, N = cells over strides 8/16/32)"
    #: YOLOX (and model_api's YOLOX wrapper) scales the BGR frame with cv2.resize
    resize_preference: ClassVar[str] = "host"
    host_from_image: ClassVar[bool] = True

    def __init__(self, info: ModelInfo, settings: dict[str, Any], layout: Layout,
                 options: dict[str, Any] | None = None) -> None:
        options = dict(options or {})
        self.strides = _strides(options.pop("strides", STRIDES))
        super().__init__(info, settings, layout, options)

    @classmethod
    def layout(cls, info: ModelInfo, input_hw: tuple[int, int], options: dict[str, Any] | None = None
               ) -> Layout | None:
        strides = _strides((options or {}).get("strides", STRIDES))
        return grid_head(info, 5, grid_cells(input_hw, strides))

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        """Boxes in model-input pixels."""
        p = rows(outputs[self.layout_used.output], False)
        grid, stride = cell_grid(tuple(input_hw), self.strides)
        if len(grid) != len(p):
            raise ValueError(f"yolox: the output has {len(p)} rows but a {input_hw[1]}x{input_hw[0]} input has "
                             f"{len(grid)} cells at strides {list(self.strides)}")
        cand = np.flatnonzero(p[:, 4] > self.threshold)  # score <= objectness
        picked = np.asarray(p[cand], np.float32)
        ids, best, keep = best_class_times_objectness(picked, self.threshold)
        picked, cand = picked[keep], cand[keep]
        xy = (picked[:, :2] + grid[cand]) * stride[cand]
        wh = np.exp(picked[:, 2:4]) * stride[cand]
        return self.finish(xywh_to_xyxy(np.concatenate([xy, wh], axis=1)), best[keep], ids[keep], input_hw)


def _strides(value: Any) -> tuple[int, ...]:
    if (not isinstance(value, (list, tuple)) or not value
            or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in value)):
        raise ValueError(f"decoder 'yolox': strides must be a list of positive integers, got {value!r}")
    return tuple(value)
