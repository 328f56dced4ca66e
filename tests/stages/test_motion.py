"""Motion detection and detection gating on generated clips (no shared assets)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.config import parse_config
from pipeline.frame import GATE, OVERLAY, STILL, Frame
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
from stages.motion import BOXES, Motion
from tests.stages.shapes import Mover, linear, make_clip

W, H = 320, 240


def yuv_frame(image: np.ndarray, seq: int, fps: int = 10) -> Frame:
    """A frame that keeps the decoder's YUV planes, as decoded frames do."""
    vf = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format="yuv420p")
    return Frame("cam", seq, W, H, pts=seq, time_base=Fraction(1, fps), av_frame=vf)


def scene(square_x: int | None = None, brightness: int = 100) -> np.ndarray:
    rng = np.random.default_rng(0)  # the same texture every frame
    image = np.clip(rng.normal(brightness, 6, (H, W, 1)), 0, 255).astype(np.uint8).repeat(3, axis=2)
    if square_x is not None:
        image[100:140, square_x:square_x + 40] = (30, 200, 240)
    return image


def run_motion(images: list[np.ndarray], **params: object) -> tuple[list[Frame], Motion]:
    with Motion(**params) as m:
        frames = [m(yuv_frame(img, i)) for i, img in enumerate(images)]
    return frames, m


def test_a_still_scene_closes_the_gate_except_for_refreshes() -> None:
    frames, m = run_motion([scene()] * 60, refresh_s=2.0, calibration_frames=5)
    gates = [f.attrs[(m.name, GATE)] for f in frames]
    assert gates[:5] == [True] * 5                     # calibrating
    assert [i for i, g in enumerate(gates) if g][5:] == [24, 44]  # every 2 s (20 frames) after the last open
    assert all(f.attrs[(m.name, STILL)] for f in frames[5:])
    assert not any(f.has_image for f in frames)        # only the decoder's Y plane was read
    assert m.counters() == {"frames": 60, "motion_frames": 0, "gate_open_frames": 7, "calibrations": 1}


def test_a_moving_object_opens_the_gate_with_its_region_in_source_pixels() -> None:
    images = [scene()] * 12 + [scene(20 + 8 * k) for k in range(20)]
    frames, m = run_motion(images, calibration_frames=5, draw=True)
    moving = frames[20]
    assert moving.attrs[(m.name, GATE)] and not moving.attrs[(m.name, STILL)]
    boxes = moving.attrs[(m.name, BOXES)]
    x = 20 + 8 * 8
    assert len(boxes) >= 1
    union = [boxes[:, 0].min(), boxes[:, 1].min(), boxes[:, 2].max(), boxes[:, 3].max()]
    assert union[0] <= x + 2 and union[2] >= x + 38 and union[1] <= 102 and union[3] >= 138
    assert union[0] >= x - 30 and union[3] <= 170  # around the square (and where it just was)
    assert len(moving.attrs[(m.name, OVERLAY)]) == len(boxes)
    assert not any(f.attrs[(m.name, GATE)] for f in frames[6:12])


def test_a_global_change_recalibrates_instead_of_reporting_motion() -> None:
    images = [scene()] * 15 + [scene(brightness=170)] * 20
    frames, m = run_motion(images, calibration_frames=4, refresh_s=100.0)
    assert m.counters()["calibrations"] == 2
    assert all(len(f.attrs[(m.name, BOXES)]) == 0 for f in frames)
    assert [f.attrs[(m.name, GATE)] for f in frames[15:21]] == [True] * 4 + [False] * 2


def test_a_source_whose_frame_size_changes_calibrates_again_at_the_new_size() -> None:
    """An image folder of mixed sizes, or a camera switched to another resolution."""
    with Motion(calibration_frames=3, refresh_s=100.0) as m:
        frames = [m(yuv_frame(scene(), i)) for i in range(8)]
        wide = np.ascontiguousarray(scene()[:H // 2])  # another shape (the same one would scale alike)
        vf = av.VideoFrame.from_ndarray(wide, format="bgr24").reformat(format="yuv420p")
        frames += [m(Frame("cam", 8 + i, W, H // 2, pts=8 + i, time_base=Fraction(1, 10), av_frame=vf))
                   for i in range(8)]
    gates = [f.attrs[(m.name, GATE)] for f in frames]
    assert m.counters()["calibrations"] == 2
    assert gates == [True] * 3 + [False] * 5 + [True] * 3 + [False] * 5
    assert all(len(f.attrs[(m.name, BOXES)]) == 0 for f in frames)


@pytest.mark.parametrize("exposure, found", [(100, True), (0, False)])
def test_in_a_dark_scene_the_threshold_follows_the_light(exposure: int, found: bool) -> None:
    """The moving-square scene at 30 % of the light: the square differs from the background
    by 24 luma levels instead of 80, under the threshold of 25 unless it is lowered (to 10)."""
    dark = [(img * 0.3).astype(np.uint8) for img in [scene(brightness=100)] * 12 + [scene(20 + 8 * k, 100)
                                                                                      for k in range(20)]]
    frames, m = run_motion(dark, calibration_frames=5, exposure=exposure)
    assert any(len(f.attrs[(m.name, BOXES)]) for f in frames[12:]) == found
    assert not any(len(f.attrs[(m.name, BOXES)]) for f in frames[5:12])  # still noise stays under it

def test_an_object_that_stops_becomes_background() -> None:
    images = [scene()] * 8 + [scene(20 + 8 * k) for k in range(10)] + [scene(92)] * 80
    frames, m = run_motion(images, calibration_frames=5, alpha=0.05, refresh_s=100.0)
    assert frames[20].attrs[(m.name, GATE)]
    assert not any(f.attrs[(m.name, GATE)] for f in frames[-20:])


def test_detection_runs_only_where_the_gate_is_open(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "still.mp4", [Mover("blue", linear((60, 120), (6, 0), first=30, last=45))], 90)
    text = """
pipelines:
  gated:
    stages:
      - {name: decode, type: decode}
      - {name: motion, type: motion, params: {refresh_s: 3.0}}
      - {name: faces, type: detect, params: {model: mediapipe/face_detection_short_range, decoder: blazeface}}
      - {name: track, type: track}
"""
    graph = build_graph(parse_config(text, "g.yaml").get("gated"), "g.yaml")
    summary = run_pipeline(graph, [str(clip)], RunOptions(output_dir=tmp_path, handle_signals=False))
    counts = summary.sources[0].counters
    assert summary.error is None
    assert counts["faces"]["frames_inferred"] == counts["motion"]["gate_open_frames"]
    # calibration (10 frames), the square moving (frames 30-45 and its fading trace) and refreshes
    assert 20 <= counts["motion"]["gate_open_frames"] <= 45
    assert counts["faces"]["frames_passed"] == 90 - counts["faces"]["frames_inferred"]


@pytest.mark.parametrize("field, value", [("threshold", 0), ("alpha", 0), ("refresh_s", 0), ("height", 8),
                                          ("blur", 4)])
def test_bad_parameters_are_rejected(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        Motion(**{field: value})
