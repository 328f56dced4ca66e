"""The request-priority benchmark's checks (``python -m bench.priorities`` runs the full sweep):
one high-priority camera and 7 normal ones on a shared person detector, offered half and one and
a half times what the pipeline can take.  Generated scenes: runs on every machine.  Latency
checks need the machine to themselves: ``make test`` runs this file after the parallel part.

A measurement that misses a check is taken once more, whole, and every check must be met in one
of the two: a p99 of about 1,300 frames on a shared 2-core machine moves with the host's own
stalls (camera 0's p99 ratio was 0.96-1.26 for the same code within an hour on one such machine;
one fresh-clone run missed the p99 ratio in its first measurement, 1.33, and the idle throughput
in its second, 0.93 with rounds from 196 to 244 fps, meeting each in the other), and the same
check missed twice is a regression, not a noisy minute."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.priorities import run

pytestmark = pytest.mark.alone

ATTEMPTS = 2


def _measure(out: Path) -> tuple[dict[str, Any], str]:
    lines: list[str] = []
    result = run("persons", seconds=6.0, min_fps=2.0, out=out, loads=(0.5, 1.5), log=lines.append)
    return result, "\n".join(lines)


def test_a_high_priority_camera_keeps_its_latency_under_overload(models_dir: Path, tmp_path: Path) -> None:
    """With priorities, camera 0's p99 latency at 1.5x load stays within 1.2x of its p99 at 0.5x
    and it drops nothing after the warm-up; without, its latency grows with the load; the normal
    cameras keep ``min_fps``; with camera 0 idle, priorities cost at most 5 % of the throughput."""
    missed: dict[str, list[float]] = {}  # check -> its values in the measurements that missed it
    met: set[str] = set()
    for attempt in range(1, ATTEMPTS + 1):
        out = tmp_path / f"attempt-{attempt}"
        result, report = _measure(out)
        print(f"\nattempt {attempt}\n{report}")
        checks = {c["check"]: c for c in result["checks"]}
        assert len(checks) == 5, report
        met |= {name for name, c in checks.items() if c["ok"]}
        for name, c in checks.items():
            if not c["ok"]:
                missed.setdefault(name, []).append(round(c["value"], 2))
        if met == set(checks):
            break
    never = {name: values for name, values in missed.items() if name not in met}
    assert not never, f"missed in all {ATTEMPTS} measurements: {never}\n{report}"
    assert (out / "priorities.png").is_file() and (out / "priorities.json").is_file()
