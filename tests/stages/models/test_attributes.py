"""The generic ``attributes`` decoder on synthetic classifiers: every head type, labels,
crops and one-line configuration errors."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from pipeline.frame import Detections, Frame
from stages.classify import Classify
from pipeline.geometry import PixelPoint
from stages.models.attributes import crop_box
from stages.preprocess import Preprocess
from tests.stages.models.synthetic import constant_model

COLORS = ["white", "gray", "red"]


def classifier(tmp_path: Path, rt_info: dict | None = None) -> Path:
    outputs = {
        "color": np.array([[1.0, 3.0, 2.0]], np.float32).reshape(1, 3, 1, 1),   # logits
        "453": np.array([[2.0, -2.0, 0.1]], np.float32),                         # logits
        "age": np.array([[0.34]], np.float32),
        "point": np.array([[0.25, 0.5]], np.float32),
    }
    return constant_model(tmp_path / "attrs.xml", outputs, input_shape=(1, 3, 32, 16), input_name="0",
                          rt_info=rt_info)


def run(path: Path, boxes: list[list[float]], **params: object) -> list[dict]:
    frame = Frame.from_image(np.zeros((100, 200, 3), np.uint8))
    frame.detections = Detections(xyxy=boxes, score=[0.9] * len(boxes), label=["person"] * len(boxes))
    with Classify(model=str(path), decoder="attributes", on=["person"], **params) as stage:
        return stage(frame).detections.attributes


HEADS = {
    "color": {"type": "softmax", "labels": COLORS},
    453: {"type": "multilabel", "labels": ["is_male", "has_bag", "has_hat"], "scores": True},
    "age": {"type": "regression", "scale": 100},
    3: {"type": "point", "name": "top_color_point"},
}


def test_every_head_type(tmp_path: Path) -> None:
    (attrs,) = run(classifier(tmp_path), [[10, 20, 50, 60]], heads=HEADS)
    probs = np.exp([1.0, 3.0, 2.0]) / np.exp([1.0, 3.0, 2.0]).sum()
    assert attrs["color"] == "gray" and attrs["color_score"] == pytest.approx(probs[1], abs=1e-5)
    assert (attrs["is_male"], attrs["has_bag"], attrs["has_hat"]) == (True, False, True)  # sigmoid(0.1) > 0.5
    assert attrs["has_bag_score"] == pytest.approx(1 / (1 + np.exp(2.0)), abs=1e-5)
    assert attrs["age"] == pytest.approx(34.0, abs=1e-4)
    assert attrs["top_color_point"] == pytest.approx([10 + 0.25 * 40, 20 + 0.5 * 40])


def test_points_on_a_preprocessed_view_go_back_to_the_camera_pixels(tmp_path: Path) -> None:
    """On a 200x100 frame turned 180 degrees, the crop [10, 20, 50, 60] of the view is the box
    [150, 40, 190, 80] of the camera; the point (0.25, 0.5) of that crop is (20, 40) in the view
    and (180, 60) in the camera's pixels, inside the box."""
    frame = Frame.from_image(np.zeros((100, 200, 3), np.uint8))
    with Preprocess(rotate=180) as prep, Classify(model=str(classifier(tmp_path)), decoder="attributes",
                                                  on=["person"], heads=HEADS) as stage:
        view = prep(frame)
        view.detections = Detections(xyxy=[[10, 20, 50, 60]], score=[0.9], label=["person"])
        view = stage(view)
    assert view.detections.attributes[0]["top_color_point"] == pytest.approx([20.0, 40.0])
    original = view.original()
    assert np.allclose(original.detections.xyxy, [[150, 40, 190, 80]])
    assert original.detections.attributes[0]["top_color_point"] == pytest.approx([180.0, 60.0])


def test_kept_points_move_with_the_box(tmp_path: Path) -> None:
    stage = Classify(model=str(classifier(tmp_path)), decoder="attributes", on=["person"], heads=HEADS)
    with stage:
        kept = stage.adapter.carry({"top_color_point": PixelPoint([20.0, 40.0]), "color": "gray"},
                                   np.array([10, 20, 50, 60]), np.array([110, 20, 190, 100]))
    assert kept["top_color_point"] == pytest.approx([130.0, 60.0]) and kept["color"] == "gray"


def test_without_heads_every_output_is_named_after_itself(tmp_path: Path) -> None:
    (attrs,) = run(classifier(tmp_path), [[10, 20, 50, 60]])
    assert attrs["age"] == pytest.approx(0.34, abs=1e-6)
    assert attrs["453"] == pytest.approx([2.0, -2.0, 0.1])
    assert attrs["point"] == pytest.approx([0.25, 0.5])


