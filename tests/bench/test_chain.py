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

