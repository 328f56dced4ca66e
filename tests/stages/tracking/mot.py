"""Tracker evaluation on the pedestrian ground truth that py-motmetrics ships (TUD-Campus,
TUD-Stadtmitte): noisy detection streams made from the ground truth, vapipe's tracker and
Roboflow's ByteTrack (PyPI ``trackers``) run on the same streams, both scored with motmetrics.

Boxes are MOTChallenge ``(x, y, width, height)`` in the files and ``[x1, y1, x2, y2]`` for
the trackers.  Detection noise, per ground-truth box: dropped with ``miss`` (10-20 %), corners moved by
a normal error of ``jitter`` times the box size, scores drawn around 0.7 (some fall below the
trackers' 0.5 split); per frame a Poisson number of false positives (mean ``false_per_frame``)
of ground-truth-like size anywhere in the image, scores around 0.4.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SEQUENCES = ("TUD-Campus", "TUD-Stadtmitte")
IMAGE_WH = (640, 480)  # both TUD sequences
FPS = 25.0

#: py-motmetrics' own results for its test.txt against gt.txt (its Readme, "MOTChallenge compatibility")
PUBLISHED = {
    "TUD-Campus": {"idf1": 0.558, "idp": 0.730, "idr": 0.451, "recall": 0.582, "precision": 0.941,
                   "num_unique_objects": 8, "mostly_tracked": 1, "partially_tracked": 6, "mostly_lost": 1,
                   "num_false_positives": 13, "num_misses": 150, "num_switches": 7, "num_fragmentations": 7,
                   "mota": 0.526, "motp": 0.277},
    "TUD-Stadtmitte": {"idf1": 0.645, "idp": 0.820, "idr": 0.531, "recall": 0.609, "precision": 0.940,
                       "num_unique_objects": 10, "mostly_tracked": 5, "partially_tracked": 4, "mostly_lost": 1,
                       "num_false_positives": 45, "num_misses": 452, "num_switches": 7, "num_fragmentations": 6,
                       "mota": 0.564, "motp": 0.346},
}
METRICS = ("mota", "idf1", "num_switches", "motp", "recall", "precision", "num_false_positives", "num_misses")


def data_dir() -> Path:
    import motmetrics

    return Path(motmetrics.__file__).parent / "data"


@dataclass
class Boxes:
    """Per frame (1-based frame numbers): ids (K,) and xyxy (K, 4)."""

    frames: dict[int, tuple[np.ndarray, np.ndarray]]

    @property
    def numbers(self) -> list[int]:
        return sorted(self.frames)


def load(seq: str, name: str = "gt") -> Boxes:
    """``gt`` or ``test`` of a sequence: MOTChallenge rows ``frame, id, x, y, w, h, conf, ...``;
    ground-truth rows with confidence 0 are ignored (as motmetrics does)."""
    rows = np.loadtxt(data_dir() / seq / f"{name}.txt", delimiter=",", ndmin=2)
    if name == "gt":
        rows = rows[rows[:, 6] >= 1]
    frames: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    last = int(rows[:, 0].max())
    for f in range(1, last + 1):
        sel = rows[rows[:, 0] == f]
        xyxy = np.concatenate([sel[:, 2:4], sel[:, 2:4] + sel[:, 4:6]], axis=1)
        frames[f] = (sel[:, 1].astype(np.int64), xyxy)
    return Boxes(frames)


def noisy_stream(gt: Boxes, seed: int, miss: float | None = None, jitter: float = 0.04,
                 false_per_frame: float = 0.3) -> list[tuple[np.ndarray, np.ndarray]]:
    """Detections (xyxy (N, 4), scores (N,)) per frame of ``gt``; seeded.  ``miss`` None: a miss
    rate drawn from [0.10, 0.20) by the seed."""
    rng = np.random.default_rng(seed)
    if miss is None:
        miss = float(rng.uniform(0.10, 0.20))
    all_boxes = np.concatenate([b for _, b in gt.frames.values() if len(b)])
    sizes = all_boxes[:, 2:] - all_boxes[:, :2]
    w, h = IMAGE_WH
    out = []
    for f in gt.numbers:
        _, boxes = gt.frames[f]
        keep = rng.random(len(boxes)) >= miss
        b = boxes[keep].copy()
        wh = np.repeat(b[:, 2:] - b[:, :2], 2, axis=0).reshape(-1, 4)
        b += rng.normal(0, jitter, b.shape) * wh
        s = np.clip(rng.normal(0.7, 0.15, len(b)), 0.05, 1.0)
        n_false = rng.poisson(false_per_frame)
        fsz = sizes[rng.integers(0, len(sizes), n_false)]
        fxy = rng.random((n_false, 2)) * (np.array([w, h]) - fsz).clip(1)
        fb = np.concatenate([fxy, fxy + fsz], axis=1)
        fs = np.clip(rng.normal(0.4, 0.15, n_false), 0.05, 1.0)
        out.append((np.concatenate([b, fb]), np.concatenate([s, fs])))
    return out


def run_vapipe(stream: list[tuple[np.ndarray, np.ndarray]], **params: Any) -> Boxes:
    """vapipe's track stage on the stream (one frame per entry); confirmed tracks only."""
    from pipeline.frame import Detections, Frame
    from stages.track import Track

    image = np.zeros((IMAGE_WH[1], IMAGE_WH[0], 3), np.uint8)
    frames = {}
    with Track(**params) as tracker:
        tracker.source_fps = FPS
        for i, (xyxy, scores) in enumerate(stream):
            frame = Frame.from_image(image, "mot", seq=i)
            frame.detections = Detections(xyxy=xyxy, score=scores, label=["person"] * len(xyxy))
            out = tracker(frame).detections
            sel = out.track_id >= 0
            frames[i + 1] = (out.track_id[sel].copy(), out.xyxy[sel].astype(np.float64))
    return Boxes(frames)


