"""``vapipe bench``: a pipeline against the loops users write, and against the machine's limits.

One invocation measures, on the same source(s) and the same frames, each mode in
a fresh subprocess (no model cache, thread pool or GIL setting leaks from one
mode into the next), alternating the order of the modes from round to round;
the median over rounds is reported (the machine is shared and noisy).

Modes
-----
naive
    The loop users write: ``cv2.VideoCapture.read`` (full-size BGR), the model
    input built on the host (same letterbox geometry as the pipeline), float
    normalisation on the host, synchronous ``infer`` on ``compile_model`` with
    default settings, outputs decoded with the pipeline's adapter.  N cameras:
    N threads, each with its own capture and request on one compiled model.
hand-tuned
    A competent user's code: a PyAV decode thread per camera (frames converted
    to BGR once), u8 model input with conversion/normalisation baked into the
    model (``PrePostProcessor``), ``AsyncInferQueue`` with the device's optimal
    number of requests per camera (one queue per camera, one shared compiled
    model, THROUGHPUT hint).
vapipe / vapipe-sync
    The real runtime (:func:`pipeline.runtime.run_pipeline`), asynchronous and
    ``sync=True``.
vapipe-unplanned
    The runtime without its thread plan (``--cores 0``): OpenVINO's per-model
    defaults (THROUGHPUT streams and threads sized to the whole machine, for
    every model), FFmpeg's automatic decoder threads, OpenCV's own pool.  The
    ratio ``vapipe/vapipe-unplanned`` is what the plan is worth.
decode-alone / infer-alone
    The limits: PyAV decoding only (same decoder settings, one thread per
    camera, all cores) and the pipeline's compiled model(s) alone on real
    inputs (``AsyncInferQueue``, optimal requests, all cores).  The limit is
    ``1 / (1 / decode + 1 / infer)``: both share the same cores.

Every mode does the same work per frame: the same model(s), the same input
pixels up to resize rounding (the adapter's own letterbox/warp geometry), the
same output decoding.  Output sinks (``encode``, ``metadata``) are replaced by
an in-memory recorder in the vapipe modes, because the baselines write no
files either.  A second model on regions (``classify`` on ``face``) runs on
each selected object in every mode: naive runs the crops synchronously one
after the other; hand-tuned starts them on a second ``AsyncInferQueue`` from a
per-camera thread fed by the detector's callback.

Measurements per camera: steady-state FPS (frames between the first and the
last result, as the runtime reports it), end-to-end latency from "decoded
frame available" to "results ready", and CPU utilisation of the worker
process (``resource.getrusage`` CPU time / wall time / cores) over the same
window.  The first frames of camera 0 are recorded in every mode so that
``bench.json`` can show the baselines find the same objects as vapipe.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import resource
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

from .frame import Frame
from .stage import Params, Stage

__all__ = ["MODES", "BenchPlan", "BenchError", "run_bench", "format_table", "draw_chart", "BenchRecorder",
           "run_worker", "compare_records"]

MODES = ("naive", "hand-tuned", "vapipe", "vapipe-sync", "vapipe-unplanned", "decode-alone", "infer-alone")
RECORDER = "bench_record"
TARGETS = {"vapipe/naive": 1.3, "vapipe/hand-tuned": 1.2, "vapipe/limit": 0.9}
CAMERA_SPREAD_MAX = 0.10


class BenchError(RuntimeError):
    """A benchmark mode failed; the message is one line naming the mode."""


@dataclass
class BenchPlan:
    """Everything a worker subprocess needs (passed as JSON)."""

    pipeline: str
    config: str
    source: str
    cameras: int = 1
    frames: int = 0                 # per camera
    loop: bool = False              # the source is shorter than ``frames``
    out: str = "bench-output"
    record_frames: int = 1000       # camera 0's first frames kept for the agreement check
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)  # vapipe modes only (tune)


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------
def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class _Clock:
    """Per-camera completion times and latencies, plus the CPU window they span."""

    def __init__(self, cameras: int) -> None:
        self.lock = threading.Lock()
        self.done: list[list[float]] = [[] for _ in range(cameras)]
        self.latency: list[list[float]] = [[] for _ in range(cameras)]
        self.first: tuple[float, float] | None = None   # (wall, cpu) at the first result
        self.last: tuple[float, float] | None = None

    def add(self, cam: int, started: float) -> None:
        now = time.perf_counter()
        with self.lock:
            if self.first is None:
                self.first = (now, _cpu_s())
            self.done[cam].append(now)
            self.latency[cam].append((now - started) * 1000.0)

    def finish(self) -> None:
        self.last = (time.perf_counter(), _cpu_s())

    def result(self) -> dict[str, Any]:
        cams = []
        for done, lat in zip(self.done, self.latency):
            fps = (len(done) - 1) / (done[-1] - done[0]) if len(done) > 1 and done[-1] > done[0] else 0.0
            cams.append(_camera_result(len(done), fps, lat))
        return _mode_result(cams, self.first, self.last)


def _camera_result(frames: int, fps: float, latencies: list[float] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"frames": frames, "fps": round(fps, 2)}
    if latencies:
        a = np.asarray(latencies, float)
        out["latency_p50_ms"] = round(float(np.percentile(a, 50)), 2)
        out["latency_p95_ms"] = round(float(np.percentile(a, 95)), 2)
    return out


def _mode_result(cams: list[dict[str, Any]], first: tuple[float, float] | None,
                 last: tuple[float, float] | None) -> dict[str, Any]:
    cpu = None
    if first is not None and last is not None and last[0] > first[0]:
        cpu = (last[1] - first[1]) / (last[0] - first[0]) / (os.cpu_count() or 1)
    res: dict[str, Any] = {"fps": round(sum(c["fps"] for c in cams), 2), "cameras": cams,
                           "cpu_util": None if cpu is None else round(cpu, 3)}
    lat50 = [c["latency_p50_ms"] for c in cams if "latency_p50_ms" in c]
    if lat50:
        res["latency_p50_ms"] = round(float(np.median(lat50)), 2)
        res["latency_p95_ms"] = round(float(max(c["latency_p95_ms"] for c in cams if "latency_p95_ms" in c)), 2)
    return res


LANDMARK_FRAMES = 40  # landmarks are recorded for this many first frames (468 points per face)


def _det_record(dets: Any, seq: int) -> dict[str, Any]:
    """Camera-0 record of one frame: boxes, scores and (early frames) landmarks per object."""
    objs = []
    for i in range(len(dets)):
        lm = dets.attributes[i].get("landmarks") if dets.attributes[i] and seq < LANDMARK_FRAMES else None
        objs.append({"box": [round(float(v), 2) for v in dets.xyxy[i]], "score": round(float(dets.score[i]), 4),
                     "label": str(dets.label[i]),
                     "landmarks": None if lm is None else np.round(np.asarray(lm)[:, :2], 2).tolist()})
    return {"objects": objs}


class _Recorder:
    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.records: dict[int, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def add(self, seq: int, dets: Any) -> None:
        if seq < self.keep:
            rec = _det_record(dets, seq)
            with self.lock:
                self.records[seq] = rec


def _write_records(plan: BenchPlan, mode: str, records: dict[int, dict[str, Any]]) -> None:
    folder = Path(plan.out) / "records"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{mode}.json").write_text(json.dumps({str(k): v for k, v in sorted(records.items())}))


class BenchRecorder(Stage):
    """Leaf stage that replaces output sinks in the vapipe modes: keeps the first
    ``keep`` frames of the first source in memory (no files, no encoding)."""

    kind: ClassVar[str] = "sink"

    class Params(Params):
        keep: int = 0
        source: str = ""

    records: ClassVar[dict[int, dict[str, Any]]] = {}

    def process(self, frame: Any) -> Any:
        if frame.seq < self.params.keep and self.source_id == self.params.source:
            BenchRecorder.records[frame.seq] = _det_record(frame.detections, frame.seq)
        return frame


# --------------------------------------------------------------------------------------------
# What the baselines run: the pipeline's detector and optional region model
# --------------------------------------------------------------------------------------------
@dataclass
class _ModelPart:
    stage: str
    path: Path
    adapter: Any
    device: str
    hint: str
    config: dict[str, Any]
    requests: int
    on: list[str] = field(default_factory=list)
    max_objects: int = 32


@dataclass
class _Parts:
    spec: Any
    detect: _ModelPart
    region: _ModelPart | None
    decode_threads: int


def _load_spec(plan: BenchPlan) -> Any:
    from .config import load_config

    return load_config(plan.config, check_files=False).get(plan.pipeline)


def _parts(spec: Any, overrides: dict[str, dict[str, Any]] | None = None) -> _Parts:
    """The detect stage and the optional classify stage the baselines reproduce."""
    from stages.classify import Classify
    from stages.decode import Decode
    from stages.detect import Detect
    from stages.models.base import DetectorAdapter, RoiAdapter
    from stages._infer_common import make_adapter

    from .models import resolve_model
    from .registry import resolve_stage_type

    overrides = overrides or {}
    det = region = None
    threads = 0
    for st in spec.stages:
        cls = resolve_stage_type(st.type)
        params = cls.Params(**{**st.params, **overrides.get(st.name, {})})
        if issubclass(cls, Decode):
            threads = params.threads
        elif issubclass(cls, Detect) and det is None:
            det = _ModelPart(st.name, resolve_model(params.model),
                             make_adapter("detector", params.decoder, params.options, DetectorAdapter),
                             params.device, params.hint, dict(params.config), params.requests)
        elif issubclass(cls, Classify) and det is not None and region is None:
            region = _ModelPart(st.name, resolve_model(params.model),
                                make_adapter("region", params.decoder, params.options, RoiAdapter),
                                params.device, params.hint, dict(params.config), params.requests,
                                list(params.on), params.max_objects)
        elif cls.kind != "sink" and not issubclass(cls, (Decode,)):
            raise BenchError(f"bench: pipeline {spec.name!r} stage {st.name!r} ({st.type}) has no baseline; the "
                             "baselines reproduce one detect stage, optionally followed by one classify stage")
    if det is None:
        raise BenchError(f"bench: pipeline {spec.name!r} has no detect stage to compare against")
    return _Parts(spec, det, region, threads)


def _selected(dets: Any, part: _ModelPart) -> list[int]:
    """Objects the region model runs on (labels in ``on``, highest scores first), as Classify does."""
    idx = dets.with_label(part.on)
    if len(idx) > part.max_objects:
        idx = idx[(-dets.score[idx]).argsort(kind="stable")[: part.max_objects]]
    return [int(i) for i in idx]


def _input_hw(compiled: Any) -> tuple[tuple[int, int], bool]:
    """((height, width), nchw) of a compiled model's single image input."""
    shape = list(compiled.input(0).get_shape())
    nchw = shape[1] == 3 and shape[3] != 3
    return ((shape[2], shape[3]) if nchw else (shape[1], shape[2])), nchw


