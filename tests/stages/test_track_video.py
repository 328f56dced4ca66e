"""The tracker on the shared real clips, through the runtime with the shipped models."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.config import apply_overrides, parse_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
from tests.bench.intervals import PIPELINES  # faces (with face mesh) and persons, each with track and metadata


def tracked(name: str, clip: Path, tmp_path: Path, sets: list[str] = ()) -> list[list[int]]:
    """Track ids per frame (confirmed tracks only), from the JSON Lines."""
    spec = apply_overrides(parse_config(PIPELINES, "p.yaml").get(name), list(sets))
    graph = build_graph(spec, "p.yaml")
    summary = run_pipeline(graph, [str(clip)], RunOptions(output_dir=tmp_path, handle_signals=False))
    assert summary.error is None
    records = [json.loads(line) for line in (tmp_path / f"{clip.stem}.jsonl").read_text().splitlines()]
    return [sorted(o["track_id"] for o in r["objects"] if o["track_id"] is not None) for r in records]


def test_two_faces_keep_two_ids_from_start_to_end(videos_dir: Path, tmp_path: Path) -> None:
    ids = tracked("faces", videos_dir / "head-pose-face-detection-female-and-male.gif", tmp_path)
    assert len(ids) == 56
    # both faces are found on every frame; ids are confirmed on the second frame and never change
    assert ids[0] == [] and all(frame_ids == [1, 2] for frame_ids in ids[1:])


def test_one_person_id_per_person_who_enters(videos_dir: Path, tmp_path: Path) -> None:
    """Six people enter, one after another.  Counted by eye on contact sheets of the clip (every
    10th frame, then every 3rd around each entry and exit): each walks in from the bottom edge,
    stands at the table and leaves to the right, never two at once; they are in view at about
    frames 62-195, 228-445, 505-697, 748-870, 925-1195 and 1237-1365.

    ``min_hits: 4``: the pose detector gives a person who steps in close to the camera a head-sized
    box for two or three frames before the whole-body box (IoU near 0), which must not count as
    someone else."""
    ids = tracked("persons", videos_dir / "one-by-one-person-detection.mp4", tmp_path, ["track.min_hits=4"])
    people = 6
    first = {}
    for seq, frame_ids in enumerate(ids):
        for t in frame_ids:
            first.setdefault(t, seq)
    assert sorted(first) == list(range(1, people + 1))
    entries = [62, 228, 505, 748, 925, 1237]
    assert all(e <= first[i + 1] <= e + 15 for i, e in enumerate(entries)), first
    assert max(len(f) for f in ids) == 1  # never two at once