def run_peer(stream: list[tuple[np.ndarray, np.ndarray]], **kwargs: Any) -> Boxes:
    """Roboflow's ByteTrackTracker (``trackers``) on the stream, as its users call it."""
    import supervision as sv
    from trackers import ByteTrackTracker

    tracker = ByteTrackTracker(**kwargs)
    frames = {}
    for i, (xyxy, scores) in enumerate(stream):
        dets = sv.Detections(xyxy=np.asarray(xyxy, np.float32).reshape(-1, 4),
                             confidence=np.asarray(scores, np.float32), class_id=np.zeros(len(xyxy), int))
        out = tracker.update(dets)
        sel = out.tracker_id >= 0
        frames[i + 1] = (out.tracker_id[sel].astype(np.int64), out.xyxy[sel].astype(np.float64))
    return Boxes(frames)


def peer_kwargs_like_vapipe(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """ByteTrackTracker arguments carrying vapipe's track defaults (or ``params``)."""
    from stages.track import Track

    p = Track.Params(**(params or {}))
    return {"lost_track_buffer": p.lost_frames, "frame_rate": 30.0,  # its buffer counts 30 fps frames
            "track_activation_threshold": p.new_track_score, "minimum_consecutive_frames": p.min_hits,
            "minimum_iou_threshold": p.match_iou, "high_conf_det_threshold": p.high_score}


def iou_distance(a: np.ndarray, b: np.ndarray, max_distance: float = 0.5) -> np.ndarray:
    """(N, M) 1 - IoU of xyxy boxes, NaN above ``max_distance`` (motmetrics' convention: no match)."""
    from stages.models.nms import iou_matrix

    if not len(a) or not len(b):
        return np.empty((len(a), len(b)))
    d = 1.0 - iou_matrix(a, b)
    d[d > max_distance] = np.nan
    return d


def score(gt: Boxes, hyp: Boxes) -> dict[str, float]:
    """motmetrics' CLEAR-MOT and identity metrics of ``hyp`` against ``gt`` (IoU >= 0.5 matches)."""
    import motmetrics as mm

    acc = mm.MOTAccumulator(auto_id=False)
    empty = (np.zeros(0, np.int64), np.zeros((0, 4)))
    for f in sorted(set(gt.frames) | set(hyp.frames)):
        gids, gboxes = gt.frames.get(f, empty)
        hids, hboxes = hyp.frames.get(f, empty)
        acc.update(gids.tolist(), hids.tolist(), iou_distance(gboxes, hboxes), frameid=f)
    names = list(PUBLISHED["TUD-Campus"])
    summary = mm.metrics.create().compute(acc, metrics=names, name="seq")
    return {k: float(summary[k].iloc[0]) for k in names}