def _normalise(img: np.ndarray, spec: Any, nchw: bool) -> np.ndarray:
    """Host-side float preprocessing, the same arithmetic the engine bakes in."""
    x = img[..., ::-1] if spec.host_color != spec.model_color else img
    x = x.astype(np.float32)
    if spec.mean is not None:
        x -= np.asarray(spec.mean, np.float32)
    if spec.scale is not None:
        x /= np.asarray(spec.scale, np.float32)
    x = x[None]
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if nchw else x


def _outputs(request: Any, n: int) -> list[np.ndarray]:
    return [request.get_output_tensor(i).data for i in range(n)]


def _open_video(uri: str, threads: int) -> tuple[Any, Any]:
    import av

    container = av.open(uri)
    stream = container.streams.video[0]
    if threads:
        stream.codec_context.thread_count = threads
    stream.codec_context.thread_type = "AUTO"
    return container, stream


def _av_frames(uri: str, threads: int, frames: int, loop: bool, stop: threading.Event | None = None) -> Any:
    """Decoded PyAV frames, ``frames`` of them, starting again at the end when ``loop``."""
    n = 0
    while n < frames:
        container, stream = _open_video(uri, threads)
        got = 0
        try:
            for f in container.decode(stream):
                if n >= frames or (stop is not None and stop.is_set()):
                    return
                yield f
                n += 1
                got += 1
        finally:
            container.close()
        if not loop or got == 0:
            return


