"""JSON Lines sink: one record per frame, plus event lines.

Frame record (one line, UTF-8)::

    {"source": str, "seq": int, "pts_time": float | null,   # seconds of source time
     "width": int, "height": int,                           # source pixels
     "objects": [{"label": str, "score": float,
                  "box": [x1, y1, x2, y2],                  # source pixels
                  "track_id": int | null,                   # null: not tracked
                  "keypoints": [[x, y], ...],               # only when present
                  "attributes": {...}}, ...]}

Landmark arrays (``attributes["landmarks"]``, e.g. 468 face-mesh points) are
large, so by default they are left out and replaced by their count
(``"landmarks": 468``); ``include_landmarks=True`` writes the points as
nested lists (``[[x, y], ...]``, or ``[x, y, z]`` rows when the array has them).

Event line (:meth:`Metadata.write_event`)::

    {"event": str, "source": str, "time": float,            # Unix time, seconds
     ...caller's fields}

Lines are flushed to the OS every ``flush_every`` frame records (events:
always) and on :meth:`Metadata.close`, so readers can follow the file while it
grows.  Non-finite floats are written as null (strict JSON).  Thread-safe:
events may come from another thread than frames.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import IO, Any, ClassVar

import numpy as np
from pydantic import Field

from pipeline.frame import Detections, Frame
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage

from ._paths import resolve_output

__all__ = ["Metadata"]


class Metadata(Stage):
    """Writes per-frame detections as JSON Lines (sink that passes frames on)."""

    kind: ClassVar[str] = "sink"

    class Params(StageParams):
        path: str = Field("{output}/{source}.jsonl", description="output file template: {output}, {source}, {name}")
        include_landmarks: bool = Field(False, description="write attributes['landmarks'] points instead of "
                                        "their count")
        flush_every: int = Field(1, ge=1, description="flush after this many frame records")
        append: bool = Field(False, description="add to an existing file instead of starting it anew (a camera "
                             "that continues where an earlier run stopped)")

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.output_dir: Path | None = None  # set by the runtime
        self.path: Path | None = None
        self.records_written = 0
        self._file: IO[str] | None = None
        self._pending = 0
        self._started = False  # the file was created in this open/close cycle
        self._lock = threading.RLock()

    def open(self) -> None:
        with self._lock:
            self.close()
            self.records_written = 0
            self._started = False

    def process(self, frame: Frame) -> Frame | None:
        record = {
            "source": frame.source_id,
            "seq": int(frame.seq),
            "pts_time": frame.pts_time,
            "width": int(frame.width),
            "height": int(frame.height),
            "objects": self._objects(frame.detections),
        }
        with self._lock:
            self._write(record, flush=False)
            self.records_written += 1
        return frame

    def write_event(self, kind: str, **fields: Any) -> None:
        """Write ``{"event": kind, "source", "time", **fields}`` and flush it."""
        record = {"event": kind, "source": self.source_id, "time": time.time(), **fields}
        with self._lock:
            self._write(record, flush=True)

    def close(self) -> None:
        """Flush and close the file; safe to call more than once."""
        with self._lock:
            f, self._file = self._file, None
            if f is not None:
                try:
                    f.flush()
                finally:
                    f.close()

    # internals ------------------------------------------------------------------
    def _objects(self, det: Detections) -> list[dict[str, Any]]:
        if not self.params.include_landmarks and any("landmarks" in a for a in det.attributes):
            slim = [{k: v for k, v in a.items() if k != "landmarks"} for a in det.attributes]
            records = Detections(xyxy=det.xyxy, score=det.score, label=det.label, track_id=det.track_id,
                                 keypoints=det.keypoints, attributes=slim).to_records()
            for rec, a in zip(records, det.attributes):
                if "landmarks" in a:
                    rec["attributes"]["landmarks"] = _count(a["landmarks"])
            return records
        return det.to_records()

    def _write(self, record: dict[str, Any], flush: bool) -> None:
        if self._file is None:
            self.path = resolve_output(self.params.path, self)
            # Truncate once per open() unless appending; later re-opens (writes after close) append.
            self._file = open(self.path, "a" if self._started or self.params.append else "w", encoding="utf-8")
            self._started = True
            self._pending = 0
        f = self._file  # a signal handler may close() between the next lines
        f.write(_dumps(record) + "\n")
        self._pending += 1
        if (flush or self._pending >= self.params.flush_every) and not f.closed:
            f.flush()
            self._pending = 0


def _count(landmarks: Any) -> int | None:
    if landmarks is None:
        return None
    arr = np.asarray(landmarks)
    return int(arr.shape[0]) if arr.ndim >= 2 else int(arr.size // 2)


def _dumps(record: dict[str, Any]) -> str:
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_default)
    except ValueError:  # NaN/inf somewhere: write null instead
        return json.dumps(_finite(record), ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                          default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, np.ndarray):
        return _finite(value.tolist())
    if isinstance(value, np.floating):
        return _finite(float(value))
    return value
