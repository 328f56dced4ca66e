"""Medians over rounds, and a failing mode reported in one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.plan import BenchError, BenchPlan, sweep_mode, sweep_requests
from bench.runner import ROOT, spawn_worker, summarise


def test_summarise_takes_medians_per_camera_and_per_model() -> None:
    runs = [{"fps": f, "cameras": [{"frames": 10, "fps": f / 2}, {"frames": 10, "fps": f / 2 + k}],
             "latency_p50_ms": 10.0 * k, "cpu_util": 0.5 + k / 10, "seconds": 3.0,
             "region_fps": {"recognize": 40.0 + k}, "objects_per_frame": {"recognize": 6.0},
             "threads": f"plan {k}"} for k, f in enumerate([30.0, 10.0, 20.0])]
    s = summarise(runs)
    assert s["fps"] == 20.0 and s["rounds"] == [30.0, 10.0, 20.0]
    assert s["fps_per_camera"] == [10.0, 12.0] and s["frames_per_camera"] == [10, 10]
    assert s["latency_p50_ms"] == 10.0 and s["cpu_util"] == 0.6
    assert s["region_fps"] == {"recognize": 41.0} and s["objects_per_frame"] == {"recognize": 6.0}
    assert s["threads"] == "plan 2"           # the last round's description
    assert "latency_p95_ms" not in s


def test_sweep_mode_names() -> None:
    assert sweep_mode(3) == "vapipe-r3" and sweep_requests("vapipe-r3") == 3
    assert sweep_requests("vapipe") is None and sweep_requests("vapipe-rx") is None


def test_failing_mode_is_one_line_naming_it(tmp_path: Path) -> None:
    plan = BenchPlan(pipeline="persons", config=str(ROOT / "pipelines.yaml"), source=str(tmp_path / "none.mp4"),
                     frames=5, width=64, height=64, out=str(tmp_path))
    with pytest.raises(BenchError) as info:
        spawn_worker("naive", plan)
    msg = str(info.value)
    assert msg.startswith("bench mode 'naive' failed: ") and "cannot open" in msg and "\n" not in msg
    with pytest.raises(BenchError, match="unknown bench mode 'turbo'"):
        spawn_worker("turbo", plan)


@pytest.mark.parametrize("fps, frames, expected", [(300.0, 75, 300), (30.0, 75, 75), (3000.0, 75, 600)])
def test_a_run_too_short_on_this_machine_is_lengthened(monkeypatch, tmp_path: Path, fps: float, frames: int,
                                                         expected: int) -> None:
    import bench.runner as runner

    seen = []
    monkeypatch.setattr("pipeline.videofile.count_frames", lambda source: (frames, 64, 48))
    monkeypatch.setattr(runner, "spawn_worker", lambda mode, plan: seen.append((mode, plan)) or {"fps": fps})
    got, run_s = runner.frames_for_run("persons", str(tmp_path / "clip.mp4"), 4, frames, 4.0)
    assert (got, run_s) == (expected, pytest.approx(4 * frames / fps))  # at most 8 times longer, never shorter
    (mode, plan), = seen
    assert mode == "vapipe" and plan.cameras == 4 and plan.frames == frames and not plan.loop
