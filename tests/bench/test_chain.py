"""What the baselines reproduce: every shipped pipeline's chain of models, the stages'
non-thread properties without vapipe's thread ones, and models of dynamic width."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from bench.chain import THREAD_KEYS, compile_plain, compile_tuned, load_chain, load_spec, outputs
from pipeline.ort_engine import preprocess
from bench.plan import BenchError, BenchPlan

ROOT = Path(__file__).resolve().parents[2]


def plan(pipeline: str, *sets: str) -> BenchPlan:
    return BenchPlan(pipeline=pipeline, config=str(ROOT / "pipelines.yaml"), source="", sets=list(sets))


@pytest.mark.parametrize("pipeline, detector, regions", [
    ("persons", "pose", []),
    ("faces", "blazeface", [("landmarks", "face_landmarks", ["face"])]),
    ("ocr", "db_text", [("direction", "text_direction", ["text"]), ("recognize", "text_recognition", ["text"])]),
])
def test_every_shipped_pipeline_has_a_chain(pipeline: str, detector: str, regions: list) -> None:
    chain = load_chain(load_spec(plan(pipeline)))
    assert chain.detect.decoder == detector
    assert [(p.stage, p.decoder, p.on) for p in chain.regions] == regions   # in the pipeline's order


def test_baselines_get_precision_but_not_threads() -> None:
    spec = load_spec(plan("ocr", "text_detect.config={INFERENCE_PRECISION_HINT: f32, NUM_STREAMS: 2, "
                                 "INFERENCE_NUM_THREADS: 1, ENABLE_CPU_PINNING: false}",
                          "recognize.config={INFERENCE_PRECISION_HINT: f32}"))
    chain = load_chain(spec)
    assert chain.detect.config["NUM_STREAMS"] == 2                      # vapipe's modes keep the user's value
    assert chain.detect.baseline_config == {"INFERENCE_PRECISION_HINT": "f32"}
    assert chain.regions[0].baseline_config == {}
    assert chain.regions[1].baseline_config == {"INFERENCE_PRECISION_HINT": "f32"}
    assert {"NUM_STREAMS", "INFERENCE_NUM_THREADS", "PERFORMANCE_HINT"} <= THREAD_KEYS


def test_stage_without_baseline_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "p.yaml"
    config.write_text("pipelines:\n  p:\n    stages:\n      - {name: decode, type: decode}\n"
                      "      - {name: slow, type: 'tests.live.slow_stage:Slow'}\n")
    with pytest.raises(BenchError, match="stage 'slow' .* has no baseline"):
        load_chain(load_spec(BenchPlan(pipeline="p", config=str(config), source="")))


def test_other_engine_is_one_line() -> None:
    with pytest.raises(BenchError, match="stage 'recognize' runs on engine 'onnxruntime'; the baselines run OpenVINO"):
        load_chain(load_spec(plan("ocr", "recognize.engine=onnxruntime")))


def _text_crop(text: str) -> np.ndarray:
    img = np.full((48, 12 + 22 * len(text), 3), 255, np.uint8)
    cv2.putText(img, text, (6, 36), cv2.FONT_HERSHEY_SIMPLEX, 1.0, (0, 0, 0), 2, cv2.LINE_AA)
    return img


def test_dynamic_width_recogniser_reads_alike_plain_and_tuned() -> None:
    """The recogniser (input 48 x W, W dynamic) as the naive loop compiles it (float input,
    normalised on the host) and as hand-tuned does (u8 input, PrePostProcessor) reads the same
    line; its dictionary comes from the model's metadata."""
    import openvino as ov

    chain = load_chain(load_spec(plan("ocr")))
    part = chain.regions[1]
    core = ov.Core()
    plain, tuned = compile_plain(core, part, (640, 360)), compile_tuned(core, part, (640, 360))
    assert plain.input_hw == tuned.input_hw == (48, -1) and plain.nchw and not tuned.nchw
    from pipeline.frame import Detections, Frame

    image = _text_crop("Hotel Central")
    line = Detections(xyxy=np.array([[0, 0, image.shape[1], 48]], np.float32), score=np.ones(1, np.float32),
                      label=np.array(["text"], object))
    crop, _ = part.adapter.prepare(Frame.from_image(image), line, 0, plain.input_hw)
    req = plain.compiled.create_infer_request()
    req.infer({0: preprocess(crop[None], part.adapter.input_spec, True)})
    a = part.adapter.decode(outputs(req, plain.n_outputs), None)
    req = tuned.compiled.create_infer_request()
    req.infer({0: crop[None]})
    b = part.adapter.decode(outputs(req, tuned.n_outputs), None)
    assert a[0] == b[0] and a[0].strip() == "Hotel Central", (a, b)
    assert abs(a[1] - b[1]) < 0.02



_CAMERAS_RACE = """
import sys, threading, numpy as np
sys.setswitchinterval(1e-5)  # hand the GIL over as often as possible
from bench.chain import compile_chain, compile_plain
from bench.plan import BenchPlan
_, det, _ = compile_chain(BenchPlan(pipeline="faces", config={config!r}, source="", width=1280, height=720),
                          compile_plain)
shape = tuple(det.compiled.input(0).shape)
go = threading.Barrier(4)
def camera():
    request = det.compiled.create_infer_request()
    go.wait()
    request.infer({{0: np.zeros(shape, np.float32)}})   # as the naive loop does
threads = [threading.Thread(target=camera) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("ok")
"""


@pytest.mark.parametrize("attempt", range(5))
def test_baseline_cameras_start_together(attempt: int) -> None:
    """Four baseline cameras pass their first arrays to OpenVINO at the same moment, in a
    fresh process: without the numpy bridge set up before the threads start, 4 threads
    hung in 10 of 20 processes (see :func:`pipeline.engine.numpy_bridge_ready`)."""
    from pipeline.models import resolve_model
    from tests.fresh_process import finishes_without_deadlock

    try:
        resolve_model("mediapipe/face_detection_short_range")
    except Exception as exc:  # noqa: BLE001 - no models on this machine
        pytest.skip(f"model mediapipe/face_detection_short_range unavailable: {exc}")
    finishes_without_deadlock(_CAMERAS_RACE.format(config=str(ROOT / "pipelines.yaml")),
                              "baseline camera threads making their first inference")
