"""Benchmark-only decoder for Ultralytics YOLO detection exports (output 1 x (4 + classes) x anchors:
centre x, centre y, width, height in input pixels, then class scores), registered as
``bench_yolo`` when this module is imported.  The motion-gating benchmark needs a detector for
bottles and cars; the pipelines themselves do not use this module."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import yaml

from pipeline.engine import InputSpec
from pipeline.frame import Detections
from stages.models.base import DetectorAdapter, register
from stages.models.nms import nms


def coco_names(model: Path) -> list[str]:
    """Class names from the ``metadata.yaml`` Ultralytics writes next to the model."""
    meta = yaml.safe_load((Path(model).parent / "metadata.yaml").read_text())
    return [meta["names"][i] for i in sorted(meta["names"])]


@register("bench_yolo")
class BenchYolo(DetectorAdapter):
    input_spec: ClassVar[InputSpec] = InputSpec(host_color="RGB", model_color="RGB", mean=None, scale=(255.0,) * 3)
    letterbox: ClassVar[bool] = True
    pad_value: ClassVar[int] = 114

    def __init__(self, names: str, score_threshold: float = 0.25, iou_threshold: float = 0.7) -> None:
        self.names = coco_names(Path(names))
        self.score_threshold = score_threshold
        self.iou_threshold = iou_threshold

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        out = np.asarray(outputs[0]).reshape(4 + len(self.names), -1).T
        cls = out[:, 4:].argmax(axis=1)
        score = out[np.arange(len(out)), 4 + cls]
        keep = np.flatnonzero(score >= self.score_threshold)
        if not len(keep):
            return Detections()
        cx, cy, w, h = out[keep, :4].T
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
        kept = []
        for c in np.unique(cls[keep]):  # per-class NMS
            idx = np.flatnonzero(cls[keep] == c)
            kept += idx[nms(boxes[idx], score[keep][idx], self.iou_threshold)].tolist()
        kept = sorted(kept, key=lambda i: -score[keep][i])
        return Detections(xyxy=boxes[kept], score=score[keep][kept], label=[self.names[cls[keep][i]] for i in kept])
