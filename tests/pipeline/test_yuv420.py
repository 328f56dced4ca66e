"""Warps of a small region read a copy of that region and give the picture of the whole planes."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

import pipeline.yuv420 as yuv
from pipeline.yuv420 import source_window, warp_yuv420, yuv420_planes
from tests.media import CLIP, frames_of


@pytest.fixture(scope="module")
def planes(make_clip) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # 1280x720: a 192x192 crop's region is well under a quarter of the frame
    clip: Path = make_clip(CLIP.with_(width=1280, height=720, frames=2))
    out = yuv420_planes(frames_of(clip, 1)[0])
    assert out is not None
    return out


def _crop(cx: float, cy: float, side: float, angle: float, out: int = 192) -> np.ndarray:
    """Source -> output affine of a turned square of ``side`` source pixels centred at (cx, cy)."""
    m = cv2.getRotationMatrix2D((cx, cy), angle, out / side)
    m[:, 2] += np.array([out / 2, out / 2]) - np.array([cx, cy])
    return m


def _whole(planes, *args, **kwargs) -> np.ndarray:
    """The warp from the whole planes (no window), the reference."""
    saved = yuv.source_window
    yuv.source_window = lambda p, m, w, h: (p, m)
    try:
        return warp_yuv420(planes, *args, **kwargs)
    finally:
        yuv.source_window = saved


def _agree(ours: np.ndarray, ref: np.ndarray) -> None:
    d = np.abs(ours.astype(np.int16) - ref.astype(np.int16))
    # positions are float32 in OpenCV; in the window they are smaller numbers and may round
    # one way where the whole frame rounds the other: rare values differ by a few levels
    assert (d > 0).mean() < 1e-3 and d.max() <= 4, ((d > 0).mean(), d.max())


def test_a_small_region_is_copied_with_margin_at_even_offsets(planes) -> None:
    m = _crop(700.0, 300.0, 250.0, 20.0)
    window, shifted = source_window(planes, m, 192, 192)
    y, u, v = window
    assert y.flags.c_contiguous and y.size * 4 < planes[0].size
    assert u.shape == v.shape and abs(u.shape[0] * 2 - y.shape[0]) <= 4 and abs(u.shape[1] * 2 - y.shape[1]) <= 4
    # the window's matrix maps window pixels where the frame's maps frame pixels
    x0, y0 = np.linalg.solve(m[:, :2], shifted[:, 2] - m[:, 2])
    assert x0 == pytest.approx(round(x0)) and y0 == pytest.approx(round(y0))
    assert round(x0) % 2 == 0 and round(y0) % 2 == 0
    np.testing.assert_array_equal(y, planes[0][round(y0):round(y0) + y.shape[0], round(x0):round(x0) + y.shape[1]])


def test_a_region_of_most_of_the_frame_is_read_in_place(planes) -> None:
    m = _crop(640.0, 360.0, 700.0, 10.0)
    window, shifted = source_window(planes, m, 192, 192)
    assert window is planes and shifted is m


@pytest.mark.parametrize("fmt, full_range", [("rgb24", False), ("bgr24", True), ("gray", False)])
@pytest.mark.parametrize("border", [cv2.BORDER_CONSTANT, cv2.BORDER_REPLICATE])
@pytest.mark.parametrize("centre", [(700.0, 300.0), (30.0, 20.0), (1270.0, 715.0), (-60.0, 400.0)],
                         ids=["inside", "top-left", "bottom-right", "off-left"])
def test_the_window_gives_the_picture_of_the_whole_planes(planes, fmt: str, full_range: bool, border: int,
                                                          centre: tuple[float, float]) -> None:
    """Inside, across the frame's edges (borders filled as from the whole frame), both ranges."""
    for side, angle in ((150.0, 0.0), (250.0, 33.0), (400.0, -70.0)):
        m = _crop(*centre, side, angle)
        ours = warp_yuv420(planes, full_range, m, 192, 192, fmt, border)
        _agree(ours, _whole(planes, full_range, m, 192, 192, fmt, border))


def test_chroma_stays_aligned_in_a_slice_at_odd_offsets(planes) -> None:
    # a slice of the frame starting at an odd column and row, as a view's window gives it
    y, u, v = planes
    sliced = (y[101:, 301:], u[50:, 150:], v[50:, 150:])
    m = _crop(400.0, 200.0, 200.0, 15.0)
    ours = warp_yuv420(sliced, False, m, 192, 192, "bgr24", cv2.BORDER_CONSTANT, chroma_shift=(1, 1))
    _agree(ours, _whole(sliced, False, m, 192, 192, "bgr24", cv2.BORDER_CONSTANT, chroma_shift=(1, 1)))
