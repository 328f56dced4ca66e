"""Per-frame and event records in the two message shapes the sinks write.

``vapipe`` (the JSON Lines of the CLI, see :mod:`stages.metadata`)::

    {"source", "seq", "pts_time", "width", "height", "objects": [{"label", "score", "box",
     "track_id", "class_id"?, "keypoints"?, "attributes"}]}   events: {"event", "source", "time", ...}

``dlstreamer`` (the message shape of DL Streamer Pipeline Server, so its clients read it)::

    {"objects": [{"detection": {"bounding_box": {"x_min", "y_min", "x_max", "y_max"},  # 0..1 of the frame
                                "confidence", "label", "label_id"?},
                  "x", "y", "w", "h",                   # integer pixels (box clipped to the frame)
                  "roi_type": label, "id"?: track id,
                  NAME: {"label", "confidence"?},       # per classified attribute
                  "attributes": {...}}],
     "resolution": {"width", "height"}, "source", "timestamp": ns, "tags"?}
    events: {"events": [{"event-type": STATE, ...}], "source", "timestamp": ns, "tags"?}

``label_id`` comes from a ``class_id`` column of the detections when a stage sets
one, else from the position of the label in ``labels`` (the sink's parameter),
else it is left out.  ``timestamp`` is the frame's presentation time in
nanoseconds (the monotonic capture time when the source has no timestamps).
An attribute ``NAME`` that is a string with a ``NAME_score`` beside it, or a
mapping with a ``label``, also appears as ``NAME: {"label", "confidence"}``,
the way DL Streamer reports classification results.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from pipeline.frame import EVENTS, RECORD, Detections, Frame, attr_values

__all__ = ["Schema", "SCHEMAS", "vapipe_record", "vapipe_event", "dlstreamer_record", "dlstreamer_event",
           "frame_record", "event_record", "frame_events", "to_json", "count_landmarks"]

Schema = Literal["vapipe", "dlstreamer"]
SCHEMAS = ("vapipe", "dlstreamer")


def vapipe_record(frame: Frame, include_landmarks: bool = False) -> dict[str, Any]:
    """The frame's record, with the fields stages added (``frame.attrs[(stage, RECORD)]``, e.g.
    a zones stage's ``"occupancy"``; the fixed fields win; a mapping two stages add, as two zones
    stages' occupancy, holds the keys of both, the first stage's on a clash)."""
    rec = {
        "source": frame.source_id,
        "seq": int(frame.seq),
        "pts_time": frame.pts_time,
        "width": int(frame.width),
        "height": int(frame.height),
        "objects": _vapipe_objects(frame.detections, include_landmarks),
    }
    for fields in attr_values(frame, RECORD):
        for key, value in fields.items():
            if isinstance(value, dict) and isinstance(rec.get(key), dict) and key not in _FIXED:
                rec[key] = {**value, **rec[key]}
            else:
                rec.setdefault(key, value)
    return rec


_FIXED = ("source", "seq", "pts_time", "width", "height", "objects")


def frame_events(schema: str, frame: Frame, tags: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The events stages attached to ``frame`` (``frame.attrs[(stage, EVENTS)]``: zone entries and
    exits, line crossings), as records of ``schema``: ``vapipe`` keeps them as they are (they carry
    ``source``, ``seq`` and ``pts_time``), ``dlstreamer`` wraps each in its event message."""
    out = []
    for batch in attr_values(frame, EVENTS):
        for event in batch:
            if schema == "dlstreamer":
                fields = {k: v for k, v in event.items() if k not in ("event", "source")}
                out.append(dlstreamer_event(event["event"], event.get("source", frame.source_id), fields, tags))
            else:
                out.append({**event, "tags": tags} if tags else dict(event))
    return out


def vapipe_event(kind: str, source: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"event": kind, "source": source, "time": time.time(), **fields}


