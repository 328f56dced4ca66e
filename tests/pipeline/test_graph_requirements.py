"""Stages that need another kind of stage before them fail when the graph is built, in one line
naming the stage and the field."""

from __future__ import annotations

import pytest

from pipeline.config import ConfigError, parse_config
from pipeline.graph import build_graph

DETECT = "{name: det, type: detect, params: {model: m.xml, decoder: blazeface}}"
TRACK = "{name: track, type: track}"
ZONES = "{name: counting, type: zones, params: {lines: {l: {points: [[0, 0.5], [1, 0.5]]}}}}"
MESH = "{name: mesh, type: classify, params: {model: m.xml, decoder: face_landmarks, on: [face], reclassify: 0}}"


def build(*stages: str) -> None:
    text = "pipelines:\n  p:\n    stages:\n      - {name: decode, type: decode}\n" + \
        "".join(f"      - {s}\n" for s in stages)
    build_graph(parse_config(text, "p.yaml", check_files=False).get("p"), "p.yaml")


@pytest.mark.parametrize("stages, message", [
    ([TRACK], r"^p.yaml:5: pipeline 'p' stage 'track': field 'inputs': no stage before it provides detections "
              r"\(e.g. type: detect\); before it: decode$"),
    ([DETECT, ZONES], r"^p.yaml:6: pipeline 'p' stage 'counting': field 'inputs': no stage before it provides "
                      r"tracks \(e.g. type: track\); before it: decode, det$"),
    ([DETECT, MESH], r"^p.yaml:6: pipeline 'p' stage 'mesh': field 'reclassify': no stage before it provides "
                     r"tracks \(e.g. type: track\); before it: decode, det$"),
    ([DETECT, ZONES, TRACK], r"stage 'counting': field 'inputs': no stage before it provides tracks"),
    ([MESH.replace(", reclassify: 0", "")], r"^p.yaml:5: pipeline 'p' stage 'mesh': field 'on': no stage before it "
                                            r"provides detections \(e.g. type: detect\); before it: decode$"),
])
def test_missing_provider_is_a_one_line_error(stages: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build(*stages)


def test_providers_before_satisfy_the_requirements() -> None:
    build(DETECT, TRACK, ZONES, MESH)
    build("{name: mine, type: \"tests.stages.shapes:ColourShapes\"}", TRACK, ZONES)  # a user's detector


def test_a_provider_on_another_branch_does_not_count() -> None:
    with pytest.raises(ConfigError, match=r"stage 'track': field 'inputs'"):
        build(DETECT, "{name: track, type: track, inputs: [decode]}")
