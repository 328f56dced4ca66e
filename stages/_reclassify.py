"""When a region model runs again on a tracked object (``classify.reclassify``).

Decisions are made when a frame is started and results are stored when it
completes; frames complete in the order they were started, so a frame that
reuses a result always finds the result of the run scheduled before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ReclassifyCache", "reclassified_share", "ONCE_PER_TRACK_SHARE"]

#: the share of a frame's tracked objects a ``reclassify: 0`` model runs on, for planning:
#: once per track, tracks lasting a few seconds
ONCE_PER_TRACK_SHARE = 0.02


def reclassified_share(every: int) -> float:
    """The share of a frame's objects a region model with ``reclassify: every`` runs on
    (what the thread planner multiplies objects per frame by)."""
    if every == 0:
        return ONCE_PER_TRACK_SHARE
    return 1.0 / every


class ReclassifyCache:
    """Per (source, track id): the frame of the latest scheduled run and the latest result
    with the object's box at that run (and the tracker's estimate of it, if known).
    ``every`` N >= 2: run again N frames after the last run, except that a track's second run comes ``track_id % N`` frames early, so that objects
    found together (and the detector, which runs on the same frames) spread their
    inferences over the N frames instead of all landing on one; 0: run once per track."""

    def __init__(self, every: int) -> None:
        if every == 1 or every < 0:
            raise ValueError(f"ReclassifyCache needs every = 0 or >= 2, got {every}")
        self.every = every
        self._scheduled: dict[tuple[str, int], int] = {}
        self._results: dict[tuple[str, int], tuple[Any, np.ndarray, np.ndarray | None]] = {}

    def due(self, source: str, track_id: int, seq: int) -> bool:
        """True (and the run is recorded) if the object's model must run on frame ``seq``."""
        key = (source, track_id)
        last = self._scheduled.get(key)
        if last is not None and (self.every == 0 or seq - last < self.every):
            return False
        self._scheduled[key] = seq if last is not None or self.every == 0 else seq - track_id % self.every
        return True

    def store(self, source: str, track_id: int, result: Any, box: np.ndarray, estimate: np.ndarray | None) -> None:
        """``result`` of a run on the object at ``box``; ``estimate``: the tracker's box for it then."""
        self._results[(source, track_id)] = (result, np.array(box, np.float64),
                                             None if estimate is None else np.array(estimate, np.float64))

    def carry_boxes(self, source: str, track_id: int, box: np.ndarray,
                    estimate: np.ndarray | None) -> tuple[Any, np.ndarray, np.ndarray] | None:
        """The latest result with the two boxes to carry it by, to the object now at ``box``
        (tracker's estimate ``estimate``): the tracker's estimates then and now when both are
        known (they move with the object, where a detected box after a predicted one jumps by the
        prediction's error), else the boxes themselves; None if there is no result (its run failed)."""
        kept = self._results.get((source, track_id))
        if kept is None:
            return None
        result, old_box, old_estimate = kept
        if old_estimate is not None and estimate is not None:
            return result, old_estimate, np.asarray(estimate, np.float64)
        return result, old_box, np.asarray(box, np.float64)

    def forget(self, source: str, track_ids: list[int]) -> None:
        """Drop what is kept for tracks that ended."""
        for tid in track_ids:
            self._scheduled.pop((source, tid), None)
            self._results.pop((source, tid), None)
