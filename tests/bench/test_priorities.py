"""The request-priority benchmark's checks (``python -m bench.priorities`` runs the full sweep):
one high-priority camera and 7 normal ones on a shared person detector, offered half and one and
a half times what the pipeline can take.  Generated scenes: runs on every machine.  Latency
checks need the machine to themselves: ``make test`` runs this file after the parallel part."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.priorities import run

pytestmark = pytest.mark.alone


def test_a_high_priority_camera_keeps_its_latency_under_overload(models_dir: Path, tmp_path: Path) -> None:
    """With priorities, camera 0's p99 latency at 1.5x load stays within 1.2x of its p99 at 0.5x
    and it drops nothing; without, its latency grows with the load; the normal cameras keep
    ``min_fps``; with camera 0 idle, priorities cost at most 5 % of the throughput."""
    lines: list[str] = []
    result = run("persons", seconds=6.0, min_fps=2.0, out=tmp_path, loads=(0.5, 1.5), log=lines.append)
    report = "\n".join(lines)
    print(f"\n{report}")
    checks = {c["check"]: c for c in result["checks"]}
    assert len(checks) == 5, report
    for name, c in checks.items():
        assert c["ok"], f"{name}: {c['value']:.2f}\n{report}"
    assert (tmp_path / "priorities.png").is_file() and (tmp_path / "priorities.json").is_file()
