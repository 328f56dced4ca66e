"""The table and the charts of a bench result."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import pytest

from bench.report import format_table, write_chart
from bench.targets import evaluate


def _mode(fps: float, p50: float | None = None, cams: int = 1) -> dict:
    out = {"fps": fps, "rounds": [fps * 0.98, fps, fps * 1.01], "fps_per_camera": [fps / cams] * cams,
           "cpu_util": 0.9}
    if p50 is not None:
        out.update(latency_p50_ms=p50, latency_p95_ms=p50 * 1.6)
    return out


@pytest.fixture()
def result() -> dict:
    res = {"pipeline": "ocr", "source": "/x/ticker.mp4", "width": 1280, "height": 720, "cameras": 1, "frames": 30,
           "rounds": 3, "cores": 2, "sets": ["text_detect.config={INFERENCE_PRECISION_HINT: f32}"],
           "modes": {"naive": _mode(2.0, 480), "hand-tuned": _mode(3.0, 900), "vapipe": _mode(3.5, 800),
                     "vapipe-unplanned": _mode(3.3, 850), "decode-alone": _mode(900.0),
                     "infer-alone": {**_mode(3.8), "detect_fps": 5.0, "region_fps": {"recognize": 40.0},
                                     "objects_per_frame": {"recognize": 6.0}},
                     "rapidocr": {**_mode(1.5, 700), "version": "rapidocr-onnxruntime 1.4.4"},
                     "vapipe-r1": _mode(2.5, 400), "vapipe-r2": _mode(3.2, 600)},
           "peers": {"rapidocr": {"description": "RapidOCR", "target": 3.0, "same_models": True}},
           "peers_skipped": {"mediapipe": "no peer interpreter"},
           "accuracy": {"vapipe": {"frames": 30, "lines": 100, "read": 97, "exact": 95, "accuracy": 0.97,
                                   "exact_accuracy": 0.95}}}
    res.update(evaluate(res))
    return res


def test_table_shows_modes_limit_ratios_and_targets(result: dict) -> None:
    text = format_table(result)
    assert text.splitlines()[0].startswith("ocr: ticker.mp4 1280x720, 1 camera(s) x 30 frames, 2 cores")
    assert "--set text_detect.config" in text.splitlines()[0]
    for mode in result["modes"]:
        assert any(line.startswith(f"{mode} ") for line in text.splitlines()), mode
    assert "recognize 40/s x 6.00 per frame" in text
    assert "rapidocr-onnxruntime 1.4.4: RapidOCR; the same model files as vapipe" in text
    assert "mediapipe:        not run: no peer interpreter" in text
    assert "target vapipe/rapidocr >= 3.0" in text and "BELOW TARGET" in text
    assert "lines read: vapipe" in text and "97/100" in text
    # every mode's rounds scale alike (0.98, 1, 1.01): each round's ratio is the ratio of the medians
    line = next(x for x in text.splitlines() if x.startswith("vapipe/naive "))
    assert line.endswith("1.75x   rounds 1.75 1.75 1.75; of medians 1.75x"), line


def test_chart_is_a_readable_png(result: dict, tmp_path: Path) -> None:
    path = tmp_path / "bench.png"
    assert write_chart(result, path) == str(path)
    img = cv2.imread(str(path))
    assert img is not None and img.shape == (550, 1400, 3)
    # not a blank canvas: bars, points and text
    assert (img < 200).mean() > 0.01


def test_chart_without_matplotlib_says_so(result: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.delitem(sys.modules, "bench.chart", raising=False)
    message = write_chart(result, tmp_path / "bench.png")
    assert "matplotlib" in message and "vapipe[bench]" in message
    assert not (tmp_path / "bench.png").exists()
