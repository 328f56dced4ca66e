"""View geometry: crops, quarter turns, mirrors and scaling as one affine map.

The reference for where pixels go is NumPy/OpenCV doing the same operation on an
image whose every pixel is distinct: the pixel at a source position must be
found in the transformed image exactly where the geometry maps that position.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from pipeline.frame import Detections
from pipeline.geometry import PixelPoint, ViewGeometry

W, H = 40, 30


def _labelled(w: int = W, h: int = H) -> np.ndarray:
    """(h, w) int32 image whose value is each pixel's index."""
    return np.arange(w * h, dtype=np.int32).reshape(h, w)


def _reference(img: np.ndarray, crop: tuple[int, int, int, int] | None, rotate: int, flip: str) -> np.ndarray:
    if crop is not None:
        x1, y1, x2, y2 = crop
        img = img[y1:y2, x1:x2]
    img = np.rot90(img, k=-rotate // 90)  # clockwise
    if flip == "horizontal":
        img = img[:, ::-1]
    elif flip == "vertical":
        img = img[::-1]
    return img


def _geometry(crop, rotate: int, flip: str) -> ViewGeometry:
    g = ViewGeometry.identity(W, H)
    if crop is not None:
        g = g.crop(*crop)
    return g.rotate(rotate).flip(flip)


CASES = [(crop, rot, flip) for crop in (None, (3, 5, 31, 22)) for rot in (0, 90, 180, 270)
         for flip in ("none", "horizontal", "vertical")]


@pytest.mark.parametrize("crop,rotate,flip", CASES)
def test_every_pixel_lands_where_the_map_says(crop, rotate: int, flip: str) -> None:
    src = _labelled()
    ref = _reference(src, crop, rotate, flip)
    g = _geometry(crop, rotate, flip)
    assert g.size == (ref.shape[1], ref.shape[0])
    ys, xs = np.mgrid[0:H, 0:W]
    centres = np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5], 1)
    view = g.to_view(centres)
    inside = (view[:, 0] > 0) & (view[:, 0] < g.size[0]) & (view[:, 1] > 0) & (view[:, 1] < g.size[1])
    vx, vy = np.floor(view[inside]).astype(int).T
    assert inside.sum() == ref.size  # every view pixel comes from exactly one source pixel
    assert np.array_equal(ref[vy, vx], src.ravel()[inside])
    # and OpenCV's warp with the pixel-centre matrix builds the same picture
    warped = cv2.warpAffine(src.astype(np.float32), g.cv_matrix(), g.size, flags=cv2.INTER_NEAREST)
    assert np.array_equal(warped.astype(np.int32), ref)


@pytest.mark.parametrize("crop,rotate,flip", CASES[::5])
def test_scaling_matches_cv2_resize_sampling(crop, rotate: int, flip: str) -> None:
    """A scaled view samples where cv2.resize (half-pixel centres) does."""
    rng = np.random.default_rng(1)
    src = rng.integers(0, 255, (H, W), np.uint8).astype(np.float32)
    g = _geometry(crop, rotate, flip)
    ref = cv2.resize(np.ascontiguousarray(_reference(src, crop, rotate, flip)), (17, 13),
                     interpolation=cv2.INTER_LINEAR)
    scaled = g.resize(17, 13)
    ours = cv2.warpAffine(src, scaled.cv_matrix(), (17, 13), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    assert np.abs(ours - ref).max() < 0.05


def test_boxes_keypoints_and_landmarks_round_trip() -> None:
    rng = np.random.default_rng(0)
    g = ViewGeometry.identity(1920, 1080).crop(200, 100, 1500, 900).rotate(90).flip("horizontal").resize(480, 960)
    xy = rng.uniform(0, 400, (5, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 300, (5, 2))], 1).astype(np.float32)
    kps = [rng.uniform(0, 480, (4, 2)).astype(np.float32) for _ in range(5)]
    dets = Detections(xyxy=boxes, score=np.linspace(0.5, 0.9, 5), label=["a", "b", "a", "c", "a"],
                      keypoints=kps, attributes=[{"landmarks": k * 2, "colour": "red"} for k in kps])
    back = g.detections_to_source(dets)
    again = g.detections_to_view(back)
    assert np.allclose(again.xyxy, dets.xyxy, atol=1e-3)
    assert all(np.allclose(a, b, atol=1e-3) for a, b in zip(again.keypoints, dets.keypoints))
    assert all(np.allclose(a["landmarks"], b["landmarks"], atol=1e-3)
               for a, b in zip(again.attributes, dets.attributes))
    assert list(back.label) == list(dets.label) and np.array_equal(back.score, dets.score)
    assert all(a["colour"] == "red" for a in back.attributes)
    # boxes stay boxes: corners ordered, inside the crop region of the source
    assert (back.xyxy[:, 2] > back.xyxy[:, 0]).all() and (back.xyxy[:, 3] > back.xyxy[:, 1]).all()
    assert (back.xyxy[:, [0, 2]] >= 200 - 1e-3).all() and (back.xyxy[:, [1, 3]] >= 100 - 1e-3).all()


