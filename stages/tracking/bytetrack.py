"""A multi-object tracker of the ByteTrack kind, on plain arrays (no frames).

Per detection frame (:meth:`ByteTracker.update`):

1. every track is predicted to this frame (constant-velocity Kalman filter);
2. detections scoring at least ``high_score`` are matched to all tracks
   (tracked, lost and not yet confirmed) by IoU with the predicted boxes (at
   least ``match_iou``), with an optimal assignment (most overlap overall),
   except that a track not yet confirmed whose box overlaps a confirmed one's
   by ``SHADOW_IOU`` only takes the strong detections left over;
3. detections between ``low_score`` and ``high_score`` are matched to the
   tracks still unmatched (IoU at least ``low_match_iou``): weak detections
   keep a track going (an occluded person) but never start one;
4. strong detections left over that score at least ``new_track_score`` start
   tracks, unless they overlap a detection matched on this frame by
   ``duplicate_iou`` or more (a detector's second box on the same object);
5. a track is confirmed after ``min_hits`` detection frames matched in a row
   and then gets the next id (1, 2, 3, ... with no gaps); one not yet
   confirmed that misses a detection frame is dropped; a confirmed one that
   misses becomes lost: it is not output, and can be found again until it has
   not been seen for ``lost_frames`` frames, then it ends.

Between detection frames (:meth:`ByteTracker.predict`) the tracked boxes move
on by the filter's prediction; on frames where nothing moved (``still``) they
stay where they are; lost tracks age on every frame (an object that left stays gone
however still the scene, and its track ends ``lost_frames`` later, as without gating).

With motion regions (``motion``: a motion detector watched the frame), a
tracked object the detector missed where nothing moved is *held*: it stays
tracked, in place, for up to ``hold_misses`` detection frames in a row (a
detector misses a still object now and then; with detection gated by motion
the next chance to find it may be seconds away).

Given the frame's size (``bounds``), predicted boxes are clipped to the frame, for
matching and on output, as a detector's boxes are: an object leaving through the
frame's edge is detected ever smaller, while its filter, unaware of the edge, keeps
moving the whole box on; unclipped, the predicted box drifts out of the frame and
stops overlapping the object's last detections.

Tracks match detections of any label (a detector's label often flickers between car
and truck, or car and phone, on one object), with the track's own label preferred:
another label's box counts as overlapping by :data:`LABEL_CHANGE_COST` less IoU (never
less than the threshold it passed), so a track takes it only when no box of its own label
overlaps about as much (the thresholds ``match_iou`` and ``low_match_iou`` apply to the IoU
itself, whatever the label).  With
``per_class`` a track only matches detections of its own label.  Everything is
deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stages.models.nms import iou_matrix

from .assignment import match
from .kalman import BoxKalman, state_to_xyxy

__all__ = ["TrackerConfig", "ByteTracker", "TrackedBox"]

TRACKED, LOST, NEW = 0, 1, 2
#: at most this many prediction steps are applied for one gap in the frame sequence (lost tracks age by all of it)
MAX_STEPS = 300
#: IoU a class-agnostic match gives up in the ranking when the detection's label is not the track's
LABEL_CHANGE_COST = 0.1
#: an unconfirmed track overlapping a confirmed one by this IoU matches only the strong detections
#: the confirmed tracks left (a second box on one object must not take the object's detections)
SHADOW_IOU = 0.5


@dataclass(frozen=True)
class TrackerConfig:
    high_score: float = 0.5
    low_score: float = 0.1
    new_track_score: float = 0.6
    match_iou: float = 0.2
    low_match_iou: float = 0.5
    min_hits: int = 2
    lost_frames: int = 30
    per_class: bool = False
    duplicate_iou: float = 0.7
    hold_misses: int = 2


@dataclass
class TrackedBox:
    """A confirmed, currently tracked object: box (4,) in source pixels, the track's label and
    id, the score and payload of the detection it last matched."""

    track_id: int
    box: np.ndarray
    label: str
    score: float
    payload: Any
    last_box: np.ndarray  # the box of the detection it last matched


@dataclass
class _Tracks:
    """Tracks as parallel arrays (Kalman state) and lists (everything else)."""

    mean: np.ndarray = field(default_factory=lambda: np.zeros((0, 8)))
    cov: np.ndarray = field(default_factory=lambda: np.zeros((0, 8, 8)))
    state: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)           # 0 until confirmed
    labels: list[str] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    unseen: list[int] = field(default_factory=list)        # frames since the last match
    scores: list[float] = field(default_factory=list)
    payloads: list[Any] = field(default_factory=list)
    boxes: list[np.ndarray] = field(default_factory=list)  # last matched detection box
    held: list[int] = field(default_factory=list)           # detection frames in a row held (see motion)

    def __len__(self) -> int:
        return len(self.state)

    def keep(self, mask: np.ndarray) -> None:
        idx = np.flatnonzero(mask)
        self.mean, self.cov = self.mean[idx], self.cov[idx]
        for name in ("state", "ids", "labels", "hits", "unseen", "scores", "payloads", "boxes", "held"):
            values = getattr(self, name)
            setattr(self, name, [values[i] for i in idx])

    def add(self, mean: np.ndarray, cov: np.ndarray, labels: list[str], scores: list[float],
            payloads: list[Any], boxes: np.ndarray) -> None:
        n = len(labels)
        self.mean = np.concatenate([self.mean, mean])
        self.cov = np.concatenate([self.cov, cov])
        self.state += [NEW] * n
        self.ids += [0] * n
        self.labels += list(labels)
        self.hits += [1] * n
        self.unseen += [0] * n
        self.scores += list(scores)
        self.payloads += list(payloads)
        self.boxes += [b.copy() for b in boxes]
        self.held += [0] * n


class ByteTracker:
    """Tracks of one video source; ids are issued from 1 on confirmation."""

    def __init__(self, config: TrackerConfig | None = None) -> None:
        self.config = config or TrackerConfig()
        c = self.config
        if not 0 <= c.low_score <= c.high_score <= 1:
            raise ValueError(f"need 0 <= low_score <= high_score <= 1, got {c.low_score}, {c.high_score}")
        if c.min_hits < 1 or c.lost_frames < 0:
            raise ValueError(f"min_hits must be >= 1 and lost_frames >= 0, got {c.min_hits}, {c.lost_frames}")
        self.kalman = BoxKalman()
        self.tracks = _Tracks()
        self.issued = 0  # ids handed out so far (the last id)
        self.bounds: tuple[float, float] | None = None  # the frame's (width, height) of the latest call
        #: tracked objects the latest update held in place (missed where nothing moved), as output
        self.held_now: list[TrackedBox] = []

    # public API -----------------------------------------------------------------------
    def update(self, boxes: np.ndarray, scores: np.ndarray, labels: Any, steps: int = 1,
               payloads: list[Any] | None = None, bounds: tuple[float, float] | None = None,
               motion: np.ndarray | None = None) -> tuple[np.ndarray, list[int]]:
        """Associate one detection frame ``steps`` frames after the previous call.

        boxes (N, 4) ``[x1, y1, x2, y2]``, scores (N,), labels (N,) str; payloads: one object per
        detection, kept with its track (e.g. keypoints); bounds: the frame's (width, height) in
        the boxes' pixels, if known; motion: (M, 4) regions that moved on this frame, if a motion
        detector watched it (see :attr:`held_now`).  Returns (track id per detection, int64 (N,),
        -1 where the detection belongs to no confirmed track; ids of tracks that ended on this
        frame).
        """
        c = self.config
        self.bounds = bounds
        before = self.tracks.mean.copy() if motion is not None else None  # to undo a held track's motion
        boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        scores = np.asarray(scores, np.float64).reshape(-1)
        labels = [str(x) for x in labels]
        payloads = payloads if payloads is not None else [None] * len(boxes)
        self._advance(steps, still=False)
        t = self.tracks
        det_track = np.full(len(boxes), -1, np.int64)  # index of the matching track
        high = np.flatnonzero(scores >= c.high_score)
        low = np.flatnonzero((scores >= c.low_score) & (scores < c.high_score))
        every = np.arange(len(t))
        shadowed = self._shadowed()
        first, second = every[~shadowed], every[shadowed]
        # 1. strong detections against every track (tracked, lost, not yet confirmed), except
        # unconfirmed ones in a confirmed track's shadow, which take the strong ones left over
        pairs, free_tracks, free_high = self._associate(first, high, boxes, labels, c.match_iou)
        det_track[high[pairs[:, 1]]] = first[pairs[:, 0]]
        rest = high[free_high]
        pairs1, free_second, free_rest = self._associate(second, rest, boxes, labels, c.match_iou)
        det_track[rest[pairs1[:, 1]]] = second[pairs1[:, 0]]
        # 2. weak detections against the tracks left over
        left = np.concatenate([first[free_tracks], second[free_second]])
        pairs2, _, _ = self._associate(left, low, boxes, labels, c.low_match_iou)
        det_track[low[pairs2[:, 1]]] = left[pairs2[:, 0]]
        remaining = rest[free_rest]
        self._correct(det_track, boxes, scores, labels, payloads)
        # unmatched tracks: confirmed ones become lost, unconfirmed ones are dropped
        matched = np.zeros(len(t), bool)
        matched[det_track[det_track >= 0]] = True
        alive = np.ones(len(t), bool)
        held = self._held(np.flatnonzero(~matched), before, motion)
        self.held_now = [] if not held else [b for b in self.tracked() if b.track_id in {t.ids[i] for i in held}]
        for i in np.flatnonzero(~matched):
            if i in held:
                continue
            if t.state[i] == NEW:
                alive[i] = False
            else:
                t.state[i] = LOST
        ids = np.array([t.ids[i] if i >= 0 and t.state[i] != NEW else -1 for i in det_track], np.int64)
        # 3. new tracks from strong detections left over
        start = remaining[scores[remaining] >= c.new_track_score]
        taken = np.flatnonzero(det_track >= 0)
        if len(start) and len(taken) and c.duplicate_iou < 1.0:  # a second box on a matched object
            start = start[iou_matrix(boxes[start], boxes[taken]).max(axis=1) < c.duplicate_iou]
        ended = self._forget(alive)
        if len(start):
            mean, cov = self.kalman.initiate(boxes[start])
            t.add(mean, cov, [labels[i] for i in start], scores[start].tolist(), [payloads[i] for i in start],
                  boxes[start])
            if c.min_hits <= 1:
                for k, d in zip(range(len(t) - len(start), len(t)), start):
                    self._confirm(k)
                    ids[d] = t.ids[k]
        return ids, ended

    def predict(self, steps: int = 1, still: bool = False, tentative: bool = False,
                bounds: tuple[float, float] | None = None) -> tuple[list[TrackedBox], list[int]]:
        """A frame without detection ``steps`` frames after the previous call: the tracked
        objects at their predicted boxes (held in place when ``still``; clipped to ``bounds``,
        the frame's (width, height); see :meth:`tracked`), and the ids of tracks that ended."""
        self.bounds = bounds
        self._advance(steps, still)
        ended = self._forget(np.ones(len(self.tracks), bool))
        return self.tracked(tentative), ended

    def tracked(self, tentative: bool = False) -> list[TrackedBox]:
        """Confirmed tracks currently tracked (not lost), in track order; with ``tentative``
        also those not yet confirmed (track id -1).  Given the frame's size, only those whose
        box is still partly inside it."""
        t = self.tracks
        boxes = self._predicted_boxes(np.arange(len(t)))
        inside = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        return [TrackedBox(t.ids[i] if t.state[i] == TRACKED else -1, boxes[i], t.labels[i], t.scores[i],
                           t.payloads[i], t.boxes[i])
                for i in range(len(t)) if inside[i] and (t.state[i] == TRACKED or (tentative and t.state[i] == NEW))]

    def estimates(self) -> dict[int, np.ndarray]:
        """Track id -> the filter's box (4,) now, unclipped, for confirmed tracks being tracked."""
        t = self.tracks
        rows = [i for i in range(len(t)) if t.state[i] == TRACKED]
        return dict(zip((t.ids[i] for i in rows), state_to_xyxy(t.mean[rows]))) if rows else {}

    # internals ------------------------------------------------------------------------------
    def _shadowed(self) -> np.ndarray:
        """Per track: True for one not yet confirmed whose box overlaps a confirmed track's (tracked
        or lost) by :data:`SHADOW_IOU` or more: most likely a detector's second box on that object."""
        t = self.tracks
        state = np.array(t.state, np.int64)
        new, confirmed = np.flatnonzero(state == NEW), np.flatnonzero(state != NEW)
        out = np.zeros(len(t), bool)
        if len(new) and len(confirmed):
            boxes = state_to_xyxy(t.mean)
            out[new] = iou_matrix(boxes[new], boxes[confirmed]).max(axis=1) >= SHADOW_IOU
        return out

    def _held(self, missed: np.ndarray, before: np.ndarray | None, motion: np.ndarray | None) -> set[int]:
        """Rows of tracked objects in ``missed`` to hold in place: no motion region meets their box
        and they have not been held ``hold_misses`` times in a row.  Their motion is undone."""
        t = self.tracks
        if motion is None or before is None:
            return set()
        rows = np.array([i for i in missed.tolist() if i < len(before) and t.state[i] == TRACKED
                         and t.held[i] < self.config.hold_misses], np.int64)
        if not len(rows):
            return set()
        regions = np.asarray(motion, np.float64).reshape(-1, 4)
        moved = (iou_matrix(state_to_xyxy(before[rows]), regions) > 0).any(axis=1) if len(regions) else \
            np.zeros(len(rows), bool)
        still = rows[~moved]
        t.mean[still] = before[still]
        for i in still.tolist():
            t.held[i] += 1
        return set(still.tolist())

    def _predicted_boxes(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), 4) corners of the tracks ``rows`` now, clipped to the frame if its size is known."""
        if not len(rows):
            return np.zeros((0, 4))
        boxes = state_to_xyxy(self.tracks.mean[rows])
        if self.bounds is not None:
            w, h = self.bounds
            np.clip(boxes, 0.0, [w, h, w, h], out=boxes)
        return boxes

    def _advance(self, steps: int, still: bool) -> None:
        """Move the tracks on ``steps`` frames: the filter predicts at most :data:`MAX_STEPS` of them,
        lost tracks age by all of them."""
        t = self.tracks
        if not len(t):
            return
        steps = int(max(steps, 1))
        if still:  # boxes stay where they are; lost tracks age all the same
            t.unseen = [u + steps if s == LOST else u for u, s in zip(t.unseen, t.state)]
            return
        t.mean, t.cov = self.kalman.predict(t.mean, t.cov, min(steps, MAX_STEPS))
        t.unseen = [u + steps for u in t.unseen]

    def _associate(self, tracks: np.ndarray, dets: np.ndarray, boxes: np.ndarray, labels: list[str],
                   min_iou: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Optimal IoU pairs (positions in ``tracks``, positions in ``dets``) and the unmatched positions."""
        if not len(tracks) or not len(dets):
            return np.zeros((0, 2), np.int64), np.arange(len(tracks)), np.arange(len(dets))
        t = self.tracks
        iou = iou_matrix(self._predicted_boxes(tracks), boxes[dets])
        same = np.array(t.labels, object)[tracks][:, None] == np.array(labels, object)[dets][None, :]
        limit = 1.0 - min_iou
        cost = 1.0 - iou
        other = ~same
        # another label's box: none with per_class, else ranked as less overlap (at worst as little as
        # min_iou, the threshold it still has to pass)
        cost[other] = np.inf if self.config.per_class else np.minimum(cost[other] + LABEL_CHANGE_COST, limit)
        cost[iou < min_iou] = np.inf
        return match(cost, limit + 1e-9)

    def _correct(self, det_track: np.ndarray, boxes: np.ndarray, scores: np.ndarray, labels: list[str],
                 payloads: list[Any]) -> None:
        t = self.tracks
        dets = np.flatnonzero(det_track >= 0)
        if not len(dets):
            return
        rows = det_track[dets]
        t.mean[rows], t.cov[rows] = self.kalman.update(t.mean[rows], t.cov[rows], boxes[dets])
        for d, i in zip(dets.tolist(), rows.tolist()):
            if t.state[i] == NEW:
                t.hits[i] += 1
                if t.hits[i] >= self.config.min_hits:
                    self._confirm(i)
            else:
                t.state[i] = TRACKED
                t.hits[i] += 1
            t.unseen[i] = 0
            t.held[i] = 0
            t.scores[i] = float(scores[d])
            t.payloads[i] = payloads[d]
            t.boxes[i] = boxes[d].copy()
            if not self.config.per_class:
                t.labels[i] = labels[d]

    def _confirm(self, i: int) -> None:
        self.issued += 1
        self.tracks.ids[i] = self.issued
        self.tracks.state[i] = TRACKED

    def _forget(self, alive: np.ndarray) -> list[int]:
        """Drop tracks not ``alive`` and lost ones unseen for too long; the ids of confirmed ones."""
        t = self.tracks
        ended = []
        for i in range(len(t)):
            if t.state[i] == LOST and t.unseen[i] > self.config.lost_frames:
                alive[i] = False
            if not alive[i] and t.ids[i]:
                ended.append(t.ids[i])
        if not alive.all():
            t.keep(alive)
        return ended
