"""SSD anchor grids and box decoding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stages.models.ssd_anchors import (FACE_SHORT_RANGE, POSE_DETECTION, SsdAnchorConfig, decode_ssd,
                                       generate_anchors, indices_above, sigmoid_scores, split_outputs)


def test_face_short_range_grid() -> None:
    a = generate_anchors(FACE_SHORT_RANGE)
    assert a.shape == (896, 4) and a.dtype == np.float32
    # stride 8: 16x16 cells, 2 anchors each (aspect 1 + interpolated), row-major, x fastest
    np.testing.assert_allclose(a[0], [0.5 / 16, 0.5 / 16, 1, 1])
    np.testing.assert_allclose(a[1], a[0])
    np.testing.assert_allclose(a[2, :2], [1.5 / 16, 0.5 / 16])
    np.testing.assert_allclose(a[32, :2], [0.5 / 16, 1.5 / 16])
    # the three stride-16 layers share one 8x8 grid with 6 anchors per cell
    np.testing.assert_allclose(a[512:518, :2], np.tile([0.5 / 8, 0.5 / 8], (6, 1)))
    np.testing.assert_allclose(a[-1, :2], [7.5 / 8, 7.5 / 8])
    assert np.all(a[:, 2:] == 1.0)  # fixed anchor size


def test_pose_grid() -> None:
    a = generate_anchors(POSE_DETECTION)
    assert a.shape == (2254, 4)  # 28*28*2 + 14*14*2 + 7*7*6
    np.testing.assert_allclose(a[0, :2], [0.5 / 28, 0.5 / 28])
    np.testing.assert_allclose(a[1568, :2], [0.5 / 14, 0.5 / 14])
    np.testing.assert_allclose(a[1960:1966, :2], np.tile([0.5 / 7, 0.5 / 7], (6, 1)))


def test_cached_and_read_only() -> None:
    a = generate_anchors(FACE_SHORT_RANGE)
    same = SsdAnchorConfig(input_size_height=128, input_size_width=128, strides=(8, 16, 16, 16))
    assert generate_anchors(same) is a
    with pytest.raises(ValueError):
        a[0, 0] = 1.0


def test_anchor_sizes_when_not_fixed() -> None:
    cfg = SsdAnchorConfig(input_size_height=64, input_size_width=64, strides=(16, 32), min_scale=0.2,
                          max_scale=0.6, aspect_ratios=(1.0, 4.0), fixed_anchor_size=False)
    a = generate_anchors(cfg)
    assert a.shape == (4 * 4 * 3 + 2 * 2 * 3, 4)
    # layer 0: scale 0.2 at ratios 1 and 4, then the interpolated sqrt(0.2 * 0.6) square
    np.testing.assert_allclose(a[0, 2:], [0.2, 0.2], rtol=1e-6)
    np.testing.assert_allclose(a[1, 2:], [0.2 * 2, 0.2 / 2], rtol=1e-6)
    np.testing.assert_allclose(a[2, 2:], [math.sqrt(0.12)] * 2, rtol=1e-6)
    # last layer interpolates towards scale 1.0
    np.testing.assert_allclose(a[-1, 2:], [math.sqrt(0.6)] * 2, rtol=1e-6)


def test_reduce_boxes_in_lowest_layer() -> None:
    cfg = SsdAnchorConfig(input_size_height=32, input_size_width=32, strides=(16, 32), fixed_anchor_size=False,
                          reduce_boxes_in_lowest_layer=True)
    a = generate_anchors(cfg)
    assert a.shape == (2 * 2 * 3 + 1 * 1 * 2, 4)
    np.testing.assert_allclose(a[0, 2:], [0.1, 0.1], rtol=1e-6)


def test_decode_ssd_pixels() -> None:
    anchors = np.array([[0.25, 0.5, 1, 1], [0.5, 0.5, 1, 1]], np.float32)
    raw = np.zeros((2, 8), np.float32)
    raw[1, :4] = [12.8, -12.8, 32, 64]       # offsets in 128ths: +0.1, -0.1, w 0.25, h 0.5
    raw[1, 4:6] = [-64, 0]                   # keypoint 0 at anchor - 0.5 in x
    raw[1, 6:8] = [0, 64]
    boxes, kps = decode_ssd(raw, anchors, (128.0, 128.0, 128.0, 128.0), 2, (200, 100))
    np.testing.assert_allclose(boxes[0], [25, 100, 25, 100], atol=1e-4)  # zero-size box at the anchor
    cx, cy = 0.6 * 100, 0.4 * 200
    np.testing.assert_allclose(boxes[1], [cx - 12.5, cy - 50, cx + 12.5, cy + 50], atol=1e-3)
    np.testing.assert_allclose(kps[1], [[0.0, 100.0], [50.0, 200.0]], atol=1e-4)


def test_sigmoid_scores_clip() -> None:
    s = sigmoid_scores(np.array([0.0, 1e6, -1e6]))
    np.testing.assert_allclose(s, [0.5, 1.0, 0.0], atol=1e-6)
    assert s.dtype == np.float32


def test_split_outputs_by_shape() -> None:
    reg = np.zeros((1, 896, 16), np.float32)
    cls = np.ones((1, 896, 1), np.float32)
    for outs in ([reg, cls], [cls, reg]):
        r, c = split_outputs(outs, 16)
        assert r.shape == (896, 16) and c.shape == (896,)
        assert c[0] == 1
    with pytest.raises(ValueError, match="expected outputs"):
        split_outputs([reg], 16)
    with pytest.raises(ValueError, match="expected outputs"):
        split_outputs([np.zeros((1, 10, 12)), cls], 12)


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.75, 0.999, 1.0])
def test_indices_above_matches_sigmoid_threshold(threshold: float) -> None:
    """The logit-side test keeps exactly the anchors whose sigmoid score reaches the
    threshold, including logits right at the cut and beyond the clip."""
    rng = np.random.default_rng(3)
    cut = np.log(0.75 / 0.25)
    logits = np.concatenate([rng.normal(0, 4, 3000), [cut, np.nextafter(cut, 0), 150.0, -150.0]]).astype(np.float32)
    expected = np.flatnonzero(sigmoid_scores(logits) >= threshold)
    np.testing.assert_array_equal(indices_above(logits, threshold), expected)
