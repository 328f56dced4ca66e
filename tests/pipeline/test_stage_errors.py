"""A stage's ``on_error`` policy (:class:`pipeline.stage_errors.StageErrorPolicy`) on its own."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.config import parse_config
from pipeline.frame import Frame
from pipeline.graph import build_graph
from pipeline.stage import InferStage, Stage
from pipeline.stage_errors import StageErrorPolicy
from pipeline.stats import SourceStats

RESTART = """
pipelines:
  p:
    stages:
      - {name: src, type: "pipeline.testing:ListSource"}
      - {name: flaky, type: "pipeline.testing:SleepInfer", on_error: restart}
      - {name: sink, type: "pipeline.testing:CollectSink"}
"""


class Recorded(InferStage):
    """Inference finished at once; ``events`` lists its opens and closes."""

    def open(self) -> None:
        self.events.append("open")

    def close(self) -> None:
        self.events.append("close")

    def start(self, frame: Frame) -> int:
        return frame.seq

    def is_done(self, ticket: int) -> bool:
        return True

    def complete(self, frame: Frame, ticket: int) -> Frame:
        return frame


class OpenOnly(Stage):
    """A stage with an ``open`` and no ``close`` of its own; ``events`` lists its opens."""

    def open(self) -> None:
        self.events.append("open")


@pytest.mark.parametrize("kind, events", [
    (Recorded, ["open", "close", "open", "close", "open"]),
    (OpenOnly, ["open", "open", "open"]),
])
def test_each_restart_closes_and_opens_the_stage_once(kind: type[Stage], events: list[str]) -> None:
    graph = build_graph(parse_config(RESTART, "t.yaml").get("p"))
    stages = graph.instantiate()
    stage = stages["flaky"] = kind(name="flaky")
    stage.events = []  # type: ignore[attr-defined]
    policy = StageErrorPolicy(graph, stages, "cam", SourceStats("cam"), lambda name: 0)
    stage.ensure_open()
    out = []
    for seq in range(3):
        if seq:
            assert policy.handle("flaky", ValueError(f"failed on frame {seq - 1}"))
        frame = Frame.from_image(np.zeros((8, 8, 3), np.uint8), "cam", seq)
        if isinstance(stage, InferStage):
            stage.submit(frame)
            out += stage.poll()
        else:
            out.append(stage(frame))
    assert stage.events == events  # type: ignore[attr-defined]
    assert [f.seq for f in out] == [0, 1, 2] and policy.stats.skipped_errors == 2
