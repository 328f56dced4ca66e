"""Models users bring that vapipe cannot use: one line naming the file and what is valid,
exit code not 0, never a traceback (through the command line, on synthetic models)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.cli import one_error_line, vapipe
from tests.stages.models.synthetic import constant_model, write_onnx, yolo_head

SOURCE = "testsrc://bars?frames=3&width=128&height=96"
CELLS = 84  # 64x64 input


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    import os

    empty = tmp_path / "models"
    empty.mkdir()
    return {**os.environ, "VAPIPE_MODELS_DIR": str(empty)}


def run_objects(env: dict[str, str], tmp_path: Path, *sets: str) -> str:
    args = [a for s in sets for a in ("--set", s)]
    return one_error_line(vapipe(env, "run", "objects", "--source", SOURCE, "--output", tmp_path / "out", *args,
                                 timeout=120))


def test_outputs_that_fit_no_family(env: dict[str, str], tmp_path: Path) -> None:
    path = constant_model(tmp_path / "cls.xml", {"prob": np.zeros((1, 1000), np.float32)})
    line = run_objects(env, tmp_path, f"detect.model={path}")
    assert str(path) in line and "[1,1000] fit no detector family" in line and "yolo [1,4+nc,N]" in line


def test_labels_file_with_the_wrong_count(env: dict[str, str], tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"o": yolo_head([[8, 8, 4, 4]], [[0.9, 0, 0]], CELLS)})
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\n")
    line = run_objects(env, tmp_path, f"detect.model={path}", f"detect.labels={labels}")
    assert f"labels file {labels} has 2 names but model {path} has 3 classes" in line


def test_ambiguous_layout_names_the_decoders_that_fit(env: dict[str, str], tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.xml", {"output": np.zeros((1, CELLS, 85), np.float32)})
    line = run_objects(env, tmp_path, f"detect.model={path}")
    assert f"[1,{CELLS},85] fit several detector families" in line and "set decoder: to one of yolo, yolox" in line


def test_unknown_class_name(env: dict[str, str], tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m" / "m.xml", {"o": yolo_head([[8, 8, 4, 4]], [[0.9, 0]], CELLS)},
                          ultralytics={"names": {0: "cat", 1: "dog"}, "imgsz": [64, 64]})
    line = run_objects(env, tmp_path, f"detect.model={path.parent}", "detect.classes=[cat, giraffe]")
    assert "'giraffe' is not a label" in line and "labels: cat, dog" in line and str(path) in line


def test_corrupt_xml_and_bin(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("this is not an IR")
    assert f"model {bad} is not a valid OpenVINO IR" in run_objects(env, tmp_path, f"detect.model={bad}")
    good = constant_model(tmp_path / "m.xml", {"o": yolo_head([[8, 8, 4, 4]], [[0.9]], CELLS)})
    weights = good.with_suffix(".bin")
    weights.write_bytes(weights.read_bytes()[:10])
    line = run_objects(env, tmp_path, f"detect.model={good}")
    assert f"cannot read model {good}" in line and "bin" in line


def test_onnx_file_that_is_not_a_model(env: dict[str, str], tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"\x00\x01 definitely not protobuf " * 10)
    assert f"model {fake} is not a valid ONNX model file" in run_objects(env, tmp_path, f"detect.model={fake}")


def test_onnx_detector_runs(env: dict[str, str], tmp_path: Path) -> None:
    """The good case beside the bad ones: an ONNX export with Ultralytics' metadata_props."""
    pytest.importorskip("onnx", reason="needs the onnx package (test extra)")
    head = yolo_head([[32, 32, 16, 16]], [[0.0, 0.9]], CELLS)
    path = write_onnx(tmp_path / "best.onnx", head, {"names": "{0: 'cat', 1: 'hot dog'}", "imgsz": "[64, 64]"})
    proc = vapipe(env, "run", "objects", "--source", SOURCE, "--output", tmp_path / "out", "--set",
                  f"detect.model={path}", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    record = (tmp_path / "out" / "bars.jsonl").read_text().splitlines()[0]
    assert '"label":"hot dog"' in record and '"class_id":1' in record


def test_shipped_pipeline_without_its_model_says_what_to_set(env: dict[str, str], tmp_path: Path) -> None:
    line = one_error_line(vapipe(env, "run", "objects", "--source", SOURCE, "--output", tmp_path / "out"))
    assert "'yolo/yolo11n' is not in the catalogue" in line
    assert "--set detect.model=PATH" in line
    assert ".xml" in line and ".onnx" in line and ".tflite" in line and "_openvino_model/" in line
