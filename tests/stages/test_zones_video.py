"""Lines and zones on the shared real clips, through the runtime with real detectors and the tracker.

The truth was counted by eye on contact sheets of each clip (see test_track_video.py for the
frames): four cars cross ``car-detection.mp4`` (seen from above, each taking about half the
picture's height), two driving up and two down; six people walk into
``one-by-one-person-detection.mp4`` from the bottom edge one after another, stop at the table
(centre x about 0.52-0.62 of the width) and leave to the right, never two at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline

CARS = """
pipelines:
  cars:
    stages:
      - {name: decode, type: decode}
      - {name: detect, type: detect, params: {model: MODELS/yolo/yolo11n_int8_openvino_model}}
      - {name: track, type: track}
      - name: counting
        type: zones
        params:
          anchor: center      # seen from above: a car's bottom edge is not where it stands
          lines: {middle: {points: [[0, 0.5], [1, 0.5]]}}   # left to right: moving down is "in"
          zones: {lower: {points: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]},
                  upper: {points: [[0, 0], [1, 0], [1, 0.5], [0, 0.5]]}}
      - {name: metadata, type: metadata}
"""
PEOPLE = """
pipelines:
  people:
    stages:
      - {name: decode, type: decode}
      - {name: person_detect, type: detect, params: {model: mediapipe/pose_detection, decoder: pose}}
      - {name: track, type: track, params: {min_hits: 4}}
      - name: counting
        type: zones
        params:
          anchor: center
          # bottom to top: walking right is "in"; 'stand' runs through where people stop
          lines: {stand: {points: [[0.585, 1], [0.585, 0]]}, passage: {points: [[0.65, 1], [0.65, 0]]}}
          zones: {table: {points: [[0.54, 0.2], [0.67, 0.2], [0.67, 0.8], [0.54, 0.8]]}}
      - name: everywhere   # the default bottom centre, on a zone drawn to the frame's edges
        type: zones
        params: {zones: {picture: {points: [[0, 0], [1, 0], [1, 1], [0, 1]]}}}
      - {name: metadata, type: metadata}
"""


def run(text: str, name: str, clip: Path, tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's counters and the events of its JSON Lines."""
    graph = build_graph(parse_config(text, "p.yaml").get(name), "p.yaml")
    summary = run_pipeline(graph, [str(clip)], RunOptions(output_dir=tmp_path, handle_signals=False))
    assert summary.error is None
    lines = [json.loads(x) for x in (tmp_path / f"{clip.stem}.jsonl").read_text().splitlines()]
    return summary.sources[0].counters, [x for x in lines if "event" in x]


def totals(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    return {what: sum(by_label.values()) for what, by_label in counts.items()}


def test_cars_crossing_a_line_and_passing_through_zones(shared_models_dir: Path, videos_dir: Path,
                                                        tmp_path: Path) -> None:
    counters, events = run(CARS.replace("MODELS", str(shared_models_dir)), "cars", videos_dir / "car-detection.mp4",
                           tmp_path)
    counting = counters["counting"]
    assert totals(counting["lines"]["middle"]) == {"in": 2, "out": 2}
    assert totals(counting["zones"]["lower"]) == {"enter": 4, "exit": 4}
    assert totals(counting["zones"]["upper"]) == {"enter": 4, "exit": 4}
    crossed = sorted((e["track_id"], e["direction"]) for e in events if e["event"] == "line_cross")
    assert len({t for t, _ in crossed}) == 4  # each car once
    # the last car leaves through the bottom edge 30 frames before the clip ends: it exits then
    last_exit = max(e["seq"] for e in events if e["event"] == "zone_exit" and e["zone"] == "lower")
    assert 340 <= last_exit <= 355


def test_people_at_a_table_counted_once_each(videos_dir: Path, tmp_path: Path) -> None:
    counters, events = run(PEOPLE, "people", videos_dir / "one-by-one-person-detection.mp4", tmp_path)
    counting = counters["counting"]
    # standing on the 'stand' line (their centres sway across it) counts each person once
    assert totals(counting["lines"]["stand"]) == {"in": 6, "out": 0}
    assert totals(counting["lines"]["passage"]) == {"in": 6, "out": 0}
    assert totals(counting["zones"]["table"]) == {"enter": 6, "exit": 6}
    assert totals(counters["everywhere"]["zones"]["picture"]) == {"enter": 6, "exit": 6}
    visits = [(62, 195), (228, 445), (505, 697), (748, 870), (925, 1195), (1237, 1365)]
    enters = sorted(e["seq"] for e in events if e["event"] == "zone_enter" and e["zone"] == "table")
    exits = sorted(e["seq"] for e in events if e["event"] == "zone_exit" and e["zone"] == "table")
    assert all(a <= s <= b and a <= x <= b + 5 for s, x, (a, b) in zip(enters, exits, visits)), (enters, exits)
