"""The machine's limits for a pipeline: decoding alone, and its models alone.

``decode-alone``: PyAV decoding only (the source stage's decoder threads, one thread
per camera, all cores).  ``infer-alone``: the pipeline's compiled models (same
adapter input, hint and properties as the stages, through the engine, no thread plan)
on real inputs made the pipeline's way from the first frames, each model alone on an
``AsyncInferQueue`` with the optimal number of requests.  The model rate of the chain
is ``1 / (1/detector + sum over region models of objects per frame / model rate)``;
the limit reported next to vapipe is ``1 / (1/decode + 1/infer)``: both share the cores.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

import numpy as np

from .chain import load_chain, load_spec, plan_chain, selected
from .measure import Cameras, av_frames, cpu_s
from .plan import BenchPlan

__all__ = ["run_decode_alone", "run_infer_alone"]

SAMPLE_FRAMES = 24     # frames the model inputs are made from
MIN_INFERENCES = 20    # per model (cycled inputs)
MIN_SECONDS = 1.0      # per model: fast models run at least this long ...
MAX_SECONDS = 8.0      # ... and slow ones at most this long


def run_decode_alone(plan: BenchPlan) -> dict[str, Any]:
    chain = load_chain(load_spec(plan))
    cams = Cameras(plan.cameras)

    def camera(cam: int) -> None:
        t0 = time.perf_counter()
        for _ in av_frames(plan.source, chain.decode_threads, plan.frames, plan.loop):
            cams.clock.add(cam, t0)
            t0 = time.perf_counter()

    cams.run(camera)
    return cams.clock.result(latency=False)  # a decoder's "latency" means nothing here


def _throughput(compiled: Any, inputs: list[np.ndarray], count: int, max_s: float) -> tuple[float, float, float]:
    """(inferences per second, wall s, CPU s) of ``compiled`` alone on ``inputs`` (cycled)."""
    import openvino as ov

    jobs = max(2, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
    q = ov.AsyncInferQueue(compiled, jobs)
    for i in range(jobs):  # warm up every request
        q.start_async({0: inputs[i % len(inputs)][None]})
    q.wait_all()
    t0, c0 = time.perf_counter(), cpu_s()
    n = 0
    while (n < count or time.perf_counter() - t0 < MIN_SECONDS) and time.perf_counter() - t0 < max_s:
        q.start_async({0: inputs[n % len(inputs)][None]})
        n += 1
    q.wait_all()
    dt, dc = time.perf_counter() - t0, cpu_s() - c0
    return (n / dt if dt > 0 else 0.0), dt, dc


def run_infer_alone(plan: BenchPlan) -> dict[str, Any]:
    from pipeline.engine import get_engine
    from pipeline.frame import Frame

    chain = plan_chain(plan)
    eng = get_engine()
    det = chain.detect
    sample = list(av_frames(plan.source, chain.decode_threads, min(plan.frames, SAMPLE_FRAMES), plan.loop))
    frames = [Frame("bench", i, f.width, f.height, av_frame=f) for i, f in enumerate(sample)]
    size = det.adapter.input_size((frames[0].width, frames[0].height)) if hasattr(det.adapter, "input_size") else None
    det_model = eng.load(det.path, replace(det.adapter.input_spec, size=size), det.device, det.hint, det.config)
    reg_models = []
    for part in chain.regions:
        model = eng.load(part.path, part.adapter.input_spec, part.device, part.hint, part.config)
        if hasattr(part.adapter, "bind_model"):
            part.adapter.bind_model(model)
        reg_models.append(model)
    hw = det_model.input_hw
    det_pool = det_model.create_pool(1)
    reg_pools = [m.create_pool(1) for m in reg_models]
    det_inputs: list[np.ndarray] = []
    crops: list[list[np.ndarray]] = [[] for _ in chain.regions]
    for fr in frames:  # the chain run once per frame, keeping every model's inputs
        x, box = det.adapter.host_input(fr, hw)
        det_inputs.append(np.ascontiguousarray(x))
        if not chain.regions:
            continue
        dets = box.detections_to_source(det_pool.run(x, lambda outs: det.adapter.decode(outs, hw)),
                                        (fr.width, fr.height))
        for k, (part, model, pool) in enumerate(zip(chain.regions, reg_models, reg_pools)):
            for i in selected(dets, part):
                crop, ctx = part.adapter.prepare(fr, dets, i, model.input_hw)
                crops[k].append(np.ascontiguousarray(crop))
                part.adapter.apply(dets, i, pool.run(crop, lambda outs, ctx=ctx: part.adapter.decode(outs, ctx)))
    total = max(plan.frames * plan.cameras, MIN_INFERENCES)
    det_fps, wall, cpu = _throughput(det_model.compiled, det_inputs, total, MAX_SECONDS)
    res: dict[str, Any] = {"detect_fps": round(det_fps, 2), "region_fps": {}, "objects_per_frame": {}}
    seconds_per_frame = 1.0 / det_fps if det_fps else 0.0
    for part, model, inputs in zip(chain.regions, reg_models, crops):
        per_frame = len(inputs) / len(frames)
        res["objects_per_frame"][part.stage] = round(per_frame, 3)
        if inputs:
            fps, dt, dc = _throughput(model.compiled, inputs, max(MIN_INFERENCES, int(total * per_frame)),
                                      MAX_SECONDS)
            res["region_fps"][part.stage] = round(fps, 2)
            seconds_per_frame += per_frame / fps if fps else 0.0
            wall, cpu = wall + dt, cpu + dc
    res.update({"fps": round(1.0 / seconds_per_frame, 2) if seconds_per_frame else 0.0, "cameras": [],
                "cpu_util": round(cpu / wall / (os.cpu_count() or 1), 3) if wall else None})
    return res
