"""Face mesh adapter: ROI geometry, crop, decoding and the real model."""

from __future__ import annotations

import math
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.frame import Detections, Frame
from stages.classify import Classify
from stages.detect import Detect
from stages.models import DECODERS, load_adapters
from stages.models.face_landmarks import FaceLandmarks, FaceMesh, face_roi, roi_warp

# eye contour landmarks of the face mesh (corners and lids): subject's right eye, left eye
RIGHT_EYE = [33, 133, 159, 145]
LEFT_EYE = [362, 263, 386, 374]


def _apply(warp: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return np.asarray(pts, np.float64) @ warp[:, :2].T + warp[:, 2]


def test_registered() -> None:
    load_adapters()
    assert DECODERS["face_landmarks"] is FaceLandmarks
    spec = FaceLandmarks.input_spec
    assert spec.scale == (255.0,) * 3 and spec.mean is None and spec.model_color == "RGB"


def test_roi_is_square_scaled_and_rotated_by_eyes() -> None:
    box = np.array([100, 50, 160, 130], np.float32)  # 60 x 80
    cx, cy, side, rot = face_roi(box, None)
    assert (cx, cy, side, rot) == (130, 90, pytest.approx(120), 0.0)
    eyes = np.array([[110, 80], [150, 80 + 40 * math.tan(math.radians(20))]])
    assert face_roi(box, eyes)[3] == pytest.approx(math.radians(20))


def test_roi_warp_corners_and_axes() -> None:
    m = roi_warp(50, 40, 96, 0.0, (192, 192))
    np.testing.assert_allclose(_apply(m, [[0, 0], [192, 192], [96, 96]]), [[2, -8], [98, 88], [50, 40]])
    r = roi_warp(50, 40, 96, math.radians(30), (192, 192))
    np.testing.assert_allclose(_apply(r, [[96, 96]]), [[50, 40]])
    step = _apply(r, [[97, 96]]) - _apply(r, [[96, 96]])
    np.testing.assert_allclose(step[0], [0.5 * math.cos(math.radians(30)), 0.5 * math.sin(math.radians(30))])


def test_prepare_crops_the_rotated_square() -> None:
    img = np.zeros((200, 300, 3), np.uint8)
    img[90:110, 140:160] = (0, 0, 255)  # red square at the ROI centre
    img[:, :20] = (255, 0, 0)           # blue edge (replicated outside the frame)
    dets = Detections(xyxy=[[110, 70, 190, 130]], score=[0.9], label="face",
                      keypoints=[np.array([[130, 90], [170, 90]] + [[150, 100]] * 4, np.float32)])
    crop, warp = FaceLandmarks().prepare(Frame.from_image(img), dets, 0, (192, 192))
    assert crop.shape == (192, 192, 3) and crop.dtype == np.uint8
    assert tuple(crop[96, 96]) == (0, 0, 255)  # BGR, as the input spec's host colour says
    np.testing.assert_allclose(_apply(warp, [[96, 96]]), [[150, 100]])
    # side = 1.5 * 80 = 120 source pixels over 192 crop pixels
    assert math.hypot(warp[0, 0], warp[1, 0]) == pytest.approx(120 / 192)
    near_edge = Detections(xyxy=[[0, 50, 40, 90]], score=[0.9], label="face")
    crop2, _ = FaceLandmarks().prepare(Frame.from_image(img), near_edge, 0, (192, 192))
    assert tuple(crop2[96, 0]) == (255, 0, 0)  # replicated border, not black


def test_decode_maps_back_and_presence() -> None:
    warp = roi_warp(150, 100, 120, math.radians(90), (192, 192))
    pts = np.zeros((1, 1, 1, 1404), np.float32)
    mesh = pts.reshape(468, 3)
    mesh[0] = [96, 96, 0]
    mesh[1] = [192, 96, 10]  # crop's right edge -> rotated 90 degrees: below the centre
    ad = FaceLandmarks()
    for outs in ([pts, np.zeros((1, 1, 1, 1), np.float32)], [np.full((1, 1, 1, 1), 3.0, np.float32), pts]):
        res = ad.decode(outs, warp)
        assert isinstance(res, FaceMesh) and res.landmarks.shape == (468, 3)
        np.testing.assert_allclose(res.landmarks[0, :2], [150, 100], atol=1e-4)
        np.testing.assert_allclose(res.landmarks[1], [150, 160, 10 * 120 / 192], atol=1e-4)
    assert ad.decode([pts, np.zeros((1, 1, 1, 1))], warp).presence == pytest.approx(0.5)
    assert ad.decode([pts, np.full((1, 1, 1, 1), 3.0)], warp).presence == pytest.approx(1 / (1 + math.exp(-3)))
    with pytest.raises(ValueError):
        ad.decode([pts], warp)


def test_apply_gates_landmarks_on_presence() -> None:
    dets = Detections(xyxy=[[0, 0, 10, 10]], score=[0.9], label="face")
    ad = FaceLandmarks()
    ad.apply(dets, 0, FaceMesh(np.ones((468, 3), np.float32), 0.9))
    assert dets.attributes[0]["landmarks"].shape == (468, 2) and dets.attributes[0]["face_presence"] == 0.9
    ad.apply(dets, 0, FaceMesh(np.ones((468, 3), np.float32), 0.2))
    assert "landmarks" not in dets.attributes[0] and dets.attributes[0]["face_presence"] == 0.2


@pytest.fixture(scope="module")
def head_pose_frames(videos_dir: Path) -> list[np.ndarray]:
    with av.open(str(videos_dir / "head-pose-face-detection-female-and-male.gif")) as c:
        return [f.to_ndarray(format="bgr24") for i, f in enumerate(c.decode(video=0)) if i % 4 == 0]


def test_landmarks_on_real_faces(head_pose_frames: list[np.ndarray]) -> None:
    det = Detect(model="mediapipe/face_detection_short_range", decoder="blazeface")
    mesh = Classify(model="mediapipe/face_landmark", decoder="face_landmarks", on=["face"])
    n = 0
    with det, mesh:
        for i, bgr in enumerate(head_pose_frames):
            frame = mesh(det(Frame.from_image(bgr.copy(), seq=i)))
            d = frame.detections
            assert len(d) == 2
            for box, kp, attrs in zip(d.xyxy, d.keypoints, d.attributes):
                n += 1
                assert attrs["face_presence"] > 0.9
                lm = attrs["landmarks"]
                assert lm.shape == (468, 2) and lm.dtype == np.float32
                w = box[2] - box[0]
                grown = np.concatenate([box[:2] - 0.25 * w, box[2:] + 0.25 * w])
                inside = ((lm >= grown[:2]) & (lm <= grown[2:])).all(1)
                assert inside.mean() > 0.97
                # the mesh's eye centres sit near the detector's (coarser) eye keypoints,
                # each nearer its own eye than the other one
                right, left = lm[RIGHT_EYE].mean(0), lm[LEFT_EYE].mean(0)
                assert np.linalg.norm(right - kp[0]) < 0.2 * w and np.linalg.norm(left - kp[1]) < 0.2 * w
                assert np.linalg.norm(right - kp[0]) < np.linalg.norm(right - kp[1])
                assert np.linalg.norm(left - kp[1]) < np.linalg.norm(left - kp[0])
                # landmark spread matches the face size
                span = lm.max(0) - lm.min(0)
                assert 0.6 * w < span[0] < 1.6 * w
    assert n == 2 * len(head_pose_frames)
