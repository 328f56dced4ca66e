"""Run statistics: per-source frame counts and rates, per-stage latencies."""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["LatencyStats", "SourceStats", "RunSummary", "LATENCY_BUCKETS_MS"]

#: upper bounds (ms) of the cumulative latency histogram every LatencyStats keeps: 1 ms to 2 s
LATENCY_BUCKETS_MS = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2000.0)


class LatencyStats:
    """Latency samples in milliseconds: the most recent ``keep`` in a preallocated ring
    (memory stays flat however long a camera runs); ``count`` counts all.  Every sample
    is also counted in :data:`LATENCY_BUCKETS_MS` (``buckets[i]``: samples <= bound i;
    the last entry counts those above 2 s) with their sum ``total_ms``, over the whole run."""

    def __init__(self, keep: int = 20000) -> None:
        self._ring = np.zeros(keep, np.float64)
        self.count = 0
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.total_ms = 0.0
        self._frozen: dict[str, float] | None = None

    def freeze(self) -> None:
        """Keep :meth:`summary` as it is now and drop the samples (160 KB at the default
        ``keep``), for a finished run kept for its records; count, buckets and total stay."""
        if self._frozen is None:
            self._frozen = self.summary()
            self._ring = np.zeros(0, np.float64)

    @property
    def frozen(self) -> bool:
        """:meth:`freeze` has run: the summary no longer changes."""
        return self._frozen is not None

    def add(self, ms: float) -> None:
        if self._frozen is not None:
            return
        self._ring[self.count % len(self._ring)] = ms
        self.count += 1
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        self.total_ms += ms

    def samples(self) -> np.ndarray:
        """The kept samples (ms), oldest first (a copy); none once frozen."""
        n = len(self._ring)
        if not n:
            return self._ring.copy()
        if self.count <= n:
            return self._ring[:self.count].copy()
        head = self.count % n
        return np.concatenate([self._ring[head:], self._ring[:head]])

    def summary(self, skip: int = 0) -> dict[str, float]:
        """Count, mean and percentiles of the kept samples, leaving out the ``skip`` oldest (once
        frozen: the summary at that moment)."""
        if self._frozen is not None:
            return dict(self._frozen)
        a = self.samples()[skip:] if skip else self._ring[:min(self.count, len(self._ring))]
        if not len(a):
            return {"count": 0, "mean_ms": 0.0, "p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0}
        p50, p95, p99 = np.percentile(a, [50, 95, 99])
        return {"count": self.count, "mean_ms": float(a.mean()), "p50_ms": float(p50), "p95_ms": float(p95),
                "p99_ms": float(p99)}


@dataclass
class SourceStats:
    source: str
    total: int | None = None
    decoded: int = 0
    processed: int = 0
    dropped: int = 0
    drop_times: list[float] = field(default_factory=list)  # monotonic times of the latest drops, sorted
    skipped_errors: int = 0
    first_out: float | None = None
    last_out: float | None = None
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    error: str | None = None
    decode_errors: int = 0
    missing_frames: int = 0  # frames a source announced (file header) that never came: the file ends early
    events: dict[str, int] = field(default_factory=dict)      # live-source state changes by state
    reconnect_s: list[float] = field(default_factory=list)    # down time of each reconnect
    decoder_priority_changes: int = 0  # times the decoder went to a lower CPU priority or back (pipeline/priority.py)
    priority: dict[str, Any] | None = None  # level, min_fps, waits, promoted on shared models (pipeline/arbiter.py)
    state: str | None = None  # last state a live source reported (connecting, streaming, ...)
    reason: str = ""  # why it is in that state (a stream that ended, a connection refused); "" when streaming
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)  # Stage.counters() by stage name, at the end
    last_seq: int | None = None  # the highest seq of the frames that left the pipeline
    latency: LatencyStats = field(default_factory=LatencyStats)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    down_since: float | None = field(default=None, repr=False)  # monotonic time a live source went down

    def note_state(self, state: str, reason: str | None) -> None:
        """A live source reported ``state`` (``reason``: why, if it said): count it, and time
        each stretch from going down (stalled, ended) to streaming again as a reconnect."""
        with self.lock:
            self.state = state
            self.reason = "" if state == "streaming" else (reason if reason is not None else self.reason)
            self.events[state] = self.events.get(state, 0) + 1
            if state == "streaming" and self.down_since is not None:  # also when the first retry worked
                self.reconnect_s.append(time.monotonic() - self.down_since)
                self.down_since = None
            elif state in ("stalled", "ended") and self.down_since is None:
                self.down_since = time.monotonic()

    @property
    def reconnects(self) -> int:
        """Reconnections of a live source: connection attempts after the first, whether the
        camera was back at once or only after backoff waits."""
        return max(0, self.events.get("connecting", 0) - 1)

    def frame_out(self, captured_ns: int, seq: int | None = None) -> None:
        now = time.monotonic()
        with self.lock:
            self.processed += 1
            if seq is not None and (self.last_seq is None or seq > self.last_seq):
                self.last_seq = seq
            if self.first_out is None:
                self.first_out = now
            self.last_out = now
        self.latency.add((time.monotonic_ns() - captured_ns) / 1e6)

    def dropped_after(self, t: float) -> int:
        """Frames dropped at monotonic time ``t`` or later (from the latest 1,000 drops of
        each queue)."""
        return len(self.drop_times) - bisect.bisect_left(self.drop_times, t)

    @property
    def fps(self) -> float:
        """Steady-state rate: frames between the first and the last output."""
        if self.processed < 2 or self.first_out is None or self.last_out is None or self.last_out <= self.first_out:
            return 0.0
        return (self.processed - 1) / (self.last_out - self.first_out)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "frames": self.processed, "decoded": self.decoded, "fps": round(self.fps, 2),
                "dropped": self.dropped, "skipped_errors": self.skipped_errors, "decode_errors": self.decode_errors,
                "missing_frames": self.missing_frames,
                "events": dict(self.events), "reconnect_s": [round(x, 3) for x in self.reconnect_s],
                "decoder_priority_changes": self.decoder_priority_changes, "priority": self.priority,
                "last_seq": self.last_seq,
                "latency": {k: round(v, 2) for k, v in self.latency.summary().items()}, "error": self.error,
                "counters": self.counters}


