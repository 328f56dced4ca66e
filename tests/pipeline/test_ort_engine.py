"""ONNX Runtime as a second engine: the same outputs as OpenVINO at f32, requests in flight in
order, one-line errors, and threads within the plan with both engines in one pipeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the onnxruntime package (test extra) runs the ONNX Runtime engine")

from pipeline.engine import EngineError, InputSpec  # noqa: E402
from pipeline.engines import load_model  # noqa: E402
from pipeline.models import resolve_model  # noqa: E402
from stages.models.db_text import DbTextAdapter  # noqa: E402
from stages.models.text_direction import TextDirectionAdapter  # noqa: E402
from stages.models.text_recognition import TextRecognitionAdapter  # noqa: E402
from stages.testsrc import iter_frames  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
F32 = {"INFERENCE_PRECISION_HINT": "f32"}
SCENE = "testsrc://ticker?width=960&height=540&frames=8"
OCR_STAGES = ("text_detect", "direction", "recognize")


def _scene_image(h: int, w: int, host_color: str) -> np.ndarray:
    import cv2

    _, bgr = next(iter_frames(SCENE))
    img = cv2.resize(bgr, (w, h), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(img[..., ::-1] if host_color == "RGB" else img)[None]


@pytest.mark.parametrize("model, spec, hw", [
    ("ppocr/ch_PP-OCRv4_det_infer", DbTextAdapter.input_spec, (544, 960)),
    ("ppocr/ch_ppocr_mobile_v2.0_cls_infer", TextDirectionAdapter.input_spec, None),
    ("ppocr/ch_PP-OCRv4_rec_infer", TextRecognitionAdapter.input_spec, (48, 320)),
])
def test_raw_outputs_equal_openvino_at_f32(model: str, spec: InputSpec, hw: tuple[int, int] | None) -> None:
    path = resolve_model(model)
    if hw is not None:
        spec = replace(spec, size=hw)
    ov_model = load_model("openvino", path, spec, config=F32)
    ort_model = load_model("onnxruntime", path, spec)
    h, w = ov_model.input_hw
    assert (h, w) == tuple(ort_model.input_hw) or hw is not None
    image = _scene_image(h, w, spec.host_color)
    want = ov_model.create_pool(1).run(image, lambda outs: [np.array(o) for o in outs])
    got = ort_model.create_pool(1).run(image, lambda outs: [np.array(o) for o in outs])
    assert len(want) == len(got)
    for a, b in zip(want, got):
        assert a.shape == b.shape
        assert float(np.abs(a - b).max()) <= 1e-3, (model, float(np.abs(a - b).max()))


def test_requests_in_flight_come_back_in_submission_order() -> None:
    spec = TextDirectionAdapter.input_spec
    model = load_model("onnxruntime", resolve_model("ppocr/ch_ppocr_mobile_v2.0_cls_infer"), spec,
                       config={"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2})
    h, w = model.input_hw
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (1, h, w, 3), dtype=np.uint8) for _ in range(6)]
    pool = model.create_pool(3)
    jobs = [pool.start(img, lambda outs, k=k: (k, np.array(outs[0]))) for k, img in enumerate(images)]
    assert pool.busy <= 3  # starting a 4th waited for the oldest
    results = [pool.finish(job) for job in jobs]
    assert [k for k, _ in results] == list(range(6))
    for (_, out), img in zip(results, images):
        assert np.array_equal(out, np.array(model.infer(img)[0]))
    pool.drain()
    assert pool.busy == 0


def test_engine_errors_name_the_file_and_what_is_valid(tmp_path: Path) -> None:
    spec = InputSpec()
    with pytest.raises(EngineError, match=r"engine onnxruntime reads ONNX models \(\.onnx\); .*face_detection"):
        load_model("onnxruntime", resolve_model("mediapipe/face_detection_short_range"), spec)
    with pytest.raises(EngineError, match="device 'GPU' is OpenVINO's"):
        load_model("onnxruntime", resolve_model("ppocr/ch_ppocr_mobile_v2.0_cls_infer"), spec, device="GPU")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(EngineError, match=f"cannot read model {bad} with onnxruntime"):
        load_model("onnxruntime", bad, spec)
    with pytest.raises(ValueError, match="unknown engine 'tensorrt'; valid: openvino, onnxruntime"):
        load_model("tensorrt", bad, spec)


def _vapipe(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=ROOT, env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _sets(engine: dict[str, str]) -> list[str]:
    out = ["--set", "text_detect.resize=host"]
    for stage in OCR_STAGES:
        out += ["--set", f"{stage}.engine={engine[stage]}", "--set", f"{stage}.config={{INFERENCE_PRECISION_HINT: f32}}"]
    return out


def _records(folder: Path) -> list[dict]:
    return [r for r in map(json.loads, next(folder.glob("*.jsonl")).read_text().splitlines()) if "seq" in r]


def _iou(a: list[float], b: list[float]) -> float:
    x1, y1, x2, y2 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _busy_peak(proc: subprocess.Popen) -> int:
    """Most threads of ``proc`` running or runnable at once, sampled every 5 ms until it ends."""
    peak = 0
    while proc.poll() is None:
        running = 0
        try:
            for task in os.listdir(f"/proc/{proc.pid}/task"):
                try:
                    with open(f"/proc/{proc.pid}/task/{task}/stat", encoding="ascii") as fh:
                        running += fh.read().rsplit(")", 1)[1].split()[0] == "R"
                except OSError:
                    pass
        except OSError:
            break
        peak = max(peak, running)
        time.sleep(0.005)
    return peak


def test_ocr_on_onnxruntime_reads_what_openvino_reads_within_the_thread_budget(tmp_path: Path) -> None:
    """All three OCR models on each engine give the same lines and texts; with both engines in
    one pipeline, no more threads are busy at once than the plan starts."""
    runs = {}
    for name, engines in (("openvino", dict.fromkeys(OCR_STAGES, "openvino")),
                          ("onnxruntime", dict.fromkeys(OCR_STAGES, "onnxruntime")),
                          ("mixed", {"text_detect": "openvino", "direction": "onnxruntime",
                                     "recognize": "onnxruntime"})):
        proc = _vapipe("run", "ocr", "--source", SCENE, "--output", str(tmp_path / name), "--json",
                       "--no-progress", "--cores", "2", *_sets(engines))
        peak = _busy_peak(proc)
        stdout, stderr = proc.communicate()
        assert proc.returncode == 0, stderr
        assert "onnxruntime" not in stderr, stderr  # no warnings from ORT about ignored settings
        runs[name] = (_records(tmp_path / name), json.loads(stdout), peak)
    want, _, _ = runs["openvino"]
    assert sum(len(r["objects"]) for r in want) > 30
    for name in ("onnxruntime", "mixed"):
        got, summary, peak = runs[name]
        assert [r["seq"] for r in got] == [r["seq"] for r in want]
        for a, b in zip(want, got):
            assert [o["attributes"].get("text") for o in a["objects"]] == \
                   [o["attributes"].get("text") for o in b["objects"]], a["seq"]
            assert all(_iou(oa["box"], ob["box"]) >= 0.99 for oa, ob in zip(a["objects"], b["objects"]))
        plan = summary["plan"]
        # the plan's decoder and inference threads, plus the camera's reader and worker and the main thread
        budget = plan["busy_threads"] + 3
        assert peak <= budget, (name, peak, budget, summary["threads"])
        if name == "mixed":
            assert "onnxrt   recognize" in summary["threads"] and "openvino text_detect" in summary["threads"]
