"""The ``yolo`` family ([1, 4+nc, N] and transposed) on synthetic models with known outputs:
boxes checked exactly in source pixels, through the detect stage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.frame import Frame
from stages.detect import Detect
from tests.stages.models.synthetic import constant_model, yolo_head

CELLS_64 = 64 + 16 + 4          # 64x64 input, strides 8/16/32
CELLS_32x64 = 32 + 8 + 2        # 32 rows x 64 columns

# rows: (cx, cy, w, h) in model-input pixels, then class scores
BOXES = [[32, 32, 16, 8], [33, 32, 16, 8], [32, 32, 16, 8], [10, 10, 4, 4]]
SCORES = [[0.0, 0.0, 0.9], [0.0, 0.0, 0.8], [0.6, 0.0, 0.0], [0.0, 0.2, 0.0]]
NAMES = {0: "person", 1: "traffic light", 2: "car"}


def frame(width: int, height: int) -> Frame:
    return Frame.from_image(np.zeros((height, width, 3), np.uint8))


def detect(path: Path, width: int = 128, height: int = 64, **params: object):
    with Detect(model=str(path), **params) as det:
        return det(frame(width, height)).detections


@pytest.mark.parametrize("channels_first", [True, False])
def test_boxes_in_source_pixels_with_class_aware_nms(tmp_path: Path, channels_first: bool) -> None:
    head = yolo_head(BOXES, SCORES, CELLS_64, channels_first=channels_first)
    path = constant_model(tmp_path / "m" / "best.xml", {"output0": head},
                          ultralytics={"names": NAMES, "imgsz": [64, 64], "task": "detect", "stride": 32})
    dets = detect(path)
    # 128x64 into 64x64: scale 0.5, 32 rows of image centred (16 rows of padding on top)
    assert dets.label.tolist() == ["car", "person"]
    assert dets.class_id.tolist() == [2, 0]
    np.testing.assert_allclose(dets.score, [0.9, 0.6], atol=1e-6)
    expected = np.array([[24, 28, 40, 36], [24, 28, 40, 36]], np.float32)  # model-input pixels
    expected[:, [1, 3]] -= 16
    np.testing.assert_allclose(dets.xyxy, expected * 2, atol=1e-4)


def test_thresholds_nms_and_class_filter_are_parameters(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"out": yolo_head(BOXES, SCORES, CELLS_64)},
                          rt_info={"model_type": "YOLO", "labels": "person traffic_light car"})
    assert detect(path, agnostic_nms=True).label.tolist() == ["car"]
    assert detect(path, iou=0.99).label.tolist() == ["car", "car", "person"]
    low = detect(path, threshold=0.1)
    assert low.label.tolist() == ["car", "person", "traffic light"]  # "_" restored to a space
    assert detect(path, threshold=0.1, classes=["traffic light"]).score.tolist() == pytest.approx([0.2])
    assert detect(path, threshold=0.1, classes=[0, 1]).label.tolist() == ["person", "traffic light"]
    assert detect(path, max_det=1).label.tolist() == ["car"]


def test_iou_and_threshold_from_rt_info_and_stage_parameters_win(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"out": yolo_head(BOXES, SCORES, CELLS_64)},
                          rt_info={"model_type": "YOLO", "confidence_threshold": "0.7", "iou_threshold": "0.99"})
    assert detect(path).score.tolist() == pytest.approx([0.9, 0.8])
    assert detect(path, threshold=0.5, iou=0.5).score.tolist() == pytest.approx([0.9, 0.6])


def test_one_class_head(tmp_path: Path) -> None:
    head = yolo_head([[32, 32, 16, 8], [8, 8, 4, 4]], [[0.95], [0.1]], CELLS_64)
    assert head.shape == (1, 5, CELLS_64)
    path = constant_model(tmp_path / "m.xml", {"out": head}, ultralytics={"names": {0: "face"}, "imgsz": [64, 64]})
    dets = detect(path, width=64, height=64)
    assert dets.label.tolist() == ["face"]
    np.testing.assert_allclose(dets.xyxy, [[24, 28, 40, 36]], atol=1e-4)


def test_non_square_input(tmp_path: Path) -> None:
    """imgsz [32, 64] (height, width): a 1920x1080 frame fills 57x32 of it, 3 columns of padding left."""
    head = yolo_head([[20, 10, 8, 4]], [[0.0, 0.8]], CELLS_32x64)
    path = constant_model(tmp_path / "m.xml", {"out": head}, input_shape=(1, 3, 32, 64),
                          ultralytics={"names": {0: "a", 1: "b"}, "imgsz": [32, 64]})
    dets = detect(path, width=1920, height=1080)
    sx, sy = 57 / 1920, 32 / 1080
    np.testing.assert_allclose(dets.xyxy, [[(16 - 3) / sx, 8 / sy, (24 - 3) / sx, 12 / sy]], rtol=1e-5)
    assert dets.label.tolist() == ["b"]


def test_dynamic_input_runs_at_the_letterbox_rounded_to_the_stride(tmp_path: Path) -> None:
    """A dynamic model with imgsz 64: a 128x64 frame runs at 32x64 (no padding rows), as
    Ultralytics' rectangular inference does."""
    head = yolo_head([[32, 16, 16, 8]], [[0.9]], 42)
    path = constant_model(tmp_path / "m.xml", {"out": head}, input_shape=(1, 3, -1, -1),
                          ultralytics={"names": {0: "a"}, "imgsz": [64, 64], "stride": 32})
    with Detect(model=str(path)) as det:
        dets = det(frame(128, 64)).detections
        assert [r.model.input_hw for r in det._routes.values()] == [(32, 64)]
    np.testing.assert_allclose(dets.xyxy, [[48, 24, 80, 40]], atol=1e-4)


