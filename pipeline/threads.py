"""Process-wide thread budget: how many threads each runtime in the process may use.

Every runtime in a vapipe process brings its own thread pool: OpenVINO (TBB,
per compiled model), FFmpeg (per decoder, "auto" = one frame thread per core
plus one), OpenCV (one global pool), numpy's BLAS, and ONNX Runtime or PyTorch
when a user stage brings them.  Left alone, each sizes itself to the whole
machine.  :func:`plan_for_graph` measures what the pipeline's parts cost on this
machine (:mod:`pipeline.graph_costs`: decode per frame of each source, host work
per frame (input preparation, until a run has observed the whole of it), each CPU
model's inference on one thread; cached per machine by :mod:`pipeline.costs`) and
shares the cores given to vapipe (``--cores``, default the process's CPU affinity,
capped by a cgroup quota) in proportion to that work (:mod:`pipeline.planner`):

* **decoder threads per source** (FFmpeg ``thread_count``): 1, more when decoding
  binds the rate and a frame thread would raise it by 10 %, or when one thread would
  be busy more than 75 % of the time (not for cameras and streams, which set the pace),
  and then one spare (frame threads wait on each other);
* **OpenVINO, CPU models** (``NUM_STREAMS``, ``INFERENCE_NUM_THREADS``): the threads
  each model's share of the work needs, as single-threaded streams, unpinned
  (``ENABLE_CPU_PINNING: False``: pinned, the streams of every model start on the same
  cores); requests per camera one more than its share of the streams.  Other devices are left to their
  plugins;
* **OpenVINO precision** (``INFERENCE_PRECISION_HINT``): f32 where it costs no more than the
  CPU's default (bf16 or f16), measured per model (:mod:`pipeline.precision`);
* **decoder priority**: a decoder whose output queue stays full runs at nice
  ``NICE_WHILE_AHEAD``, with its FFmpeg frame threads, until it falls behind again
  (:mod:`pipeline.priority`);
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

from .costs import CostCache
from .graph_costs import measure_graph, non_negative_int, stage_params, with_cost
from .planner import InferInfo, ThreadPlan, plan_threads
from .precision import with_hint

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


def infer_infos(graph: Any, overrides: dict[str, dict[str, Any]] | None = None) -> list[InferInfo]:
    """The inference stages of a :class:`pipeline.graph.PipelineGraph` (params with ``overrides``),
    without costs."""
    from .stage import InferStage

    out = []
    for name, cls in graph.classes().items():
        # OpenVINO stages: inference stages that take compile properties
        if not issubclass(cls, InferStage) or "config" not in cls.Params.model_fields:
            continue
        params = stage_params(graph, name, overrides)
        fields = cls.Params.model_fields
        device = str(params.get("device", fields["device"].default if "device" in fields else "CPU"))
        hint = str(params.get("hint", fields["hint"].default if "hint" in fields else "THROUGHPUT"))
        config = {str(k).upper(): v for k, v in (params.get("config") or {}).items()}
        user = any(k in OV_THREAD_KEYS for k in config)
        out.append(InferInfo(name=name, device=device, hint=hint, user_config=user,
                             user_threads=non_negative_int(config.get("INFERENCE_NUM_THREADS")),
                             user_streams=non_negative_int(config.get("NUM_STREAMS")),
                             user_requests=non_negative_int(params.get("requests")) > 0,
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
    src = stage_params(graph, graph.source, overrides)
    user_dec = non_negative_int(src["threads"]) if "threads" in src else None
    infos = infer_infos(graph, overrides)
    if cores is not None and int(cores) == 0:
        return plan_threads(0, count, infos, decoder_threads=user_dec)
    stages = graph.instantiate(overrides)
    needs_image = any(st.needs_image for st in stages.values())
    if not measure:
        return plan_threads(cores, count, infos, needs_image, user_dec)
    cache = costs if costs is not None else CostCache()
    measured = measure_graph(graph, stages, uris, needs_image, overrides, cache)
    if measured.failures:
        log.info("planning with assumed costs for %s", "; ".join(measured.failures))
    infos = [with_cost(i, measured, graph.spec.name, cache) for i in infos]
    plan = plan_threads(cores, count, infos, needs_image, user_dec, decode_ms=measured.decode_ms or None,
                        host_ms=measured.host_ms, decode_origin=measured.decode_origin, encoders=measured.encoders,
                        host_origin=measured.host_origin, paced=measured.paced)
    plan.host_key = measured.host_key
    plan.notes = [*plan.notes, *(f"{COST_ASSUMED}{failure}" for failure in measured.failures)]
    return plan


#: the start of a plan note for a cost that could not be measured (the note names what and why)
COST_ASSUMED = "cost assumed, not measured: "


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
    if "threads" in src_cls.Params.model_fields and "threads" not in stage_params(graph, src, overrides):
        out.setdefault(src, {})["threads"] = plan.decoder_threads
    classes = graph.classes()
    for name, enc in plan.encoders.items():
        if name not in plan.user_set and "threads" in classes[name].Params.model_fields:
            out.setdefault(name, {})["threads"] = enc["threads"]
    for name, cfg in plan.infer.items():
        if name in plan.user_set or "config" not in classes[name].Params.model_fields:
            continue
        params = stage_params(graph, name, overrides)
        user = dict(params.get("config") or {})
        if any(str(k).upper() in OV_THREAD_KEYS for k in user):
            continue
        out.setdefault(name, {})["config"] = {**cfg, **PLANNED_OV_CONFIG, **user}
        fields = classes[name].Params.model_fields
        if name in plan.requests and "requests" in fields and not non_negative_int(params.get("requests")):
            out[name]["requests"] = plan.requests[name]
    for name, hint in plan.precision.items():  # chosen by measurement, also where the user set threads
        if "config" not in classes[name].Params.model_fields:
            continue
        config = out.get(name, {}).get("config") or dict(stage_params(graph, name, overrides).get("config") or {})
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


def _cv2_threads() -> int:
    try:
        import cv2

        return int(cv2.getNumThreads())
    except ImportError:  # pragma: no cover
        return 1


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