# --------------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------------
def _mode_naive(plan: BenchPlan) -> dict[str, Any]:
    import cv2
    import openvino as ov

    parts = _parts(_load_spec(plan))
    core = ov.Core()
    det_model = core.compile_model(str(parts.detect.path), parts.detect.device)   # plain defaults
    reg_model = core.compile_model(str(parts.region.path), parts.region.device) if parts.region else None
    clock, rec = _Clock(plan.cameras), _Recorder(plan.record_frames)
    errors: list[BaseException] = []

    def camera(cam: int) -> None:
        try:
            det_ad = parts.detect.adapter
            det_hw, det_nchw = _input_hw(det_model)
            det_req, n_det = det_model.create_infer_request(), len(det_model.outputs)
            if reg_model is not None:
                reg, reg_ad = parts.region, parts.region.adapter
                reg_hw, reg_nchw = _input_hw(reg_model)
                reg_req, n_reg = reg_model.create_infer_request(), len(reg_model.outputs)
            cap = cv2.VideoCapture(plan.source)
            n = 0
            while n < plan.frames:
                ok, img = cap.read()
                if not ok:
                    cap.release()
                    if not plan.loop or n == 0:
                        break
                    cap = cv2.VideoCapture(plan.source)
                    continue
                t0 = time.perf_counter()
                frame = Frame.from_image(img)  # full-size BGR: every scaling is OpenCV on it, as a user does
                x, box = det_ad.host_input(frame, det_hw)
                det_req.infer({0: _normalise(x, det_ad.input_spec, det_nchw)})
                dets = box.detections_to_source(det_ad.decode(_outputs(det_req, n_det), det_hw),
                                                (frame.width, frame.height))
                if reg_model is not None:
                    for i in _selected(dets, reg):
                        crop, ctx = reg_ad.prepare(frame, dets, i, reg_hw)
                        reg_req.infer({0: _normalise(crop, reg_ad.input_spec, reg_nchw)})
                        reg_ad.apply(dets, i, reg_ad.decode(_outputs(reg_req, n_reg), ctx))
                clock.add(cam, t0)
                if cam == 0:
                    rec.add(n, dets)
                n += 1
            cap.release()
        except BaseException as exc:  # noqa: BLE001 - reported by the worker
            errors.append(exc)

    _run_cameras(camera, plan.cameras, clock, errors)
    _write_records(plan, "naive", rec.records)
    return clock.result()


def _run_cameras(camera: Callable[[int], None], cameras: int, clock: Any, errors: list[BaseException]) -> None:
    """Run ``camera(index)`` on one thread per camera, stop the clock, re-raise the first error."""
    threads = [threading.Thread(target=camera, args=(c,), daemon=True) for c in range(cameras)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    clock.finish()
    if errors:
        raise errors[0]


def _ppp_compile(core: Any, part: _ModelPart) -> Any:
    """The model with u8 NHWC input and conversion/normalisation inside (PrePostProcessor),
    compiled with the THROUGHPUT hint: what a user who read the OpenVINO docs writes."""
    from pipeline.engine import with_preprocessing

    model = core.read_model(str(part.path))
    shape = list(model.input(0).get_partial_shape().to_shape())
    layout = "NCHW" if shape[1] == 3 and shape[3] != 3 else "NHWC"
    hw = (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])
    model = with_preprocessing(model, part.adapter.input_spec, layout, hw)
    return core.compile_model(model, part.device, {"PERFORMANCE_HINT": "THROUGHPUT"})


