"""Text-line crops and model-input sizing."""

from __future__ import annotations

import cv2
import numpy as np

from stages.models.text_crop import (CLS_HW, PAD_VALUE, cls_input, crop_quad, rec_input, rec_width,
                                     resize_pad)


def _gradient(h: int = 200, w: int = 300) -> np.ndarray:
    ys, xs = np.mgrid[0:h, 0:w]
    return np.dstack([xs % 256, ys % 256, (xs + ys) % 256]).astype(np.uint8)


def _quad(x1: float, y1: float, x2: float, y2: float) -> np.ndarray:
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float32)


def test_axis_aligned_crop_is_the_region() -> None:
    img = _gradient()
    crop = crop_quad(img, _quad(40, 30, 140, 60))
    assert crop.shape == (30, 100, 3) and crop.dtype == np.uint8
    np.testing.assert_allclose(crop.astype(int), img[30:60, 40:140].astype(int), atol=2)


def test_rotated_quad_becomes_upright() -> None:
    img = np.full((300, 300, 3), 255, np.uint8)
    rect = ((150.0, 150.0), (160.0, 40.0), -25.0)
    box = cv2.boxPoints(rect)
    cv2.fillPoly(img, [box.astype(np.int32)], (0, 0, 0))
    # order the quad TL, TR, BR, BL along the rectangle's long side
    from stages.models.db_text import order_quad
    crop = crop_quad(img, order_quad(box))
    assert crop.shape[1] > 3 * crop.shape[0]                     # wide, not tall
    assert crop[3:-3, 3:-3].mean() < 30                          # all ink: the crop follows the rectangle


def test_tall_crop_is_turned() -> None:
    img = _gradient()
    crop = crop_quad(img, _quad(10, 10, 30, 70))                # 20 wide, 60 tall
    assert crop.shape[:2] == (20, 60)
    # rotated 90 degrees counter-clockwise: the region's top-left pixel ends at bottom-left
    np.testing.assert_allclose(crop[-1, 0].astype(int), img[10, 10].astype(int), atol=2)


def test_resize_pad() -> None:
    crop = np.zeros((20, 50, 3), np.uint8)
    out = resize_pad(crop, 48, 192)
    assert out.shape == (48, 192, 3)
    assert (out[:, :120] == 0).all() and (out[:, 120:] == PAD_VALUE).all()   # ceil(48 * 50 / 20) = 120
    wide = resize_pad(np.zeros((10, 500, 3), np.uint8), 48, 192)
    assert (wide == 0).all()                                     # squeezed to the full width


def test_model_input_sizes() -> None:
    assert cls_input(np.zeros((30, 400, 3), np.uint8)).shape == (*CLS_HW, 3)
    assert rec_width((48, 100)) == 320                           # at least 320
    assert rec_width((30, 600)) == 960                           # 48 * 600 / 30
    assert rec_input(np.zeros((24, 500, 3), np.uint8)).shape == (48, 1000, 3)


def test_the_ocr_stages_crop_each_line_of_a_frame_once(monkeypatch) -> None:
    """Direction and recognition read the same line: it is warped once per frame and quad, and
    the shared crop cannot be changed by either."""
    from pipeline.frame import Detections, Frame
    from stages.models import text_crop
    from stages.models.text_direction import TextDirectionAdapter
    from stages.models.text_recognition import TextRecognitionAdapter

    warps = []
    monkeypatch.setattr(text_crop, "crop_quad", lambda img, q: warps.append(q) or crop_quad(img, q))
    img = _gradient()
    frame = Frame.from_image(img)
    dets = Detections(xyxy=np.array([[40, 30, 140, 60], [10, 100, 200, 140]], np.float32),
                      score=np.ones(2, np.float32), label=np.array(["text", "text"], object),
                      keypoints=[None, None], attributes=[{}, {}])
    rec, direction = TextRecognitionAdapter(), TextDirectionAdapter()
    for i in range(2):
        direction.prepare(frame, dets, i, CLS_HW)
        dets.attributes[i]["angle"] = 180 if i else 0
        rec_in, _ = rec.prepare(frame, dets, i, (48, 320))
        want = crop_quad(img, _quad(*dets.xyxy[i]))
        want = want[::-1, ::-1] if i else want
        np.testing.assert_array_equal(rec_in, rec_input(np.ascontiguousarray(want)))
    assert len(warps) == 2  # one per line, not one per stage and line
    shared = text_crop.line_crop(frame, _quad(40, 30, 140, 60))
    assert not shared.flags.writeable and len(warps) == 2
    assert text_crop.line_crop(Frame.from_image(img), _quad(40, 30, 140, 60)) is not shared  # per frame
