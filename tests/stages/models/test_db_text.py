"""DB text-detection post-processing on hand-made probability maps."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from stages.models import DECODERS, load_adapters
from stages.models.db_text import DbTextAdapter, input_size_for, order_quad, reading_order


def _map(h: int = 128, w: int = 256) -> np.ndarray:
    return np.zeros((1, 1, h, w), np.float32)


def test_registered() -> None:
    load_adapters()
    assert DECODERS["db_text"] is DbTextAdapter
    assert DbTextAdapter.letterbox is False


@pytest.mark.parametrize("src_wh, kind, expected", [
    ((1280, 720), "min", (736, 1312)),   # short side raised to 736
    ((640, 480), "min", (736, 992)),
    ((1920, 1080), "min", (1088, 1920)),  # already large enough: only rounded to 32
    ((4000, 3000), "min", (1504, 1984)),  # long side first capped at 2000 (then 62.5 x 32 rounds to even)
    ((1280, 720), "max", (416, 736)),     # long side lowered to 736
])
def test_input_size(src_wh: tuple[int, int], kind: str, expected: tuple[int, int]) -> None:
    assert input_size_for(src_wh, 736, kind) == expected
    assert DbTextAdapter(limit_type=kind).input_size(src_wh) == expected


def test_input_size_multiple_of_32() -> None:
    for w in range(40, 3000, 97):
        for h in (33, 480, 721, 1999):
            hh, ww = input_size_for((w, h))
            assert hh % 32 == 0 and ww % 32 == 0 and hh >= 32 and ww >= 32


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="limit_type"):
        DbTextAdapter(limit_type="mid")
    with pytest.raises(ValueError, match="normalize"):
        DbTextAdapter(normalize="zscore")


def test_order_quad() -> None:
    quad = np.array([[10, 5], [50, 5], [50, 20], [10, 20]], np.float32)
    for perm in ([2, 0, 3, 1], [3, 2, 1, 0], [1, 3, 0, 2]):
        np.testing.assert_array_equal(order_quad(quad[perm]), quad)


def test_reading_order_same_line_left_to_right() -> None:
    def q(x: float, y: float) -> np.ndarray:
        return np.array([[x, y], [x + 30, y], [x + 30, y + 10], [x, y + 10]], np.float32)

    quads = [q(200, 52), q(10, 100), q(100, 50), q(5, 55)]   # first line with a few px of jitter
    assert reading_order(quads) == [3, 2, 0, 1]


def test_decode_two_lines() -> None:
    prob = _map()
    prob[0, 0, 20:36, 30:150] = 0.9        # a horizontal line
    prob[0, 0, 80:96, 60:200] = 0.8        # a second line below
    dets = DbTextAdapter().decode([prob], (128, 256))
    assert len(dets) == 2
    assert list(dets.label) == ["text", "text"]
    # Mean over the region's rectangle, whose rim (from the 2x2 dilation) lies just outside the kernel.
    assert 0.8 < dets.score[0] <= 0.9 and 0.7 < dets.score[1] <= 0.8
    first = dets.keypoints[0]
    assert first.shape == (4, 2)
    # Ordered TL, TR, BR, BL; grown outwards (unclip) beyond the kernel on every side.
    assert first[0, 0] < 30 and first[0, 1] < 20 and first[1, 0] > 149 and first[2, 1] > 35
    assert first[0, 0] < first[1, 0] and first[0, 1] < first[3, 1]
    np.testing.assert_allclose(dets.xyxy[0], [first[:, 0].min(), first[:, 1].min(),
                                              first[:, 0].max(), first[:, 1].max()])
    assert dets.xyxy[1, 1] > dets.xyxy[0, 3]   # reading order: top line first


def test_decode_rotated_line() -> None:
    prob = _map(200, 200)
    rect = ((100.0, 100.0), (120.0, 16.0), 30.0)
    cv2.fillPoly(prob[0, 0], [cv2.boxPoints(rect).astype(np.int32)], 0.95)
    dets = DbTextAdapter().decode([prob], (200, 200))
    assert len(dets) == 1
    q = dets.keypoints[0]
    edge = q[1] - q[0]
    assert abs(np.degrees(np.arctan2(edge[1], edge[0])) - 30) < 3   # top edge follows the text
    assert np.linalg.norm(edge) > 120


def test_decode_rejects_weak_and_tiny_regions() -> None:
    prob = _map()
    prob[0, 0, 20:36, 30:150] = 0.4    # above thresh (0.3) but mean score below box_thresh (0.5)
    prob[0, 0, 80:82, 60:62] = 0.99    # 2x2 blob: shorter than min_size
    assert len(DbTextAdapter().decode([prob], (128, 256))) == 0
    assert len(DbTextAdapter(box_thresh=0.35).decode([prob], (128, 256))) == 1


def test_decode_empty_map() -> None:
    dets = DbTextAdapter().decode([_map()], (128, 256))
    assert len(dets) == 0 and dets.xyxy.shape == (0, 4)


def test_decode_scales_to_input_size() -> None:
    prob = _map(64, 128)
    prob[0, 0, 10:18, 15:75] = 0.9
    half = DbTextAdapter().decode([prob], (64, 128)).xyxy[0]
    double = DbTextAdapter().decode([prob], (128, 256)).xyxy[0]
    np.testing.assert_allclose(double, half * 2, atol=1.0)
