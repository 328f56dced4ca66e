"""The synthetic ``testsrc://`` video patterns."""

from __future__ import annotations

import numpy as np
import pytest

from stages.testsrc import (PATTERNS, BarsScene, NoiseScene, TickerScene, fair_to_read, iter_frames, make_scene,
                            open_testsrc, parse_testsrc, random_text)


def test_parse() -> None:
    assert parse_testsrc("testsrc://ticker") == ("ticker", {})
    pattern, opts = parse_testsrc("testsrc://ticker?width=640&height=480&fps=25&frames=200&seed=1")
    assert pattern == "ticker"
    assert opts == {"width": 640, "height": 480, "fps": 25.0, "frames": 200, "seed": 1}
    assert parse_testsrc("testsrc://BARS?fps=12.5") == ("bars", {"fps": 12.5})


@pytest.mark.parametrize("uri, message", [
    ("testsrc://smpte", "valid: ticker, bars, noise"),
    ("testsrc://ticker?colour=red", "unknown option 'colour'"),
    ("testsrc://ticker?width=wide", "not a valid int"),
    ("testsrc://ticker?fps=0", "out of range; valid: 1 or more"),
    ("testsrc://bars?frames=-2", "out of range; valid: 0 or more"),
    ("rtsp://ticker", "not a testsrc"),
])
def test_parse_errors(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_testsrc(uri)


def test_open_and_iterate() -> None:
    scene, frames = open_testsrc("testsrc://ticker?width=640&height=480&seed=3&frames=4")
    assert isinstance(scene, TickerScene) and frames == 4 and (scene.width, scene.height) == (640, 480)
    images = list(iter_frames("testsrc://bars?width=320&height=240&frames=3"))
    assert [seq for seq, _ in images] == [0, 1, 2]
    assert all(img.shape == (240, 320, 3) and img.dtype == np.uint8 for _, img in images)
    assert set(PATTERNS) == {"ticker", "bars", "noise"}
    scene, opts = make_scene("testsrc://noise?fps=10&frames=7&seed=2")
    assert isinstance(scene, NoiseScene) and scene.fps == 10.0 and scene.seed == 2 and opts["frames"] == 7


def test_ticker_is_deterministic() -> None:
    a, lines_a = TickerScene(seed=5).render(17)
    b, lines_b = TickerScene(seed=5).render(17)
    np.testing.assert_array_equal(a, b)
    assert [(l.text, l.box) for l in lines_a] == [(l.text, l.box) for l in lines_b]
    c, _ = TickerScene(seed=6).render(17)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("size", [(1280, 720), (640, 480)])
def test_ticker_ground_truth(size: tuple[int, int]) -> None:
    w, h = size
    scene = TickerScene(w, h, seed=2)
    assert scene.fps == 25.0
    for seq in (0, 40, 97):
        img, lines = scene.render(seq)
        assert img.shape == (h, w, 3) and img.dtype == np.uint8
        assert len(lines) >= 3
        boxes = np.array([l.box for l in lines])
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= w).all() and (boxes[:, 3] <= h).all()
        assert (boxes[:, 3] - boxes[:, 1] >= 20).all()                 # readable text height
        for line in lines:
            assert line.text.strip() and fair_to_read(line.text)
            np.testing.assert_array_equal(line.quad[0], line.box[:2])
            np.testing.assert_array_equal(line.quad[2], line.box[2:])
            x1, y1, x2, y2 = (int(v) for v in line.box)
            assert img[y1:y2, x1:x2].std() > 20                         # there is ink in the box
        for i in range(len(boxes)):                                     # lines never overlap
            for j in range(i + 1, len(boxes)):
                a, b = boxes[i], boxes[j]
                assert min(a[2], b[2]) <= max(a[0], b[0]) or min(a[3], b[3]) <= max(a[1], b[1])


def test_ticker_lines_move() -> None:
    scene = TickerScene(seed=4)
    first = {l.text: l.box for l in scene.render(0)[1]}
    later = {l.text: l.box for l in scene.render(5)[1]}
    common = set(first) & set(later)
    assert common and any(first[t] != later[t] for t in common)
    horizontal = any(first[t][1] == later[t][1] and first[t][0] != later[t][0] for t in common)
    vertical = any(first[t][0] == later[t][0] and first[t][1] != later[t][1] for t in common)
    assert horizontal and vertical


def test_text_mix() -> None:
    import random

    rng = random.Random(0)
    texts = [random_text(rng) for _ in range(300)]
    assert any("$" in t for t in texts) and any("/" in t or "-" in t for t in texts)
    assert any(t.isupper() for t in texts) and any(any(c.islower() for c in t) for t in texts)
    assert all(fair_to_read(t) for t in texts)
    assert not fair_to_read("OPEN 24 HOURS") and not fair_to_read("$89.99") and fair_to_read("OPEN LATE")


@pytest.mark.parametrize("cls", [BarsScene, NoiseScene])
def test_plain_patterns(cls: type) -> None:
    scene = cls(320, 240, seed=1)
    a, lines = scene.render(0)
    b, _ = scene.render(5)
    assert a.shape == (240, 320, 3) and a.dtype == np.uint8 and lines == []
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, cls(320, 240, seed=1).render(0)[0])
