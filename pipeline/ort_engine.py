"""ONNX Runtime as a second inference engine (CPU execution provider), behind the same
stage API as :mod:`pipeline.engine`: ``load`` gives a model with ``input_hw``,
``metadata`` and ``create_pool``; a camera's pool keeps several inferences in flight
and hands results back in submission order.

What OpenVINO does inside the compiled model (u8 -> f32, colour order, mean and
scale, NHWC -> NCHW) is done here on the host, in the same order and in float32, on
the thread that runs the inference.

Threads, following the thread plan (``NUM_STREAMS``/``INFERENCE_NUM_THREADS`` in the
stage's ``config``, as for OpenVINO): a model runs ``streams`` inferences at once, each
on one of the model's own runner threads (``InferenceSession.run`` is thread-safe and
releases the GIL), with ``threads / streams`` threads per inference.  Sessions share
one process-wide intra-op pool (``use_per_session_threads = False``), sized once, before
the first session, to the largest threads-per-inference the plan gives (the calling
thread counts as one, so 1 means no extra threads); ORT pins nothing when sizes are
explicit.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .engine import EngineError, InputSpec
from .request_pool import InferencePool, Job

__all__ = ["OrtEngine", "OrtModel", "OrtRequestPool", "get_ort_engine", "global_pool", "preprocess"]

_POOL_LOCK = threading.Lock()
_GLOBAL_POOL: dict[str, int] | None = None


def global_pool(intra_threads: int = 1) -> dict[str, int]:
    """Create ONNX Runtime's process-wide thread pool once (later calls return its sizes:
    ORT allows one global pool per process)."""
    global _GLOBAL_POOL
    with _POOL_LOCK:
        if _GLOBAL_POOL is None:
            ort = _ort()
            sizes = {"intra_op": max(1, int(intra_threads)), "inter_op": 1}
            ort.set_global_thread_pool_sizes(sizes["intra_op"], sizes["inter_op"])
            _GLOBAL_POOL = sizes
        return dict(_GLOBAL_POOL)


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise EngineError("engine onnxruntime needs the onnxruntime package: pip install onnxruntime") from None
    return onnxruntime


def preprocess(image: np.ndarray, spec: InputSpec, nchw: bool) -> np.ndarray:
    """u8 (1, H, W, 3) in ``spec.host_color`` -> float32 model input, the arithmetic
    OpenVINO's preprocessing bakes in: colour order, then ``(x - mean) / scale``."""
    x = image[..., ::-1] if spec.host_color != spec.model_color else image
    x = x.astype(np.float32)
    if spec.mean is not None:
        x -= np.asarray(spec.mean, np.float32)
    if spec.scale is not None:
        x /= np.asarray(spec.scale, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if nchw else np.ascontiguousarray(x)


@dataclass
class OrtModel:
    """A session shared by every camera, its runner threads, and what hosts need to feed it."""

    path: Path
    session: Any
    input_name: str
    input_hw: tuple[int, int]          # model input (height, width); -1 where dynamic and not set
    nchw: bool
    spec: InputSpec
    output_names: list[str]
    streams: int
    runner: ThreadPoolExecutor
    metadata: dict[str, str] = field(default_factory=dict)
    device: str = "CPU"
    _arbiter: Any = field(default=None, repr=False)

    @property
    def optimal_requests(self) -> int:
        return self.streams + 1

    def create_pool(self, num_requests: int = 0, priority: Any = None) -> OrtRequestPool:
        """A pool of ``num_requests`` inferences in flight (0: streams + 1, at least 2); with a
        ``priority``, starts are ordered against other cameras' (:mod:`pipeline.arbiter`)."""
        return OrtRequestPool(self, num_requests if num_requests > 0 else max(2, self.optimal_requests), priority)

    def arbiter(self) -> Any:
        """The session's request arbiter: at most ``streams`` inferences started at once."""
        with _POOL_LOCK:
            if self._arbiter is None:
                from .arbiter import RequestArbiter

                self._arbiter = RequestArbiter(self.streams)
            return self._arbiter

    def infer(self, image: np.ndarray) -> list[np.ndarray]:
        """Outputs for one u8 (1, H, W, 3) image, on the calling thread."""
        feed = {self.input_name: preprocess(image, self.spec, self.nchw)}
        return self.session.run(self.output_names, feed)


class OrtRequestPool(InferencePool):
    """One camera's inferences in flight on a shared :class:`OrtModel` (same contract as
    :class:`pipeline.engine.RequestPool`; used by one thread).  ``start`` copies nothing:
    the image must stay unchanged until the job finishes (stages pass fresh arrays)."""

    model: OrtModel

    def __init__(self, model: OrtModel, num_requests: int, priority: Any = None) -> None:
        super().__init__(model, max(1, num_requests), priority)

    def grow(self, size: int) -> None:
        self.size = max(self.size, size)

    def start(self, image: np.ndarray, postprocess: Callable[[list[np.ndarray]], Any]) -> Job:
        if len(self._inflight) >= self.size:
            self.finish(self._inflight[0])
        if image.ndim == 3:
            image = image[None]
        ticket = self._acquire()
        future: Future = self.model.runner.submit(self.model.infer, image)
        return self._started(Job(future, postprocess, self._arbiter, ticket))

    def _completed(self, job: Job) -> bool:
        return job.request.done()

    def _wait(self, job: Job) -> None:
        job.request.result()

    def _outputs(self, job: Job) -> list[np.ndarray]:
        return job.request.result()  # the finished future's value, at once


class OrtEngine:
    """Process-wide ONNX Runtime sessions, one per model file, input spec and thread settings."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[tuple[Any, ...], OrtModel] = {}

    def load(self, path: str | os.PathLike[str], spec: InputSpec, device: str = "CPU",
             hint: str = "THROUGHPUT", config: dict[str, Any] | None = None, keep: bool = True) -> OrtModel:
        """A session for ``path`` (an .onnx file) on the CPU execution provider; ``config``
        keys ``NUM_STREAMS`` and ``INFERENCE_NUM_THREADS`` set its threads (others are
        OpenVINO's and ignored: ORT's CPU provider computes in f32).  ``keep=False`` opens a
        one-off session (not cached) with its own single thread, leaving the global pool
        alone (the planner's measurements; on the global pool once it exists)."""
        path = Path(path)
        if device.upper() != "CPU":
            raise EngineError(f"engine onnxruntime runs on the CPU execution provider; device {device!r} is "
                              "OpenVINO's (use engine: openvino, or device: CPU)")
        if path.suffix.lower() != ".onnx":
            raise EngineError(f"engine onnxruntime reads ONNX models (.onnx); {path} is not one "
                              "(use engine: openvino for .xml, .tflite, ...)")
        if not path.is_file():
            raise EngineError(f"model file not found: {path}")
        cfg = {str(k).upper(): v for k, v in (config or {}).items()}
        threads = max(1, int(cfg.get("INFERENCE_NUM_THREADS") or 1))
        streams = 1 if hint == "LATENCY" else max(1, min(threads, int(cfg.get("NUM_STREAMS") or threads)))
        key = (str(path.resolve()), spec, streams, threads)
        with self._lock:
            hit = self._models.get(key)
            if hit is not None:
                return hit
            model = self._open(path, spec, streams, max(1, threads // streams), shared_pool=keep)
            if keep:
                self._models[key] = model
            return model

    def _open(self, path: Path, spec: InputSpec, streams: int, per_run: int, shared_pool: bool) -> OrtModel:
        ort = _ort()
        options = ort.SessionOptions()
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if shared_pool or _GLOBAL_POOL is not None:
            # the process-wide pool: per-session thread counts would be ignored, and once the pool
            # exists ORT refuses sessions with their own threads (a late one-off measurement then
            # runs on the pool, at its size)
            options.use_per_session_threads = False
            global_pool(per_run)
        else:
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EngineError(f"cannot read model {path} with onnxruntime: {text[:300]}") from None
        inputs = session.get_inputs()
        if len(inputs) != 1:
            raise EngineError(f"model {path} has {len(inputs)} inputs; vapipe image stages need exactly 1")
        shape = list(inputs[0].shape)
        if len(shape) != 4 or 3 not in (shape[1], shape[3]):
            raise EngineError(f"model {path} input has shape {shape}; expected NHWC or NCHW with 3 channels")
        nchw = shape[1] == 3
        dims = [d if isinstance(d, int) else -1 for d in (shape[2:4] if nchw else shape[1:3])]
        h, w = dims
        if spec.size is not None:
            h = spec.size[0] if h < 0 else h
            w = spec.size[1] if w < 0 else w
        meta = dict(session.get_modelmeta().custom_metadata_map)
        runner = ThreadPoolExecutor(max_workers=streams, thread_name_prefix=f"ort-{path.stem}")
        return OrtModel(path=path, session=session, input_name=inputs[0].name, input_hw=(h, w), nchw=nchw,
                        spec=spec, output_names=[o.name for o in session.get_outputs()], streams=streams,
                        runner=runner, metadata=meta)


_ENGINE: OrtEngine | None = None
_ENGINE_LOCK = threading.Lock()


def get_ort_engine() -> OrtEngine:
    """The process-wide ONNX Runtime engine (created on first use)."""
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = OrtEngine()
        return _ENGINE
