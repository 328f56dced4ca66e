"""The vapipe modes: the real runtime (:func:`pipeline.runtime.run_pipeline`) on the
pipeline with its output sinks replaced by the in-memory recorder (the baselines
write no files either).

``vapipe`` (asynchronous, thread plan), ``vapipe-sync`` (one request per camera, no
overlap), ``vapipe-unplanned`` (``--cores 0``: every runtime's own thread defaults;
``vapipe/vapipe-unplanned`` is what the plan is worth), ``vapipe-rN`` (``--requests N``,
the points of the latency-vs-FPS sweep) and ``vapipe-ort`` (every inference stage on
ONNX Runtime, :mod:`bench.engine_modes`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .chain import load_spec
from .engine_modes import engine_overrides, mode_engine
from .measure import cpu_s, mode_result, write_records
from .plan import BenchError, BenchPlan, sweep_requests
from .recorder import RECORDER_TYPE, BenchRecorder

__all__ = ["bench_spec", "run_vapipe", "work_per_frame", "RECORDER"]

RECORDER = "bench_record"   # stage name of the recorder in the bench spec


def bench_spec(spec: Any, plan: BenchPlan) -> Any:
    """``spec`` with its output sinks replaced by the recorder, ``plan.overrides`` applied
    and the source looping when the plan needs more frames than the file has."""
    from pipeline.config import StageSpec
    from pipeline.graph import build_graph
    from pipeline.registry import resolve_stage_type

    sinks = {st.name for st in spec.stages if resolve_stage_type(st.type).kind == "sink"}
    kept = []
    for st in spec.stages:
        if st.name in sinks:
            continue
        if st.inputs and any(i in sinks for i in st.inputs):
            raise BenchError(f"bench: stage {st.name!r} reads from the output stage(s) {sorted(sinks)}; "
                             "cannot replace them with the recorder")
        kept.append(st.model_copy(deep=True))
    for st in kept:
        if st.name in plan.overrides:
            st.params.update(plan.overrides[st.name])
    if plan.loop:
        for st in kept:
            if resolve_stage_type(st.type).kind == "source":
                st.params["loop"] = True
    new = spec.model_copy(update={"stages": kept}, deep=True)
    g = build_graph(new, plan.config).graph
    leaves = [n for n in g if g.out_degree(n) == 0]
    new.stages.append(StageSpec(name=RECORDER, type=RECORDER_TYPE, inputs=leaves,
                                params={"keep": plan.record_frames}))
    return new


def run_vapipe(plan: BenchPlan, mode: str) -> dict[str, Any]:
    """``mode``: vapipe, vapipe-sync, vapipe-unplanned, vapipe-rN or vapipe-ort (see the module docstring)."""
    from pipeline.config import validate_pipeline
    from pipeline.graph import build_graph
    from pipeline.runtime import RunOptions, run_pipeline, source_ids

    spec = load_spec(plan)
    engine = mode_engine(mode)
    if engine:
        overrides = {k: dict(v) for k, v in plan.overrides.items()}
        for stage, params in engine_overrides(spec, engine).items():
            overrides.setdefault(stage, {}).update(params)
        plan = replace(plan, overrides=overrides)
    spec = bench_spec(spec, plan)
    sources = [plan.source] * plan.cameras
    spec.stages[-1].params["source"] = source_ids(sources)[0]
    validate_pipeline(spec, plan.config)
    graph = build_graph(spec, plan.config)
    opts = RunOptions(output_dir=Path(plan.out) / "vapipe-output", sync=mode == "vapipe-sync",
                      max_frames=plan.frames, handle_signals=False, requests=sweep_requests(mode),
                      cores=0 if mode == "vapipe-unplanned" else None)
    first: list[tuple[float, float]] = []

    def progress(stats: list[Any]) -> None:
        if not first and any(s.processed for s in stats):
            first.append((time.perf_counter(), cpu_s()))

    BenchRecorder.records.clear()
    summary = run_pipeline(graph, sources, opts, progress=progress)
    last = (time.perf_counter(), cpu_s())
    if summary.error:
        raise BenchError(summary.error)
    cams = []
    for s in summary.sources:
        lat = s.latency.summary()
        c = {"frames": s.processed, "fps": round(s.fps, 2)}
        if lat["count"]:
            c["latency_p50_ms"] = round(lat["p50_ms"], 2)
            c["latency_p95_ms"] = round(lat["p95_ms"], 2)
        cams.append(c)
    spans = [(s.first_out, s.last_out) if s.first_out is not None else None for s in summary.sources]
    res = mode_result(cams, first[0] if first else None, last, spans)
    res["stages"] = {n: {k: round(v, 3) for k, v in st.summary().items()} for n, st in summary.stages.items()
                     if n != RECORDER}
    res["threads"] = summary.threads
    res["precision"] = (summary.plan or {}).get("precision", {})  # stage -> the hint the plan chose
    check = getattr(summary, "plan_check_text", None)   # how the run matched its thread plan, and why not
    if check:
        res["plan_check"] = check
    work = work_per_frame((summary.plan_check or {}).get("observed"))
    if work:
        res["work_ms"] = work
    write_records(plan.out, mode, dict(BenchRecorder.records))
    return res


def work_per_frame(observed: dict[str, Any] | None) -> dict[str, float] | None:
    """CPU milliseconds per frame the run spent, by kind, from its plan check's observed
    costs: ``decode`` (mean over the cameras), ``host`` (the workers' own work) and
    ``models`` (every inference stage, times its inferences per frame); None when the run
    was too short to be observed."""
    if not observed:
        return None
    decode = [x for x in observed.get("decode_ms") or [] if x is not None]
    per_frame = observed.get("per_frame") or {}
    models = sum(ms * per_frame.get(name, 0.0) for name, ms in (observed.get("infer_ms") or {}).items())
    if not decode or observed.get("host_ms") is None:
        return None
    return {"decode": round(sum(decode) / len(decode), 3), "host": round(float(observed["host_ms"]), 3),
            "models": round(models, 3)}
