"""A mode's frame rate (bench/measure.py)."""

from __future__ import annotations

import pytest

from bench.measure import Clock, camera_result, mode_result


def test_cameras_that_end_at_different_times_count_over_the_whole_run() -> None:
    # camera 0 outruns camera 1: 11 results in 1 s, then camera 1's 11 take 2 s in all
    cams = [camera_result(11, 10.0, None), camera_result(11, 5.0, None)]
    assert mode_result(cams, None, None)["fps"] == 15.0          # each camera's own rate, summed
    assert mode_result(cams, None, None, [(0.0, 1.0), (0.0, 2.0)])["fps"] == 10.5   # 21 frames after the first, 2 s


def test_one_camera_keeps_its_own_rate() -> None:
    assert mode_result([camera_result(11, 10.0, None)], None, None, [(3.0, 4.0)])["fps"] == 10.0


def test_the_clock_gives_the_whole_run_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    times = iter([0.0, 0.5, 1.0,            # camera 0: 3 results in 1 s
                  0.0, 1.0, 2.0, 3.0])      # camera 1: 4 results in 3 s
    monkeypatch.setattr("bench.measure.time.perf_counter", lambda: next(times))
    clock = Clock(2)
    for cam, n in ((0, 3), (1, 4)):
        for _ in range(n):
            clock.add(cam, started=0.0)
    res = clock.result()
    assert [c["fps"] for c in res["cameras"]] == [2.0, 1.0]
    assert res["fps"] == 2.0                # 7 results, 6 after the first, over 3 s
