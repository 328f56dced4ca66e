"""Tracking: stable ids for the detections of each source over time.

The ``track`` stage runs a ByteTrack-style tracker (:mod:`stages.tracking.bytetrack`)
on ``frame.detections`` and writes ``track_id`` into them.  Ids are per source,
start at 1 and increase without gaps over confirmed tracks; the same input
gives the same ids.

* Frames on which a detector ran (``frame.attrs[(detector, DETECTION_RAN)]``
  True, or frames no detector marked, as from a user's own model): the
  detections are matched to the tracks.  A detection that belongs to no
  confirmed track (new, not yet confirmed, or a weak unmatched one) keeps
  ``track_id`` -1 (``null`` in JSON Lines) with ``unmatched: keep`` (default),
  or is removed with ``unmatched: drop``.  Tracks whose object was not found
  are *lost*: they are not output, keep their id and are found again by IoU
  with their predicted box until they have been unseen for ``lost_frames``
  frames (or ``lost_s`` seconds).  Predicted boxes are clipped to the frame, as
  detections are.  After a motion stage, a tracked object the detector missed
  where nothing moved is held in place instead (output as on frames without
  detection) for up to ``hold_misses`` detection frames in a row.
* Frames on which detection did not run (``detect.every``, motion gating):
  every tracked object is output at its predicted box with the label, score,
  keypoints (moved with the box) and detector attributes of its last
  detection, and ``attributes["predicted"] = True`` (with ``unmatched: keep``
  also tracks not yet confirmed, with ``track_id`` -1).  On frames where nothing
  moved (a gating stage set ``STILL``) boxes stay where they are; lost tracks
  age all the same (``lost_frames`` counts every frame).

Tracks that end (lost for too long) are listed on that frame in
``frame.attrs[(name, TRACKS_ENDED)]``; the filter's box of every tracked object is in
``frame.attrs[(name, TRACK_BOXES)]`` (region results carried between frames follow it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from pipeline.frame import DETECTION_RAN, STILL, TRACK_BOXES, TRACKS_ENDED, Detections, Frame, attr_values
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage

from ._label_watch import LabelWatch
from .motion import BOXES as MOTION_BOXES
from .tracking.boxes import follow_box
from .tracking.bytetrack import ByteTracker, TrackerConfig

__all__ = ["Track", "detection_ran"]

DEFAULT_FPS = 25.0


def detection_ran(frame: Frame) -> bool:
    """True if a detector ran on ``frame`` (or none said it let the frame pass)."""
    flags = attr_values(frame, DETECTION_RAN)
    return any(flags) if flags else True


@dataclass
class _Source:
    tracker: ByteTracker
    last_seq: int | None = None


class Track(Stage):
    """Assigns track ids to detections; predicts tracked boxes on frames without detection."""

    provides: ClassVar[frozenset[str]] = frozenset({"tracks"})

    class Params(StageParams):
        high_score: float = Field(0.5, ge=0, le=1, description="detections scoring at least this are matched "
                                  "first; weaker ones only continue tracks")
        low_score: float = Field(0.1, ge=0, le=1, description="detections below are ignored")
        new_track_score: float = Field(0.6, ge=0, le=1, description="unmatched detections scoring at least this "
                                       "start a track")
        match_iou: float = Field(0.2, gt=0, le=1, description="minimum IoU of a strong detection with a track's "
                                 "predicted box")
        low_match_iou: float = Field(0.5, gt=0, le=1, description="minimum IoU for weak detections")
        min_hits: int = Field(2, ge=1, description="detection frames in a row before a track is confirmed and "
                              "gets an id")
        lost_frames: int = Field(30, ge=0, description="frames a lost track is kept for re-identification")
        lost_s: float | None = Field(None, gt=0, description="the same in seconds of source time (converted with "
                                     "the source's frame rate, which the runner sets: used alone, set the "
                                     "stage's source_fps, else 25 is assumed); overrides lost_frames")
        duplicate_iou: float = Field(0.7, gt=0, le=1, description="an unmatched detection overlapping a matched "
                                     "one by this IoU is a duplicate and starts no track (1: off)")
        hold_misses: int = Field(2, ge=0, description="with a motion stage before the detector: detection frames "
                                 "in a row a tracked object the detector missed where nothing moved is held in "
                                 "place (0: never)")
        per_class: bool = Field(False, description="true: a track only matches detections of its own label; "
                                "false: detections of any label, its own preferred (the track's label follows "
                                "the latest detection)")
        labels: list[str] | None = Field(None, description="track only these labels; others pass untracked")
        unmatched: Literal["keep", "drop"] = Field("keep", description="detections of no confirmed track: kept "
                                                   "with track_id null, or dropped")

        @model_validator(mode="after")
        def _scores_ordered(self) -> "Track.Params":
            if self.low_score > self.high_score:
                raise ValueError(f"low_score ({self.low_score}) must not be above high_score ({self.high_score})")
            return self

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source_fps: float | None = None  # set by the runtime; in your own loop, set it for lost_s
        self._sources: dict[str, _Source] = {}
        self._labels_seen: LabelWatch | None = None

    @classmethod
    def requires(cls, params: dict[str, Any]) -> dict[str, str]:
        return {"detections": "inputs"}

    def open(self) -> None:
        self._sources = {}
        self._labels_seen = None if self.params.labels is None else LabelWatch(self.name, "labels", self.params.labels)

    def close(self) -> None:
        if getattr(self, "_labels_seen", None) is not None:
            self._labels_seen.warn_if_unmatched()

    def config(self) -> TrackerConfig:
        p = self.params
        lost = p.lost_frames if p.lost_s is None else round(p.lost_s * (self.source_fps or DEFAULT_FPS))
        return TrackerConfig(high_score=p.high_score, low_score=p.low_score, new_track_score=p.new_track_score,
                             match_iou=p.match_iou, low_match_iou=p.low_match_iou,
                             min_hits=p.min_hits, lost_frames=lost, per_class=p.per_class,
                             duplicate_iou=p.duplicate_iou, hold_misses=p.hold_misses)

    def process(self, frame: Frame) -> Frame:
        src = self._sources.get(frame.source_id)
        if src is None:
            src = self._sources[frame.source_id] = _Source(ByteTracker(self.config()))
        steps = frame.seq - src.last_seq if src.last_seq is not None and frame.seq > src.last_seq else 1
        src.last_seq = frame.seq
        if detection_ran(frame):
            ended = self._associate(src.tracker, frame, steps)
        else:
            objects, ended = src.tracker.predict(steps, still=any(attr_values(frame, STILL)),
                                                 tentative=self.params.unmatched == "keep",
                                                 bounds=(frame.width, frame.height))
            frame.detections = Detections.merge([frame.detections, _predicted(objects)])
        if ended:
            frame.attrs[(self.name, TRACKS_ENDED)] = ended
        frame.attrs[(self.name, TRACK_BOXES)] = src.tracker.estimates()
        return frame

    def counters(self) -> dict[str, Any]:
        return {"ids": sum(s.tracker.issued for s in self._sources.values())}

    def _associate(self, tracker: ByteTracker, frame: Frame, steps: int) -> list[int]:
        dets = frame.detections
        labels = self.params.labels
        sel = np.arange(len(dets)) if labels is None else dets.with_label(labels)
        if self._labels_seen is not None:
            self._labels_seen.see(dets.label, len(sel))
        payloads = [(dets.keypoints[i], dict(dets.attributes[i])) for i in sel]
        ids, ended = tracker.update(dets.xyxy[sel], dets.score[sel], dets.label[sel], steps, payloads,
                                    bounds=(frame.width, frame.height), motion=_motion_regions(frame))
        track_id = dets.track_id.copy()
        track_id[sel] = ids
        dets.track_id = track_id
        if self.params.unmatched == "drop" and len(sel):
            keep = np.ones(len(dets), bool)
            keep[sel[ids < 0]] = False
            frame.detections = dets[keep]
        if tracker.held_now:
            frame.detections = Detections.merge([frame.detections, _predicted(tracker.held_now)])
        return ended


def _motion_regions(frame: Frame) -> np.ndarray | None:
    """(M, 4) regions that moved on ``frame`` if a motion stage watched it and was not calibrating
    (it then reports no regions and no stillness), else None."""
    regions = [np.asarray(b, np.float64).reshape(-1, 4) for b in attr_values(frame, MOTION_BOXES)]
    if not regions:
        return None
    moved = np.concatenate(regions)
    return moved if len(moved) or any(attr_values(frame, STILL)) else None


def _predicted(objects: list[Any]) -> Detections:
    """Detections for tracked objects on a frame without detection."""
    if not objects:
        return Detections()
    keypoints = []
    attributes = []
    for obj in objects:
        kp, attrs = obj.payload if obj.payload is not None else (None, {})
        keypoints.append(None if kp is None else follow_box(kp, obj.last_box, obj.box))
        attributes.append({**attrs, "predicted": True})
    return Detections(xyxy=np.stack([o.box for o in objects]), score=[o.score for o in objects],
                      label=[o.label for o in objects], track_id=[o.track_id for o in objects],
                      keypoints=keypoints, attributes=attributes)