def _vapipe_objects(det: Detections, include_landmarks: bool) -> list[dict[str, Any]]:
    if not include_landmarks and any("landmarks" in a for a in det.attributes):
        slim = [{k: v for k, v in a.items() if k != "landmarks"} for a in det.attributes]
        records = Detections(xyxy=det.xyxy, score=det.score, label=det.label, track_id=det.track_id,
                             keypoints=det.keypoints, attributes=slim, class_id=det.class_id).to_records()
        for rec, a in zip(records, det.attributes):
            if "landmarks" in a:
                rec["attributes"]["landmarks"] = count_landmarks(a["landmarks"])
        return records
    return det.to_records()


def dlstreamer_record(frame: Frame, tags: dict[str, Any] | None = None, labels: Sequence[str] = (),
                      source: str | None = None) -> dict[str, Any]:
    w, h = int(frame.width), int(frame.height)
    det = frame.detections
    class_id = getattr(det, "class_id", None)
    index = {str(lab): i for i, lab in enumerate(labels)}
    records = _vapipe_objects(det, False)
    objects = []
    for i, rec in enumerate(records):
        x1, y1, x2, y2 = (float(v) for v in np.nan_to_num(det.xyxy[i]))
        x1, x2 = min(max(x1, 0.0), w), min(max(x2, 0.0), w)
        y1, y2 = min(max(y1, 0.0), h), min(max(y2, 0.0), h)
        label = str(det.label[i])
        detection: dict[str, Any] = {
            "bounding_box": {"x_min": x1 / w if w else 0.0, "y_min": y1 / h if h else 0.0,
                             "x_max": x2 / w if w else 0.0, "y_max": y2 / h if h else 0.0},
            "confidence": float(det.score[i]), "label": label}
        if class_id is not None and i < len(class_id) and int(class_id[i]) >= 0:
            detection["label_id"] = int(class_id[i])
        elif label in index:
            detection["label_id"] = index[label]
        obj: dict[str, Any] = {"detection": detection, "x": int(round(x1)), "y": int(round(y1)),
                               "w": int(round(x2 - x1)), "h": int(round(y2 - y1)), "roi_type": label}
        if det.track_id[i] >= 0:
            obj["id"] = int(det.track_id[i])
        attrs = rec["attributes"]
        for name, value in attrs.items():
            if name in obj:
                continue
            if isinstance(value, dict) and "label" in value:
                obj[name] = value
            elif isinstance(value, str) and isinstance(attrs.get(f"{name}_score"), (int, float)):
                obj[name] = {"label": value, "confidence": float(attrs[f"{name}_score"])}
        obj["attributes"] = attrs
        objects.append(obj)
    pts = frame.pts_time
    msg: dict[str, Any] = {"objects": objects, "resolution": {"width": w, "height": h},
                           "source": source if source is not None else frame.source_id,
                           "timestamp": int(round(pts * 1e9)) if pts is not None else int(frame.captured_ns)}
    if tags:
        msg["tags"] = tags
    return msg


def dlstreamer_event(kind: str, source: str, fields: dict[str, Any],
                     tags: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"events": [{"event-type": kind, **fields}], "source": source,
                           "timestamp": time.time_ns()}
    if tags:
        msg["tags"] = tags
    return msg


def frame_record(schema: str, frame: Frame, *, include_landmarks: bool = False, tags: dict[str, Any] | None = None,
                 labels: Sequence[str] = ()) -> dict[str, Any]:
    """The record of ``frame`` in ``schema`` (``vapipe`` adds ``tags`` when given)."""
    if schema == "dlstreamer":
        return dlstreamer_record(frame, tags, labels)
    rec = vapipe_record(frame, include_landmarks)
    if tags:
        rec["tags"] = tags
    return rec


def event_record(schema: str, kind: str, source: str, fields: dict[str, Any],
                 tags: dict[str, Any] | None = None) -> dict[str, Any]:
    if schema == "dlstreamer":
        return dlstreamer_event(kind, source, fields, tags)
    rec = vapipe_event(kind, source, fields)
    if tags:
        rec["tags"] = tags
    return rec


def count_landmarks(landmarks: Any) -> int | None:
    if landmarks is None:
        return None
    arr = np.asarray(landmarks)
    return int(arr.shape[0]) if arr.ndim >= 2 else int(arr.size // 2)


def to_json(record: dict[str, Any]) -> str:
    """Compact strict JSON on one line; NaN and infinities become null."""
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