def test_box_maps_to_the_turned_pixels() -> None:
    """A box on a 1920x1080 frame turned clockwise: x' = 1080 - y, y' = x (pixel edges)."""
    g = ViewGeometry.identity(1920, 1080).rotate(90)
    out = g.detections_to_view(Detections(xyxy=[[100, 200, 300, 250]], score=[1.0], label="x"))
    assert np.allclose(out.xyxy, [[1080 - 250, 100, 1080 - 200, 300]])
    assert g.size == (1080, 1920)


def test_point_attributes_follow_the_view_and_plain_lists_do_not() -> None:
    """A :class:`PixelPoint` is a position: a 180 degree turn of a 100x80 frame puts (10, 20)
    at (90, 60); a plain list of two numbers is left as it is."""
    g = ViewGeometry.identity(100, 80).rotate(180)
    dets = Detections(xyxy=[[0, 0, 30, 30]], score=[1.0], label="person",
                      attributes=[{"top": PixelPoint([10.0, 20.0]), "pair": [10.0, 20.0]}])
    out = g.detections_to_source(dets).attributes[0]
    assert isinstance(out["top"], PixelPoint) and out["top"] == pytest.approx([90.0, 60.0])
    assert out["pair"] == [10.0, 20.0]
    assert dets.attributes[0]["top"] == [10.0, 20.0]  # the input is not changed


def test_rotation_attribute_follows_the_view() -> None:
    """``rotation`` (clockwise from upright): upright in a view turned 90 degrees clockwise is
    turned 90 degrees counter-clockwise in the source; a mirror negates it."""
    g = ViewGeometry.identity(100, 80).rotate(90)
    dets = Detections(xyxy=[[0, 0, 10, 10]], score=[1.0], label="person", attributes=[{"rotation": 0.0}])
    assert math.isclose(g.detections_to_source(dets).attributes[0]["rotation"], -math.pi / 2, abs_tol=1e-9)
    mirrored = ViewGeometry.identity(100, 80).flip("horizontal")
    dets.attributes[0]["rotation"] = 0.3
    assert math.isclose(mirrored.detections_to_source(dets).attributes[0]["rotation"], -0.3, abs_tol=1e-9)


def test_outline_region_and_chaining() -> None:
    g = ViewGeometry.identity(640, 480).crop(100, 50, 500, 450).rotate(270)
    assert g.region() == pytest.approx((100, 50, 500, 450))
    assert not g.covers_source()
    assert ViewGeometry.identity(640, 480).rotate(90).resize(240, 320).covers_source()
    # a second view of the first composes into one map from the source
    second = ViewGeometry.identity(*g.size).crop(0, 0, 200, 100).flip("vertical")
    chained = g.then(second)
    p = np.array([[150.0, 120.0]])
    assert np.allclose(chained.to_view(p), second.to_view(g.to_view(p)))
    with pytest.raises(ValueError, match="cannot chain"):
        g.then(ViewGeometry.identity(10, 10))


def test_bad_steps_are_errors() -> None:
    g = ViewGeometry.identity(64, 48)
    with pytest.raises(ValueError, match="not inside the 64x48 frame"):
        g.crop(0, 0, 65, 48)
    with pytest.raises(ValueError, match="rotation 45 is not one of 0, 90, 180, 270"):
        g.rotate(45)
    with pytest.raises(ValueError, match="flip 'diagonal'"):
        g.flip("diagonal")  # type: ignore[arg-type]
