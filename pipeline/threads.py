"""Process-wide thread budget: how many threads each runtime in the process may use.

Every runtime in a vapipe process brings its own thread pool: OpenVINO (TBB,
per compiled model), FFmpeg (per decoder, "auto" = one frame thread per core
plus one), OpenCV (one global pool), numpy's BLAS, and ONNX Runtime or PyTorch
when a user stage brings them.  Left alone, each sizes itself to the whole
machine.  :func:`plan_for_graph` measures what the pipeline's parts cost on this
machine (:mod:`pipeline.costs`: decode per frame of each source, host work per
frame (input preparation, until a run has observed the whole of it), each CPU
model's inference on one thread; cached per machine) and shares
the cores given to vapipe (``--cores``, default the process's CPU affinity,
capped by a cgroup quota) in proportion to that work (:mod:`pipeline.planner`):

* **decoder threads per source** (FFmpeg ``thread_count``): 1, more when decoding
  binds the rate and a frame thread would raise it by 10 %, or when one thread would
  be busy more than 85 % of the time;
* **OpenVINO, CPU models** (``NUM_STREAMS``, ``INFERENCE_NUM_THREADS``): the threads
  each model's share of the work needs, as single-threaded streams, unpinned
  (``ENABLE_CPU_PINNING: False``: pinned, the streams of every model start on the same
  cores); requests per camera one more than its share of the streams.  Other devices are left to their
  plugins;
* **OpenVINO precision** (``INFERENCE_PRECISION_HINT``): f32 where it costs no more than the
  CPU's default (bf16 or f16), measured per model (:mod:`pipeline.precision`);
* **decoder priority**: a decoder whose output queue stays full runs at nice
  ``NICE_WHILE_AHEAD`` until it falls behind again (:mod:`pipeline.priority`);
* **encoders** (FFmpeg ``thread_count`` of MP4 outputs): 1, encoding on the camera's
  worker thread, or their share of threads when that pays;
* **OpenCV**: 1 thread (its calls are small and run on each camera's threads);
* **BLAS / PyTorch / ONNX Runtime**: ``runtime_threads`` intra-op threads, one inter-op.

While a run goes, :mod:`pipeline.plan_check` compares the plan with what the
process does and can re-plan from the costs it observes (``--replan``).

The plan is only applied where the user did not choose: an explicit
``decode.threads``, ``requests``, or ``NUM_STREAMS``/``INFERENCE_NUM_THREADS`` or
``INFERENCE_PRECISION_HINT`` in a stage's ``config`` wins; ``--cores 0`` leaves every runtime at its own defaults.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from typing import Any, Callable, Sequence

from .costs import (DEFAULT_OBJECTS_PER_FRAME, CostCache, ModelProbe, decode_key, host_key, measure_decode,
                    measure_host, measure_model, model_cost, model_key, objects_key)
from .planner import ASSUMED_DECODE_MS, EncoderInfo, InferInfo, ThreadPlan, plan_threads
from .precision import Precision, with_hint
from .precision import choose as choose_precision

__all__ = ["InferInfo", "ThreadPlan", "available_cores", "plan_threads", "plan_for_graph", "plan_overrides",
           "apply_global", "ort_session_options", "OV_THREAD_KEYS", "infer_infos"]

log = logging.getLogger("vapipe.threads")

#: OpenVINO properties the plan sets; a user's value for either keeps the plan off that stage
OV_THREAD_KEYS = ("NUM_STREAMS", "INFERENCE_NUM_THREADS")
#: set with every planned model's streams (a user's value wins): OpenVINO pins each compiled
#: model's stream threads from the first core on, so several models of one stream each
#: would share core 0 and run one after the other (two 1 x 1 models: 2.0x the time of one
#: model's inferences where unpinned they take 1.0x); the planner measures unpinned too
PLANNED_OV_CONFIG = {"ENABLE_CPU_PINNING": False}
#: source size assumed for planning when a live source's size is not known yet
ASSUMED_SOURCE_WH = (1920, 1080)


def infer_infos(graph: Any, overrides: dict[str, dict[str, Any]] | None = None) -> list[InferInfo]:
    """The inference stages of a :class:`pipeline.graph.PipelineGraph` (params with ``overrides``),
    without costs."""
    from .stage import InferStage

    out = []
    for name, cls in graph.classes().items():
        # OpenVINO stages: inference stages that take compile properties
        if not issubclass(cls, InferStage) or "config" not in cls.Params.model_fields:
            continue
        params = _params(graph, name, overrides)
        fields = cls.Params.model_fields
        device = str(params.get("device", fields["device"].default if "device" in fields else "CPU"))
        hint = str(params.get("hint", fields["hint"].default if "hint" in fields else "THROUGHPUT"))
        config = {str(k).upper(): v for k, v in (params.get("config") or {}).items()}
        user = any(k in OV_THREAD_KEYS for k in config)
        out.append(InferInfo(name=name, device=device, hint=hint, user_config=user,
                             user_threads=_int(config.get("INFERENCE_NUM_THREADS")),
                             user_streams=_int(config.get("NUM_STREAMS")),
                             user_requests=_int(params.get("requests")) > 0,
                             engine=str(params.get("engine", "openvino"))))
    return out


def plan_for_graph(graph: Any, sources: int | Sequence[str] = 1, cores: int | None = None,
                   overrides: dict[str, dict[str, Any]] | None = None,
                   costs: CostCache | None = None, measure: bool = True) -> ThreadPlan:
    """The plan for running ``graph`` on ``sources`` (URIs, or only their number).

    With ``measure`` (default), costs come from ``costs`` (default: the machine's cost
    cache) and whatever is missing there is measured now and stored: decode per frame
    of every file source (live sources: what an earlier run observed, else assumed),
    host work per frame (what an earlier run of the same settings observed, else the
    input preparation), every CPU model's inference on one thread.
    """
    uris = list(sources) if not isinstance(sources, int) else []
    count = len(uris) if uris else max(1, int(sources))
    src = _params(graph, graph.source, overrides)
    user_dec = _int(src["threads"]) if "threads" in src else None
    infos = infer_infos(graph, overrides)
    if cores is not None and int(cores) == 0:
        return plan_threads(0, count, infos, decoder_threads=user_dec)
    stages = graph.instantiate(overrides)
    needs_image = any(st.needs_image for st in stages.values())
    if not measure:
        return plan_threads(cores, count, infos, needs_image, user_dec)
    cache = costs if costs is not None else CostCache()
    measured = _measure(graph, stages, uris, needs_image, overrides, cache)
    if measured.failures:
        log.info("planning with assumed costs for %s", "; ".join(measured.failures))
    infos = [_with_cost(i, measured, graph.spec.name, cache) for i in infos]
    plan = plan_threads(cores, count, infos, needs_image, user_dec, decode_ms=measured.decode_ms or None,
                        host_ms=measured.host_ms, decode_origin=measured.decode_origin, encoders=measured.encoders,
                        host_origin=measured.host_origin)
    plan.host_key = measured.host_key
    return plan


class _Measured:
    def __init__(self) -> None:
        self.encoders: list[EncoderInfo] = []
        self.decode_ms: list[float] = []
        self.decode_origin = "assumed"
        self.host_ms: float | None = None
        self.host_origin = "assumed"
        self.host_key: str | None = None  # where a run keeps the host work it observed
        self.models: dict[str, tuple[float, str, ModelProbe, Precision | None]] = {}
        self.failures: list[str] = []  # what could not be measured (the run itself reports why)


def _measure(graph: Any, stages: dict[str, Any], uris: list[str], needs_image: bool,
             overrides: dict[str, dict[str, Any]] | None, cache: CostCache) -> _Measured:
    from .stage import InferStage

    out = _Measured()
    frames: dict[str, Any] = {}
    src_wh = None
    origins = set()
    decoded: dict[str, float] = {}
    for uri in uris:
        if uri not in decoded:
            try:
                ms, wh, frame, origin = _decode_cost(graph, uri, needs_image, overrides, cache)
            except Exception as exc:  # noqa: BLE001 - a source that cannot be read fails the run itself
                out.failures.append(f"source {uri}: {exc}")
                ms, wh, frame, origin = ASSUMED_DECODE_MS, None, None, "assumed"
            decoded[uri] = ms
            origins.add(origin)
            if frame is not None:
                frames[uri] = frame
            src_wh = src_wh or wh
        out.decode_ms.append(decoded[uri])
    if origins:
        out.decode_origin = "/".join(sorted(origins))
    src_wh = src_wh or ASSUMED_SOURCE_WH
    host = 0.0
    host_known = False
    for name, st in stages.items():
        if not isinstance(st, InferStage):
            continue
        try:
            probe = st.planning_probe(src_wh)
            if probe is None or not probe.on_cpu:
                continue
            probe, entry, origin, precision = choose_precision(probe, lambda p: model_cost(p, cache, measure_model))
            key = model_key(probe)
        except Exception as exc:  # noqa: BLE001 - a model that cannot be read fails the stage's open
            out.failures.append(f"stage {name}: {exc}")
            continue
        out.models[name] = (float(entry["ms"]), origin, probe, precision)
        if not uris:
            continue
        hkey = f"host|{decode_key(uris[0], needs_image)}|{key}"
        value = cache.get(hkey)
        if not isinstance(value, (int, float)):
            try:
                frame = frames.get(uris[0]) or _first_frame(graph, uris[0], overrides)
                frames[uris[0]] = frame
                fn = st.planning_host(frame, tuple(entry["input_hw"])) if frame is not None else None
                value = None if fn is None else round(measure_host(fn), 4)
            except Exception as exc:  # noqa: BLE001
                out.failures.append(f"host work of {name}: {exc}")
                value = None
            if value is not None:
                cache.put(hkey, value)
        if isinstance(value, (int, float)):
            host += float(value)
            host_known = True
    if host_known:
        out.host_ms = host + HOST_OVERHEAD_MS * sum(1 for s in stages.values() if isinstance(s, InferStage))
        out.host_origin = "measured"
    if uris:
        # a run's observed host work (every stage's share of the worker, with the objects it met)
        # replaces the estimate from input preparation alone
        out.host_key = host_key({name: [graph.graph.nodes[name]["spec"].type, _params(graph, name, overrides)]
                                 for name in stages if name != graph.source}, src_wh)
        seen = cache.get(out.host_key)
        if isinstance(seen, (int, float)):
            out.host_ms, out.host_origin = float(seen), "observed"
    for name, st in stages.items():
        probe_cost = st.planning_cost(src_wh)
        if probe_cost is None:
            continue
        user = _params(graph, name, overrides).get("threads")
        try:
            key, measure = probe_cost
            ms, origin = cache.cached(key, lambda measure=measure: round(float(measure()), 4))
            out.encoders.append(EncoderInfo(name, float(ms), origin, _int(user) if user is not None else None))
        except Exception as exc:  # noqa: BLE001 - an encoder that cannot start fails the stage itself
            out.failures.append(f"stage {name}: {exc}")
            out.encoders.append(EncoderInfo(name, None, "assumed", _int(user) if user is not None else None))
    return out


#: worker-thread bookkeeping per inference stage and frame beyond input preparation (queue
#: hand-offs, result mapping); the runtime check observes the real host cost
HOST_OVERHEAD_MS = 0.2


def _probe_source(graph: Any, uri: str, overrides: dict[str, dict[str, Any]] | None, opened: bool) -> Any:
    """The pipeline's source stage for ``uri`` on one decoder thread, without looping or pacing."""
    cls = graph.classes()[graph.source]
    fields = cls.Params.model_fields
    params = {k: v for k, v in {**_params(graph, graph.source, overrides), "uri": uri}.items() if k in fields}
    if opened:
        params.update({k: v for k, v in (("threads", 1), ("loop", False), ("realtime", False)) if k in fields})
    source = cls(cls.Params(**params), name=graph.source)
    if opened:
        source.open()
    return source


