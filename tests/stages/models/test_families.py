"""Recognising a detector's family from its outputs and metadata; one-line errors when it cannot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stages.models.families import FamilyError, choose_family
from stages.models.model_info import read_model_info
from tests.stages.models.synthetic import constant_model

CELLS = 144 + 36 + 9  # 96x96 input, strides 8/16/32


def family(tmp_path: Path, shape: tuple[int, ...] | dict[str, tuple[int, ...]], decoder: str | None = None,
           settings: dict | None = None, **model: object) -> tuple[str, object]:
    outputs = shape if isinstance(shape, dict) else {"out": shape}
    folder = tmp_path / f"model{len(list(tmp_path.iterdir()))}"  # metadata.yaml stays with its model
    path = constant_model(folder / "m.xml", {k: np.zeros(v, np.float32) for k, v in outputs.items()},
                          input_shape=(1, 3, 96, 96), **model)
    cls, layout = choose_family(read_model_info(path), decoder, settings or {})
    return cls.family, layout


@pytest.mark.parametrize("shape, name, classes", [
    ((1, 84, CELLS), "yolo", 80),              # Ultralytics YOLOv8/11, channels first
    ((1, 5, CELLS), "yolo", 1),
    ((1, 7, CELLS), "yolo", 3),
    ((1, CELLS, 5), "yolo", 1),                # transposed, one class (yolox would have none)
    ((1, 3 * CELLS, 85), "yolov5", 80),
    ((1, 3 * CELLS, 6), "yolov5", 1),
    ((1, 300, 6), "yolo_end2end", None),
    ((1, 1, 200, 7), "ssd", None),
])
def test_recognised_from_output_shapes(tmp_path: Path, shape: tuple[int, ...], name: str, classes: int | None) -> None:
    got, layout = family(tmp_path, shape)
    assert got == name
    assert layout.num_classes == classes


def test_boxes_and_labels_outputs_are_ssd(tmp_path: Path) -> None:
    assert family(tmp_path, {"boxes": (100, 5), "labels": (100,)})[0] == "ssd"


def test_yolox_and_transposed_yolo_are_ambiguous_without_metadata(tmp_path: Path) -> None:
    with pytest.raises(FamilyError) as err:
        family(tmp_path, (1, CELLS, 85))
    msg = str(err.value)
    assert "\n" not in msg
    assert f"[1,{CELLS},85]" in msg and "yolo (" in msg and "yolox (" in msg
    assert "81 classes" in msg and "80 classes" in msg
    assert msg.endswith("set decoder: to one of yolo, yolox")


def test_metadata_and_labels_settle_an_ambiguous_layout(tmp_path: Path) -> None:
    shape = (1, CELLS, 85)
    assert family(tmp_path, shape, rt_info={"model_type": "YOLOX"})[0] == "yolox"
    assert family(tmp_path, shape, ultralytics={"task": "detect", "imgsz": [96, 96]})[0] == "yolo"
    assert family(tmp_path, shape, settings={"labels": [str(i) for i in range(80)]})[0] == "yolox"
    assert family(tmp_path, shape, decoder="yolo")[1].num_classes == 81


def test_end2end_flag_in_ultralytics_metadata(tmp_path: Path) -> None:
    # [1, N, 6] with N = cells: a 2-class transposed head, a 1-class yolox head, or boxes
    with pytest.raises(FamilyError, match="fit several detector families"):
        family(tmp_path, (1, CELLS, 6))
    assert family(tmp_path, (1, CELLS, 6), ultralytics={"imgsz": [96, 96], "end2end": False})[0] == "yolo"
    assert family(tmp_path, (1, 300, 6), ultralytics={"args": {"nms": True}})[0] == "yolo_end2end"


def test_outputs_that_fit_no_family(tmp_path: Path) -> None:
    with pytest.raises(FamilyError) as err:
        family(tmp_path, (1, 1000))
    msg = str(err.value)
    assert "outputs [1,1000] fit no detector family" in msg and "yolo [1,4+nc,N]" in msg
    assert "blazeface" in msg and "\n" not in msg


def test_a_named_decoder_that_does_not_fit(tmp_path: Path) -> None:
    with pytest.raises(FamilyError, match=r"outputs \[1,84,189\] do not fit decoder 'ssd' .* decoders that fit: yolo"):
        family(tmp_path, (1, 84, CELLS), decoder="ssd")


def test_models_of_other_tasks_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FamilyError, match=r"is a 'pose' model .*metadata.yaml"):
        family(tmp_path, (1, 56, CELLS), ultralytics={"task": "pose", "imgsz": [96, 96]})


def _fixed(tmp_path: Path, outputs: dict[str, tuple[int, ...]], decoder: str) -> str:
    from stages.models.families import build_detector

    folder = tmp_path / f"fixed{len(list(tmp_path.iterdir()))}"
    path = constant_model(folder / "m.xml", {k: np.zeros(v, np.float32) for k, v in outputs.items()},
                          input_shape=(1, 3, 128, 128))
    return type(build_detector(path, decoder, {}, {})).__name__


@pytest.mark.parametrize("outputs, decoder, fitting", [
    ({"regressors": (1, 896, 16), "scores": (1, 896, 1)}, "db_text", "blazeface"),    # a face detector
    ({"regressors": (1, 2254, 12), "scores": (1, 2254, 1)}, "blazeface", "pose"),   # the pose detector
    ({"map": (1, 1, 128, 128)}, "pose", "db_text"),                                     # a text detector
    ({"out": (1, 84, 336)}, "blazeface", "yolo"),                                       # YOLO11 at 128x128
    ({"landmarks": (1, 1404), "presence": (1, 1)}, "blazeface", "none"),                # not a detector
])
def test_a_fixed_decoder_checks_the_outputs_when_the_model_loads(tmp_path: Path, outputs: dict, decoder: str,
                                                                 fitting: str) -> None:
    """The fixed families (MediaPipe's SSDs, DB text) refuse a model of another layout at load,
    not at its first frame, and name the decoders that fit it."""
    with pytest.raises(FamilyError) as err:
        _fixed(tmp_path, outputs, decoder)
    msg = str(err.value)
    assert f"do not fit decoder {decoder!r} (it reads " in msg and msg.endswith(f"decoders that fit: {fitting}"), msg
    assert "\n" not in msg


def test_a_fixed_decoder_takes_the_outputs_it_reads(tmp_path: Path) -> None:
    assert _fixed(tmp_path, {"regressors": (1, 896, 16), "scores": (1, 896, 1)}, "blazeface") == "BlazeFace"
    assert _fixed(tmp_path, {"scores": (1, 2254, 1), "regressors": (1, 2254, 12)}, "pose") == "PoseDetector"
    assert _fixed(tmp_path, {"map": (1, 1, 128, 128)}, "db_text") == "DbTextAdapter"
