from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.config import ConfigError, parse_config
from stages.decode import Decode
from stages.detect import Detect
from stages.models.nms import iou_matrix

PERSON_CLIP = "one-by-one-person-detection.mp4"  # shared: people in view from frame ~62


def _persons(video: Path, resize: str, n: int = 40, first: int = 80) -> tuple[list[np.ndarray], Detect]:
    """Person boxes on frames first..first+n of ``video``."""
    boxes = []
    with Decode(uri=str(video)) as src, \
            Detect(model="mediapipe/pose_detection", decoder="pose", resize=resize) as det:
        for i, frame in enumerate(src.frames()):
            if i >= first + n:
                break
            if i >= first:
                boxes.append(det(frame).detections.xyxy.copy())
    return boxes, det


def test_engine_resize_finds_the_same_people_as_host_resize(videos_dir: Path) -> None:
    host, det_h = _persons(videos_dir / PERSON_CLIP, "host")
    engine, det_e = _persons(videos_dir / PERSON_CLIP, "engine")
    assert [c[0] for c in det_h.choices.values()] == ["host"]
    assert [c[0] for c in det_e.choices.values()] == ["engine"]
    assert sum(1 for b in host if len(b)) >= 30
    ious = [iou_matrix(a, b).max() for a, b in zip(host, engine) if len(a) and len(b)]
    assert len(ious) >= 0.9 * sum(1 for b in host if len(b))
    assert np.median(ious) >= 0.9


def test_default_engine_resize_runs_on_the_host_where_opencv_gives_the_same_pixels(
        videos_dir: Path, models_dir: Path, tmp_path: Path) -> None:
    """YOLO scales inside the model by default (as model_api); 1920x1080 and 1280x720 frames
    shrink by 3 and 2 into the 640x360 letterbox, where the host gives the same pixels, so they
    are scaled on the host and the detections are bit for bit those of ``resize: engine``;
    1024x576 (by 1.6) stays in the engine.  All at f32: at bf16 two graphs that differ in their
    preprocessing round differently."""
    from tests.video import decode, encode

    raw = decode(videos_dir / PERSON_CLIP, 100, 12)  # people in view
    model = str(models_dir / "yolo" / "yolo11n_int8_openvino_model")
    exact = "host (engine's pixels)"
    for size, default_route in (((1920, 1080), exact), ((1280, 720), exact), ((1024, 576), "engine")):
        clip = encode(raw, tmp_path / f"{size[0]}x{size[1]}.mp4", size)
        found, routes = {}, {}
        for resize in ("default", "engine"):
            extra = {} if resize == "default" else {"resize": resize}
            with Decode(uri=str(clip)) as src, \
                    Detect(model=model, config={"INFERENCE_PRECISION_HINT": "f32"}, **extra) as det:
                found[resize] = [det(frame).detections for frame in src.frames()]
            routes[resize] = [c[0] for c in det.choices.values()]
        assert routes == {"default": [default_route], "engine": ["engine"]}, size
        assert sum(len(d) for d in found["engine"]) >= 5
        for ours, engine in zip(found["default"], found["engine"]):
            assert np.array_equal(ours.xyxy, engine.xyxy) and np.array_equal(ours.score, engine.score), size


def test_the_planner_times_the_model_as_the_route_feeds_it(shared_models_dir: Path) -> None:
    """The engine route's model takes full-size frames and scales them inside: its cost is
    measured that way; where the host scales, the model takes its own input size."""
    det = Detect(model=str(shared_models_dir / "yolo" / "yolo11n_int8_openvino_model"))
    engine = det.planning_probe((1024, 576)).spec
    assert (engine.resize_from, engine.inner, engine.pad_top_left) == ((576, 1024), (360, 640), (140, 0))
    assert det.planning_probe((1920, 1080)).spec.resize_from is None


def test_auto_resize_measures_both_paths_and_keeps_the_faster(models_dir: Path) -> None:
    from stages.testsrc import TickerScene
    from pipeline.frame import Frame

    image, _ = TickerScene(640, 360, seed=3).render(0)
    with Detect(model="ppocr/ch_PP-OCRv4_det_infer", decoder="db_text") as det:
        out = det(Frame.from_image(image))
    chosen, timings = det.choices[(640, 360)]
    assert set(timings) == {"host", "engine"} and all(t > 0 for t in timings.values())
    assert timings[chosen] == min(timings.values())
    assert len(out.detections) > 0


def test_adapters_with_their_own_sampling_stay_on_the_host_in_auto_mode(clip: Path) -> None:
    _, det = _persons(clip, "auto", n=2, first=0)
    assert [c[0] for c in det.choices.values()] == ["host"]


