"""The ``ssd`` family: DetectionOutput [1, 1, N, 7] (rows end at image_id < 0), boxes (+ labels) and
bboxes + scores + labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.stages.models.synthetic import constant_model, detection_output_model
from tests.stages.models.synthetic import yolo_head
from stages.detect import Detect
from tests.stages.models.test_yolo import CELLS_64, detect, frame


def table(rows: list[list[float]], n: int = 20) -> np.ndarray:
    out = np.zeros((1, 1, n, 7), np.float32)
    out[0, 0, : len(rows)] = rows
    return out


def test_rows_stop_at_the_first_negative_image_id(tmp_path: Path) -> None:
    rows = [[0, 1, 0.9, 0.1, 0.2, 0.5, 0.6], [0, 2, 0.4, 0, 0, 1, 1], [0, 2, 0.7, 0.5, 0.5, 1.0, 1.0],
            [-1, 0, 0, 0, 0, 0, 0], [0, 1, 0.99, 0, 0, 0.5, 0.5]]  # after the end: never a detection
    path = constant_model(tmp_path / "ssd.xml", {"detection_out": table(rows)}, input_shape=(1, 3, 60, 80),
                          input_name="data")
    dets = detect(path, width=160, height=120, labels=["background", "person", "car"])
    assert dets.label.tolist() == ["person", "car"] and dets.class_id.tolist() == [1, 2]
    np.testing.assert_allclose(dets.score, [0.9, 0.7], atol=1e-6)
    # normalised corners times the frame size (stretched input)
    np.testing.assert_allclose(dets.xyxy, [[16, 24, 80, 72], [80, 60, 160, 120]], atol=1e-3)


def test_boxes_and_labels_layout(tmp_path: Path) -> None:
    boxes = np.zeros((100, 5), np.float32)
    boxes[0] = [8, 6, 40, 30, 0.8]
    boxes[1] = [0, 0, 4, 4, 0.3]
    labels = np.zeros((100,), np.float32)
    labels[0] = 3
    path = constant_model(tmp_path / "ssd.xml", {"boxes": boxes, "labels": labels}, input_shape=(1, 3, 60, 80))
    dets = detect(path, width=160, height=120)
    assert dets.class_id.tolist() == [3] and dets.label.tolist() == ["#3"]
    np.testing.assert_allclose(dets.xyxy, [[16, 12, 80, 60]], atol=1e-4)


@pytest.mark.parametrize("shape", [(100, 5), (1, 100, 5)])
def test_boxes_alone_are_class_0(tmp_path: Path, shape: tuple[int, ...]) -> None:
    boxes = np.zeros((100, 5), np.float32)
    boxes[0] = [8, 6, 40, 30, 0.8]
    boxes[1] = [20, 20, 30, 30, 0.6]
    boxes[2] = [0, 0, 4, 4, 0.3]
    path = constant_model(tmp_path / "ssd.xml", {"boxes": boxes.reshape(shape)}, input_shape=(1, 3, 60, 80))
    dets = detect(path, width=160, height=120, labels=["face"])
    assert dets.label.tolist() == ["face", "face"] and dets.class_id.tolist() == [0, 0]
    np.testing.assert_allclose(dets.xyxy, [[16, 12, 80, 60], [40, 40, 60, 60]], atol=1e-4)


def test_bboxes_scores_and_labels_normalised(tmp_path: Path) -> None:
    corners = np.zeros((1, 50, 4), np.float32)
    corners[0, :2] = [[0.1, 0.2, 0.5, 0.6], [0.5, 0.5, 1.0, 1.0]]
    scores = np.zeros((1, 50), np.float32)
    scores[0, :2] = [0.4, 0.9]
    labels = np.zeros((1, 50), np.float32)
    labels[0, :2] = [1, 2]
    path = constant_model(tmp_path / "ssd.xml", {"bboxes": corners, "scores": scores, "labels": labels},
                          input_shape=(1, 3, 60, 80))
    dets = detect(path, width=160, height=120, threshold=0.3, labels=["a", "b", "c"])
    assert dets.label.tolist() == ["c", "b"]  # highest score first
    np.testing.assert_allclose(dets.score, [0.9, 0.4], atol=1e-6)
    np.testing.assert_allclose(dets.xyxy, [[80, 60, 160, 120], [16, 24, 80, 72]], atol=1e-3)


def test_a_one_class_yolo_head_rows_last_is_not_read_as_boxes(tmp_path: Path) -> None:
    head = np.ascontiguousarray(yolo_head([[32, 32, 16, 8]], [[0.95]], CELLS_64).transpose(0, 2, 1))
    assert head.shape == (1, CELLS_64, 5)
    path = constant_model(tmp_path / "m.xml", {"output0": head}, ultralytics={"names": {0: "face"}, "imgsz": [64, 64]})
    with Detect(model=str(path)) as det:
        assert det.adapter.family == "yolo"
        dets = det(frame(64, 64)).detections
    np.testing.assert_allclose(dets.xyxy, [[24, 28, 40, 36]], atol=1e-4)


def test_a_real_detection_output_op_gives_its_class_count(tmp_path: Path) -> None:
    """A DetectionOutput op (one prior, zero offsets): its num_classes checks the labels."""
    detection_output_model(tmp_path / "do.xml", [0.1, 0.2, 0.7])
    dets = detect(tmp_path / "do.xml", width=64, height=64, threshold=0.5, labels=["bg", "a", "b"])
    assert dets.label.tolist() == ["b"]
    np.testing.assert_allclose(dets.xyxy, [[16, 16, 48, 32]], atol=1e-3)
    # names without the background class (id 0) are accepted too
    assert detect(tmp_path / "do.xml", width=64, height=64, threshold=0.5, labels=["a", "b"]).label.tolist() == ["b"]
    with pytest.raises(ValueError, match=r"has 5 names but model .* has 3 classes"):
        detect(tmp_path / "do.xml", labels=["a", "b", "c", "d", "e"])


def _three_outputs() -> dict[str, np.ndarray]:
    return {"bboxes": np.array([[[0.1, 0.2, 0.5, 0.6], [0.5, 0.5, 1.0, 1.0], [0.2, 0.2, 0.3, 0.3]]], np.float32),
            "scores": np.array([[0.7, 0.9, 0.2]], np.float32), "labels": np.array([[1, 2, 1]], np.float32)}


def test_three_outputs_read_as_model_api_reads_them(tmp_path: Path) -> None:
    """model_api's ``SSD`` wrapper (its multiple-output parser) on the same model: the same
    boxes (it rounds to whole pixels), scores and classes."""
    pytest.importorskip("model_api.models", reason="needs openvino-model-api (make setup installs it)")
    from model_api.adapters import OpenvinoAdapter, create_core
    from model_api.models import Model

    path = constant_model(tmp_path / "ssd.xml", _three_outputs(), input_shape=(1, 3, 60, 80))
    config = {"resize_type": "standard", "pad_value": 0, "reverse_input_channels": False, "scale_values": [],
              "mean_values": [], "confidence_threshold": 0.5, "nms_execute": False}
    ref = Model.create_model(OpenvinoAdapter(create_core(), str(path), device="CPU"), model_type="SSD",
                             configuration=config)(np.zeros((120, 160, 3), np.uint8))
    ours = detect(path, width=160, height=120)
    order = np.argsort(-np.asarray(ref.scores), kind="stable")
    assert len(ours) == len(order) >= 1
    np.testing.assert_allclose(ours.xyxy, np.asarray(ref.bboxes)[order], atol=0.51)
    np.testing.assert_allclose(ours.score, np.asarray(ref.scores)[order], atol=1e-6)
    assert ours.class_id.tolist() == np.asarray(ref.labels)[order].astype(int).tolist()
