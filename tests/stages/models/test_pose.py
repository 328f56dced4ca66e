"""Pose (person) adapter: body region from keypoints, and the real model."""

from __future__ import annotations

import math
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.frame import Frame
from stages.detect import Detect
from stages.models import DECODERS, load_adapters
from stages.models.pose import PoseDetector, body_square

# pose anchors: stride-8 grid 28x28 (2 anchors per cell); cell (14, 14) -> centre (116, 116)
CELL = (14 * 28 + 14) * 2


def _outputs(logit: float, values: list[float]) -> list[np.ndarray]:
    reg = np.zeros((1, 2254, 12), np.float32)
    logits = np.full((1, 2254, 1), -10.0, np.float32)
    reg[0, CELL, :len(values)] = values
    logits[0, CELL, 0] = logit
    return [logits, reg]


def test_registered() -> None:
    load_adapters()
    assert DECODERS["pose"] is PoseDetector
    ad = PoseDetector()
    assert (ad.score_threshold, ad.iou_threshold, ad.roi_scale) == (0.5, 0.3, 1.25)
    assert PoseDetector.input_spec.mean == (127.5,) * 3 and PoseDetector.letterbox


def test_body_square_geometry() -> None:
    up = np.array([[[100, 120], [100, 60], [100, 80], [100, 50]]], np.float32)
    c, side, rot = body_square(up)
    np.testing.assert_allclose(c, [[100, 120]])
    np.testing.assert_allclose(side, [2 * 60 * 1.25])
    np.testing.assert_allclose(rot, [0.0], atol=1e-9)
    right = up.copy()
    right[0, 1] = [160, 120]  # scale point to the right: person lying, rotated +90 degrees
    np.testing.assert_allclose(body_square(right)[2], [math.pi / 2])
    down = up.copy()
    down[0, 1] = [100, 180]
    assert abs(abs(body_square(down)[2][0]) - math.pi) < 1e-6


def test_decode_box_bounds_the_rotated_square() -> None:
    # box offsets irrelevant; keypoints relative to the anchor centre (116, 116)
    kps = [0, 20, 0, -40, 0, -10, 0, -30]
    d = PoseDetector(sample_offset=0.0).decode(_outputs(4.0, [0, 0, 30, 30] + kps), (224, 224))
    assert len(d) == 1 and d.label[0] == "person"
    np.testing.assert_allclose(d.keypoints[0], np.array(kps, np.float32).reshape(4, 2) + 116, atol=1e-4)
    half = 60 * 1.25  # |kp1 - kp0| = 60
    np.testing.assert_allclose(d.xyxy[0], [116 - half, 136 - half, 116 + half, 136 + half], atol=1e-3)
    assert d.attributes[0]["rotation"] == pytest.approx(0.0, abs=1e-6)
    # tilted by 45 degrees: the bounding box grows by sqrt(2)
    s = 60 / math.sqrt(2)
    kps45 = [0, 20, s, 20 - s, 0, 0, 0, 0]
    d45 = PoseDetector(sample_offset=0.0).decode(_outputs(4.0, [0, 0, 30, 30] + kps45), (224, 224))
    w = d45.xyxy[0, 2] - d45.xyxy[0, 0]
    assert w == pytest.approx(2 * half * math.sqrt(2), rel=1e-4)
    assert d45.attributes[0]["rotation"] == pytest.approx(math.pi / 4, abs=1e-5)
    assert len(PoseDetector().decode(_outputs(-1.0, [0, 0, 30, 30] + kps), (224, 224))) == 0


@pytest.fixture(scope="module")
def people_frames(videos_dir: Path) -> dict[int, np.ndarray]:
    wanted = {100, 300, 800, 1100, 1300}
    out: dict[int, np.ndarray] = {}
    with av.open(str(videos_dir / "one-by-one-person-detection.mp4")) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i in wanted:
                out[i] = f.to_ndarray(format="bgr24")
            if i >= max(wanted):
                break
    return out


def test_people_found(people_frames: dict[int, np.ndarray]) -> None:
    with Detect(model="mediapipe/pose_detection", decoder="pose") as det:
        for i, bgr in people_frames.items():
            frame = det(Frame.from_image(bgr.copy(), seq=i))
            d = frame.detections
            assert len(d) == 1, f"frame {i}: {len(d)} people"
            assert d.label[0] == "person" and d.score[0] > 0.8
            box, kp = d.xyxy[0], d.keypoints[0]
            w, h = box[2] - box[0], box[3] - box[1]
            # a standing person (one of the men walking in) spans most of the frame's height
            assert h > 0.8 * frame.height and 0.6 * h < w < 1.4 * h
            # body region holds hips, shoulders and the full-body scale point (above the head);
            # the upper-body scale point may lie outside the frame
            assert ((kp[:3] >= box[:2] - 1) & (kp[:3] <= box[2:] + 1)).all()
            assert kp[1, 1] < kp[2, 1] < kp[0, 1]
            assert abs(d.attributes[0]["rotation"]) < 0.5


def test_blank_frame_has_no_person() -> None:
    with Detect(model="mediapipe/pose_detection", decoder="pose") as det:
        for value in (0, 200):
            frame = det(Frame.from_image(np.full((432, 768, 3), value, np.uint8)))
            assert len(frame.detections) == 0
