"""BlazeFace adapter: synthetic decoding, input preparation and the real model."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.frame import Frame
from stages._infer_common import make_adapter
from stages.detect import Detect
from stages.models import DECODERS, DetectorAdapter, load_adapters
from stages.models.blazeface import BlazeFace

HEAD_POSE = "head-pose-face-detection-female-and-male.gif"


def _outputs(hits: dict[int, tuple[float, list[float]]]) -> list[np.ndarray]:
    """Model outputs in the engine's order (regressors, classificators) with given anchors set."""
    reg = np.zeros((1, 896, 16), np.float32)
    logits = np.full((1, 896, 1), -10.0, np.float32)
    for idx, (logit, values) in hits.items():
        logits[0, idx, 0] = logit
        reg[0, idx, :len(values)] = values
    return [reg, logits]


# anchor 728: stride-16 grid cell (4, 4) -> centre (72, 72) in model pixels
CELL = 512 + (4 * 8 + 4) * 6


def test_registered() -> None:
    load_adapters()
    assert DECODERS["blazeface"] is BlazeFace
    ad = make_adapter("detector", "blazeface", {"score_threshold": 0.6}, DetectorAdapter)
    assert isinstance(ad, BlazeFace) and ad.score_threshold == 0.6
    assert (ad.score_threshold, ad.iou_threshold, ad.max_objects) == (0.6, 0.3, None)
    assert BlazeFace.input_spec.mean == (127.5,) * 3 and BlazeFace.input_spec.scale == (127.5,) * 3
    assert BlazeFace.input_spec.model_color == "RGB" and BlazeFace.letterbox
    with pytest.raises(ValueError):
        make_adapter("detector", "blazeface", {"bogus": 1}, DetectorAdapter)
    with pytest.raises(ValueError):
        BlazeFace(score_threshold=1.5)


@pytest.mark.parametrize("options, message", [
    ({"score_threshold": "abc"}, "option 'score_threshold': expected a number, got 'abc'"),
    ({"score_threshold": True}, "option 'score_threshold': expected a number, got True"),
    ({"max_objects": 2.5}, "option 'max_objects': expected an integer, got 2.5"),
])
def test_an_option_of_the_wrong_type_is_named(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=r"^decoder 'blazeface' " + message.replace("(", r"\(") + "$"):
        make_adapter("detector", "blazeface", options, DetectorAdapter)
    ok = make_adapter("detector", "blazeface", {"score_threshold": 1, "max_objects": None}, DetectorAdapter)
    assert ok.score_threshold == 1 and ok.max_objects is None  # an int is a number; None stays allowed


def test_decode_single_face() -> None:
    kps = [-8, -8, 8, -8, 0, 0, 0, 8, -14, -4, 14, -4]
    outs = _outputs({CELL: (3.0, [2, -1, 32, 40] + kps)})
    dets = BlazeFace(sample_offset=0.0).decode(outs, (128, 128))
    assert len(dets) == 1 and dets.label[0] == "face"
    np.testing.assert_allclose(dets.score, [1 / (1 + np.exp(-3.0))], rtol=1e-6)
    np.testing.assert_allclose(dets.xyxy[0], [74 - 16, 71 - 20, 74 + 16, 71 + 20], atol=1e-4)
    want = np.array(kps, np.float32).reshape(6, 2) + 72
    assert dets.keypoints[0].shape == (6, 2)
    np.testing.assert_allclose(dets.keypoints[0], want, atol=1e-4)
    # the default offset shifts every coordinate by half a model pixel
    shifted = BlazeFace().decode(outs, (128, 128))
    np.testing.assert_allclose(shifted.xyxy[0], dets.xyxy[0] + 0.5, atol=1e-4)
    np.testing.assert_allclose(shifted.keypoints[0], want + 0.5, atol=1e-4)


def test_decode_output_order_and_threshold() -> None:
    outs = _outputs({CELL: (0.1, [0, 0, 20, 20])})  # score 0.525
    a = BlazeFace().decode(outs, (128, 128))
    b = BlazeFace().decode(outs[::-1], (128, 128))
    assert len(a) == len(b) == 1
    np.testing.assert_array_equal(a.xyxy, b.xyxy)
    assert len(BlazeFace(score_threshold=0.6).decode(outs, (128, 128))) == 0
    assert len(BlazeFace().decode(_outputs({}), (128, 128))) == 0


