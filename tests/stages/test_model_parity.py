"""vapipe's detectors against OpenVINO's own model_api on the shared models and clips.

Frames: 200 of ``car-detection.mp4``, 200 of ``one-by-one-person-detection.mp4``, 60
of a 1280x720 and 40 of a 1920x1080 re-encode of the latter (plus the head-pose GIF for
the face detector, so that it sees faces), decoded once.  On every frame both must find the same objects:
matched one to one, corners within 1.5 px (model_api rounds boxes to whole pixels),
scores within 0.02, equal class ids.  Both run at f32: what is compared is decoding, and on a
CPU with bf16 (OpenVINO's default there) two graphs that differ only in their preprocessing
round differently.

model_api is configured where its defaults differ from the family's reference on purpose:
YOLOX with YOLOX's own demo thresholds (score 0.3, class-agnostic NMS at IoU 0.45; model_api:
0.5 and 0.65).  Its YOLO wrapper keeps up to 30,000 candidates into NMS and no limit after
it, vapipe (as Ultralytics) at most 300 boxes after NMS: the frames here have far fewer.
model_api's YOLOX wrapper fails with its preprocessing embedded in the model (its
postprocess needs a scale only its own OpenCV resize computes), so its own resize,
inference and postprocess are called in turn, which is what YOLOX's demo does too.
model_api's wrappers share their parameter defaults within a process (after a YOLO
wrapper is created, SSD and YOLOX wrappers default to a letterbox padded with 114, RGB,
/255 and NMS): every wrapper here gets its family's settings spelled out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from pipeline.frame import Detections, Frame
from stages.detect import Detect
from stages.models.nms import iou_matrix
from tests.video import decode, encode

model_api = pytest.importorskip("model_api.models", reason="needs openvino-model-api (make setup installs it)")

YOLO11 = "yolo/yolo11n_int8_openvino_model"
YOLOX = "yolo/yolox_nano.onnx"
PERSON = "omz/person-detection-retail-0013.xml"
FACE = "omz/face-detection-retail-0004.xml"


@pytest.fixture(scope="module")
def clips(videos_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    """Decoder frames (yuv420p) per clip, decoded once for every model."""
    person = videos_dir / "one-by-one-person-detection.mp4"
    hd = encode(decode(person, 900, 60), tmp_path_factory.mktemp("hd") / "person-720p.mp4", (1280, 720))
    # 1920x1080 shrinks by 3 into a 640 letterbox: there vapipe scales with OpenCV on the host
    full_hd = encode(decode(person, 900, 40), tmp_path_factory.mktemp("fhd") / "person-1080p.mp4", (1920, 1080))
    return {
        "car-detection": decode(videos_dir / "car-detection.mp4", 40, 200),
        "one-by-one-person-detection": decode(person, 60, 200),
        "person-720p": decode(hd, 0, 60),
        "person-1080p": decode(full_hd, 0, 40),
    }


def _vapipe(model: Path, frames: list[Frame], **params: Any) -> list[Detections]:
    """Detections per frame, through the detect stage's asynchronous API (default settings, f32)."""
    out: list[Detections] = []
    with Detect(model=str(model), config=F32, **params) as det:
        for frame in frames:
            det.submit(frame)
            out.extend(f.detections for f in det.poll())
        out.extend(f.detections for f in det.drain())
    return out


def _frames(raw: list[Any], clip: str) -> list[Frame]:
    frames = []
    for i, f in enumerate(raw):
        frame = Frame(clip, i, f.width, f.height, av_frame=f)
        frame.image()  # one BGR conversion, shared by model_api and vapipe
        frames.append(frame)
    return frames


def _compare(ours: Detections, boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, where: str) -> int:
    """Asserts one-to-one agreement; returns the number of objects compared."""
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    assert len(ours) == len(boxes), f"{where}: vapipe {len(ours)} objects {ours.score}, model_api {len(boxes)} {scores}"
    if not len(boxes):
        return 0
    iou = iou_matrix(ours.xyxy, boxes)
    pairs = []
    for _ in range(len(boxes)):
        i, j = np.unravel_index(np.argmax(iou), iou.shape)
        pairs.append((i, j))
        iou[i, :] = -1
        iou[:, j] = -1
    for i, j in pairs:
        what = f"{where} object {i}: vapipe {ours.xyxy[i]} {ours.score[i]:.4f} #{ours.class_id[i]}, " \
               f"model_api {boxes[j]} {scores[j]:.4f} #{labels[j]}"
        assert np.abs(ours.xyxy[i] - boxes[j]).max() <= 1.5, what
        assert abs(float(ours.score[i]) - float(scores[j])) <= 0.02, what
        assert int(ours.class_id[i]) == int(labels[j]), what
    return len(pairs)


