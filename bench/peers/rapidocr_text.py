"""RapidOCR (``rapidocr-onnxruntime``, ONNX Runtime with its default threads) on the
same three PP-OCR model files vapipe's ``ocr`` pipeline uses, with RapidOCR's own
settings (detection limit 736 on the short side, direction threshold 0.9, recognition
height 48, text score >= 0.5).  Each text line is recorded as the bounding box of its
quad, its text and score.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.measure import object_record
from bench.plan import BenchPlan

from .worker import run_loop

__all__ = ["run", "model_files", "version"]

#: RapidOCR's model arguments, in the order of the chain's stages (detection, direction, recognition)
ARGUMENTS = ("det_model_path", "cls_model_path", "rec_model_path")


def version() -> str:
    from importlib.metadata import version as dist_version

    return f"rapidocr-onnxruntime {dist_version('rapidocr-onnxruntime')}"


def model_files(plan: BenchPlan) -> list[str]:
    return list(plan.peer["models"].values())


def run(plan: BenchPlan) -> dict[str, Any]:
    from rapidocr_onnxruntime import RapidOCR

    kwargs = dict(zip(ARGUMENTS, plan.peer["models"].values()))

    def make_model() -> Any:
        return RapidOCR(**kwargs)

    def process(engine: Any, bgr: np.ndarray, seq: int) -> list[dict[str, Any]]:
        result, _ = engine(bgr)
        objects = []
        for quad, text, score in result or []:
            q = np.asarray(quad, np.float32).reshape(4, 2)
            objects.append(object_record((*q.min(axis=0), *q.max(axis=0)), float(score), "text", text=text))
        return objects

    return run_loop(plan, make_model, process, "bgr24")
