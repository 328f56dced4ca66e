"""The request-priority benchmark's checks (``python -m bench.priorities`` runs the full sweep):
one high-priority camera and 7 normal ones on a shared person detector, offered half and one and
a half times what the pipeline can take.  Generated scenes: runs on every machine.  Latency
checks need the machine to themselves: ``make test`` runs this file after the parallel part.

``make test`` asserts the checks that hold on a busy shared machine (``robust`` in
:func:`bench.priorities.checks`): the high camera drops nothing under overload, its p99 there is
at most a quarter of what it is without priorities, which grows many times with the load, and
every normal camera keeps its minimum rate.  The ratios held to tight bounds (camera 0's p99 at
1.5x within 1.2x of its p99 at 0.5x; the rate with camera 0 idle within 0.95 of the rate without
priorities) are printed there, and asserted by ``make bench`` (``-m bench``).

A measurement that misses a check is taken once more, whole, and every check must be met in one
of the two: a p99 of about 1,300 frames on a shared 2-core machine moves with the host's own
stalls, and the same check missed twice is a regression, not a noisy minute."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.priorities import IDLE_ROUNDS, run

ATTEMPTS = 2


def _measure(out: Path, idle_rounds: int) -> tuple[list[dict[str, Any]], str]:
    lines: list[str] = []
    result = run("persons", seconds=6.0, min_fps=2.0, out=out, loads=(0.5, 1.5), log=lines.append,
                 idle_rounds=idle_rounds)
    assert (out / "priorities.png").is_file() and (out / "priorities.json").is_file()
    return result["checks"], "\n".join(lines)


def _met_in_one_attempt(tmp_path: Path, idle_rounds: int, robust_only: bool) -> None:
    missed: dict[str, list[float]] = {}  # check -> its values in the measurements that missed it
    met: set[str] = set()
    for attempt in range(1, ATTEMPTS + 1):
        found, report = _measure(tmp_path / f"attempt-{attempt}", idle_rounds)
        print(f"\nattempt {attempt}\n{report}")
        checks = {c["check"]: c for c in found if c["robust"] or not robust_only}
        assert len(checks) == (4 if robust_only else 6), report
        met |= {name for name, c in checks.items() if c["ok"]}
        for name, c in checks.items():
            if not c["ok"]:
                missed.setdefault(name, []).append(round(c["value"], 2))
        if met == set(checks):
            break
    never = {name: values for name, values in missed.items() if name not in met}
    assert not never, f"missed in all {ATTEMPTS} measurements: {never}\n{report}"


@pytest.mark.alone
def test_a_high_priority_camera_goes_first_under_overload(models_dir: Path, tmp_path: Path) -> None:
    """With priorities camera 0 drops nothing at 1.5x load and its p99 there is at most a quarter
    of its p99 without, which grows with the load; the normal cameras keep ``min_fps``."""
    _met_in_one_attempt(tmp_path, idle_rounds=0, robust_only=True)


@pytest.mark.bench
def test_a_high_priority_camera_keeps_its_latency_under_overload(models_dir: Path, tmp_path: Path) -> None:
    """Every check of the sweep, the tight ratios too: camera 0's p99 at 1.5x load within 1.2x of
    its p99 at 0.5x; with camera 0 idle, priorities cost at most 5 % of the throughput."""
    _met_in_one_attempt(tmp_path, idle_rounds=IDLE_ROUNDS, robust_only=False)
