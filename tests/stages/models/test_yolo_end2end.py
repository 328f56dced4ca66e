"""The ``yolo_end2end`` family: [1, K, 6] boxes with NMS inside the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.stages.models.synthetic import constant_model
from tests.stages.models.test_yolo import detect


def test_rows_above_the_threshold_without_nms(tmp_path: Path) -> None:
    rows = np.zeros((1, 300, 6), np.float32)
    rows[0, 0] = [6.4, 6.4, 38.4, 51.2, 0.9, 0]
    rows[0, 1] = [8, 8, 38, 50, 0.5, 0]        # overlaps the first: the model's NMS kept it, so do we
    rows[0, 2] = [0, 0, 10, 10, 0.2, 2]
    path = constant_model(tmp_path / "fixture.xml", {"final_boxes": rows}, rt_info={"model_type": "YOLO"})
    (tmp_path / "labels.txt").write_text("car\nbus\ntruck\n")
    dets = detect(path, width=64, height=64, labels=str(tmp_path / "labels.txt"))
    assert dets.label.tolist() == ["car", "car"]
    np.testing.assert_allclose(dets.xyxy, rows[0, :2, :4], atol=1e-4)
    assert detect(path, width=64, height=64, threshold=0.1, classes=[2]).class_id.tolist() == [2]
    assert len(detect(path, width=64, height=64, max_det=1)) == 1
