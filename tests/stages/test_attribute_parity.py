"""The attributes decoder against a plain OpenVINO loop on the same crops.

Vehicle attributes on the cars of ``car-detection.mp4`` (YOLO11n's boxes, whatever their
COCO label: from above, most cars look like phones to it) and person attributes on the
people of ``one-by-one-person-detection.mp4`` (person-detection-retail-0013's boxes).  The
plain loop crops each box as the decoder documents (corners rounded, clipped to the
frame), resizes with OpenCV, feeds BGR 0..255 as NCHW float and reads every head itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import av
import cv2
import numpy as np
import openvino as ov
import pytest

from pipeline.frame import Frame
from stages.classify import Classify
from stages.detect import Detect

VEHICLE = "omz/vehicle-attributes-recognition-barrier-0039.xml"
PERSON_ATTRS = "omz/person-attributes-recognition-crossroad-0230.xml"
COLORS = ["white", "gray", "yellow", "red", "green", "blue", "black"]
TYPES = ["car", "van", "truck", "bus"]
PERSON_FLAGS = ["is_male", "has_bag", "has_backpack", "has_hat", "has_longsleeves", "has_longpants",
                "has_longhair", "has_coat_jacket"]


def _objects(video: Path, frames: set[int], detector: dict[str, Any], classifier: dict[str, Any]
             ) -> Iterator[tuple[np.ndarray, np.ndarray, dict[str, Any]]]:
    """(frame BGR, box, attributes) of every object the classifier ran on."""
    with av.open(str(video)) as container, Detect(**detector) as det, Classify(**classifier) as cls:
        for i, f in enumerate(container.decode(video=0)):
            if i > max(frames):
                break
            if i not in frames:
                continue
            frame = cls(det(Frame(video.stem, i, f.width, f.height, av_frame=f)))
            for box, attrs in zip(frame.detections.xyxy, frame.detections.attributes):
                if attrs:
                    yield frame.image(), box, attrs


def _plain_crop(image: np.ndarray, box: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    h, w = image.shape[:2]
    x1, y1, x2, y2 = (int(round(float(v))) for v in box)
    x1, y1 = min(max(x1, 0), w - 1), min(max(y1, 0), h - 1)
    x2, y2 = min(max(x2, x1 + 1), w), min(max(y2, y1 + 1), h)
    crop = cv2.resize(image[y1:y2, x1:x2], size_wh, interpolation=cv2.INTER_LINEAR)
    return crop.transpose(2, 0, 1)[None].astype(np.float32)


def _plain(path: Path) -> tuple[Any, tuple[int, int]]:
    compiled = ov.Core().compile_model(str(path), "CPU")
    _, _, h, w = compiled.input(0).get_shape()
    return compiled, (int(w), int(h))


def test_vehicle_attributes_equal_a_plain_openvino_loop(models_dir: Path, videos_dir: Path) -> None:
    heads = {"color": {"type": "softmax", "labels": COLORS}, "type": {"type": "softmax", "labels": TYPES}}
    yolo = {"model": str(models_dir / "yolo/yolo11n_int8_openvino_model"), "threshold": 0.2}
    attrs = {"model": str(models_dir / VEHICLE), "decoder": "attributes", "heads": heads,
             "on": ["car", "truck", "bus", "cell phone", "suitcase"]}
    frames = set(range(62, 102, 2)) | set(range(195, 231, 2)) | set(range(325, 346, 2))
    compiled, size = _plain(models_dir / VEHICLE)
    seen = 0
    for image, box, got in _objects(videos_dir / "car-detection.mp4", frames, yolo, attrs):
        out = compiled(_plain_crop(image, box, size))
        for head, labels in (("color", COLORS), ("type", TYPES)):
            probs = out[compiled.output(head)].reshape(-1)
            assert got[head] == labels[int(np.argmax(probs))], (head, box, probs)
            assert got[f"{head}_score"] == pytest.approx(float(probs.max()), abs=1e-4)
        seen += 1
    assert seen >= 30


def test_person_attributes_equal_a_plain_openvino_loop(models_dir: Path, videos_dir: Path) -> None:
    heads = {"453": {"type": "multilabel", "labels": PERSON_FLAGS, "scores": True},
             "456": {"type": "point", "name": "top_color_point"},
             "459": {"type": "point", "name": "bottom_color_point"}}
    ssd = {"model": str(models_dir / "omz/person-detection-retail-0013.xml"), "labels": ["background", "person"]}
    attrs = {"model": str(models_dir / PERSON_ATTRS), "decoder": "attributes", "heads": heads, "on": ["person"]}
    compiled, size = _plain(models_dir / PERSON_ATTRS)
    seen, flags_true = 0, 0
    for image, box, got in _objects(videos_dir / "one-by-one-person-detection.mp4", set(range(70, 1390, 20)), ssd,
                                    attrs):
        out = compiled(_plain_crop(image, box, size))
        probs = out[compiled.output("453")].reshape(-1)
        assert [got[name] for name in PERSON_FLAGS] == [bool(p >= 0.5) for p in probs], (box, probs)
        assert [got[f"{name}_score"] for name in PERSON_FLAGS] == pytest.approx(probs.tolist(), abs=1e-4)
        x1, y1, x2, y2 = (int(round(float(v))) for v in box)
        for head, name in (("456", "top_color_point"), ("459", "bottom_color_point")):
            px, py = out[compiled.output(head)].reshape(-1)
            x1c, y1c = max(x1, 0), max(y1, 0)
            x2c, y2c = min(x2, image.shape[1]), min(y2, image.shape[0])
            assert got[name] == pytest.approx([x1c + px * (x2c - x1c), y1c + py * (y2c - y1c)], abs=0.05)
        seen += 1
        flags_true += sum(got[name] for name in PERSON_FLAGS)
    assert seen >= 40 and flags_true >= 40
