"""Device strings: parsing, availability errors, virtual devices through the Detect stage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.devices import named_devices, resolve_device, unavailable_reason
from pipeline.engine import EngineError, get_engine, validate_device

ROOT = Path(__file__).resolve().parents[2]
VIRTUAL = ("AUTO:CPU", "MULTI:CPU", "HETERO:CPU", "BATCH:CPU(2)")


def _available() -> list[str]:
    return list(get_engine().core.available_devices)


def test_device_strings_name_their_physical_devices() -> None:
    assert named_devices("CPU") == ["CPU"]
    assert named_devices("GPU.1") == ["GPU.1"]
    assert named_devices("AUTO") == []
    assert named_devices("AUTO:GPU,-CPU") == ["GPU"]
    assert named_devices("MULTI:GPU,CPU") == ["GPU", "CPU"]
    assert named_devices("HETERO:NPU,CPU") == ["NPU", "CPU"]
    assert named_devices("BATCH:GPU(4)") == ["GPU"]
    for dev in ("CPU", "GPU", "NPU", "AUTO", "AUTO:GPU,CPU", "MULTI:CPU", "HETERO:GPU,CPU", "BATCH:CPU(2)"):
        assert validate_device(dev) == dev


def test_unknown_device_is_a_one_line_error() -> None:
    with pytest.raises(EngineError) as err:
        validate_device("TPU")
    assert "unknown device 'TPU'" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.skipif("GPU" in ",".join(_available()), reason="a GPU is present")
def test_missing_device_names_what_is_available(models_dir: Path) -> None:
    core = get_engine().core
    assert unavailable_reason(core, "GPU") == f"device GPU not available; available: {', '.join(_available())}"
    assert unavailable_reason(core, "AUTO:GPU,CPU").startswith("device GPU not available")
    assert unavailable_reason(core, "AUTO:CPU") is None
    from stages.detect import Detect

    with pytest.raises(EngineError) as err:
        with Detect(model="mediapipe/pose_detection", decoder="pose", device="GPU"):
            pass
    assert str(err.value) == f"device GPU not available; available: {', '.join(_available())}"


@pytest.mark.skipif("GPU" in ",".join(_available()), reason="a GPU is present")
def test_cli_reports_a_missing_device_in_one_line(clip: Path, models_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "VAPIPE_MODELS_DIR": str(models_dir)}
    res = subprocess.run([sys.executable, "-m", "pipeline", "run", "persons", "--source",
                          str(clip), "--device", "GPU", "--max-frames", "2", "--no-progress",
                          "--output", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "device GPU not available; available: CPU" in lines[0], res.stderr


def _boxes(device: str, n: int = 4) -> list[np.ndarray]:
    """Text boxes the PP-OCR detector finds on ``n`` frames of a synthetic street scene."""
    from pipeline.frame import Frame
    from stages.detect import Detect
    from stages.testsrc import TickerScene

    scene = TickerScene(640, 360, seed=5)
    out = []
    with Detect(model="ppocr/ch_PP-OCRv4_det_infer", decoder="db_text", device=device, resize="host") as det:
        for i in range(n):
            out.append(det(Frame.from_image(scene.render(10 * i)[0])).detections.xyxy.copy())
    return out


@pytest.mark.parametrize("device", VIRTUAL)
def test_virtual_devices_find_the_same_text_as_cpu(models_dir: Path, device: str) -> None:
    cpu = _boxes("CPU")
    other = _boxes(device)
    assert sum(len(b) for b in cpu) >= 3
    assert [len(b) for b in other] == [len(b) for b in cpu]
    for a, b in zip(cpu, other):
        np.testing.assert_allclose(b, a, atol=1.0)


@pytest.mark.parametrize("device", VIRTUAL)
def test_virtual_devices_resolve_to_cpu(device: str) -> None:
    info = resolve_device(get_engine().core, device)
    assert "error" not in info, info
    assert info.get("EXECUTION_DEVICES") == ["CPU"]


def test_vapipe_devices_lists_cpu() -> None:
    res = subprocess.run([sys.executable, "-m", "pipeline", "devices", "--device", "AUTO:CPU"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("CPU: ")
    assert "OPTIMIZATION_CAPABILITIES" in res.stdout
    assert "AUTO:CPU resolves to:" in res.stdout and "EXECUTION_DEVICES: CPU" in res.stdout


@pytest.mark.skipif("NPU" in ",".join(_available()), reason="an NPU is present")
def test_vapipe_devices_rejects_a_missing_device() -> None:
    res = subprocess.run([sys.executable, "-m", "pipeline", "devices", "--device", "NPU"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip() == "vapipe: error: device NPU not available; available: CPU"