@dataclass
class RunSummary:
    pipeline: str
    mode: str
    sources: list[SourceStats]
    stages: dict[str, LatencyStats]
    wall_s: float
    error: str | None = None
    stopped_by_signal: bool = False
    outputs: list[str] = field(default_factory=list)
    threads: str | None = None  # the thread plan, one line per runtime (pipeline/threads.py)
    plan: dict[str, Any] | None = None        # the plan's numbers: costs, shares, prediction
    plan_check: dict[str, Any] | None = None  # how the run matched the plan (pipeline/plan_check.py)
    plan_check_text: str | None = None

    @property
    def total_fps(self) -> float:
        return sum(s.fps for s in self.sources)

    def as_dict(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "mode": self.mode, "wall_s": round(self.wall_s, 3),
                "total_fps": round(self.total_fps, 2), "sources": [s.as_dict() for s in self.sources],
                "stages": {n: {k: round(v, 3) for k, v in st.summary().items()} for n, st in self.stages.items()},
                "error": self.error, "stopped_by_signal": self.stopped_by_signal, "outputs": self.outputs,
                "threads": self.threads, "plan": self.plan, "plan_check": self.plan_check}

    def table(self) -> str:
        lines = [f"pipeline {self.pipeline} ({self.mode}), {self.wall_s:.1f} s"]
        if self.threads:
            lines.append(self.threads)
        if self.plan_check_text:
            lines.append(self.plan_check_text)
        lines.append(f"{'source':<40} {'frames':>7} {'fps':>8} {'dropped':>8} {'p95 e2e ms':>11}")
        for s in self.sources:
            lat = s.latency.summary()
            lines.append(f"{_short(s.source, 40):<40} {s.processed:>7} {s.fps:>8.1f} {s.dropped:>8} "
                         f"{lat['p95_ms']:>11.1f}")
            notes = []
            if s.decode_errors or s.skipped_errors:
                notes.append(f"decode errors {s.decode_errors}, frames skipped on stage errors {s.skipped_errors}")
            if s.missing_frames:
                notes.append(f"ended after {s.decoded} of the {s.total} frames the source announced "
                             "(file cut short?)")
            if s.events:
                notes.append("events " + ", ".join(f"{k} {v}" for k, v in s.events.items()))
            if s.reconnect_s:
                notes.append(f"reconnected {len(s.reconnect_s)}x (down {min(s.reconnect_s):.1f}-"
                             f"{max(s.reconnect_s):.1f} s)")
            notes.extend(f"{stage}: {_flat(counts)}" for stage, counts in s.counters.items() if _flat(counts))
            if s.error:
                notes.append(f"error: {s.error}")
            lines.extend(f"  {n}" for n in notes)
        lines.append(f"{'stage':<40} {'frames':>7} {'mean ms':>8} {'p95 ms':>8}")
        for name, st in self.stages.items():
            sm = st.summary()
            lines.append(f"{name:<40} {sm['count']:>7} {sm['mean_ms']:>8.2f} {sm['p95_ms']:>8.2f}")
        for out in self.outputs:
            lines.append(f"output: {out}")
        return "\n".join(lines)


def _flat(value: Any, prefix: str = "") -> str:
    """Nested counters on one line: ``lines.door.in.person=3 lines.door.out.person=1``."""
    if isinstance(value, dict):
        parts = [_flat(v, f"{prefix}.{k}" if prefix else str(k)) for k, v in value.items()]
        return " ".join(p for p in parts if p)
    return f"{prefix}={value}"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]
