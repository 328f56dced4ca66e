"""Continuing a camera where its lost placement stopped.

The JSON Lines output of a camera is its durable record: the frames it holds were
processed and written.  Every placement of a camera starts the file with an event line
naming the run (the first placement creates the file)::

    {"event": "placed", "source": CAMERA, "time": UNIX_S, "run": RUN_ID, "part": 0, "start_seq": 0, "node": ID}

A later placement that finds a file of the same run (the output directory is shared, or
the camera comes back to a node it ran on) cuts a partial last line (a process killed
mid-write), continues after its last frame record and appends: no frame is written
twice.  A placement that finds none (per-node disks) starts a new file at the frame the
driver last saw written.

Video outputs cannot be appended to: each later placement writes a segment of its own,
``NAME.fromSEQ.mp4`` beside ``NAME.mp4``; MP4/MOV outputs are written fragmented
(``KILL_SAFE_MP4``), so the segment of a node that dies stays playable up to its last
fragment.  OpenVINO's CPU pinning is turned off for the same reason actors share nodes
(``cluster_overrides``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

from pipeline.videofile import iso_boxes

__all__ = ["KILL_SAFE_MP4", "MP4_SUFFIXES", "prepare_jsonl", "last_frame_seq", "cluster_overrides",
           "sink_paths", "segment_template", "stage_param",
           "count_frame_records", "Resume", "seal_fragmented_mp4", "video_frames"]

#: muxer options for MP4 outputs of cluster runs: a fragment at least every 0.2 s, written out at once
KILL_SAFE_MP4 = {"movflags": "+frag_keyframe+empty_moov+default_base_moof", "frag_duration": "200000",
                 "flush_packets": "1"}
MP4_SUFFIXES = (".mp4", ".mov", ".m4v")
_TAIL = 65536


def _stage_kinds(graph: Any) -> dict[str, str]:
    """Stage name -> "jsonl" (a JSON Lines sink) or "video" (an encoder) for the graph's sinks."""
    from stages.encode import Encode
    from stages.metadata import Metadata

    kinds = {}
    for name, cls in graph.classes().items():
        if issubclass(cls, Metadata):
            kinds[name] = "jsonl"
        elif issubclass(cls, Encode):
            kinds[name] = "video"
    return kinds


def stage_param(graph: Any, overrides: dict[str, dict[str, Any]], name: str, key: str) -> Any:
    """Parameter ``key`` of stage ``name``: from ``overrides``, else the pipeline file, else its default."""
    spec_params = graph.graph.nodes[name]["spec"].params
    if key in overrides.get(name, {}):
        return overrides[name][key]
    if key in spec_params:
        return spec_params[key]
    return graph.classes()[name].Params.model_fields[key].get_default(call_default_factory=True)


