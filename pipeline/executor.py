"""Pushes the frames of one camera through its stages (:class:`GraphExecutor`), on the
camera's worker thread: fan-out, fan-in, asynchronous inference stages with results taken
back in ``seq`` order."""

from __future__ import annotations

import time
from typing import Callable

from .frame import Frame
from .graph import PipelineGraph
from .stage import InferStage, Stage
from .stats import LatencyStats
from .trace import LaneAllocator, Tracer

__all__ = ["GraphExecutor"]


class GraphExecutor:
    """Pushes frames of one camera through instantiated stages.

    Fan-out: a frame goes to every successor (the same object).  Fan-in: a
    stage with several inputs runs once a frame has arrived on all of them.
    Inference stages run asynchronously (``async_mode``) with up to their
    ``depth`` frames in flight.  Leaves report finished frames to ``on_output``, each frame
    once: when the first of several leaves hands it on (each leaf's frames leave in ``seq``
    order; a branch that dropped the frame does not hold it back).  A frame a stage fails
    on goes to ``on_error`` with that frame alone; the frames around it go on in order.
    """

    def __init__(self, graph: PipelineGraph, stages: dict[str, Stage], async_mode: bool,
                 stage_stats: dict[str, LatencyStats], on_output: Callable[[Frame], None],
                 on_error: Callable[[str, BaseException, Frame | None], bool],
                 tracer: Tracer | None = None, camera: str = "") -> None:
        self.graph = graph
        self.tracer = tracer
        self.camera = camera
        self._lanes = {n: LaneAllocator() for n in graph.order}
        self._lane_of: dict[tuple[str, int], tuple[int, int]] = {}
        self.stages = stages
        self.async_mode = async_mode
        self.stage_stats = stage_stats
        self.on_output = on_output
        self.on_error = on_error
        g = graph.graph
        self.order = [n for n in graph.order if n != graph.source]
        self.succ = {n: list(g.successors(n)) for n in graph.order}
        self.npred = {n: g.in_degree(n) for n in graph.order}
        self._arrivals: dict[tuple[str, int], int] = {}
        self._leaves = sum(1 for n in graph.order if not self.succ[n])
        self._joins = any(n > 1 for n in self.npred.values())
        self._reported: set[int] = set()  # seqs reported at or above _reported_below (several leaves)
        self._reported_below = 0  # the frames before it have all left the graph
        self._submitted: dict[tuple[str, int], int] = {}
        #: frames each stage has handled without an error (its error policy reads it)
        self.passed: dict[str, int] = {n: 0 for n in graph.order}

    def feed(self, frame: Frame) -> None:
        if self._leaves > 1 or self._joins:
            self._forget_left(frame.seq)
        self._emit(self.graph.source, frame)

    def _forget_left(self, seq: int) -> None:
        """Forget what is kept for frames that have left the graph, or were dropped on a branch:
        those before the oldest frame still in flight (or ``seq``, entering) - reported seqs, and
        arrivals at a stage with several inputs that one input will never complete."""
        oldest = (st.oldest for st in self.stages.values() if isinstance(st, InferStage))
        low = min([seq, *(f.seq for f in oldest if f is not None)])
        if low > self._reported_below:
            self._reported_below = low
            self._reported = {s for s in self._reported if s >= low}
            if self._arrivals:
                self._arrivals = {key: n for key, n in self._arrivals.items() if key[1] >= low}

    @property
    def in_flight(self) -> int:
        """Frames inside asynchronous stages."""
        return sum(st.in_flight for st in self.stages.values() if isinstance(st, InferStage))

    def poll(self) -> None:
        """Hand on frames that finished since the last call (never blocks)."""
        if self.async_mode:
            self._collect(wait=False)

    def finish(self) -> None:
        """Drain every inference stage in topological order."""
        if self.async_mode:
            self._collect(wait=True)

    def _collect(self, wait: bool) -> None:
        for name in self.order:
            stage = self.stages[name]
            if isinstance(stage, InferStage):
                for f in self._finished(name, stage, wait):
                    self._done(name, f)

    def _finished(self, name: str, stage: InferStage, wait: bool) -> list[Frame]:
        """The stage's frames, in order, while the oldest has finished (``wait``: all of them)."""
        outs: list[Frame] = []
        while stage.in_flight and (wait or stage.oldest_done()):
            outs.extend(self._oldest(name, stage))
        return outs

    def _oldest(self, name: str, stage: InferStage) -> list[Frame]:
        """The stage's oldest frame (waiting for it), or [] if dropped; if it fails, that frame
        alone goes to ``on_error``."""
        frame = stage.oldest
        try:
            outs = stage.pop_oldest()
        except Exception as exc:  # noqa: BLE001 - routed through the error policy
            outs = []
            self.on_error(name, exc, frame)
        if not outs and frame is not None:  # failed, or dropped by the stage
            self._forget(name, frame.seq)
        return outs

    def _emit(self, name: str, frame: Frame) -> None:
        succ = self.succ[name]
        if not succ:
            if self._leaves > 1:
                if frame.seq < self._reported_below or frame.seq in self._reported:
                    return
                self._reported.add(frame.seq)
            self.on_output(frame)
            return
        for nxt in succ:
            self._push(nxt, frame)

    def _push(self, name: str, frame: Frame) -> None:
        if self.npred[name] > 1:
            key = (name, frame.seq)
            n = self._arrivals.get(key, 0) + 1
            if n < self.npred[name]:
                self._arrivals[key] = n
                return
            self._arrivals.pop(key, None)
        stage = self.stages[name]
        t0 = time.perf_counter_ns()
        is_async = self.async_mode and isinstance(stage, InferStage)
        try:
            if is_async:
                stage.submit(frame)
                self._submitted[(name, frame.seq)] = t0
                if self.tracer is not None:
                    self._lane_of[(name, frame.seq)] = (self._lanes[name].take(), self.tracer.now())
            else:
                out = stage.process(frame)
        except Exception as exc:  # noqa: BLE001 - routed through the error policy
            self.on_error(name, exc, frame)
            return
        if is_async:
            # every frame this stage hands on now is taken out before any goes further
            outs = self._finished(name, stage, wait=False)
            while stage.over_depth():
                outs.extend(self._oldest(name, stage))
            for f in outs:
                self._done(name, f)
            return
        t1 = time.perf_counter_ns()
        self.passed[name] += 1
        self.stage_stats[name].add((t1 - t0) / 1e6)
        if self.tracer is not None:
            end = self.tracer.now()
            self.tracer.slice(self.camera, name, f"frame {frame.seq}", end - (t1 - t0), end, seq=frame.seq)
        if out is not None:
            self._emit(name, out)

    def _forget(self, name: str, seq: int) -> None:
        """Drop what was kept for frame ``seq`` in stage ``name`` (its start, its trace lane)."""
        self._submitted.pop((name, seq), None)
        lane = self._lane_of.pop((name, seq), None)
        if lane is not None:
            self._lanes[name].give(lane[0])

    def _done(self, name: str, frame: Frame) -> None:
        self.passed[name] += 1
        t0 = self._submitted.pop((name, frame.seq), None)
        if t0 is not None:
            self.stage_stats[name].add((time.perf_counter_ns() - t0) / 1e6)
        lane = self._lane_of.pop((name, frame.seq), None)
        if lane is not None and self.tracer is not None:
            self._lanes[name].give(lane[0])
            self.tracer.slice(self.camera, f"{name} request {lane[0]}", f"frame {frame.seq}", lane[1],
                              self.tracer.now(), seq=frame.seq)
        self._emit(name, frame)
