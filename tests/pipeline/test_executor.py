"""One camera's frames through its stages (:class:`pipeline.executor.GraphExecutor`), driven
frame by frame: inference finishes when a test says so."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pipeline.config import parse_config
from pipeline.executor import GraphExecutor
from pipeline.frame import Frame
from pipeline.graph import build_graph
from pipeline.stage import InferStage, Params
from pipeline.stats import LatencyStats
from pipeline.testing import SleepInfer


class Held(InferStage):
    """Inference that finishes when ``finished`` holds its frame's seq (``depth`` 2); it fails on
    the frames in ``fail`` and drops those in ``drop``."""

    class Params(Params):
        fail: list[int] = []
        drop: list[int] = []

    params: Params

    def open(self) -> None:
        self.depth = 2
        self.finished: set[int] = set()

    def start(self, frame: Frame) -> int:
        return frame.seq

    def is_done(self, ticket: int) -> bool:
        return ticket in self.finished

    def complete(self, frame: Frame, ticket: int) -> Frame | None:
        if ticket in self.params.fail:
            raise ValueError(f"inference failed on frame {ticket}")
        return None if ticket in self.params.drop else frame


class FailingInfer(SleepInfer):
    """:class:`pipeline.testing.SleepInfer` whose inference fails on the frames in ``fail``."""

    class Params(SleepInfer.Params):
        fail: list[int] = []

    params: Params

    def complete(self, frame: Frame, ticket: Any) -> Frame:
        frame = super().complete(frame, ticket)
        if frame.seq in self.params.fail:
            raise ValueError(f"inference failed on frame {frame.seq}")
        return frame


class Run:
    """An executor over ``stages`` (YAML) whose stage ``held`` is a :class:`Held`; it records the
    frames reported and the errors (stage, seq), which every stage skips."""

    def __init__(self, stages: str, fail: list[int], drop: list[int] = ()) -> None:
        graph = build_graph(parse_config(f"pipelines:\n  p:\n    stages:\n{stages}", "t.yaml").get("p"))
        self.stages = graph.instantiate()
        self.held = self.stages["held"] = Held(name="held", fail=fail, drop=list(drop))
        for stage in self.stages.values():
            stage.ensure_open()
        self.stats = {n: LatencyStats() for n in graph.order}
        self.out: list[int] = []
        self.errors: list[tuple[str, int | None]] = []
        self.executor = GraphExecutor(graph, self.stages, True, self.stats, lambda f: self.out.append(f.seq),
                                      self._error)

    def _error(self, name: str, exc: BaseException, frame: Frame | None) -> bool:
        self.errors.append((name, None if frame is None else frame.seq))
        return True

    def feed(self, seqs: range) -> None:
        for seq in seqs:
            self.executor.feed(Frame.from_image(np.zeros((8, 8, 3), np.uint8), "cam", seq))


LINE = """\
      - {name: src, type: "pipeline.testing:ListSource"}
      - {name: held, type: "pipeline.testing:SleepInfer"}
      - {name: sink, type: "pipeline.testing:CollectSink"}
"""


@pytest.mark.parametrize("fail", [[0], [3], [5], [2, 3]])
@pytest.mark.parametrize("how", ["poll", "over depth", "finish"])
def test_a_failed_inference_drops_its_frame_alone(how: str, fail: list[int]) -> None:
    run = Run(LINE, fail)
    if how != "over depth":  # over depth: each frame with inference past the second waits for the oldest
        run.held.depth = 10
    run.feed(range(6))
    if how == "poll":  # all finished before the executor looks
        run.held.finished.update(range(6))
        run.executor.poll()
        assert run.executor.in_flight == 0
    run.executor.finish()
    kept = [seq for seq in range(6) if seq not in fail]
    assert run.out == kept and run.errors == [("held", seq) for seq in fail]
    assert run.stats["held"].count == run.executor.passed["held"] == len(kept)  # each latency its frame's
    assert run.stats["sink"].count == len(kept) and run.executor.in_flight == 0


TWO_LEAVES = """\
      - {name: src, type: "pipeline.testing:ListSource"}
      - {name: flaky, type: "pipeline.testing:Fail", params: {every: 2}}
      - {name: held, type: "pipeline.testing:SleepInfer", inputs: [src]}
"""


@pytest.mark.parametrize("depth, out", [(10, [0, 2, 4, 1, 3, 5]), (2, [0, 2, 1, 4, 3, 5])])
def test_a_frame_one_leaf_dropped_is_reported_once_by_the_other(depth: int, out: list[int]) -> None:
    run = Run(TWO_LEAVES, [])
    run.held.depth = depth
    run.feed(range(6))
    run.executor.finish()
    assert run.out == out and run.errors == [("flaky", 1), ("flaky", 3), ("flaky", 5)]


def test_nothing_is_kept_for_a_frame_an_inference_stage_dropped() -> None:
    run = Run(LINE, fail=[4], drop=[1, 2])
    run.held.depth = 10
    run.feed(range(6))
    run.held.finished.update(range(6))
    run.executor.finish()
    assert run.out == [0, 3, 5] and run.errors == [("held", 4)]
    assert run.executor._submitted == {}  # per frame: what a camera running for weeks would pile up


JOIN = """\
      - {name: src, type: "pipeline.testing:ListSource"}
      - {name: flaky, type: "pipeline.testing:Fail", params: {every: 2}}
      - {name: held, type: "pipeline.testing:SleepInfer", inputs: [src]}
      - {name: sink, type: "pipeline.testing:CollectSink", inputs: [flaky, held]}
"""


def test_a_frame_one_input_of_a_join_dropped_is_forgotten_there() -> None:
    run = Run(JOIN, [])
    run.held.depth = 1
    run.held.finished.update(range(400))
    run.feed(range(400))
    run.executor.finish()
    assert run.out == list(range(0, 400, 2))  # the frames both inputs handed on
    assert len(run.executor._arrivals) <= 2  # not one for each of the 200 frames "flaky" dropped
