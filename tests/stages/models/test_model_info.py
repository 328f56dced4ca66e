"""Reading a model's own metadata: rt_info model_info, Ultralytics' metadata.yaml, ONNX metadata_props."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stages.models.model_info import ModelInfoError, read_model_info
from tests.stages.models.synthetic import constant_model, detection_output_model, write_onnx

pytest.importorskip("onnx", reason="needs the onnx package (test extra) to write ONNX files")


def test_rt_info_model_info(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"o": np.zeros((1, 6, 84))}, rt_info={
        "model_type": "YOLO", "labels": "person traffic_light", "resize_type": "fit_to_window_letterbox",
        "pad_value": "114", "reverse_input_channels": "YES", "scale_values": "255", "mean_values": "0 0 0",
        "iou_threshold": "0.7", "confidence_threshold": "0.3"})
    info = read_model_info(path)
    assert info.meta["labels"] == ["person", "traffic light"]
    assert info.meta["pad_value"] == 114 and info.meta["reverse_input_channels"] is True
    assert info.meta["scale_values"] == [255.0] and info.meta["mean_values"] == [0, 0, 0]
    assert info.meta["iou_threshold"] == 0.7 and info.meta["confidence_threshold"] == 0.3
    assert info.input_hw == (64, 64) and info.layout == "NCHW"
    assert "rt_info" in info.origin["labels"]


def test_underscores_stay_for_models_not_from_ultralytics(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"o": np.zeros((1, 6, 84))},
                          rt_info={"model_type": "SSD", "labels": "no_helmet helmet"})
    assert read_model_info(path).meta["labels"] == ["no_helmet", "helmet"]


def test_bad_rt_info_value_names_the_key(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"o": np.zeros((1, 6, 84))}, rt_info={"pad_value": "grey"})
    with pytest.raises(ModelInfoError, match=r"rt_info model_info/pad_value: expected numbers, got 'grey'"):
        read_model_info(path)


def test_ultralytics_metadata_yaml_beside_the_ir_wins(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "exp_openvino_model" / "exp.xml", {"o": np.zeros((1, 6, 84))},
                          rt_info={"model_type": "YOLO", "labels": "a_b c"},
                          ultralytics={"names": {0: "cat", 1: "hot dog"}, "imgsz": [384, 640], "stride": 32,
                                       "task": "detect", "args": {"nms": False}})
    info = read_model_info(path)
    assert info.meta["labels"] == ["cat", "hot dog"]
    assert info.meta["imgsz"] == (384, 640) and info.meta["stride"] == 32 and info.meta["end2end"] is False
    assert info.origin["labels"].endswith("metadata.yaml")


def test_onnx_metadata_props_names_are_a_literal_never_evaluated(tmp_path: Path) -> None:
    path = write_onnx(tmp_path / "m.onnx", np.zeros((1, 6, 84)), {
        "names": "{0: 'person', 1: 'traffic light'}", "imgsz": "[64, 64]", "stride": "32", "task": "detect"})
    info = read_model_info(path)
    assert info.meta["labels"] == ["person", "traffic light"] and info.meta["imgsz"] == (64, 64)
    marker = tmp_path / "ran"
    bad = write_onnx(tmp_path / "bad.onnx", np.zeros((1, 6, 84)),
                     {"names": f"__import__('pathlib').Path({str(marker)!r}).touch()"})
    with pytest.raises(ModelInfoError, match=r"metadata_props: names: expected a dict"):
        read_model_info(bad)
    assert not marker.exists()


def test_names_with_gaps_are_an_error(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "x" / "m.xml", {"o": np.zeros((1, 6, 84))}, ultralytics={"names": {0: "a", 2: "b"}})
    with pytest.raises(ModelInfoError, match=r"metadata.yaml: names: class ids must be 0..1"):
        read_model_info(path)


@pytest.mark.parametrize("batch", [1, -1])
def test_an_opset8_detection_output_gives_its_class_count_whatever_the_batch(tmp_path: Path, batch: int) -> None:
    """Scores [batch, 1 prior x 3 classes]: 3 classes, with the batch fixed or dynamic."""
    info = read_model_info(detection_output_model(tmp_path / "do.xml", [0.1, 0.2, 0.7], batch=batch))
    assert info.outputs[0].op.startswith("DetectionOutput")
    assert info.outputs[0].op_attrs.get("num_classes") == 3