def cluster_overrides(graph: Any, overrides: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``overrides`` plus what a run spread over processes needs where the user did not choose:
    fragmented-MP4 muxer options for encoders writing MP4/MOV (``KILL_SAFE_MP4``), and OpenVINO's
    CPU pinning off (several actors share a node; pinned streams of two processes would fight
    for the same cores)."""
    from pipeline.stage import InferStage

    out = {k: dict(v) for k, v in overrides.items()}
    for name, cls in graph.classes().items():
        if not issubclass(cls, InferStage) or "config" not in cls.Params.model_fields:
            continue
        config = dict(stage_param(graph, out, name, "config") or {})
        if "engine" in cls.Params.model_fields and stage_param(graph, out, name, "engine") != "openvino":
            continue
        if not any(str(k).upper() == "ENABLE_CPU_PINNING" for k in config):
            out.setdefault(name, {})["config"] = {**config, "ENABLE_CPU_PINNING": False}
    for name, kind in _stage_kinds(graph).items():
        if kind != "video" or stage_param(graph, out, name, "container_options"):
            continue
        if str(stage_param(graph, out, name, "path")).lower().endswith(MP4_SUFFIXES):
            out.setdefault(name, {})["container_options"] = dict(KILL_SAFE_MP4)
    return out


def sink_paths(graph: Any, overrides: dict[str, dict[str, Any]], output_dir: Path, camera: str,
               kind: str) -> dict[str, Path]:
    """Stage name -> resolved output path of the camera's sinks of ``kind`` ("jsonl", "video")."""
    from stages._paths import resolve_output

    out = {}
    for name, k in _stage_kinds(graph).items():
        if k == kind:
            template = str(stage_param(graph, overrides, name, "path"))
            out[name] = resolve_output(template, SimpleNamespace(output_dir=output_dir, source_id=camera, name=name))
    return out


def segment_template(template: str, start_seq: int) -> str:
    """The path template of a later placement's video segment: ``X.mp4`` -> ``X.fromSEQ.mp4``."""
    stem, dot, suffix = template.rpartition(".")
    if not dot or "/" in suffix or "}" in suffix:
        return f"{template}.from{start_seq}"
    return f"{stem}.from{start_seq}.{suffix}"


def last_frame_seq(path: Path) -> int | None:
    """``seq`` of the last frame record in a JSON Lines file (event lines are skipped), or None."""
    rec = _last_record(path, lambda r: "event" not in r and isinstance(r.get("seq"), int))
    return None if rec is None else int(rec["seq"])


def _last_record(path: Path, wanted: Any) -> dict[str, Any] | None:
    """The last complete record of a JSON Lines file for which ``wanted(record)`` is true, read backwards."""
    with open(path, "rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        pos, carry = end, b""
        while pos > 0:
            step = min(_TAIL, pos)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step) + carry
            lines = chunk.split(b"\n")
            carry = lines[0] if pos > 0 else b""  # maybe the tail of a line that starts further back
            for line in reversed(lines[1:] if pos > 0 else lines):
                rec = _record(line)
                if rec is not None and wanted(rec):
                    return rec
    return None


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def _first_record(path: Path) -> dict[str, Any] | None:
    with open(path, "rb") as fh:
        return _record(fh.readline())


def _cut_partial_line(path: Path) -> None:
    """Drop bytes after the last newline (a record cut short when its writer was killed)."""
    with open(path, "rb+") as fh:
        end = fh.seek(0, os.SEEK_END)
        pos = end
        while pos > 0:
            step = min(_TAIL, pos)
            fh.seek(pos - step)
            chunk = fh.read(step)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                fh.truncate(pos - step + nl + 1)
                return
            pos -= step
        fh.truncate(0)


def count_frame_records(path: Path) -> int:
    """Complete frame records (lines that are not event lines) in a JSON Lines file of the metadata sink."""
    return _count(path)[0]


def _count(path: Path) -> tuple[int, int]:
    """(frame records, frame records after the last ``placed`` event) of a JSON Lines file."""
    total = since = 0
    with open(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                continue
            if not line.startswith(b'{"event"'):
                total += 1
                since += 1
            elif line.startswith(b'{"event":"placed"'):
                since = 0
    return total, since


class Resume(NamedTuple):
    """Where a placement starts: ``start`` seq, whether it came from the camera's own output
    (``exact``), the frame records that output already holds, the previous placement's ``placed``
    event found there (its ``part`` and ``start_seq``), if any, and the frame records it wrote."""

    start: int
    exact: bool
    frames: int | None = None
    previous: dict[str, Any] | None = None
    previous_frames: int | None = None


def prepare_jsonl(path: Path, camera: str, run_id: str, part: int, fallback_seq: int, node: str = "") -> Resume:
    """Make ``path`` ready for placement ``part`` of ``camera`` in run ``run_id`` (see :class:`Resume`).

    Part 0 starts a new file at ``fallback_seq``.  A later part continues a file of the same run
    after its last frame record; without one (not reachable from this node, or of another run)
    it starts a new file at ``fallback_seq``.  The file then ends with a ``placed`` event line
    and the camera's sink appends after it."""
    start, exact, frames, previous, previous_frames = fallback_seq, False, None, None, None
    ours = False
    if part > 0 and path.is_file():
        first = _first_record(path)
        ours = bool(first) and first.get("event") == "placed" and first.get("run") == run_id
    if ours:
        _cut_partial_line(path)
        last = last_frame_seq(path)
        frames, previous_frames = _count(path)
        previous = _last_record(path, lambda r: r.get("event") == "placed" and r.get("run") == run_id)
        if last is not None:
            start, exact = last + 1, True
    path.parent.mkdir(parents=True, exist_ok=True)
    event = {"event": "placed", "source": camera, "time": time.time(), "run": run_id, "part": part,
             "start_seq": start, "node": node}
    with open(path, "a" if ours else "w", encoding="utf-8") as fh:
        fh.write(json.dumps(event, separators=(",", ":")) + "\n")
    return Resume(start, exact, frames, previous, previous_frames)


def seal_fragmented_mp4(path: Path) -> int:
    """Cut a fragmented MP4 that a killed process left mid-write back to its last whole fragment
    (a ``moof`` box and the ``mdat`` after it), so that every packet left decodes; returns the
    bytes cut.  A whole file, a missing one and one that is not fragmented MP4 stay as they are
    (0).  Only for a file no process writes any more."""
    try:
        size = path.stat().st_size
        boxes = iso_boxes(path)
    except OSError:
        return 0
    kept, pending, kinds = 0, False, set()
    for kind, offset, box_size in boxes:
        if offset + box_size > size:
            break  # the box the process died writing
        kinds.add(kind)
        pending = kind == b"moof" or (pending and kind != b"mdat")
        if not pending:
            kept = offset + box_size
    if b"moov" not in kinds or b"moof" not in kinds or kept >= size:
        return 0
    os.truncate(path, kept)
    return size - kept


def video_frames(path: Path) -> int | None:
    """Video packets a (possibly cut short) file holds, read without decoding; None if unreadable."""
    import av

    try:
        with av.open(str(path)) as container:
            return sum(1 for p in container.demux(video=0) if p.size)
    except (av.FFmpegError, OSError):
        return None
