"""The ``yolov5`` family ([1, N, 5+nc], 3 anchors per cell, score = objectness x class)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.stages.models.synthetic import constant_model, yolo_head
from tests.stages.models.test_yolo import detect

ANCHORS_64 = 3 * (64 + 16 + 4)


def test_score_is_objectness_times_class_and_both_pass_the_threshold(tmp_path: Path) -> None:
    head = yolo_head([[32, 32, 16, 8], [10, 10, 4, 4], [50, 50, 4, 4]],
                     [[0.1, 0.9, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 1.0]], ANCHORS_64, channels_first=False,
                     objectness=[0.8, 0.4, 0.2])
    assert head.shape == (1, ANCHORS_64, 8)
    path = constant_model(tmp_path / "m.xml", {"output": head})
    dets = detect(path, width=64, height=64, labels=["a", "b", "c"])
    assert dets.label.tolist() == ["b"]
    np.testing.assert_allclose(dets.score, [0.72], atol=1e-6)
    np.testing.assert_allclose(dets.xyxy, [[24, 28, 40, 36]], atol=1e-4)
    # objectness 0.2 x 1.0 and 0.4 x 0.5 stay under 0.25; at 0.15 the second row (0.2) passes, not the
    # third (its objectness 0.2 passes, its score 0.2 too)
    assert detect(path, width=64, height=64, threshold=0.15).score.tolist() == pytest.approx([0.72, 0.2, 0.2])


def test_one_class(tmp_path: Path) -> None:
    head = yolo_head([[32, 32, 16, 8]], [[0.9]], ANCHORS_64, channels_first=False, objectness=[0.9])
    path = constant_model(tmp_path / "m.xml", {"output": head})
    dets = detect(path, width=64, height=64)
    assert dets.label.tolist() == ["#0"] and dets.class_id.tolist() == [0]
    np.testing.assert_allclose(dets.score, [0.81], atol=1e-6)