def _first_frame(graph: Any, uri: str, overrides: dict[str, dict[str, Any]] | None) -> Any:
    source = _probe_source(graph, uri, overrides, opened=True)
    try:
        for unit in source.units():
            frames = source.decode_unit(unit)
            if frames or unit is None:
                return frames[0] if frames else None
    finally:
        source.close()
    return None


def _decode_cost(graph: Any, uri: str, needs_image: bool, overrides: dict[str, dict[str, Any]] | None,
                 cache: CostCache) -> tuple[float, tuple[int, int] | None, Any, str]:
    """(ms per frame, source size, a decoded frame or None, origin) of one source."""
    key = decode_key(uri, needs_image)
    entry = cache.get(key)
    connects = not getattr(_probe_source(graph, uri, overrides, opened=False), "can_probe", True)
    if isinstance(entry, dict) and "ms" in entry:
        wh = (int(entry.get("width", 0)), int(entry.get("height", 0))) if entry.get("width") else None
        return float(entry["ms"]), wh, None, "observed" if connects else "cached"
    if connects:  # a camera or stream is not probed before it connects: assumed until a run observes it
        return ASSUMED_DECODE_MS, None, None, "assumed"
    cache.measurements += 1
    ms, frame = measure_decode(uri, needs_image, lambda u: _probe_source(graph, u, overrides, opened=True))
    wh = (frame.width, frame.height) if frame is not None else None
    cache.put(key, {"ms": round(ms, 4), "width": wh[0] if wh else 0, "height": wh[1] if wh else 0})
    return ms, wh, frame, "measured"


