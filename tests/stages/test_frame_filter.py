"""Interlaced video is deinterlaced (FFmpeg's bwdif) and anamorphic video stretched to square
pixels before models see it; other video is untouched.  The clips are made here: each frame's two
fields show a bar at two moments, as an interlaced camera captures a moving object, encoded as
interlaced H.264; a circle stored squeezed with the sample aspect ratio that stretches it back."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest

from stages.decode import Decode
from tests.media import encode_images

W, H, FRAMES = 160, 120, 12


def bar(x: float) -> np.ndarray:
    img = np.full((H, W), 40, np.uint8)
    img[:, int(x):int(x) + 16] = 220
    return img


def interlaced_images() -> list[np.ndarray]:
    """Top field (even rows) with the bar at x, bottom field (odd rows) half a frame later."""
    images = []
    for i in range(FRAMES):
        top, bottom = bar(20 + 8 * i), bar(24 + 8 * i)
        top[1::2] = bottom[1::2]
        images.append(top)
    return images


def write(path: Path, images: list[np.ndarray], interlaced: bool, rotation: int = 0) -> Path:
    options = {"crf": "10", **({"x264-params": "interlaced=1:tff=1"} if interlaced else {})}
    return encode_images(path, (np.dstack([image] * 3) for image in images), 25, options, turn=(rotation, False, False))


def decoded(clip: Path, **params: object) -> list[tuple[int, float, np.ndarray]]:
    with Decode(uri=str(clip), **params) as source:
        return [(f.seq, f.pts_time, f.image()[:, :, 1].copy()) for f in source.frames()]


def combing(grey: np.ndarray, axis: int = 0) -> float:
    """Mean distance of each row (``axis`` 0) or column from the mean of its two neighbours:
    high where the fields of a frame disagree."""
    g = np.moveaxis(grey.astype(float), axis, 0)
    return float(np.abs(g[1:-1] - (g[:-2] + g[2:]) / 2).mean())


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("interlace")
    return {"interlaced": write(folder / "interlaced.mp4", interlaced_images(), True),
            "progressive": write(folder / "progressive.mp4", [bar(20 + 8 * i) for i in range(FRAMES)], False),
            "turned": write(folder / "turned.mp4", interlaced_images(), True, rotation=90)}


def test_interlaced_frames_come_deinterlaced_every_one_in_time(clips: dict[str, Path]) -> None:
    combed = decoded(clips["interlaced"], deinterlace="off")
    clean = decoded(clips["interlaced"])
    assert [(s, t) for s, t, _ in clean] == [(s, t) for s, t, _ in combed] == [(i, i / 25) for i in range(FRAMES)]
    before = np.mean([combing(g) for *_, g in combed])
    after = np.mean([combing(g) for *_, g in clean])
    assert before > 5.0 and after < before / 5
    # the bar is still where it was (between its two field positions), not blurred away
    for i, (_, _, g) in enumerate(clean):
        columns = np.flatnonzero(g[H // 2] > 130)
        assert 20 + 8 * i - 2 <= columns.min() and columns.max() <= 24 + 8 * i + 16 + 2, (i, columns)


def test_progressive_frames_are_untouched(clips: dict[str, Path]) -> None:
    plain = decoded(clips["progressive"], deinterlace="off")
    auto = decoded(clips["progressive"])
    assert len(auto) == FRAMES
    assert all(a[:2] == b[:2] and np.array_equal(a[2], b[2]) for a, b in zip(auto, plain))


def test_fields_are_joined_before_the_picture_is_turned(clips: dict[str, Path]) -> None:
    """Turned 90 degrees for display, the stored rows (the fields) become columns: deinterlaced
    first, the columns of the upright picture show no combing."""
    frames = decoded(clips["turned"])
    assert len(frames) == FRAMES and frames[0][2].shape == (W, H)
    combed = decoded(clips["turned"], deinterlace="off")
    before = np.mean([combing(g, axis=1) for *_, g in combed])
    after = np.mean([combing(g, axis=1) for *_, g in frames])
    assert before > 5.0 and after < before / 5


@pytest.mark.parametrize("aspect", [Fraction(4, 3), Fraction(8, 9)])
def test_anamorphic_video_comes_in_square_pixels(tmp_path: Path, aspect: Fraction) -> None:
    """A circle of diameter 80 stored 80 / aspect wide (HDV 1440x1080 is 4:3, NTSC 720x480 is
    8:9): decoded, the frame is ``aspect`` times wider and the circle round again."""
    stored_w = 120
    image = np.zeros((96, stored_w, 3), np.uint8)
    cv2.ellipse(image, (60, 48), (round(40 / aspect), 40), 0, 0, 360, (255, 255, 255), -1)
    encode_images(tmp_path / "anamorphic.mp4", [image] * 3, 25, {}, sample_aspect=aspect)

    def frame_and_circle(**params: object) -> tuple[tuple[int, int], tuple[int, int]]:
        with Decode(uri=str(tmp_path / "anamorphic.mp4"), **params) as source:
            frames = list(source.frames())
        assert len(frames) == 3
        ys, xs = np.nonzero(frames[-1].image()[:, :, 1] > 128)
        return (frames[-1].width, frames[-1].height), (xs.max() - xs.min() + 1, ys.max() - ys.min() + 1)

    size, circle = frame_and_circle()
    assert size == (2 * round(stored_w * aspect / 2), 96)
    assert abs(circle[0] - circle[1]) <= 2, circle
    size, circle = frame_and_circle(square_pixels=False)
    assert size == (stored_w, 96) and abs(circle[0] - round(80 / aspect)) <= 2
