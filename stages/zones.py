"""Zones and counting lines over tracked objects.

An object is where its *anchor* is (``anchor``, default the bottom centre of
its box).  Only tracked objects (``track_id`` set) of a zone's or line's
``labels`` (all when unset) count.  An object's label here is the one its track
has had most often so far (the first of them on a tie): detectors' labels flicker
on one object, and a count, a filter and an exit must not follow every flicker.

* **Zones** (polygons; an anchor on the edge is inside): an object enters after
  its anchor has been inside for ``inertia`` frames in a row and exits after
  ``inertia`` frames outside (hysteresis), when it has been missing for
  ``inertia`` frames after its box last touched the frame's edge (it left the
  picture), or when its track ends.  Occupancy per label (the label it entered
  with) is in every frame's record (``"occupancy": {zone: {label: n}}``); each
  object in a zone carries ``attributes["zones"] = {zone: seconds inside}``
  (dwell time, from the first frame of the run that made it enter).
* **Lines** (directed segments A -> B): a crossing is counted once when the
  object has moved to the other side of the line and stayed there for
  ``min_frames`` frames, and the anchor's latest step across the line (continued
  past the segment's ends; margin ignored) passes through the segment.  The side
  is the anchor's, and an anchor within ``margin`` of the line counts for neither
  (``trigger: anchor``); with ``trigger: box`` the whole box must be on one side,
  and frames where it meets the line, anywhere along it, count for neither.
  Going back before ``min_frames`` counts nothing (jitter).

Boxes the tracker predicted (``attributes["predicted"]``: no detection on that
frame) count toward ``inertia`` and ``min_frames`` but never complete an entry,
an exit or a crossing; the next frame on which the object was detected does.
  Direction ``in``: from the left of A -> B to its right as seen on screen
  (y down); ``out`` the other way.

Events (``frame.attrs[(name, EVENTS)]``, written by the metadata sink)::

    {"event": "zone_enter" | "zone_exit" | "line_cross", "zone" | "line": NAME,
     "track_id": int, "label": str, "direction": "in" | "out", "source": str,
     "seq": int, "pts_time": float | null}

Zone events have direction ``in`` (enter) or ``out`` (exit).  Coordinates are
fractions of the frame (``units: fraction``) or pixels (``units: px``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pipeline.frame import EVENTS, OVERLAY, RECORD, TRACKS_ENDED, Frame, attr_values
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage

from ._label_watch import LabelWatch
from .annotate import Shape
from .regions import Anchor, anchors, box_sides, inside_polygon, segments_cross, \
    self_intersection, signed_distance

__all__ = ["Zones", "ZoneSpec", "LineSpec"]

DEFAULT_FPS = 25.0
#: a box within this share of the frame's width (height) of its edge touches the edge
EDGE = 0.01
ZONE_COLOR = (0, 215, 255)   # BGR
LINE_COLOR = (255, 255, 0)


class ZoneSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    points: list[tuple[float, float]] = Field(description="polygon vertices [[x, y], ...]")
    labels: list[str] | None = Field(None, description="count only these labels")

    @field_validator("points")
    @classmethod
    def _polygon(cls, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if len(points) < 3:
            raise ValueError(f"a polygon needs at least 3 points, got {len(points)}")
        v = np.asarray(points, np.float64)
        crossing = self_intersection(v)
        if crossing is not None:
            i, j = crossing
            raise ValueError(f"the polygon intersects itself (edge {i}-{i + 1} crosses edge {j}-{(j + 1) % len(v)})")
        twice_area = np.sum(v[:, 0] * np.roll(v[:, 1], -1) - np.roll(v[:, 0], -1) * v[:, 1])
        if abs(twice_area) <= 1e-9 * float(np.ptp(v, axis=0).max()) ** 2:  # float rounding of points on one line
            raise ValueError("the polygon has no area (its points lie on one line)")
        return points


class LineSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    points: list[tuple[float, float]] = Field(description="[[x, y] of A, [x, y] of B]: crossing from the left of "
                                              "A -> B to its right (on screen) is 'in'")
    labels: list[str] | None = Field(None, description="count only these labels")

    @field_validator("points")
    @classmethod
    def _segment(cls, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if len(points) != 2:
            raise ValueError(f"a line needs exactly 2 points, got {len(points)}")
        if tuple(points[0]) == tuple(points[1]):
            raise ValueError(f"the line has zero length (both points are {list(points[0])})")
        return points


@dataclass
class _LineState:
    side: int = 0                     # established side: +1 right of A -> B, -1 left, 0 not yet known
    pending: int = 0                  # frames in a row on the other side
    raw: int = 0                      # the anchor's side of the line's full length (margin ignored), latest
    raw_point: np.ndarray | None = None   # ... and where it was then
    step: tuple[np.ndarray, np.ndarray] | None = None  # the anchor's latest move across the full line


@dataclass
class _ZoneState:
    inside: bool = False
    run: int = 0                      # frames in a row whose raw state differs from ``inside``
    run_start: float = 0.0
    since: float = 0.0                # time of entering (first frame of the run)
    last_seen: float = 0.0
    label: str = ""                   # while inside: the label it entered with
    at_edge: bool = False             # its box touched the frame's edge when last seen
    missing: int = 0                  # frames in a row it has not been seen


class Zones(Stage):
    """Zone entries, exits, occupancy and dwell time; line crossings; per track."""

    class Params(StageParams):
        zones: dict[str, ZoneSpec] = Field(default_factory=dict, description="name -> {points, labels}")
        lines: dict[str, LineSpec] = Field(default_factory=dict, description="name -> {points: [A, B], labels}")
        units: Literal["fraction", "px"] = Field("fraction", description="coordinates as fractions of the frame "
                                                 "(0..1) or pixels")
        anchor: Anchor = Field("bottom_center", description="the point of a box that decides where an object is")
        inertia: int = Field(3, ge=1, description="frames in a row inside (outside) before an object enters "
                             "(exits) a zone")
        min_frames: int = Field(2, ge=1, description="frames in a row on the new side before a crossing counts")
        trigger: Literal["anchor", "box"] = Field("anchor", description="what puts an object on a side of a line: "
                                                  "its anchor (outside the margin), or its whole box")
        margin: float = Field(0.015, ge=0, description="anchors this close to a line count for neither side "
                              "(trigger: anchor): a fraction of the frame's diagonal, or pixels with units: px")
        draw: bool = Field(True, description="draw zones, lines and live counts in the video")

        @model_validator(mode="after")
        def _something_and_inside(self) -> "Zones.Params":
            if not self.zones and not self.lines:
                raise ValueError("zones: give at least one of 'zones' or 'lines'")
            if self.units == "fraction":
                _check_inside(self, 1.0, 1.0, "fractions must be in [0, 1]; for pixels set units: px")
            return self

    params: Params

    @classmethod
    def requires(cls, params: dict[str, Any]) -> dict[str, str]:
        return {"tracks": "inputs"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source_fps: float | None = None  # set by the runtime
        self._sources: dict[str, _Source] = {}
        self._labels_seen: list[LabelWatch] = []  # one per zone or line with labels

    def open(self) -> None:
        self._sources = {}
        # each zone and line on its own: a misspelt label in one is not hidden by another's match
        self._labels_seen = [LabelWatch(self.name, f"{kind}.{name}.labels", list(spec.labels))
                             for kind, specs in (("zones", self.params.zones), ("lines", self.params.lines))
                             for name, spec in specs.items() if spec.labels]

    def close(self) -> None:
        for watch in getattr(self, "_labels_seen", []):
            watch.warn_if_unmatched()

    def process(self, frame: Frame) -> Frame:
        src = self._sources.get(frame.source_id)
        if src is None:
            src = self._sources[frame.source_id] = _Source(self.params, frame.width, frame.height)
        elif src.size != (frame.width, frame.height):
            src.set_size(frame.width, frame.height)
        t = frame.pts_time if frame.pts_time is not None else frame.seq / float(self.source_fps or DEFAULT_FPS)
        waiting = [w for w in self._labels_seen if not w.matched]  # until one object matches each
        if waiting:
            tracked = frame.detections.label[frame.detections.track_id >= 0]
            for watch in waiting:
                watch.see(tracked, sum(1 for lb in tracked if lb in watch.wanted))
        events = src.update(frame, t)
        for ended in attr_values(frame, TRACKS_ENDED):
            events += src.end_tracks(ended, frame, t)
        if events:
            frame.attrs[(self.name, EVENTS)] = events
        frame.attrs[(self.name, RECORD)] = {"occupancy": src.occupancy()}
        if self.params.draw:
            frame.attrs[(self.name, OVERLAY)] = src.shapes()
        return frame

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lines": {n: {"in": {}, "out": {}} for n in self.params.lines},
                               "zones": {n: {"enter": {}, "exit": {}} for n in self.params.zones}}
        for src in self._sources.values():
            for kind, table in (("lines", src.line_counts), ("zones", src.zone_counts)):
                for (name, what, label), n in sorted(table.items()):
                    bucket = out[kind][name][what]
                    bucket[label] = bucket.get(label, 0) + n
        return out


def _check_inside(params: Zones.Params, width: float, height: float, rule: str) -> None:
    """One-line error naming the first point outside [0, width] x [0, height]."""
    for kind, items in (("zones", params.zones), ("lines", params.lines)):
        for name, spec in items.items():
            for k, (x, y) in enumerate(spec.points):
                if not (0 <= x <= width and 0 <= y <= height):
                    raise ValueError(f"{kind}.{name}.points[{k}] = [{x:g}, {y:g}] is outside the frame ({rule})")


class _Source:
    """Zone and line state of one source (geometry in this source's pixels)."""

    def __init__(self, params: Zones.Params, width: int, height: int) -> None:
        self.params = params
        self.zone_states: dict[tuple[str, int], _ZoneState] = {}
        self.line_states: dict[tuple[str, int], _LineState] = {}
        self.zone_counts: dict[tuple[str, str, str], int] = {}
        self.line_counts: dict[tuple[str, str, str], int] = {}
        self.label_counts: dict[int, dict[str, int]] = {}   # per track: frames seen with each label
        self.set_size(width, height)

    def set_size(self, width: int, height: int) -> None:
        """Geometry in pixels of a (width, height) frame: at the first frame, and again when the
        source's frames change size (a camera switching resolution, a folder of mixed images)."""
        params = self.params
        if params.units == "px":
            _check_inside(params, width, height, f"the frame is {width}x{height} px")
        scale = np.array([width, height], np.float64) if params.units == "fraction" else np.ones(2)
        self.zones = {n: np.asarray(z.points, np.float64) * scale for n, z in params.zones.items()}
        self.lines = {n: np.asarray(ln.points, np.float64) * scale for n, ln in params.lines.items()}
        self.size = (float(width), float(height))
        diagonal = float(np.hypot(width, height))
        self.margin = params.margin * diagonal if params.units == "fraction" else params.margin

    def update(self, frame: Frame, t: float) -> list[dict[str, Any]]:
        dets = frame.detections
        events: list[dict[str, Any]] = []
        tracked = np.flatnonzero(dets.track_id >= 0)
        ids = [int(dets.track_id[i]) for i in tracked]
        labels = [self._track_label(tid, str(dets.label[i])) for tid, i in zip(ids, tracked)]
        boxes = dets.xyxy[tracked].reshape(-1, 4).astype(np.float64)
        points = anchors(boxes, self.params.anchor)
        # boxes the tracker predicted (no detection on this frame) may hold a change, not make one
        detected = [not dets.attributes[i].get("predicted", False) for i in tracked]
        w, h = self.size
        mx, my = max(EDGE * w, 2.0), max(EDGE * h, 2.0)  # detectors cut boxes off a few pixels short
        at_edge = (boxes[:, 0] <= mx) | (boxes[:, 1] <= my) | (boxes[:, 2] >= w - mx) | (boxes[:, 3] >= h - my)
        for name, polygon in self.zones.items():
            wanted = self.params.zones[name].labels
            inside = inside_polygon(points, polygon)
            for k, tid in enumerate(ids):
                counts = wanted is None or labels[k] in wanted
                if counts or (name, tid) in self.zone_states:  # a label no longer wanted: outside
                    events += self._zone_step(name, tid, labels[k], counts and bool(inside[k]), bool(at_edge[k]),
                                              detected[k], frame, t, dets.attributes[tracked[k]])
        events += self._left_the_picture(set(ids), frame)
        for name, (a, b) in self.lines.items():
            wanted = self.params.lines[name].labels
            distance = signed_distance(points, a, b)
            raw = np.sign(distance).astype(np.int64)
            if self.params.trigger == "anchor":
                sides = np.where(np.abs(distance) < self.margin, 0, raw)
            else:
                sides = box_sides(boxes, a, b)
            for k, tid in enumerate(ids):
                if wanted is None or labels[k] in wanted:
                    events += self._line_step(name, tid, labels[k], int(sides[k]), int(raw[k]), points[k],
                                              detected[k], frame)
        return events

    def _track_label(self, tid: int, label: str) -> str:
        """The label track ``tid`` has had most often so far, counting this frame's ``label``."""
        counts = self.label_counts.setdefault(tid, {})
        counts[label] = counts.get(label, 0) + 1
        return max(counts, key=counts.__getitem__)

    def _left_the_picture(self, present: set[int], frame: Frame) -> list[dict[str, Any]]:
        """Exits of objects inside a zone missing for ``inertia`` frames since their box last
        touched the frame's edge."""
        events = []
        for (zone, tid), st in self.zone_states.items():
            if tid in present or not st.inside:
                continue
            st.missing += 1
            if st.at_edge and st.missing >= self.params.inertia:
                st.inside, st.run = False, 0
                events.append(self._event("zone_exit", "zone", zone, tid, st.label, frame))
        return events

    def _zone_step(self, name: str, tid: int, label: str, raw: bool, at_edge: bool, detected: bool, frame: Frame,
                   t: float, attributes: dict[str, Any]) -> list[dict[str, Any]]:
        st = self.zone_states.setdefault((name, tid), _ZoneState())
        st.last_seen, st.at_edge, st.missing = t, at_edge, 0
        if not st.inside:
            st.label = label
        events = []
        if raw == st.inside:
            st.run = 0
        else:
            if st.run == 0:
                st.run_start = t
            st.run += 1
            if st.run >= self.params.inertia and detected:
                st.inside, st.run = raw, 0
                if raw:
                    st.since = st.run_start
                events.append(self._event("zone_enter" if raw else "zone_exit", "zone", name, tid, st.label, frame))
        if st.inside:
            attributes.setdefault("zones", {})[name] = round(t - st.since, 3)
        return events

    def _line_step(self, name: str, tid: int, label: str, side: int, raw: int, point: np.ndarray,
                   detected: bool, frame: Frame) -> list[dict[str, Any]]:
        """``side``: where the object is for counting (0: neither); ``raw``: its anchor's side of
        the line's full length, margin ignored, which tells where it went across."""
        st = self.line_states.setdefault((name, tid), _LineState())
        if raw != 0:
            if st.raw != 0 and raw != st.raw:
                st.step = (st.raw_point, point.copy())
            st.raw, st.raw_point = raw, point.copy()
        if side == 0:  # on the line: neither side
            return []
        if st.side == 0 or side == st.side:
            st.side, st.pending = side, 0
            return []
        st.pending += 1
        if st.pending < self.params.min_frames or not detected:
            return []
        a, b = self.lines[name]
        through = st.step is not None and segments_cross(*st.step, a, b)
        st.side, st.pending = side, 0
        if not through:  # went round an end of the segment
            return []
        return [self._event("line_cross", "line", name, tid, label, frame, "in" if side > 0 else "out")]

    def end_tracks(self, ended: list[int], frame: Frame, t: float) -> list[dict[str, Any]]:
        """Exits for tracks that ended inside a zone; their state is dropped."""
        events = []
        gone = set(ended)
        for (name, tid) in [k for k in self.zone_states if k[1] in gone]:
            st = self.zone_states.pop((name, tid))
            if st.inside:
                events.append(self._event("zone_exit", "zone", name, tid, st.label, frame))
        for key in [k for k in self.line_states if k[1] in gone]:
            del self.line_states[key]
        for tid in gone:
            self.label_counts.pop(tid, None)
        return events

    def _event(self, kind: str, what: str, name: str, tid: int, label: str, frame: Frame,
               direction: str | None = None) -> dict[str, Any]:
        direction = direction or ("in" if kind == "zone_enter" else "out")
        counts = self.line_counts if what == "line" else self.zone_counts
        key = (name, direction if what == "line" else kind.split("_")[1], label)
        counts[key] = counts.get(key, 0) + 1
        return {"event": kind, what: name, "track_id": tid, "label": label, "direction": direction,
                "source": frame.source_id, "seq": int(frame.seq), "pts_time": frame.pts_time}

    def occupancy(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {name: {} for name in self.zones}
        for (name, _), st in self.zone_states.items():
            if st.inside:
                out[name][st.label] = out[name].get(st.label, 0) + 1
        return out

    def shapes(self) -> list[Shape]:
        shapes = []
        occupancy = self.occupancy()
        for name, polygon in self.zones.items():
            entered = sum(n for (z, what, _), n in self.zone_counts.items() if z == name and what == "enter")
            shapes.append(Shape(polygon, ZONE_COLOR, closed=True,
                                text=f"{name}: {sum(occupancy[name].values())} now, {entered} entered"))
        for name, (a, b) in self.lines.items():
            n_in = sum(n for (ln, d, _), n in self.line_counts.items() if ln == name and d == "in")
            n_out = sum(n for (ln, d, _), n in self.line_counts.items() if ln == name and d == "out")
            shapes.append(Shape(np.stack([a, b]), LINE_COLOR, text=f"{name}: in {n_in} out {n_out}"))
            mid, d = (a + b) / 2, b - a
            normal = np.array([-d[1], d[0]]) / max(np.hypot(*d), 1e-9)  # points to the 'in' side (right of A -> B)
            shapes.append(Shape(np.stack([mid, mid + normal * min(40.0, np.hypot(*d) / 3)]), LINE_COLOR, arrow=True))
        return shapes
