"""Targets of the analytics benchmarks (slow: ``pytest -m bench tests/bench/test_analytics_bench.py``;
the full tables: ``python -m tests.bench.intervals`` and ``python -m tests.bench.motion_gating``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.bench
pytest.importorskip("motmetrics", reason="needs py-motmetrics (test extra)")


@pytest.mark.parametrize("case", ["faces 720p", "faces 1080p", "persons 768x432"])
def test_detection_every_third_frame_doubles_fps_and_keeps_boxes_and_ids(shared_dir: Path, case: str) -> None:
    """Every 3rd frame against every frame: >= 2x FPS, >= 90 % of the boxes at IoU >= 0.5, no id switch.

    On the people clip the pose detector also fires for a few frames at a time on the table
    (scores 0.5-0.6, below ``new_track_score``: never tracked, so never carried between detections);
    those boxes are about 10 % of the clip's every-frame boxes, so there the share is taken over the
    boxes of tracked objects (both shares are in ``python -m tests.bench.intervals``)."""
    from tests.bench.intervals import cases, curve, format_rows

    name, pipeline, clip, detect, max_frames = next(c for c in cases() if c[0] == case)
    base, third = curve(pipeline, clip, detect, [1, 3], rounds=3, max_frames=max_frames)
    print(format_rows(name, [base, third]))
    assert third["speedup"] >= 2.0
    assert (third["matched"] if pipeline == "faces" else third["matched_tracked"]) >= 0.90
    assert third["id_switches"] == 0 and third["ids"] == base["ids"]


def test_motion_gating_on_a_mostly_still_clip(shared_dir: Path) -> None:
    """The bottle clip (bottles stand still; a hand moves some of them now and then): detection on
    under half of the frames, >= 2x FPS, every object the ungated run tracks found (>= 99 %)."""
    from tests.bench.motion_gating import format_row, measure

    result = measure("bottle-detection.mp4", rounds=3)
    print(format_row("bottle-detection.mp4", result))
    assert result["detected"] < 0.5
    assert result["speedup"] >= 2.0
    assert result["objects_found"] >= 0.99 * result["objects"]