def _with_cost(info: InferInfo, measured: _Measured, pipeline: str, cache: CostCache) -> InferInfo:
    from dataclasses import replace

    hit = measured.models.get(info.name)
    if hit is None:
        return info
    ms, origin, probe, precision = hit
    per_frame = probe.per_frame
    if per_frame is None:
        seen = cache.get(objects_key(pipeline, info.name))
        objects = float(seen) if isinstance(seen, (int, float)) else DEFAULT_OBJECTS_PER_FRAME
        per_frame = objects * probe.per_object
    return replace(info, ms=ms, per_frame=per_frame, origin=origin, objects=probe.per_frame is None,
                   per_object=probe.per_object, precision=precision)


def plan_overrides(plan: ThreadPlan, graph: Any,
                   overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """``overrides`` plus the plan's stage parameters, wherever the user did not set them:
    ``threads`` of the source stage, OpenVINO ``config`` keys and ``requests`` of CPU
    inference stages."""
    out = {k: dict(v) for k, v in (overrides or {}).items()}
    if not plan.enabled:
        return out
    src = graph.source
    src_cls = graph.classes()[src]
    if "threads" in src_cls.Params.model_fields and "threads" not in _params(graph, src, overrides):
        out.setdefault(src, {})["threads"] = plan.decoder_threads
    classes = graph.classes()
    for name, enc in plan.encoders.items():
        if name not in plan.user_set and "threads" in classes[name].Params.model_fields:
            out.setdefault(name, {})["threads"] = enc["threads"]
    for name, cfg in plan.infer.items():
        if name in plan.user_set or "config" not in classes[name].Params.model_fields:
            continue
        params = _params(graph, name, overrides)
        user = dict(params.get("config") or {})
        if any(str(k).upper() in OV_THREAD_KEYS for k in user):
            continue
        out.setdefault(name, {})["config"] = {**cfg, **PLANNED_OV_CONFIG, **user}
        fields = classes[name].Params.model_fields
        if name in plan.requests and "requests" in fields and not _int(params.get("requests")):
            out[name]["requests"] = plan.requests[name]
    for name, hint in plan.precision.items():  # chosen by measurement, also where the user set threads
        if "config" not in classes[name].Params.model_fields:
            continue
        config = out.get(name, {}).get("config") or dict(_params(graph, name, overrides).get("config") or {})
        out.setdefault(name, {})["config"] = with_hint(config, hint)
    return out


def available_cores() -> int:
    """CPUs this process may run on: the affinity mask, capped by a cgroup v2 CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


def cgroup_cpu_quota() -> float | None:
    """CPUs allowed by ``/sys/fs/cgroup/cpu.max`` (None if unlimited or unknown)."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _cv2_threads() -> int:
    try:
        import cv2

        return int(cv2.getNumThreads())
    except ImportError:  # pragma: no cover
        return 1


def _params(graph: Any, name: str, overrides: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    return {**graph.graph.nodes[name]["spec"].params, **((overrides or {}).get(name, {}))}


# --------------------------------------------------------------------------------------------
# process-wide settings

def apply_global(plan: ThreadPlan, ort_pool: bool = True) -> Callable[[], None]:
    """Set OpenCV's threads, and PyTorch's and BLAS's when those are already loaded, and
    (``ort_pool``) create ONNX Runtime's process-wide pool, which can be sized only once: pass
    False for a plan made before the costs are measured.  Returns a function that restores the
    previous values."""
    undo: list[Callable[[], None]] = []
    if not plan.enabled:
        return lambda: None
    try:
        import cv2

        before = cv2.getNumThreads()
        cv2.setNumThreads(plan.cv2_threads)
        undo.append(lambda: cv2.setNumThreads(before))
    except ImportError:  # pragma: no cover - opencv is a core dependency
        pass
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        t_before = torch.get_num_threads()
        torch.set_num_threads(plan.runtime_threads)
        undo.append(lambda: torch.set_num_threads(t_before))
        try:  # allowed once, before any inter-op work has started
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
    if ort_pool and (any(i.engine == "onnxruntime" for i in plan.infos) or "onnxruntime" in sys.modules):
        # ORT's process-wide pool can be sized once, before the first session: do it here
        try:
            from .ort_engine import global_pool

            global_pool(plan.ort_intra_threads)
        except Exception as exc:  # noqa: BLE001 - ORT missing: its stages fail at open with a clear line
            log.debug("ONNX Runtime's global thread pool not set: %s", exc)
    if "threadpoolctl" in sys.modules or "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            limiter = threadpool_limits(limits=plan.runtime_threads, user_api="blas")
            undo.append(limiter.restore_original_limits)

    def restore() -> None:
        for fn in reversed(undo):
            try:
                fn()
            except Exception:  # noqa: BLE001 - restoring is best effort
                pass

    return restore


def ort_session_options(plan: ThreadPlan, options: Any = None) -> Any:
    """ONNX Runtime ``SessionOptions`` for a user stage's own session, within the plan: the
    process-wide intra-op pool vapipe's ONNX Runtime stages share (created now if needed,
    sized to the plan's threads per inference), one inter-op thread, sequential execution."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ImportError("onnxruntime is not installed; pip install onnxruntime") from None
    from .ort_engine import global_pool

    opts = options if options is not None else ort.SessionOptions()
    global_pool(plan.ort_intra_threads)
    opts.use_per_session_threads = False
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return opts
