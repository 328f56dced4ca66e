"""``vapipe bench --engine onnxruntime``: the pipeline run by vapipe with every inference
stage on ONNX Runtime (``vapipe-ort``), interleaved with vapipe on OpenVINO; it reads the
same texts, its ratio to vapipe is printed, and a pipeline whose models are not .onnx
files is refused in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.chain import ModelPart
from bench.engine_modes import check_models, engine_mode, engine_overrides
from bench.plan import BenchError
from tests.bench.conftest import OCR_SMALL
from tests.bench.test_cli import bench
from tests.cli import one_error_line

ROOT = Path(__file__).resolve().parents[2]
FRAMES = 4
#: OpenVINO at f32, as ONNX Runtime's CPU provider computes (its default is bf16 where the CPU has it)
F32 = [a for stage in ("text_detect", "direction", "recognize")
       for a in ("--set", f"{stage}.config={{INFERENCE_PRECISION_HINT: f32}}")]


def test_bench_ocr_on_onnxruntime_reads_what_openvino_reads(bench_env: dict[str, str], ticker: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="needs onnxruntime (the test extra)")
    clip, truth = ticker
    proc = bench(bench_env, "ocr", "--source", clip, "--frames", FRAMES, "--rounds", 1, "--out", tmp_path,
                 "--truth", truth, "--set", OCR_SMALL, *F32, "--modes", "vapipe", "--engine", "onnxruntime",
                 "--no-peers")
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "bench.json").read_text())
    assert list(result["modes"]) == ["vapipe", "vapipe-ort"] and result["engine"] == "onnxruntime"
    vap, ort = result["modes"]["vapipe"], result["modes"]["vapipe-ort"]
    for r in (vap, ort):
        assert r["fps"] > 0 and r["frames_per_camera"] == [FRAMES] and len(r["rounds"]) == 1
        assert r["latency_p95_ms"] >= r["latency_p50_ms"] > 0
    # Every model of the chain on ONNX Runtime (its own thread plan), none left on OpenVINO.
    for stage in ("text_detect", "direction", "recognize"):
        assert re.search(rf"onnxrt +{stage} [\d.]+ ms/inference", ort["threads"]), ort["threads"]
        assert re.search(rf"openvino +{stage} ", vap["threads"]), vap["threads"]
    assert "openvino" not in ort["threads"] and "vapipe-ort:" in proc.stdout
    assert result["ratios"]["vapipe-ort/vapipe"] == round(ort["fps"] / vap["fps"], 3)
    assert "vapipe/vapipe-ort" not in result["ratios"]
    ratio_line = r"^vapipe-ort/vapipe +\d+\.\d\dx   rounds \d+\.\d\d; of medians \d+\.\d\dx$"
    assert re.search(ratio_line, proc.stdout, re.M), proc.stdout
    # At f32 the engines agree within 1e-3 on raw outputs: the same lines, boxes and texts.
    a = result["agreement"]["vapipe-ort vs vapipe"]
    assert a["frames"] == FRAMES and a["objects_ref"] >= 2 * FRAMES, a
    assert a["matched"] == a["objects_ref"] == a["objects"], a
    assert a["texts_equal"] == a["texts"] == a["matched"], a
    assert a["min_iou"] > 0.95, a
    acc = result["accuracy"]
    assert acc["vapipe-ort"]["read"] == acc["vapipe"]["read"] and acc["vapipe"]["accuracy"] >= 0.8, acc


def test_bench_refuses_onnxruntime_for_models_that_are_not_onnx(bench_env: dict[str, str],
                                                                ticker: tuple[Path, Path], tmp_path: Path) -> None:
    line = one_error_line(bench(bench_env, "persons", "--source", ticker[0], "--out", tmp_path,
                                "--engine", "onnxruntime"))
    assert "stage 'person_detect'" in line and "pose_detection.tflite" in line, line
    assert "ONNX Runtime reads .onnx files" in line, line
    assert not (tmp_path / "warmup").exists()   # refused before any mode ran


def test_check_models_names_the_first_model_that_is_not_onnx(tmp_path: Path) -> None:
    def part(stage: str, name: str) -> ModelPart:
        return ModelPart(stage, "d", tmp_path / name, None, "CPU", "THROUGHPUT", {}, 0)

    check_models("vapipe-ort", [part("det", "a.onnx"), part("rec", "b.ONNX")])
    check_models("vapipe", [part("det", "a.xml")])   # vapipe's own engine reads every format
    with pytest.raises(BenchError, match=r"stage 'rec' has model .*b\.xml and ONNX Runtime reads \.onnx"):
        check_models("vapipe-ort", [part("det", "a.onnx"), part("rec", "b.xml"), part("x", "c.tflite")])


def test_engine_names_and_overrides() -> None:
    from pipeline.config import load_config

    assert engine_mode("openvino") is None and engine_mode("onnxruntime") == "vapipe-ort"
    with pytest.raises(ValueError, match="unknown --engine 'tensorrt'; valid: openvino, onnxruntime"):
        engine_mode("tensorrt")
    spec = load_config(ROOT / "pipelines.yaml", check_files=False).get("ocr")
    assert engine_overrides(spec, "onnxruntime") == {s: {"engine": "onnxruntime"}
                                                     for s in ("text_detect", "direction", "recognize")}