def test_every_n_lets_frames_pass_without_inference_in_order(clip: Path) -> None:
    with Decode(uri=str(clip)) as src, \
            Detect(model="mediapipe/pose_detection", decoder="pose", every=3) as det:
        frames = []
        for i, frame in enumerate(src.frames()):
            if i >= 12:
                break
            det.submit(frame)
            frames.extend(det.poll())
        frames.extend(det.drain())
    assert [f.seq for f in frames] == list(range(12))
    assert all(len(f.detections) == 0 for f in frames if f.seq % 3)


def test_every_n_counts_per_source_over_open_gates_and_restarts_when_a_gate_closes() -> None:
    """Gates as a motion stage sets them: open frames 0-6 and 20-21 (motion), 12 (a refresh)."""
    from pipeline.frame import GATE, Frame

    ran: dict[str, list[int]] = {"a": [], "b": []}
    with Detect(model="mediapipe/pose_detection", decoder="pose", every=3) as det:
        for seq in range(24):
            for source in ("a", "b"):  # two cameras, frames interleaved: each keeps its own count
                frame = Frame(source, seq, 64, 48)
                frame.attrs[("motion", GATE)] = seq <= 6 or seq == 12 or seq in (20, 21)
                if det.wants(frame):
                    ran[source].append(seq)
    assert ran["a"] == ran["b"] == [0, 3, 6, 12, 20]

def test_a_misspelt_decoder_option_lists_the_valid_ones_when_the_stage_is_made() -> None:
    """Checked with the parameters: a pipeline file, or a request to the server, is refused
    before anything runs."""
    with pytest.raises(ValueError, match=r"^Detect: options: decoder 'pose': unknown option 'score_treshold'; "
                                         r"valid: score_threshold, iou_threshold, .*label$"):
        Detect(model="mediapipe/pose_detection", decoder="pose", options={"score_treshold": 0.3})
    with pytest.raises(ValueError, match=r"^Detect: options: score_threshold must be in \[0, 1\], got 5$"):
        Detect(model="mediapipe/pose_detection", decoder="pose", options={"score_threshold": 5})
    text = ("pipelines:\n  p:\n    stages:\n      - {name: src, type: decode}\n"
            "      - {name: det, type: detect, params: {model: mediapipe/pose_detection, decoder: pose, "
            "options: {score_threshold: high}}}\n")
    with pytest.raises(ConfigError, match=r"^t\.yaml:5: pipeline 'p' stage 'det': .*option 'score_threshold': "
                                          r"expected a number, got 'high'"):
        parse_config(text, "t.yaml", check_files=False)

def test_unknown_decoder_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown detector decoder 'yolo9'; valid: .*blazeface.*db_text.*pose.*"
                                         r"ssd.*yolo.*yolo_end2end.*yolov5.*yolox"):
        Detect(model="mediapipe/pose_detection", decoder="yolo9").open()


def test_model_driven_adapter_feeds_a_plain_openvino_model(videos_dir: Path, models_dir: Path) -> None:
    """What benchmark baselines and ``vapipe quantize`` do with a detector: the adapter's
    ``host_input`` (uint8, ``input_spec.host_color``), normalised on the host, a plain compiled
    model, the adapter's ``decode`` and letterbox mapping; the same people as the stage."""
    import openvino as ov

    from pipeline.frame import Frame
    from stages.detect import detector_adapter

    model = models_dir / "yolo" / "yolo11n_int8_openvino_model"
    params = Detect.Params(model=str(model))
    adapter = detector_adapter(params)
    compiled = ov.Core().compile_model(str(next(model.glob("*.xml"))), "CPU")
    hw = tuple(compiled.input(0).get_shape())[2:]
    spec = adapter.input_spec
    stage_boxes, plain_boxes = [], []
    with Decode(uri=str(videos_dir / PERSON_CLIP)) as src, Detect(params) as det:
        for i, frame in enumerate(src.frames()):
            if i >= 110:
                break
            if i < 90:
                continue
            image, box = adapter.host_input(Frame(frame.source_id, i, frame.width, frame.height,
                                                  av_frame=frame.av_frame), hw)
            assert image.dtype == np.uint8 and image.shape == (*hw, 3) and spec.host_color == spec.model_color
            x = (image.astype(np.float32) - np.asarray(spec.mean or (0, 0, 0), np.float32)) / np.asarray(spec.scale)
            out = compiled(x.transpose(2, 0, 1)[None])[0]
            plain_boxes.append(box.detections_to_source(adapter.decode([out], hw), (frame.width, frame.height)).xyxy)
            stage_boxes.append(det(frame).detections.xyxy.copy())
    assert all(len(a) == len(b) >= 1 for a, b in zip(stage_boxes, plain_boxes))
    assert min(iou_matrix(a, b).max(axis=1).min() for a, b in zip(stage_boxes, plain_boxes)) > 0.9
