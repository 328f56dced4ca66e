"""Annotators draw where the objects are, in place, and nowhere else."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.frame import Detections
from stages.annotate import (AttributeAnnotator, BoxAnnotator, KeypointAnnotator, PALETTE, TextAnnotator,
                             annotate_all, color_for)


def blank(h: int = 240, w: int = 320) -> np.ndarray:
    return np.zeros((h, w, 3), np.uint8)


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(H, W) mask of pixels that differ."""
    return (a != b).any(axis=2)


def one_box(**kw) -> Detections:
    return Detections(xyxy=[[100, 80, 200, 180]], score=[0.87], label=["face"], **kw)


def test_box_outline_in_place_and_local() -> None:
    img = blank()
    out = BoxAnnotator(thickness=2).annotate(img, one_box())
    assert out is img
    diff = changed(img, blank())
    # the four edges are drawn
    assert diff[80, 150] and diff[180, 150] and diff[130, 100] and diff[130, 200]
    assert tuple(img[130, 100]) == color_for("face")
    # inside the box (away from the caption) and far away stay untouched
    assert not diff[100:170, 110:190].any()
    assert not diff[200:, :].any()
    assert not diff[:, 260:].any()
    # every change lies within a band around the box (caption above it)
    ys, xs = np.nonzero(diff)
    assert ys.min() >= 40 and ys.max() <= 182 and xs.min() >= 98 and xs.max() <= 250


def test_box_caption_shows_track_id() -> None:
    a, b = blank(), blank()
    BoxAnnotator().annotate(a, one_box())
    BoxAnnotator().annotate(b, one_box(track_id=[7]))
    caption_band = changed(a, b)[40:80]
    assert caption_band.any()
    a2 = blank()
    BoxAnnotator(show_score=False).annotate(a2, one_box())
    assert changed(a, a2)[40:80].any()  # the score is part of the caption


def test_box_at_image_edge_and_outside_is_safe() -> None:
    img = blank(60, 80)
    det = Detections(xyxy=[[-20, -20, 30, 30], [70, 50, 500, 500], [np.nan, 0, 10, 10]],
                     score=[0.5, 0.5, 0.5], label=["a", "b", "c"])
    BoxAnnotator().annotate(img, det)
    assert changed(img, blank(60, 80))[0:31, 0:31].any()


def test_colours_stable_per_label() -> None:
    assert color_for("person") == color_for("person")
    assert color_for("person") in PALETTE
    assert len({color_for(x) for x in ("person", "face", "car", "bottle", "text")}) >= 3


def test_keypoints_and_landmarks_dots() -> None:
    img = blank()
    lms = np.array([[10.0, 10.0], [300.0, 220.0], [-5.0, 500.0]], np.float32)  # last one is off-image
    det = Detections(xyxy=[[100, 80, 200, 180]], score=[0.9], label=["face"],
                     keypoints=[np.array([[120, 100], [180, 100], [np.nan, np.nan]], np.float32)],
                     attributes=[{"landmarks": lms}])
    out = KeypointAnnotator(radius=2, landmark_radius=1, landmark_color=(0, 255, 0)).annotate(img, det)
    assert out is img
    diff = changed(img, blank())
    assert tuple(img[100, 120]) == color_for("face") and tuple(img[100, 180]) == color_for("face")
    assert tuple(img[10, 10]) == (0, 255, 0) and tuple(img[220, 300]) == (0, 255, 0)
    dot = diff[98:103, 118:123]  # radius-2 disk: full 3x3 core and cross, corners left out
    assert dot[1:4, 1:4].all() and dot[2, :].all() and dot[:, 2].all() and not dot[0, 0]
    # only small dots: the number of changed pixels is bounded
    assert diff.sum() <= 2 * 21 + 2 * 9
    assert not diff[150:, :250].any()


def test_keypoints_skip_objects_without_points() -> None:
    img = blank()
    KeypointAnnotator().annotate(img, one_box())
    assert not changed(img, blank()).any()


def test_text_and_quad() -> None:
    img = blank()
    quad = np.array([[40, 40], [140, 50], [135, 90], [35, 80]], np.float32)
    det = Detections(xyxy=[[35, 40, 140, 90], [200, 150, 300, 200]], score=[0.8, 0.9], label=["text", "car"],
                     keypoints=[quad, None], attributes=[{"text": "HELLO"}, {}])
    out = TextAnnotator(color=(0, 200, 255), thickness=1).annotate(img, det)
    assert out is img
    diff = changed(img, blank())
    assert diff[40, 40] and diff[45, 90]  # corner and the top edge of the quad
    assert not diff[60:70, 60:110].any()  # inside the quad
    assert diff[91:115, 35:140].any()  # the text under the box
    assert not diff[140:, 190:].any()  # the car has no text: nothing drawn there


def test_annotators_reject_wrong_images() -> None:
    with pytest.raises(ValueError):
        BoxAnnotator().annotate(np.zeros((10, 10), np.uint8), one_box())
    with pytest.raises(ValueError):
        BoxAnnotator().annotate(np.zeros((10, 10, 3), np.float32), one_box())


def test_annotate_all_empty_detections_leaves_image() -> None:
    img = np.full((50, 60, 3), 77, np.uint8)
    annotate_all(img, Detections())
    assert (img == 77).all()


def test_attributes_drawn_under_the_box_one_line_each() -> None:
    attrs = {"color": "red", "color_score": 0.931, "type": "car", "has_bag": True, "has_hat": False,
             "age": 34.2, "top_color_point": [1.0, 2.0], "text": "ABC", "has_bag_score": 0.8}
    ann = AttributeAnnotator()
    assert ann.lines(attrs) == ["color: red 0.93", "type: car", "has_bag", "age: 34.2"]
    img = blank(400, 320)
    ann.annotate(img, one_box(attributes=[attrs]))
    diff = changed(img, blank(400, 320))
    ys, xs = np.nonzero(diff)
    assert ys.min() > 180 and xs.min() >= 100  # under the box, from its left edge
    rows = np.flatnonzero(diff.any(axis=1))
    assert rows.max() - rows.min() > 4 * 15  # four caption lines, stacked
    img = blank()
    AttributeAnnotator().annotate(img, one_box(attributes=[{"has_hat": False, "text": "x"}]))
    assert not changed(img, blank()).any()
