"""Ticker clips carry the ground truth of every frame they show."""

from __future__ import annotations

import json
from pathlib import Path

from bench.clips import ticker_clip
from pipeline.videofile import count_frames
from stages.testsrc import TickerScene
from tests.bench.conftest import OCR_FRAMES


def test_ticker_clip_and_truth(ticker: tuple[Path, Path]) -> None:
    clip, truth = ticker
    assert count_frames(str(clip)) == (OCR_FRAMES, 640, 360)
    data = json.loads(truth.read_text())
    assert len(data["frames"]) == OCR_FRAMES and data["source"].startswith("testsrc://ticker?width=640&height=360")
    scene = TickerScene(640, 360, fps=25.0, seed=0)
    for seq in (0, OCR_FRAMES - 1):
        lines = scene.render(seq)[1]
        assert [ln["text"] for ln in data["frames"][seq]] == [ln.text for ln in lines]
        for got, line in zip(data["frames"][seq], lines):
            assert got["box"] == list(line.box)
            assert 0 <= got["box"][0] < got["box"][2] <= 640 and 0 <= got["box"][1] < got["box"][3] <= 360
    assert ticker_clip(OCR_FRAMES, 640, 360, folder=clip.parent) == (clip, truth)   # cached
