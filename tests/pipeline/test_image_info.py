"""Models with an image-size input beside the image: the size becomes a constant of the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import pytest
from openvino import opset13 as ops

from pipeline.image_info import fold_image_info, image_info_inputs
from stages.detect import Detect
from tests.stages.models.test_yolo import frame


def size_model(path: Path, info_width: int = 3) -> Path:
    """A DetectionOutput-style model on a 60x80 image whose one detection is read from its
    image-size input: score 0.9 x scale, x2 = 0.5 x width / 80, y2 = 0.6 x height / 60."""
    image = ops.parameter([1, 3, 60, 80], np.float32, name="image")
    info = ops.parameter([1, info_width], np.float32, name="image_info")
    weights = np.zeros((info_width, 7), np.float32)
    weights[0, 6] = 0.6 / 60
    weights[1, 5] = 0.5 / 80
    bias = np.array([[0, 1, 0, 0.1, 0.2, 0, 0]], np.float32)
    if info_width == 3:
        weights[2, 2] = 0.9
    else:
        bias[0, 2] = 0.9
    zero = ops.multiply(ops.reduce_mean(image, ops.constant(np.arange(4)), False), ops.constant(np.float32(0)))
    row = ops.add(ops.add(ops.matmul(info, ops.constant(weights), False, False), ops.constant(bias)), zero)
    end = ops.constant(np.array([[-1, 0, 0, 0, 0, 0, 0]], np.float32))
    table = ops.reshape(ops.concat([row, end], 0), ops.constant(np.array([1, 1, 2, 7], np.int64)), False)
    table.output(0).get_tensor().set_names({"detection_out"})
    ov.save_model(ov.Model([table], [image, info], "sized"), str(path), compress_to_fp16=False)
    return path


@pytest.mark.parametrize("info_width", [3, 2])
def test_the_size_input_is_the_image_input_size(tmp_path: Path, info_width: int) -> None:
    path = size_model(tmp_path / "m.xml", info_width)
    with Detect(model=str(path), decoder="ssd", labels=["background", "person"],
                config={"INFERENCE_PRECISION_HINT": "f32"}) as det:
        dets = det(frame(160, 120)).detections
    assert dets.label.tolist() == ["person"]
    np.testing.assert_allclose(dets.score, [0.9], atol=1e-6)
    np.testing.assert_allclose(dets.xyxy, [[16, 24, 80, 72]], atol=1e-3)


def test_model_api_reads_the_same_detection(tmp_path: Path) -> None:
    pytest.importorskip("model_api.models", reason="needs openvino-model-api (make setup installs it)")
    from model_api.adapters import OpenvinoAdapter, create_core
    from model_api.models import Model

    path = size_model(tmp_path / "m.xml")
    config = {"resize_type": "standard", "pad_value": 0, "reverse_input_channels": False, "scale_values": [],
              "mean_values": [], "confidence_threshold": 0.5, "nms_execute": False}
    ref = Model.create_model(OpenvinoAdapter(create_core(), str(path), device="CPU"), model_type="SSD",
                             configuration=config)(np.zeros((120, 160, 3), np.uint8))
    np.testing.assert_allclose(np.asarray(ref.bboxes), [[16, 24, 80, 72]], atol=0.51)
    np.testing.assert_allclose(np.asarray(ref.scores), [0.9], atol=2e-3)  # bf16 where the CPU has it


def test_only_small_2d_inputs_beside_one_image_count_as_its_size(tmp_path: Path) -> None:
    core = ov.Core()
    model = core.read_model(str(size_model(tmp_path / "m.xml")))
    assert [i.get_any_name() for i in image_info_inputs(model)] == ["image_info"]
    fold_image_info(model, (60, 80))
    assert [i.get_any_name() for i in model.inputs] == ["image"]
    a = ops.parameter([1, 3, 8, 8], np.float32, name="a")
    b = ops.parameter([1, 3, 8, 8], np.float32, name="b")
    assert image_info_inputs(ov.Model([ops.add(a, b)], [a, b])) == []  # two images
    c = ops.parameter([1, 5], np.float32, name="c")
    two = ov.Model([a.output(0), c.output(0)], [a, c])
    assert image_info_inputs(two) == []  # not a size


def test_other_second_inputs_are_a_one_line_error(tmp_path: Path) -> None:
    from pipeline.engine import EngineError

    a = ops.parameter([1, 3, 8, 8], np.float32, name="a")
    c = ops.parameter([1, 5], np.float32, name="c")
    out = ops.add(ops.reduce_mean(a, ops.constant(np.array([2, 3], np.int64)), False), ops.constant(np.float32(0)))
    ov.save_model(ov.Model([out, ops.multiply(c, ops.constant(np.float32(1)))], [a, c], "two"), str(tmp_path / "t.xml"))
    with pytest.raises(Exception) as err:
        with Detect(model=str(tmp_path / "t.xml"), decoder="ssd"):
            pass
    assert "t.xml" in str(err.value) and "input" in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, (EngineError, ValueError))
