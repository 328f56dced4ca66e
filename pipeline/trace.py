"""Timeline traces in the Chrome trace-event format (open in Perfetto or chrome://tracing).

One process per camera, one track (thread) per stage; inference stages get
one track per request lane, so overlapping frames in flight are visible side
by side.  Times are microseconds of the monotonic clock since the run started.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["Tracer"]


class Tracer:
    """Collects complete-event slices; thread-safe; written once at the end."""

    def __init__(self) -> None:
        self._t0 = time.perf_counter_ns()
        self._events: list[dict[str, Any]] = []
        self._tracks: dict[tuple[int, str], int] = {}
        self._processes: dict[str, int] = {}
        self._lock = threading.Lock()

    def now(self) -> int:
        """Current time in trace units (ns since the tracer started)."""
        return time.perf_counter_ns() - self._t0

    def _ids(self, camera: str, track: str) -> tuple[int, int]:
        pid = self._processes.get(camera)
        if pid is None:
            pid = self._processes[camera] = len(self._processes) + 1
            self._events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": camera}})
        tid = self._tracks.get((pid, track))
        if tid is None:
            tid = self._tracks[(pid, track)] = len(self._tracks) + 1
            self._events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": track}})
            self._events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                                 "args": {"sort_index": tid}})
        return pid, tid

    def slice(self, camera: str, track: str, name: str, start_ns: int, end_ns: int, **args: Any) -> None:
        """Record ``name`` on ``track`` of ``camera`` from start to end (trace units)."""
        with self._lock:
            pid, tid = self._ids(camera, track)
            self._events.append({"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": start_ns / 1000,
                                 "dur": max(0, end_ns - start_ns) / 1000, "args": args})

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(json.dumps({"traceEvents": self.events(), "displayTimeUnit": "ms"}), encoding="utf-8")
        tmp.replace(path)
        return path


class LaneAllocator:
    """Gives each frame in flight the lowest free lane (one trace track per lane)."""

    def __init__(self) -> None:
        self._busy: set[int] = set()

    def take(self) -> int:
        lane = 0
        while lane in self._busy:
            lane += 1
        self._busy.add(lane)
        return lane

    def give(self, lane: int) -> None:
        self._busy.discard(lane)