def test_decode_merges_overlapping_anchors() -> None:
    # the 6 anchors of one cell all predict nearly the same face: one weighted detection
    hits = {CELL + k: (2.0 + k * 0.1, [k * 0.5, 0, 30, 30]) for k in range(6)}
    hits[100] = (1.0, [0, 0, 10, 10])  # a separate small face elsewhere
    dets = BlazeFace(sample_offset=0.0).decode(_outputs(hits), (128, 128))
    assert len(dets) == 2
    assert dets.score[0] == pytest.approx(1 / (1 + np.exp(-2.5)))
    w = 1 / (1 + np.exp(-(2.0 + np.arange(6) * 0.1)))
    cx = 72 + (np.arange(6) * 0.5 * w).sum() / w.sum()
    np.testing.assert_allclose(dets.xyxy[0], [cx - 15, 57, cx + 15, 87], atol=1e-3)
    assert len(BlazeFace(max_objects=1).decode(_outputs(hits), (128, 128))) == 1


def test_candidates_without_a_valid_box_give_no_face() -> None:
    # scores above the threshold, but boxes of negative or undefined size: no face, no error
    hits = {CELL: (3.0, [0, 0, -30, 20]), 100: (2.0, [0, 0, float("nan"), 10])}
    dets = BlazeFace().decode(_outputs(hits), (128, 128))
    assert len(dets) == 0 and dets.xyxy.shape == (0, 4)


def test_prepare_input_matches_mediapipe_sampling() -> None:
    h, w = 144, 256
    img = np.zeros((h, w, 3), np.uint8)
    img[..., 0] = 10  # B
    img[..., 1] = np.arange(w, dtype=np.uint8)[None, :]  # G: horizontal ramp, value = x
    img[..., 2] = 30  # R
    ad = BlazeFace()
    image, box = ad.prepare_input(Frame.from_image(img), (128, 128))
    assert image.shape == (128, 128, 3) and image.dtype == np.uint8
    # letterbox: 256x144 -> 128x72 centred, 28 rows of zero padding above and below
    assert not image[:28].any() and not image[100:].any()
    assert (image[28:100, :, 0] == 30).all() and (image[28:100, :, 2] == 10).all()  # RGB order
    # model pixel i samples source x = 2 * i exactly (padded frame corners on the tensor corners),
    # not 2 * i + 0.5 as a centre-aligned resize would
    np.testing.assert_array_equal(image[64, :, 1], 2 * np.arange(128))
    # mapping back cancels the decode offset: a decoded point at model (x, y) + offset -> source
    pts = np.array([[0.0, 28.0], [64.0, 64.0], [128.0, 100.0]]) + ad.sample_offset
    np.testing.assert_allclose(box.to_source(pts), [[0, 0], [128, 72], [256, 144]], atol=1e-3)


@pytest.fixture(scope="module")
def head_pose_frames(videos_dir: Path) -> list[np.ndarray]:
    with av.open(str(videos_dir / HEAD_POSE)) as c:
        return [f.to_ndarray(format="bgr24") for i, f in zip(range(12), c.decode(video=0))]


def test_real_model_two_faces(head_pose_frames: list[np.ndarray]) -> None:
    with Detect(model="mediapipe/face_detection_short_range", decoder="blazeface") as det:
        for i, bgr in enumerate(head_pose_frames):
            frame = det(Frame.from_image(bgr.copy(), seq=i))
            d = frame.detections
            assert len(d) == 2, f"frame {i}: {len(d)} faces"
            assert (d.score > 0.7).all()
            assert set(d.label) == {"face"}
            w = d.xyxy[:, 2] - d.xyxy[:, 0]
            h = d.xyxy[:, 3] - d.xyxy[:, 1]
            assert ((w > 40) & (w < 200) & (np.abs(w - h) < 0.2 * w)).all()
            for box, kp in zip(d.xyxy, d.keypoints):
                assert kp.shape == (6, 2)
                eyes_nose = kp[:3]
                assert ((eyes_nose >= box[:2]) & (eyes_nose <= box[2:])).all()
                assert kp[0, 0] < kp[1, 0]  # right eye (subject's) is on the image's left


def test_blank_frame_has_no_face() -> None:
    with Detect(model="mediapipe/face_detection_short_range", decoder="blazeface") as det:
        for value in (0, 128, 255):
            frame = det(Frame.from_image(np.full((270, 480, 3), value, np.uint8)))
            assert len(frame.detections) == 0


def test_wrong_anchor_count_is_an_error() -> None:
    outs = [np.zeros((1, 100, 16), np.float32), np.zeros((1, 100, 1), np.float32)]
    with pytest.raises(ValueError, match="anchor grid"):
        BlazeFace().decode(outs, (128, 128))