def test_threshold_and_activation(tmp_path: Path) -> None:
    heads = {453: {"type": "multilabel", "labels": ["a", "b", "c"], "threshold": 0.6},
             "color": {"labels": COLORS, "activation": "none"}}
    (attrs,) = run(classifier(tmp_path), [[0, 0, 10, 10]], heads=heads)
    assert (attrs["a"], attrs["b"], attrs["c"]) == (True, False, False)
    assert attrs["color"] == "gray" and attrs["color_score"] == pytest.approx(3.0)


def test_labels_from_rt_info_for_a_single_softmax_head(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "cls.xml", {"prob": np.array([[0.1, 0.7, 0.2]], np.float32)},
                          input_shape=(1, 3, 16, 16), rt_info={"labels": "cat dog bird"})
    (attrs,) = run(path, [[0, 0, 10, 10]], heads={0: {"type": "softmax", "name": "animal"}})
    assert attrs == {"animal": "dog", "animal_score": pytest.approx(0.7)}


@pytest.mark.parametrize("heads, message", [
    ({"colour": {"labels": COLORS}}, r"head 'colour': no output of that name or index; outputs: 0: color"),
    ({"color": {"labels": ["a", "b"]}}, r"head 'color': 2 labels but output 'color' \[1,3,1,1\] has 3 values"),
    ({453: {"type": "multilabel"}}, r"head 453: a multilabel head needs labels"),
    ({"age": {"type": "logits"}}, r"head 'age': unknown type 'logits'; valid: softmax, multilabel"),
    ({"age": {"scale": 1, "scael": 2}}, r"head 'age': unknown key 'scael'"),
])
def test_bad_heads_are_one_line_errors(tmp_path: Path, heads: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run(classifier(tmp_path), [[0, 0, 10, 10]], heads=heads)


def test_crops_are_the_rounded_box_stretched_to_the_input(tmp_path: Path) -> None:
    assert crop_box(np.array([10.4, 20.6, 50.5, 60.2]), (200, 100)) == (10, 21, 50, 60)
    assert crop_box(np.array([-5, -5, 300, 300]), (200, 100)) == (0, 0, 200, 100)
    assert crop_box(np.array([199.8, 50, 199.9, 50]), (200, 100)) == (199, 50, 200, 51)
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (100, 200, 3), dtype=np.uint8)
    frame = Frame.from_image(image)
    frame.detections = Detections(xyxy=[[10.4, 20.6, 50.5, 60.2]], score=[1.0], label=["person"])
    with Classify(model=str(classifier(tmp_path)), decoder="attributes", on=["person"]) as stage:
        crop, box = stage.adapter.prepare(frame, frame.detections, 0, (32, 16))
        assert box == (10, 21, 50, 60)
        np.testing.assert_array_equal(crop, cv2.resize(image[21:60, 10:50], (16, 32), interpolation=cv2.INTER_LINEAR))
        assert stage.adapter.input_spec.model_color == "BGR" and stage.adapter.input_spec.scale is None


@pytest.mark.parametrize("params, pad", [({}, 114), ({"pad_value": 7}, 7)])
def test_letterboxed_crops_pad_with_the_parameter_else_the_rt_info_value(tmp_path: Path, params: dict,
                                                                         pad: int) -> None:
    """A 40x40 box into the 16x32 (width x height) input: 16 rows of crop between 8 of padding."""
    path = classifier(tmp_path, {"resize_type": "fit_to_window_letterbox", "pad_value": "114"})
    frame = Frame.from_image(np.full((100, 200, 3), 200, np.uint8))
    frame.detections = Detections(xyxy=[[10, 20, 50, 60]], score=[1.0], label=["person"])
    with Classify(model=str(path), decoder="attributes", on=["person"], **params) as stage:
        crop, _ = stage.adapter.prepare(frame, frame.detections, 0, (32, 16))
    assert crop.shape == (32, 16, 3)
    np.testing.assert_array_equal(crop[:8], pad)
    np.testing.assert_array_equal(crop[8:24], 200)
    np.testing.assert_array_equal(crop[24:], pad)


def test_options_of_other_decoders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"decoder 'face_landmarks' does not take heads"):
        Classify(model=str(classifier(tmp_path)), decoder="face_landmarks", on=["face"], heads={}).open()