def test_dynamic_input_without_a_size_is_a_one_line_error(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"out": yolo_head([[1, 1, 1, 1]], [[0.9]], 84)},
                          input_shape=(1, 3, -1, -1), rt_info={"model_type": "YOLO"})
    with pytest.raises(ValueError, match=r"dynamic input .* set input_size"):
        Detect(model=str(path)).open()
    dets = detect(path, input_size=[64, 64], width=64, height=64)
    assert len(dets) == 1


def test_an_input_size_a_fixed_model_cannot_take_is_named_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = constant_model(tmp_path / "m" / "best.xml", {"output0": yolo_head(BOXES, SCORES, CELLS_64)},
                          ultralytics={"names": NAMES, "imgsz": [64, 64], "task": "detect", "stride": 32})
    with caplog.at_level("WARNING", logger="vapipe"):
        assert len(detect(path, input_size=[32, 32])) == len(detect(path)) == 2
    assert [r.getMessage() for r in caplog.records] == [
        f"model {path}: input_size [32, 32] is not used: the model's input is fixed at [64, 64] (height, width); "
        "export it with a dynamic input to choose"]


def test_tensorflow_lite_exports_give_boxes_as_fractions_of_the_input() -> None:
    from stages.models.families import choose_family
    from stages.models.model_info import ModelInfo, OutputInfo

    outputs = (OutputInfo(0, "Identity", (1, 5, CELLS_64)),)
    for name, scale in (("best_float32.tflite", 64), ("best.xml", 1)):
        info = ModelInfo(Path(name), "images", (64, 64), "NHWC", outputs, {}, {})
        cls, layout = choose_family(info, None, {})
        head = yolo_head([[32 / scale, 32 / scale, 16 / scale, 8 / scale]], [[0.9]], CELLS_64)
        dets = cls(info, {}, layout).decode([head], (64, 64))
        np.testing.assert_allclose(dets.xyxy, [[24, 28, 40, 36]], atol=1e-4)
