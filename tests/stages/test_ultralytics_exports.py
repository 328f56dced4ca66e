"""The yolo decoders against Ultralytics' own predictor, on exports Ultralytics makes.

:mod:`tests.reference.ultralytics_exports` (run in the Ultralytics environment, ``make
ultralytics``) exports five generations of Ultralytics detectors (YOLOv5u, v8, v10, 11,
26) in ten variants each (OpenVINO and ONNX; non-square, dynamic, FP16, ``nms=True``
and the NMS-free head) and predicts with each.  Here vapipe's ``detect`` stage, told only
the path, must pick the family Ultralytics' metadata and outputs call for and find the
same boxes on the same pixels: every box matched one to one with corners within 0.1 px,
scores within 0.001 and equal classes; a box on one side only must sit at the threshold
or at NMS's IoU threshold (see :func:`_agree`), at most 1 % of them.
The frames are already at the model's input size, so that no resize differs between the
two sides: the letterbox and preprocessing are checked against model_api on real models
elsewhere (``test_model_parity.py``); this checks that every kind of export is read and
decoded as Ultralytics reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.frame import Detections, Frame
from stages.detect import Detect
from stages.models.nms import iou_matrix
from tests.conftest import ROOT
from tests.media import CLIP, scene_images
from tests.reference.ultralytics_exports import ARCHS, CONF, VARIANTS

F32 = {"INFERENCE_PRECISION_HINT": "f32"}
SCRIPT = ROOT / "tests" / "reference" / "ultralytics_exports.py"
#: architectures whose nms=False export is the NMS-free head (the others ignore nms=False)
NMS_FREE_HEADS = {"yolov10n", "yolo26n"}


def _ultralytics_python() -> Path | None:
    chosen = os.environ.get("VAPIPE_ULTRALYTICS_PYTHON")
    path = Path(chosen) if chosen else ROOT / ".venv-ultralytics" / "bin" / "python"
    return path if path.exists() else None


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    python = _ultralytics_python()
    if python is None:
        pytest.skip("needs Ultralytics in .venv-ultralytics (make ultralytics) or VAPIPE_ULTRALYTICS_PYTHON")
    out = tmp_path_factory.mktemp("ultralytics")
    spec = CLIP.with_(width=768, height=432, frames=96, scene="ticker")
    frames = np.stack([image for i, image in enumerate(scene_images(spec)) if i % 4 == 0])
    np.save(out / "source.npy", frames)
    subprocess.run([str(python), str(SCRIPT), str(out), str(out / "source.npy")], check=True, timeout=3600,
                   stdout=subprocess.DEVNULL)
    return out, json.loads((out / "ultralytics.json").read_text())


def _agree(ours: Detections, theirs: dict[str, list], where: str) -> tuple[int, int]:
    """Asserts that the boxes agree; returns (boxes matched, boxes left to NMS's borderline).

    A box on one side only is allowed when its score is within 0.002 of the threshold, or
    when the other side kept a higher-scoring box of its class over it (IoU >= 0.5): an IoU
    within a hair of 0.7 in NMS, decided the other way by Ultralytics' float32 arithmetic
    (it offsets each class by 7,680 px before its IoU, which rounds coordinates to 1/16 px;
    vapipe computes in float64), and what follows from that decision."""
    boxes = np.asarray(theirs["xyxy"], np.float32).reshape(-1, 4)
    scores, classes = np.asarray(theirs["score"], np.float32), np.asarray(theirs["cls"], np.int64)
    free = np.ones(len(boxes), bool)
    mine = np.zeros(len(ours), bool)
    for i in np.argsort(-ours.score, kind="stable"):
        # corner distance, not IoU: NMS-free heads of random weights also give inverted boxes
        far = np.abs(boxes - ours.xyxy[i]).max(axis=1)
        far[~free | (classes != ours.class_id[i])] = np.inf
        j = int(np.argmin(far)) if len(far) else -1
        if j >= 0 and far[j] <= 0.1:
            assert abs(float(ours.score[i]) - float(scores[j])) <= 1e-3, f"{where}: box {ours.xyxy[i]}"
            free[j] = False
            mine[i] = True

    def explained(box: np.ndarray, score: float, cls: int, other: np.ndarray, other_scores: np.ndarray,
                  other_classes: np.ndarray) -> bool:
        if abs(score - CONF) <= 0.002:
            return True
        higher = (other_classes == cls) & (other_scores > score)
        return bool(higher.any() and iou_matrix(box[None], other[higher]).max() >= 0.5)

    for i in np.flatnonzero(~mine):
        assert explained(ours.xyxy[i], float(ours.score[i]), int(ours.class_id[i]), boxes, scores, classes), \
            f"{where}: vapipe's {ours.xyxy[i]} {ours.score[i]:.4f} #{ours.class_id[i]} has no match"
    for j in np.flatnonzero(free):
        assert explained(boxes[j], float(scores[j]), int(classes[j]), ours.xyxy, ours.score, ours.class_id), \
            f"{where}: Ultralytics' {boxes[j]} {scores[j]:.4f} #{classes[j]} has no match"
    return int(mine.sum()), int((~mine).sum() + free.sum())


def _check_export(out: Path, entry: dict[str, Any], arch: str, variant: str) -> str:
    """One export against Ultralytics' predictions: a summary line (asserts on disagreement)."""
    h, w = entry["size"]
    frames = np.load(out / f"frames-{h}x{w}.npy")
    # [1, 300, 6] rows: NMS exported into the model, or the NMS-free head
    end2end = variant == "openvino-nms" or (variant.endswith("nms-free") and arch in NMS_FREE_HEADS)
    matched = borderline = total = 0
    with Detect(model=entry["path"], config=F32) as det:
        assert det.adapter.family == ("yolo_end2end" if end2end else "yolo"), det.adapter.family
        for seq, (image, theirs) in enumerate(zip(frames, entry["frames"])):
            ours = det(Frame.from_image(image.copy(), seq=seq)).detections
            agreed, left = _agree(ours, theirs, f"frame {seq}")
            matched, borderline, total = matched + agreed, borderline + left, total + len(theirs["score"])
    assert total >= 20, f"only {total} boxes to compare; the frames score too few"
    assert borderline <= max(2, total // 100), f"{borderline} of {total} boxes differ"
    return f"{arch}-{variant}: {det.adapter.family}, {matched} of {total} boxes matched"


def test_same_boxes_as_ultralytics_on_every_export(exports: tuple[Path, dict[str, Any]]) -> None:
    """Every architecture and variant (one test, so that a machine without Ultralytics skips
    once); the failures of all exports are reported together."""
    out, reference = exports
    failures = []
    for arch in ARCHS:
        for variant in VARIANTS:
            try:
                print(_check_export(out, reference[f"{arch}-{variant}"], arch, variant))
            except AssertionError as error:
                failures.append(f"{arch}-{variant}: {error}")
    assert not failures, "\n".join(failures)