Result = tuple[np.ndarray, np.ndarray, np.ndarray]
Reference = Callable[[list[np.ndarray]], list[Result]]

_PLAIN = {"resize_type": "standard", "pad_value": 0, "reverse_input_channels": False, "scale_values": [],
          "mean_values": []}
#: each wrapper's settings, spelled out (see the module docstring)
MODEL_API = {
    "YOLO11": {"resize_type": "fit_to_window_letterbox", "pad_value": 114, "reverse_input_channels": True,
               "scale_values": [255.0], "mean_values": [], "confidence_threshold": 0.25, "iou_threshold": 0.7,
               "nms_execute": True, "agnostic_nms": False, "nms_max_predictions": 30000},
    "YOLOX": {**_PLAIN, "confidence_threshold": 0.3, "iou_threshold": 0.45, "nms_execute": True, "agnostic_nms": True},
    "SSD": {**_PLAIN, "confidence_threshold": 0.5, "nms_execute": False},
}


#: the precision both sides run at (see the module docstring)
F32 = {"INFERENCE_PRECISION_HINT": "f32"}


def _reference(path: Path, model_type: str) -> Any:
    """model_api's wrapper on its own OpenVINO adapter: 2 streams, as its ``nstreams="2"``, at f32."""
    from model_api.adapters import OpenvinoAdapter, create_core, get_user_config

    config = {**get_user_config("CPU", "2"), **F32}
    adapter = OpenvinoAdapter(create_core(), str(path), device="CPU", plugin_config=config)
    return model_api.Model.create_model(adapter, model_type=model_type, configuration=MODEL_API[model_type])


def _run(model: Path, clips: dict[str, list[Any]], reference: Reference,
         **params: Any) -> Iterator[tuple[str, int]]:
    for clip, raw in clips.items():
        frames = _frames(raw, clip)
        ours = _vapipe(model, frames, **params)
        assert len(ours) == len(frames)
        theirs = [r for k in range(0, len(frames), 16) for r in reference([f.image() for f in frames[k:k + 16]])]
        compared = 0
        for k, (dets, result) in enumerate(zip(ours, theirs)):
            compared += _compare(dets, *result, where=f"{clip} frame {k}")
        print(f"{model.name} on {clip}: {len(frames)} frames, {compared} objects matched")
        yield clip, compared


def _result(r: Any) -> Result:
    return np.asarray(r.bboxes), np.asarray(r.scores), np.asarray(r.labels)


def _batched(ref: Any) -> Reference:
    """model_api's own asynchronous batch (its preprocessing inside the model)."""
    return lambda images: [_result(r) for r in ref.infer_batch(images)]


def test_yolo11_equals_model_api(models_dir: Path, clips: dict[str, list[Any]]) -> None:
    path = models_dir / YOLO11
    ref = _reference(next(path.glob("*.xml")), "YOLO11")
    counts = dict(_run(path, clips, _batched(ref)))
    assert counts["one-by-one-person-detection"] >= 100 and sum(counts.values()) >= 250, counts
    assert counts["person-1080p"] >= 15, counts


def test_yolox_nano_equals_model_api(models_dir: Path, clips: dict[str, list[Any]]) -> None:
    path = models_dir / YOLOX
    ref = _reference(path, "YOLOX")

    def one(image: np.ndarray) -> Result:
        resized, meta = ref._resize_image(image)
        raw = ref.infer_sync({ref.image_blob_name: resized[None]})
        return _result(ref.postprocess(raw, meta))

    counts = dict(_run(path, clips, lambda images: [one(i) for i in images], decoder="yolox"))
    assert counts["one-by-one-person-detection"] >= 100 and sum(counts.values()) >= 250, counts


def test_person_detection_retail_0013_equals_model_api(models_dir: Path, clips: dict[str, list[Any]]) -> None:
    path = models_dir / PERSON
    counts = dict(_run(path, clips, _batched(_reference(path, "SSD"))))
    assert counts["one-by-one-person-detection"] >= 150 and counts["person-720p"] >= 25, counts


def test_face_detection_retail_0004_equals_model_api(models_dir: Path, videos_dir: Path,
                                                     clips: dict[str, list[Any]]) -> None:
    path = models_dir / FACE
    faces = {**clips, "head-pose": decode(videos_dir / "head-pose-face-detection-female-and-male.gif", 0, 56)}
    counts = dict(_run(path, faces, _batched(_reference(path, "SSD"))))
    assert counts["head-pose"] >= 50, counts
