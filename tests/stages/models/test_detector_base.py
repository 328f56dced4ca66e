"""Preprocessing of the model-driven families: settings, metadata and family defaults, and
what the model really receives on the host and the engine resize routes (letterbox
geometry and the padding value, 114 for YOLO)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stages.detect
from pipeline.frame import Detections, Frame
from stages.detect import Detect, detector_adapter
from stages.models.base import DetectorAdapter
from stages.models.labels import LabelsError
from tests.stages.models.synthetic import constant_model, detection_output_model, identity_model, yolo_head
from tests.stages.models.test_yolo import detect

CELLS = 48 // 8 * 8 + 48 // 16 * 4 + 48 // 32 * 2  # 48x64 input


def adapter_for(tmp_path: Path, **params: object) -> DetectorAdapter:
    head = yolo_head([[1, 1, 1, 1]], [[0.5]], CELLS)
    path = constant_model(tmp_path / "yolo.xml", {"o": head}, input_shape=(1, 3, 48, 64))
    return detector_adapter(Detect.Params(model=str(path), **params))


def test_family_defaults_then_rt_info_then_parameters(tmp_path: Path) -> None:
    yolo = adapter_for(tmp_path)
    spec = yolo.input_spec
    assert (spec.host_color, spec.model_color, spec.mean, spec.scale) == ("RGB", "RGB", None, (255.0,) * 3)
    assert (yolo.letterbox, yolo.letterbox_align, yolo.pad_value) == (True, "center", 114)
    assert yolo.resize_preference == "engine"
    custom = adapter_for(tmp_path, resize_type="fit_to_window", pad_value=0, reverse_input_channels=False,
                         mean_values=[1, 2, 3], scale_values=[2])
    spec = custom.input_spec
    assert (spec.model_color, spec.mean, spec.scale) == ("BGR", (1.0, 2.0, 3.0), (2.0, 2.0, 2.0))
    assert (custom.letterbox, custom.letterbox_align, custom.pad_value) == (True, "top_left", 0)
    stretched = adapter_for(tmp_path, resize_type="standard")
    assert stretched.letterbox is False


class Probe(DetectorAdapter):
    """Decodes nothing: keeps the tensor the model received (an identity model's output)."""

    def __init__(self, like: DetectorAdapter) -> None:
        for key in ("input_spec", "letterbox", "letterbox_align", "pad_value", "resize_preference"):
            setattr(self, key, getattr(like, key))

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        return Detections(xyxy=[[0, 0, 1, 1]], score=[1.0], label="probe", attributes=[{"x": outputs[0].copy()}])


def model_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, like: DetectorAdapter, image: np.ndarray,
                resize: str) -> np.ndarray:
    path = identity_model(tmp_path / "identity.xml", (1, 3, 48, 64))
    monkeypatch.setattr(stages.detect, "detector_adapter", lambda params, model_path=None: Probe(like))
    with Detect(model=str(path), resize=resize) as det:
        out = det(Frame.from_image(image.copy())).detections.attributes[0]["x"]
    return out[0].transpose(1, 2, 0)  # HWC, model colour order, after mean/scale


@pytest.mark.parametrize("align", ["center", "top_left"])
def test_both_resize_routes_pad_with_the_family_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      align: str) -> None:
    """A 128x48 frame in a 64x48 letterbox: 24 rows of image, 24 of padding (114 / 255)."""
    like = adapter_for(tmp_path, resize_type="fit_to_window" if align == "top_left" else None)
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (48, 128, 3), dtype=np.uint8)
    image[..., 0] = 10  # blue: the model (RGB) sees it last
    host = model_input(tmp_path, monkeypatch, like, image, "host")
    engine = model_input(tmp_path, monkeypatch, like, image, "engine")
    rows = slice(12, 36) if align == "center" else slice(0, 24)
    pad = np.ones((48,), bool)
    pad[rows] = False
    for got in (host, engine):
        np.testing.assert_allclose(got[pad], 114 / 255, atol=1e-6)
        np.testing.assert_allclose(got[rows][..., 2], 10 / 255, atol=1e-6)  # BGR frame -> RGB model
    assert np.abs(host[rows] - engine[rows]).mean() < 2 / 255  # both bilinear, from the same pixels


def test_class_names_select_the_ids_they_name_when_the_labels_leave_out_the_background(tmp_path: Path) -> None:
    """An SSD of 3 classes (0: background) named [a, b]: a is class 1, b class 2."""
    path = detection_output_model(tmp_path / "do.xml", [0.1, 0.2, 0.7])
    ssd = detector_adapter(Detect.Params(model=str(path), labels=["a", "b"], classes=["b", "a", 0, "#2"]))
    assert ssd.keep_classes.tolist() == [2, 1, 0, 2]
    dets = detect(path, width=64, height=64, threshold=0.5, labels=["a", "b"], classes=["b"])
    assert dets.class_id.tolist() == [2] and dets.label.tolist() == ["b"]
    assert len(detect(path, width=64, height=64, threshold=0.5, labels=["a", "b"], classes=["a"])) == 0
    with pytest.raises(LabelsError, match=r"'c' is not a label of this model; labels: a, b$"):
        detector_adapter(Detect.Params(model=str(path), labels=["a", "b"], classes=["c"]))
