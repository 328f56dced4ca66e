"""Runs a pipeline graph on one or more sources in one process (:func:`run_pipeline`).

Per camera (:mod:`pipeline.camera`), three threads connected by bounded queues:

* **reader** — pulls compressed units (packets) from the source, as a camera
  delivers them (``capture_delay_ms`` adds latency per unit without CPU);
* **decoder** — turns units into frames;
* **worker** — pushes frames through the stages in topological order
  (:mod:`pipeline.executor`).
  Inference stages are asynchronous: the worker submits frame N+1 while
  frame N is still in flight and takes results back in ``seq`` order, so
  decoding and inference overlap and the slowest stage sets the rate.

``sync=True`` runs the same graph on one thread per camera with one infer
request and no overlap (the baseline the asynchronous mode must beat).

Every wait has a timeout and watches an event; a failure anywhere aborts the
run cleanly (stages closed, outputs finalised) with a one-line error.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable

from .executor import GraphExecutor
from .graph import PipelineGraph
from .left_readers import Stopped
from .run_options import RunOptions, StageFailure
from .source_names import source_ids
from .stats import RunSummary, SourceStats

__all__ = ["RunOptions", "run_pipeline", "GraphExecutor", "StageFailure", "install_signals", "source_ids"]


def run_pipeline(graph: PipelineGraph, sources: list[str], opts: RunOptions | None = None,
                 progress: Callable[[list[SourceStats]], None] | None = None) -> RunSummary:
    """Run ``graph`` on every source concurrently; returns the summary (never raises
    for stage failures: ``summary.error`` holds the one-line reason)."""
    from .plan_check import PlanCheck
    from .session import Session

    opts = opts or RunOptions()
    if not sources:
        raise ValueError("no source given; pass at least one --source")
    priorities = list(opts.priorities or [])
    if priorities and len(priorities) != len(sources):
        raise ValueError(f"{len(priorities)} priorities for {len(sources)} sources; give one per source")
    if not any(p.level != "normal" or p.min_fps for p in priorities):
        priorities = []  # all alike: no arbitration
    session = Session(graph, opts, expected_sources=len(sources))
    signalled = threading.Event()
    restore = install_signals(session.stop_sources, signalled) if opts.handle_signals else None
    check: PlanCheck | None = None
    try:
        try:
            session.add_sources(list(sources), priorities or None, ids=opts.source_ids, own=opts.source_overrides)
        except StageFailure as exc:
            session.failures.append(str(exc))
        except Stopped:
            pass  # stopped (Ctrl-C) while the sources opened: nothing ran, nothing failed
        else:
            if opts.on_session is not None:
                opts.on_session(session)
            check = PlanCheck(session.plan, session.cameras(), pipeline=graph.spec.name, uris=list(sources),
                              replan=opts.replan, cache=session.costs)
            while not session.wait(0.25):
                if progress is not None:
                    progress([c.stats for c in session.cameras()])
                if not opts.sync:
                    check.sample()
            if not opts.sync:
                check.finish()
            if progress is not None:
                progress([c.stats for c in session.cameras()])
    finally:
        summary = session.close()
        if restore is not None:
            restore()
        if check is not None:
            check.store()
    summary.stopped_by_signal = signalled.is_set()
    summary.plan = session.plan.as_dict()
    if check is not None:
        summary.plan_check = check.result
        summary.plan_check_text = "\n".join(check.summary_lines())
    return summary


def install_signals(stop: threading.Event, signalled: threading.Event) -> Callable[[], None] | None:
    """On the main thread: SIGINT/SIGTERM set ``signalled`` and ``stop`` (a second one raises
    KeyboardInterrupt); returns a function restoring the previous handlers (None elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set():  # second signal: stop waiting politely
            raise KeyboardInterrupt
        signalled.set()
        stop.set()
        os.write(2, b"\nstopping: finishing frames in flight and closing outputs...\n")

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, h in previous.items():
            signal.signal(sig, h)

    return restore
