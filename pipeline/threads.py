"""Process-wide thread budget: how many threads each runtime in the process may use.

Every runtime in a vapipe process brings its own thread pool: OpenVINO (TBB,
per compiled model), FFmpeg (per decoder, "auto" = one frame thread per core
plus one), OpenCV (one global pool), numpy's BLAS, and ONNX Runtime or PyTorch
when a user stage brings them.  Left alone, each sizes itself to the whole
machine, so a two-model pipeline on two cameras asks for far more busy threads
than there are cores.  :func:`plan_threads` shares the cores given to vapipe
(``--cores``, default the process's CPU affinity, capped by a cgroup quota):

* **decoder threads per source**: ``1`` (decoding runs on the source's decoder
  thread; frame threading adds a frame of latency per extra thread and, on a
  machine this small, takes cores from inference);
* **OpenVINO, CPU models only** (``NUM_STREAMS``, ``INFERENCE_NUM_THREADS``):
  the cores left after the decoders are split evenly between the CPU models,
  at least one thread each, one thread per stream (streams run separate infer
  requests; one camera keeps ``max(2, streams)`` requests in flight);
  ``LATENCY`` stages get one stream with all their threads.  Other devices
  (GPU, NPU, AUTO:..., MULTI:..., ...) are left to their plugins;
* **decoder priority**: a decoder whose output queue stays full (inference is the
  bottleneck) runs at nice ``NICE_WHILE_AHEAD`` until it falls behind again, so it
  takes only the CPU inference leaves free (see :mod:`pipeline.priority`);
* **OpenCV**: ``1`` — its calls are small (a few resizes and a colour
  conversion of model-sized images) and run on the calling thread; every
  source already runs its own;
* **BLAS / PyTorch / ONNX Runtime**: ``runtime_threads`` (the largest model
  share) for intra-op work, one inter-op thread.

Accounting: ``busy = sources x decoder threads + sum of INFERENCE_NUM_THREADS
over CPU models + (OpenCV threads - 1)``; the Python threads share one GIL and
mostly wait on those pools, so they are not counted.  ``busy <= cores``
whenever ``cores >= sources + CPU models`` (each needs at least one thread);
below that every share is 1 and the plan says it is oversubscribed.

Measured on the 2-core development machine (AMD EPYC, OpenVINO 2026.4, PyAV 18 /
FFmpeg 8.1), ``vapipe run NAME --source CLIP --json --no-progress``, total FPS,
median of 5 runs in shuffled order, each started only when the machine was
otherwise idle (runs during which other processes used >10 % CPU were repeated;
unguarded runs on this shared machine scattered from 30 to 290 FPS):

persons, 1080p H.264 clip (400 frames)       FPS (median, range)
  FFmpeg auto + OpenVINO THROUGHPUT defaults  195  (183-210)   --cores 0 (2 streams x 2 threads, 3 decoder threads)
  plan: decoder 1, 1 stream x 1 thread, cv2 1 216  (191-239)   default
  decoder 1, 1 stream x 2 threads             195  (167-200)
  decoder 1, 2 streams x 2 threads            200  (187-228)   (ENABLE_CPU_PINNING off: 199)
  decoder auto, 1 stream x 1 thread           190  (179-201)
  decoder 2, 1 stream x 1 thread              201  (188-211)

faces, two models at once (480x270 GIF looped to 300 frames, 2 faces a frame, MP4 + JSON Lines)
  OpenVINO THROUGHPUT defaults, both models     132  (107-156)   --cores 0 (2 streams x 2 threads each)
  plan: 1 stream x 1 thread each, decoder 1     148  (144-178)   default (3 busy threads: oversubscribed by one)
  1 stream x 2 threads each                     153  (142-168)   4 runs; 8 % more CPU time per frame
  2 streams x 2 threads each, decoder 1         142  (126-172)

faces on the 1080p clip (200 frames, 3 runs; the 1080p MP4 encode dominates)
  OpenVINO/FFmpeg defaults                     45.2 (41.8-48.9)  --cores 0
  plan                                         48.4 (47.8-55.3)  default
  2 streams x 2 threads each, decoder 1        45.9 (43.9-53.0)

Side by side in ``make bench`` (mode ``vapipe-unplanned`` is ``--cores 0``), median
of 5 rounds, in-memory outputs, total FPS:

                                      plan   defaults
  faces, 480x270 GIF                   336   278   1.21x  cheap decoding: the models' threads count most
  faces, 1080p clip                    230   209   1.10x  (a 7-round run: 221 vs 223)
  persons, 1080p clip, 1 camera        274   251   1.09x
  persons, 1080p clip, 4 cameras       281   274   1.03x

On the 1080p clips both settings use the two cores whole and decoding takes the
largest share; there the plan's gain is latency (faces: median 13 against 30 ms).

The plan beats the runtimes' own defaults most where inference dominates;
nothing measured was clearly better, so it is the default.  ``--cores 0``
restores every runtime's own choice.

Not used: OpenVINO's automatic batching for several cameras on one model.  On CPU
``BATCH:CPU(n)`` passes requests through one at a time (automatic batching is a GPU
feature; the compiled model reports one optimal request and runs batch 1): ``persons``
on 4 cameras ran at the same speed with and without it.  Batching the cameras'
frames in vapipe instead (the pose detector with a dynamic batch axis, batches of 4
filled by the cameras' worker threads) was tried too: alone, a batch of 4 costs about
17 % less per image than single requests, but in the 4-camera pipeline the inference
thread spent 3.25 instead of 3.37 ms per frame while decoders and workers spent more,
and FPS did not rise (228-264 against 281), so cameras keep their own requests.

The plan is only applied where the user did not choose: an explicit
``decode.threads``, or ``NUM_STREAMS``/``INFERENCE_NUM_THREADS`` in a stage's
``config``, wins.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from .priority import NICE_WHILE_AHEAD

__all__ = ["InferInfo", "ThreadPlan", "available_cores", "plan_threads", "plan_for_graph", "plan_overrides",
           "apply_global", "ort_session_options", "OV_THREAD_KEYS"]

#: OpenVINO properties the plan sets; a user's value for either keeps the plan off that stage
OV_THREAD_KEYS = ("NUM_STREAMS", "INFERENCE_NUM_THREADS")
#: defaults chosen from the measurements in the module docstring
DECODER_THREADS = 1
CV2_THREADS = 1


@dataclass(frozen=True)
class InferInfo:
    """An inference stage as the planner sees it."""

    name: str
    device: str = "CPU"
    hint: str = "THROUGHPUT"
    user_config: bool = False  # the stage's config already sets NUM_STREAMS or INFERENCE_NUM_THREADS
    user_threads: int = 0      # ... and its INFERENCE_NUM_THREADS (0: unknown / plugin's choice)
    user_streams: int = 0

    @property
    def on_cpu(self) -> bool:
        return self.device.upper().split(".", 1)[0] == "CPU"


@dataclass
class ThreadPlan:
    """Threads per runtime for one run; :meth:`summary` is one line."""

    cores: int
    sources: int
    decoder_threads: int                       # per source; FFmpeg thread_count
    cv2_threads: int                           # cv2.setNumThreads
    infer: dict[str, dict[str, int]] = field(default_factory=dict)  # CPU stage -> OpenVINO properties
    untouched: dict[str, str] = field(default_factory=dict)          # stage -> device left to its plugin
    runtime_threads: int = 1                  # intra-op threads for BLAS, PyTorch, ONNX Runtime
    notes: list[str] = field(default_factory=list)
    user_set: list[str] = field(default_factory=list)  # "decode", stage names: values the user chose
    enabled: bool = True                      # False (cores=0): every runtime keeps its own defaults
    decoder_nice: int = 0                     # decoders' nice value while ahead of inference (pipeline/priority.py)

    @property
    def infer_threads(self) -> int:
        return sum(c.get("INFERENCE_NUM_THREADS", 0) for c in self.infer.values())

    @property
    def busy_threads(self) -> int:
        """Threads that may be busy at once (see the module docstring)."""
        decoder = self.decoder_threads or self.cores + 1  # 0: FFmpeg's automatic choice, cores + 1
        return self.sources * decoder + self.infer_threads + max(0, self.cv2_threads - 1)

    @property
    def oversubscribed(self) -> bool:
        return self.busy_threads > self.cores

    def summary(self) -> str:
        if not self.enabled:
            return "threads: runtime defaults (--cores 0: no plan)"
        mark = {n: " (set)" if n in self.user_set else "" for n in ["decode", *self.infer]}
        dec = "auto" if self.decoder_threads == 0 else str(self.decoder_threads)
        parts = [f"decode {dec}{mark['decode']} x {self.sources} source{'s' if self.sources != 1 else ''}"]
        for name, cfg in self.infer.items():
            parts.append(f"{name} {cfg.get('NUM_STREAMS', '?')} stream x {cfg.get('INFERENCE_NUM_THREADS', '?')} "
                         f"thread{mark[name]}")
        for name, dev in self.untouched.items():
            parts.append(f"{name} {dev} (plugin's choice)")
        parts.append(f"cv2 {self.cv2_threads}")
        if self.decoder_nice:
            parts.append(f"decoders nice {self.decoder_nice} while ahead")
        over = " OVERSUBSCRIBED" if self.oversubscribed else ""
        return f"threads: {self.cores} cores, {self.busy_threads} busy{over}: " + ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["busy_threads"] = self.busy_threads
        d["oversubscribed"] = self.oversubscribed
        return d


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


def plan_threads(cores: int | None = None, sources: int = 1, infer: Iterable[InferInfo] = (),
                 needs_image: bool = False, decoder_threads: int | None = None) -> ThreadPlan:
    """Share ``cores`` between the decoders of ``sources`` sources and the inference stages ``infer``.

    ``cores=0`` disables the plan (every runtime keeps its defaults).  ``decoder_threads``
    is the user's choice of decoder threads, if any (0 = FFmpeg's automatic choice).
    ``needs_image`` (some stage reads full-size pixels: the decoder thread then also converts
    every frame to BGR) is recorded in the notes.
    """
    sources = max(1, int(sources))
    stages = list(infer)
    if cores is not None and int(cores) == 0:
        return ThreadPlan(cores=available_cores(), sources=sources, decoder_threads=decoder_threads or 0,
                          cv2_threads=_cv2_threads(), enabled=False)
    cores = max(1, int(cores if cores is not None else available_cores()))
    cpu = [s for s in stages if s.on_cpu]
    planned = [s for s in cpu if not s.user_config]
    notes: list[str] = []
    user_set: list[str] = []
    if decoder_threads is not None:
        user_set.append("decode")
    else:
        decoder_threads = DECODER_THREADS
    cv2_threads = CV2_THREADS
    # FFmpeg's automatic choice is one frame thread per core plus one
    left = cores - sources * (decoder_threads or cores + 1)
    if needs_image:
        notes.append("full-size BGR conversion runs on each decoder thread")
    # CPU models the user configured keep their own threads (unknown counts as one).
    fixed = [s for s in cpu if s.user_config]
    left -= sum(max(1, s.user_threads) for s in fixed)
    share = left // len(planned) if planned else 0
    extra = left - share * len(planned) if planned else 0
    need = sources + len(cpu)
    if cores < need:
        notes.append(f"{sources} source(s) and {len(cpu)} CPU model(s) need at least {need} threads; "
                     f"{cores} core(s) given: oversubscribed")
    plan = ThreadPlan(cores=cores, sources=sources, decoder_threads=decoder_threads, cv2_threads=cv2_threads,
                      notes=notes, user_set=user_set, decoder_nice=NICE_WHILE_AHEAD)
    for st in stages:
        if not st.on_cpu:
            plan.untouched[st.name] = st.device
        elif st.user_config:
            plan.infer[st.name] = {"NUM_STREAMS": st.user_streams or 1,
                                   "INFERENCE_NUM_THREADS": max(1, st.user_threads)}
            user_set.append(st.name)
        else:
            k = planned.index(st)
            threads = max(1, share + (1 if k < extra else 0))
            streams = 1 if st.hint == "LATENCY" else threads
            plan.infer[st.name] = {"NUM_STREAMS": streams, "INFERENCE_NUM_THREADS": threads}
    plan.runtime_threads = max([c["INFERENCE_NUM_THREADS"] for c in plan.infer.values()] or [max(1, left)])
    return plan


def infer_infos(graph: Any, overrides: dict[str, dict[str, Any]] | None = None) -> list[InferInfo]:
    """The inference stages of a :class:`pipeline.graph.PipelineGraph` (params with ``overrides``)."""
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
                             user_streams=_int(config.get("NUM_STREAMS"))))
    return out


def plan_for_graph(graph: Any, sources: int = 1, cores: int | None = None,
                   overrides: dict[str, dict[str, Any]] | None = None) -> ThreadPlan:
    """The plan for running ``graph`` on ``sources`` sources."""
    needs_image = any(getattr(cls, "needs_image", False) for cls in graph.classes().values())
    src = _params(graph, graph.source, overrides)
    user_dec = _int(src["threads"]) if "threads" in src else None
    return plan_threads(cores, sources, infer_infos(graph, overrides), needs_image, user_dec)


def plan_overrides(plan: ThreadPlan, graph: Any,
                   overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """``overrides`` plus the plan's stage parameters, wherever the user did not set them:
    ``threads`` of the source stage, OpenVINO ``config`` keys of CPU inference stages."""
    out = {k: dict(v) for k, v in (overrides or {}).items()}
    if not plan.enabled:
        return out
    src = graph.source
    src_cls = graph.classes()[src]
    if "threads" in src_cls.Params.model_fields and "threads" not in _params(graph, src, overrides):
        out.setdefault(src, {})["threads"] = plan.decoder_threads
    classes = graph.classes()
    for name, cfg in plan.infer.items():
        if name in plan.user_set or "config" not in classes[name].Params.model_fields:
            continue
        user = dict(_params(graph, name, overrides).get("config") or {})
        if any(str(k).upper() in OV_THREAD_KEYS for k in user):
            continue
        out.setdefault(name, {})["config"] = {**cfg, **user}
    return out


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

def apply_global(plan: ThreadPlan) -> Callable[[], None]:
    """Set OpenCV's threads, and PyTorch's and BLAS's when those are already loaded;
    returns a function that restores the previous values."""
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
    """ONNX Runtime ``SessionOptions`` within the plan (ORT has no process-wide setter):
    ``runtime_threads`` intra-op threads, one inter-op thread, sequential execution."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ImportError("onnxruntime is not installed; pip install onnxruntime") from None
    opts = options if options is not None else ort.SessionOptions()
    opts.intra_op_num_threads = plan.runtime_threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return opts