#: Compiled models whose executor threads ran Python callbacks.  Destroying such a model
#: can hang (OpenVINO 2026.4, 1 run in about 10): the destructor joins its stream
#: threads while holding the GIL, and a stream thread can still be waiting for the GIL to
#: finish a callback after ``wait_all()`` returned.  The worker process keeps them until
#: it exits without teardown (``worker_main``).
_OPENVINO_KEEP_ALIVE: list[Any] = []


def _mode_hand_tuned(plan: BenchPlan) -> dict[str, Any]:
    import openvino as ov

    parts = _parts(_load_spec(plan))
    core = ov.Core()
    det_model = _ppp_compile(core, parts.detect)
    reg_model = _ppp_compile(core, parts.region) if parts.region else None
    _OPENVINO_KEEP_ALIVE.extend(m for m in (det_model, reg_model) if m is not None)
    det_hw, _ = _input_hw(det_model)
    reg_hw = _input_hw(reg_model)[0] if reg_model is not None else None
    n_det = len(det_model.outputs)
    n_reg = len(reg_model.outputs) if reg_model is not None else 0
    det_jobs = int(det_model.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    reg_jobs = int(reg_model.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")) if reg_model is not None else 0
    clock, rec = _Clock(plan.cameras), _Recorder(plan.record_frames)
    errors: list[BaseException] = []
    stop = threading.Event()

    def fail(exc: BaseException) -> None:
        errors.append(exc)
        stop.set()

    def camera(cam: int) -> None:
        det_ad = parts.detect.adapter
        frames: queue.Queue[Any] = queue.Queue(maxsize=8)
        regions: queue.Queue[Any] = queue.Queue(maxsize=16)

        def decoder() -> None:
            try:
                for f in _av_frames(plan.source, parts.decode_threads, plan.frames, plan.loop, stop):
                    img = f.to_ndarray(format="bgr24")
                    frames.put((Frame.from_image(img), time.perf_counter()))  # full-size BGR, scaled with OpenCV
            except BaseException as exc:  # noqa: BLE001
                fail(exc)
            finally:
                frames.put(None)

        def finished(seq: int, t0: float, dets: Any) -> None:
            clock.add(cam, t0)
            if cam == 0:
                rec.add(seq, dets)

        def on_detections(request: Any, data: Any) -> None:
            seq, frame, box, t0 = data
            try:
                dets = box.detections_to_source(det_ad.decode(_outputs(request, n_det), det_hw),
                                                (frame.width, frame.height))
                if reg_model is None:
                    finished(seq, t0, dets)
                else:
                    regions.put((seq, frame, dets, t0))
            except BaseException as exc:  # noqa: BLE001
                fail(exc)

        def region_worker() -> None:
            reg, reg_ad = parts.region, parts.region.adapter
            rq = ov.AsyncInferQueue(reg_model, reg_jobs)
            lock = threading.Lock()
            left: dict[int, int] = {}

            def on_region(request: Any, data: Any) -> None:
                seq, i, ctx, dets, t0 = data
                try:
                    reg_ad.apply(dets, i, reg_ad.decode(_outputs(request, n_reg), ctx))
                    with lock:
                        left[seq] -= 1
                        last = left[seq] == 0
                    if last:
                        finished(seq, t0, dets)
                except BaseException as exc:  # noqa: BLE001
                    fail(exc)

            rq.set_callback(on_region)
            try:
                while True:
                    item = regions.get()
                    if item is None:
                        break
                    seq, frame, dets, t0 = item
                    chosen = _selected(dets, reg)
                    if not chosen:
                        finished(seq, t0, dets)
                        continue
                    with lock:
                        left[seq] = len(chosen)
                    for i in chosen:
                        crop, ctx = reg_ad.prepare(frame, dets, i, reg_hw)
                        rq.start_async({0: crop[None]}, (seq, i, ctx, dets, t0))
                rq.wait_all()
            except BaseException as exc:  # noqa: BLE001
                fail(exc)

        dq = ov.AsyncInferQueue(det_model, det_jobs)
        dq.set_callback(on_detections)
        threads = [threading.Thread(target=decoder, daemon=True)]
        if reg_model is not None:
            threads.append(threading.Thread(target=region_worker, daemon=True))
        for t in threads:
            t.start()
        seq = 0
        try:
            while True:
                item = frames.get()
                if item is None:
                    break
                frame, t0 = item
                x, box = det_ad.host_input(frame, det_hw)
                dq.start_async({0: x[None]}, (seq, frame, box, t0))
                seq += 1
            dq.wait_all()
        except BaseException as exc:  # noqa: BLE001
            fail(exc)
        finally:
            regions.put(None)
            for t in threads:
                t.join()

    _run_cameras(camera, plan.cameras, clock, errors)
    _write_records(plan, "hand-tuned", rec.records)
    res = clock.result()
    res["requests"] = {"detect": det_jobs, **({"region": reg_jobs} if reg_model is not None else {})}
    return res


def bench_spec(spec: Any, plan: BenchPlan) -> Any:
    """The pipeline with its output sinks replaced by the in-memory recorder."""
    from .config import StageSpec
    from .graph import build_graph
    from .registry import resolve_stage_type

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
    new.stages.append(StageSpec(name=RECORDER, type="pipeline.bench:BenchRecorder", inputs=leaves,
                                params={"keep": plan.record_frames}))
    return new


def _mode_vapipe(plan: BenchPlan, mode: str) -> dict[str, Any]:
    """``mode``: vapipe, vapipe-sync or vapipe-unplanned (see the module docstring)."""
    from .config import validate_pipeline
    from .graph import build_graph
    from .runtime import RunOptions, run_pipeline, source_ids

    spec = bench_spec(_load_spec(plan), plan)
    sources = [plan.source] * plan.cameras
    spec.stages[-1].params["source"] = source_ids(sources)[0]
    validate_pipeline(spec, plan.config)
    graph = build_graph(spec, plan.config)
    opts = RunOptions(output_dir=Path(plan.out) / "vapipe-output", sync=mode == "vapipe-sync",
                      max_frames=plan.frames, handle_signals=False, cores=0 if mode == "vapipe-unplanned" else None)
    first: list[tuple[float, float]] = []

    def progress(stats: list[Any]) -> None:
        if not first and any(s.processed for s in stats):
            first.append((time.perf_counter(), _cpu_s()))

    BenchRecorder.records.clear()
    summary = run_pipeline(graph, sources, opts, progress=progress)
    last = (time.perf_counter(), _cpu_s())
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
    res = _mode_result(cams, first[0] if first else None, last)
    res["stages"] = {n: {k: round(v, 3) for k, v in st.summary().items()} for n, st in summary.stages.items()
                     if n != RECORDER}
    res["threads"] = summary.threads
    _write_records(plan, mode, dict(BenchRecorder.records))
    return res


def _mode_decode(plan: BenchPlan) -> dict[str, Any]:
    parts = _parts(_load_spec(plan))
    clock = _Clock(plan.cameras)

    def camera(cam: int) -> None:
        t0 = time.perf_counter()
        for _ in _av_frames(plan.source, parts.decode_threads, plan.frames, plan.loop):
            clock.add(cam, t0)
            t0 = time.perf_counter()

    threads = [threading.Thread(target=camera, args=(c,), daemon=True) for c in range(plan.cameras)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    clock.finish()
    res = clock.result()
    for c in res["cameras"]:  # "latency" of a decoder is meaningless here
        c.pop("latency_p50_ms", None)
        c.pop("latency_p95_ms", None)
    res.pop("latency_p50_ms", None)
    res.pop("latency_p95_ms", None)
    return res


def _throughput(compiled: Any, inputs: list[np.ndarray], count: int, max_s: float) -> tuple[float, float, float]:
    """Inferences per second of ``compiled`` alone on ``inputs`` (cycled), optimal requests."""
    import openvino as ov

    jobs = max(2, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
    q = ov.AsyncInferQueue(compiled, jobs)
    for i in range(jobs):  # warm up every request
        q.start_async({0: inputs[i % len(inputs)][None]})
    q.wait_all()
    t0, c0 = time.perf_counter(), _cpu_s()
    n = 0
    while n < count and time.perf_counter() - t0 < max_s:
        q.start_async({0: inputs[n % len(inputs)][None]})
        n += 1
    q.wait_all()
    dt, dc = time.perf_counter() - t0, _cpu_s() - c0
    return (n / dt if dt > 0 else 0.0), dt, dc


def _mode_infer(plan: BenchPlan) -> dict[str, Any]:
    """The pipeline's compiled models alone (same InputSpec, hint and config as the
    stages) on real inputs made the pipeline's way from the first frames."""
    from pipeline.engine import get_engine
    from pipeline.frame import Frame

    parts = _parts(_load_spec(plan))
    eng = get_engine()
    det = parts.detect
    sample = list(_av_frames(plan.source, parts.decode_threads, min(plan.frames, 48), plan.loop))
    frames = [Frame("bench", i, f.width, f.height, av_frame=f) for i, f in enumerate(sample)]
    size = det.adapter.input_size((frames[0].width, frames[0].height)) if hasattr(det.adapter, "input_size") else None
    det_model = eng.load(det.path, replace(det.adapter.input_spec, size=size), det.device, det.hint, det.config)
    hw = det_model.input_hw
    det_inputs = []
    crops: list[np.ndarray] = []
    reg_model = None
    if parts.region is not None:
        reg = parts.region
        reg_model = eng.load(reg.path, reg.adapter.input_spec, reg.device, reg.hint, reg.config)
        pool = det_model.create_pool(1)
    for fr in frames:
        x, box = det.adapter.host_input(fr, hw)
        det_inputs.append(np.ascontiguousarray(x))
        if reg_model is not None:
            dets = box.detections_to_source(pool.run(x, lambda outs: det.adapter.decode(outs, hw)),
                                            (fr.width, fr.height))
            fr.detections = dets
            for i in _selected(dets, parts.region):
                crop, _ = parts.region.adapter.prepare(fr, dets, i, reg_model.input_hw)
                crops.append(np.ascontiguousarray(crop))
    total = max(plan.frames * plan.cameras, 200)
    det_fps, det_s, det_cpu = _throughput(det_model.compiled, det_inputs, total, 20.0)
    res: dict[str, Any] = {"detect_fps": round(det_fps, 2)}
    wall, cpu = det_s, det_cpu
    fps = det_fps
    if reg_model is not None:
        per_frame = len(crops) / len(frames)
        res["objects_per_frame"] = round(per_frame, 3)
        if crops:
            reg_fps, reg_s, reg_cpu = _throughput(reg_model.compiled, crops, max(200, int(total * per_frame)), 20.0)
            res["region_fps"] = round(reg_fps, 2)
            fps = 1.0 / (1.0 / det_fps + per_frame / reg_fps)
            wall, cpu = wall + reg_s, cpu + reg_cpu
    res.update({"fps": round(fps, 2), "cameras": [], "cpu_util": round(cpu / wall / (os.cpu_count() or 1), 3)})
    return res


def run_worker(mode: str, plan: BenchPlan) -> dict[str, Any]:
    """Run one mode in this process and return its measurements."""
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "naive": lambda: _mode_naive(plan),
        "hand-tuned": lambda: _mode_hand_tuned(plan),
        "vapipe": lambda: _mode_vapipe(plan, "vapipe"),
        "vapipe-sync": lambda: _mode_vapipe(plan, "vapipe-sync"),
        "vapipe-unplanned": lambda: _mode_vapipe(plan, "vapipe-unplanned"),
        "decode-alone": lambda: _mode_decode(plan),
        "infer-alone": lambda: _mode_infer(plan),
    }
    if mode not in runners:
        raise BenchError(f"unknown bench mode {mode!r}; valid: {', '.join(runners)}")
    return runners[mode]()


# --------------------------------------------------------------------------------------------
# Orchestration
# --------------------------------------------------------------------------------------------
def spawn_worker(mode: str, plan: BenchPlan, timeout: float = 1800.0) -> dict[str, Any]:
    """Run one mode in a fresh interpreter; its result is the last line of stdout."""
    code = "import sys; from pipeline.bench import worker_main; sys.exit(worker_main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", code, "--worker", mode, "--plan", json.dumps(asdict(plan))]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"bench mode {mode!r} did not finish within {timeout:.0f} s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise BenchError(f"bench mode {mode!r} failed: {err[-1] if err else f'exit {proc.returncode}'}")
    return json.loads(lines[-1])


def count_frames(uri: str) -> tuple[int, int, int]:
    """(frames, width, height) of a video file, counting packets (no decoding)."""
    import av

    try:
        with av.open(uri) as c:
            s = c.streams.video[0]
            n = sum(1 for p in c.demux(s) if p.size)
            return n, s.codec_context.width, s.codec_context.height
    except (av.error.FFmpegError, OSError, IndexError) as exc:
        raise BenchError(f"bench: cannot read source {uri}: {exc}") from None


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over rounds of every number a mode reports."""
    out: dict[str, Any] = {"fps": round(_median([r["fps"] for r in runs]), 2),
                           "rounds": [r["fps"] for r in runs]}
    ncam = len(runs[0].get("cameras", []))
    if ncam:
        out["fps_per_camera"] = [round(_median([r["cameras"][i]["fps"] for r in runs]), 2) for i in range(ncam)]
        out["frames_per_camera"] = [runs[-1]["cameras"][i]["frames"] for i in range(ncam)]
    for key in ("latency_p50_ms", "latency_p95_ms", "cpu_util", "detect_fps", "region_fps", "objects_per_frame"):
        vals = [r[key] for r in runs if r.get(key) is not None]
        if vals:
            out[key] = round(_median(vals), 3)
    for key in ("requests", "stages", "threads"):
        if key in runs[-1]:
            out[key] = runs[-1][key]
    return out


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def compare_records(ref: dict[str, Any], other: dict[str, Any], min_iou: float = 0.5) -> dict[str, Any]:
    """How well ``other``'s objects match ``ref``'s on the frames both recorded."""
    frames = sorted(set(ref) & set(other), key=int)
    n_ref = n_other = matched = 0
    ious: list[float] = []
    lm_err: list[float] = []
    for k in frames:
        a = ref[k]["objects"]
        b = other[k]["objects"]
        n_ref += len(a)
        n_other += len(b)
        if not a or not b:
            continue
        m = _iou(np.array([o["box"] for o in a], float), np.array([o["box"] for o in b], float))
        used: set[int] = set()
        for i in np.argsort(-m.max(axis=1)):
            j = int(np.argmax(m[i]))
            if m[i, j] < min_iou or j in used:
                continue
            used.add(j)
            matched += 1
            ious.append(float(m[i, j]))
            la, lb = a[i].get("landmarks"), b[j].get("landmarks")
            if la is not None and lb is not None:
                lm_err.append(float(np.abs(np.asarray(la) - np.asarray(lb)).mean()))
    out: dict[str, Any] = {"frames": len(frames), "objects_ref": n_ref, "objects": n_other, "matched": matched,
                           "mean_iou": round(float(np.mean(ious)), 4) if ious else None,
                           "min_iou": round(float(np.min(ious)), 4) if ious else None}
    if lm_err:
        out["landmarks_mean_abs_px"] = round(float(np.mean(lm_err)), 3)
    return out


def run_bench(name: str, source: str, cameras: int = 1, frames: int | None = None, out: str | Path = "bench-output",
              rounds: int = 3, config: str | Path = "pipelines.yaml", modes: tuple[str, ...] = MODES,
              record_frames: int = 1000, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every mode ``rounds`` times; write ``bench.json`` and ``bench.png`` into ``out``."""
    if cameras < 1:
        raise ValueError(f"--cameras must be >= 1, got {cameras}")
    if rounds < 1:
        raise ValueError(f"--rounds must be >= 1, got {rounds}")
    if frames is not None and frames < 2:
        raise ValueError(f"--frames must be >= 2, got {frames}")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ValueError(f"unknown bench mode {bad[0]!r}; valid: {', '.join(MODES)}")
    if "://" in source or not Path(source).is_file():
        raise ValueError(f"bench needs a video file as --source (the naive loop reads it with cv2.VideoCapture); "
                         f"not a file: {source}")
    from .config import load_config

    config = str(Path(config).resolve())
    spec = load_config(config).get(name)
    _parts(spec)  # fails early, in one line, when the pipeline has no baseline
    total, width, height = count_frames(source)
    frames = frames or total
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = BenchPlan(pipeline=name, config=config, source=str(Path(source).resolve()), cameras=cameras,
                     frames=frames, loop=frames > total, out=str(out.resolve()), record_frames=min(record_frames, frames))
    say = log or (lambda msg: None)
    say(f"bench {name}: {Path(source).name} {width}x{height}, {cameras} camera(s) x {frames} frames, "
        f"{rounds} round(s), modes: {', '.join(modes)}")
    spawn_worker("vapipe", replace(plan, frames=min(frames, 10), record_frames=0, cameras=1))  # fill the model cache
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for r in range(rounds):
        order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for mode in order:
            runs[mode].append(spawn_worker(mode, plan))
        say(f"round {r + 1}/{rounds}: " + ", ".join(f"{m} {runs[m][-1]['fps']:.1f}" for m in modes))
    result: dict[str, Any] = {
        "pipeline": name, "source": plan.source, "width": width, "height": height, "source_frames": total,
        "cameras": cameras, "frames": frames, "rounds": rounds, "cores": os.cpu_count(),
        "modes": {m: _summarise(v) for m, v in runs.items()},
    }
    result.update(_ratios(result))
    rec_dir = out / "records"
    records = {m: json.loads((rec_dir / f"{m}.json").read_text()) for m in modes if (rec_dir / f"{m}.json").is_file()}
    if "vapipe" in records:
        result["agreement"] = {f"{m} vs vapipe": compare_records(records["vapipe"], records[m])
                               for m in records if m != "vapipe"}
    (out / "bench.json").write_text(json.dumps(result, indent=2))
    draw_chart(result, out / "bench.png")
    return result


def _ratios(result: dict[str, Any]) -> dict[str, Any]:
    modes = result["modes"]
    out: dict[str, Any] = {}
    dec, inf = modes.get("decode-alone", {}).get("fps"), modes.get("infer-alone", {}).get("fps")
    if dec and inf:
        out["limit_fps"] = round(1.0 / (1.0 / dec + 1.0 / inf), 2)
    vap = modes.get("vapipe", {}).get("fps")
    ratios: dict[str, float] = {}
    if vap:
        for key, ref in (("vapipe/naive", modes.get("naive", {}).get("fps")),
                         ("vapipe/hand-tuned", modes.get("hand-tuned", {}).get("fps")),
                         ("vapipe/vapipe-sync", modes.get("vapipe-sync", {}).get("fps")),
                         ("vapipe/vapipe-unplanned", modes.get("vapipe-unplanned", {}).get("fps")),
                         ("vapipe/limit", out.get("limit_fps"))):
            if ref:
                ratios[key] = round(vap / ref, 3)
    out["ratios"] = ratios
    checks = []
    for key, target in TARGETS.items():
        if key in ratios:
            checks.append({"check": f"{key} >= {target}", "value": ratios[key], "ok": ratios[key] >= target})
    per_cam = modes.get("vapipe", {}).get("fps_per_camera") or []
    if len(per_cam) > 1 and max(per_cam) > 0:
        spread = (max(per_cam) - min(per_cam)) / max(per_cam)
        out["vapipe_camera_spread"] = round(spread, 3)
        checks.append({"check": f"vapipe per-camera FPS spread <= {CAMERA_SPREAD_MAX:.0%}", "value": round(spread, 3),
                       "ok": spread <= CAMERA_SPREAD_MAX})
    out["checks"] = checks
    return out


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def format_table(result: dict[str, Any]) -> str:
    modes = result["modes"]
    lines = [f"{result['pipeline']}: {Path(result['source']).name} {result['width']}x{result['height']}, "
             f"{result['cameras']} camera(s) x {result['frames']} frames, {result['cores']} cores, "
             f"median of {result['rounds']} round(s)"]
    lines.append(f"{'mode':<16} {'fps':>7} {'fps/camera':>22} {'p50 ms':>7} {'p95 ms':>7} {'cpu':>5}   rounds")
    for m, r in modes.items():
        per = r.get("fps_per_camera") or []
        per_s = " ".join(f"{x:.1f}" for x in per) if len(per) <= 4 else f"{min(per):.1f}..{max(per):.1f}"
        cpu = r.get("cpu_util")
        lines.append(f"{m:<16} {r['fps']:>7.1f} {per_s:>22} {_fmt(r.get('latency_p50_ms')):>7} "
                     f"{_fmt(r.get('latency_p95_ms')):>7} {('-' if cpu is None else f'{cpu:.0%}'):>5}   "
                     + ", ".join(f"{x:.1f}" for x in r["rounds"]))
    if "limit_fps" in result:
        inf = modes.get("infer-alone", {})
        extra = f" (infer-alone: detector {inf.get('detect_fps', 0):.0f}/s"
        if inf.get("region_fps"):
            extra += f", region model {inf['region_fps']:.0f}/s x {inf.get('objects_per_frame', 0):.2f} per frame"
        lines.append(f"{'limit':<16} {result['limit_fps']:>7.1f}   = 1/(1/decode-alone + 1/infer-alone){extra})")
    for m, r in modes.items():
        if r.get("threads"):
            lines.append(f"{m + ':':<17}{r['threads']}")
    for key, value in result.get("ratios", {}).items():
        lines.append(f"{key:<24} {value:5.2f}x")
    for c in result.get("checks", []):
        lines.append(f"target {c['check']:<36} {c['value']:6.2f}  {'ok' if c['ok'] else 'BELOW TARGET'}")
    for key, a in result.get("agreement", {}).items():
        lm = f", landmarks {a['landmarks_mean_abs_px']:.2f} px" if "landmarks_mean_abs_px" in a else ""
        lines.append(f"same objects: {key:<24} {a['matched']}/{a['objects_ref']} matched (vapipe), "
                     f"{a['objects']} found, mean IoU {_fmt(a['mean_iou'], '.3f')}{lm} over {a['frames']} frames")
    return "\n".join(lines)


def draw_chart(result: dict[str, Any], path: str | Path) -> None:
    """Bar chart of aggregate FPS per mode (and the limit), drawn with OpenCV."""
    import cv2

    bars = [(m, r["fps"]) for m, r in result["modes"].items()]
    if "limit_fps" in result:
        bars.append(("limit", result["limit_fps"]))
    w, h, left, bottom, top = 960, 540, 70, 90, 70
    img = np.full((h, w, 3), 255, np.uint8)
    peak = max([v for _, v in bars] + [1.0]) * 1.15
    step = 10 ** math.floor(math.log10(peak / 2)) if peak > 2 else 1
    font = cv2.FONT_HERSHEY_SIMPLEX
    title = (f"vapipe bench {result['pipeline']}: {result['width']}x{result['height']}, {result['cameras']} camera(s), "
             f"{result['cores']} cores (FPS, higher is better)")
    cv2.putText(img, title, (left, 35), font, 0.55, (0, 0, 0), 1, cv2.LINE_AA)
    plot_h = h - bottom - top
    for k in range(0, int(peak / step) + 1):
        y = h - bottom - int(k * step / peak * plot_h)
        cv2.line(img, (left, y), (w - 20, y), (225, 225, 225), 1)
        cv2.putText(img, f"{k * step:g}", (10, y + 5), font, 0.45, (90, 90, 90), 1, cv2.LINE_AA)
    colours = {"vapipe": (60, 140, 40), "vapipe-sync": (120, 190, 110), "vapipe-unplanned": (120, 190, 110),
               "limit": (60, 60, 200),
               "decode-alone": (170, 170, 170), "infer-alone": (170, 170, 170)}
    slot = (w - left - 20) / len(bars)
    for i, (name, value) in enumerate(bars):
        x0 = int(left + i * slot + slot * 0.15)
        x1 = int(left + (i + 1) * slot - slot * 0.15)
        y = h - bottom - int(value / peak * plot_h)
        cv2.rectangle(img, (x0, y), (x1, h - bottom), colours.get(name, (180, 120, 50)), -1)
        cv2.putText(img, f"{value:.1f}", (x0, y - 8), font, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
        (tw, _), _ = cv2.getTextSize(name, font, 0.5, 1)
        cv2.putText(img, name, (x0 + (x1 - x0 - tw) // 2, h - bottom + 22), font, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.line(img, (left, h - bottom), (w - 20, h - bottom), (0, 0, 0), 1)
    ratios = "  ".join(f"{k} {v:.2f}x" for k, v in result.get("ratios", {}).items())
    cv2.putText(img, ratios, (left, h - 30), font, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    if not cv2.imwrite(str(path), img):
        raise BenchError(f"cannot write {path}")


def worker_main(argv: list[str]) -> int:
    """Entry point of a worker subprocess: run one mode, print its JSON as the last line."""
    ap = argparse.ArgumentParser(prog="vapipe bench worker")
    ap.add_argument("--worker", required=True)
    ap.add_argument("--plan", required=True)
    args = ap.parse_args(argv)
    plan = BenchPlan(**json.loads(args.plan))
    res = run_worker(args.worker, plan)
    res["mode"] = args.worker
    sys.stdout.flush()
    print(json.dumps(res))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown: it would destroy the compiled models kept in
    # _OPENVINO_KEEP_ALIVE, which can hang (see there).  Everything is written.
    os._exit(0)

