"""JSON Lines sink: one record per frame, plus event lines.

Frame record (one line, UTF-8)::

    {"source": str, "seq": int, "pts_time": float | null,   # seconds of source time
     "width": int, "height": int,                           # source pixels
     "objects": [{"label": str, "score": float,
                  "box": [x1, y1, x2, y2],                  # source pixels
                  "track_id": int | null,                   # null: not tracked
                  "class_id": int,                          # only when known: the model's class index
                  "keypoints": [[x, y], ...],               # only when present
                  "attributes": {...}}, ...]}

Landmark arrays (``attributes["landmarks"]``, e.g. 468 face-mesh points) are
large, so by default they are left out and replaced by their count
(``"landmarks": 468``); ``include_landmarks=True`` writes the points as
nested lists (``[[x, y], ...]``, or ``[x, y, z]`` rows when the array has them).

Event line (:meth:`Metadata.write_event`)::

    {"event": str, "source": str, "time": float,            # Unix time, seconds
     ...caller's fields}

``schema: dlstreamer`` writes DL Streamer Pipeline Server's message shape instead
(see :mod:`stages.records`); ``format: json`` writes one JSON array (valid once
the file is closed) instead of one record per line.  Sinks of the same process
that resolve to the same path share the file (``append`` keeps what it holds).

Events of a frame (``frame.attrs[(stage, EVENTS)]``: zone entries, line
crossings) are written one line each after that frame's record; fields stages
add to a frame (``frame.attrs[(stage, RECORD)]``, e.g. ``"occupancy"``) go into
its record (see :func:`stages.records.frame_events`).

Lines are flushed to the OS every ``flush_every`` frame records (events:
always) and on :meth:`Metadata.close`, so readers can follow the file while it
grows.  Non-finite floats are written as null (strict JSON).  Thread-safe:
events may come from another thread than frames.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from pipeline.frame import Frame
from pipeline.frame_view import SINK_VIEW_HELP, SinkView, sink_picture
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage, StageError

from ._paths import PathTemplate, check_output, claim, release, resolve_output
from ._shared_file import SharedFile
from .records import Schema, event_record, frame_events, frame_record, to_json

log = logging.getLogger("vapipe.metadata")

__all__ = ["Metadata"]


class Metadata(Stage):
    """Writes per-frame detections as JSON Lines (sink that passes frames on)."""

    kind: ClassVar[str] = "sink"

    class Params(StageParams):
        path: PathTemplate = Field("{output}/{source}.jsonl", description="output file template: {output}, "
                                   "{source}, {name} (default ending .json with format: json)")
        include_landmarks: bool = Field(False, description="write attributes['landmarks'] points instead of "
                                        "their count")
        flush_every: int = Field(1, ge=1, description="flush after this many frame records")
        view: SinkView = Field("source", description=SINK_VIEW_HELP)
        schema_: Schema = Field("vapipe", alias="schema", description="record shape: vapipe, or dlstreamer "
                                "(DL Streamer Pipeline Server's messages)")
        format: Literal["json-lines", "json"] = Field("json-lines", description="one record per line, or one "
                                                      "JSON array (complete once the file is closed)")
        tags: dict[str, Any] = Field(default_factory=dict, description="added to every record as 'tags'")
        labels: list[str] = Field(default_factory=list, description="label order for dlstreamer's label_id "
                                  "(used when the detections carry no class id)")
        append: bool = Field(False, description="add to an existing file instead of replacing it (json-lines)")

        @model_validator(mode="after")
        def _json_file_for_json(self) -> "Metadata.Params":
            """A JSON array goes to a .json file unless a path is given: a .jsonl name would
            send JSON Lines readers to it."""
            if self.format == "json" and "path" not in self.model_fields_set:
                self.path = "{output}/{source}.json"
            return self

    params: Params

    @classmethod
    def file_sharing(cls, params: Any) -> str | None:
        return f"metadata {params.format}"  # records of one format share a file; others may not join

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.output_dir: Path | None = None  # set by the runtime
        self.path: Path | None = None
        self.records_written = 0
        self._file: SharedFile | None = None
        self._pending = 0
        self._started = False  # the file was created in this open/close cycle
        self._lock = threading.RLock()

    def output_file(self) -> Path:
        return check_output(self.params.path, self)

    def open(self) -> None:
        """Ready to write (the file is created at the first record); its path is checked now."""
        check_output(self.params.path, self)
        with self._lock:
            self.close()
            self.records_written = 0
            self._started = False

    def process(self, frame: Frame) -> Frame | None:
        p = self.params
        shown, _ = sink_picture(frame, p.view)  # camera pixels unless view: preprocessed
        record = frame_record(p.schema_, shown, include_landmarks=p.include_landmarks, tags=p.tags, labels=p.labels)
        events = frame_events(p.schema_, frame, p.tags)
        with self._lock:
            self._write(record, flush=False)
            self.records_written += 1
            for i, event in enumerate(events):
                self._write(event, flush=i == len(events) - 1)
        return frame

    def write_event(self, kind: str, **fields: Any) -> None:
        """Write ``{"event": kind, "source", "time", **fields}`` (or the dlstreamer event shape)
        and flush it."""
        record = event_record(self.params.schema_, kind, self.source_id, fields, self.params.tags)
        with self._lock:
            self._write(record, flush=True)

    def close(self) -> None:
        """Flush and close the file; safe to call more than once."""
        with self._lock:
            f, self._file = self._file, None
            if f is not None:
                f.release()
                release(f.path, self)

    # internals ------------------------------------------------------------------
    def _write(self, record: dict[str, Any], flush: bool) -> None:
        if self._file is None:
            array = self.params.format == "json"
            if array and self._started:
                log.debug("%s: %s is closed; a JSON array cannot take later records", self.name, self.path)
                return
            self.path = resolve_output(self.params.path, self)
            # records of several cameras (or stages) may share a file of one format; nothing else may
            claim(self.path, self, shared_as=self.file_sharing(self.params))
            # Truncate once per open(); later re-opens (writes after close) append, and so do the
            # sinks of a run's later cameras that share the file
            run_files = getattr(self, "run_files", None)
            later = run_files is not None and not run_files.first_start(self.path)
            try:
                self._file = SharedFile.acquire(self.path, append=self._started or self.params.append or later,
                                                array=array)
            except OSError as exc:
                release(self.path, self)
                raise StageError(f"{self.name}: cannot write {self.path}: {exc.strerror or exc}") from None
            self._started = True
            self._pending = 0
        self._pending += 1
        flush = flush or self._pending >= self.params.flush_every
        self._file.write(to_json(record), flush)
        if flush:
            self._pending = 0
