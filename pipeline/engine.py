"""OpenVINO inference engine: one Core per process, a compiled-model cache,
preprocessing baked into the model, and per-camera pools of infer requests.

Every camera gets its own :class:`RequestPool` on a compiled model that all
cameras share (one compiled model per model file, device, input spec and
settings).  A pool keeps several requests in flight and hands results back in
submission order; post-processing runs in the caller's thread right after a
request finishes, before the request is reused, so outputs never need copying.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .image_info import ACCEPTED_INPUTS, fold_image_info, image_input
from .model_prep import onnx_metadata, with_preprocessing
from .ov_errors import ov_reason as _ov_reason
from .request_pool import InferencePool, Job

__all__ = ["InputSpec", "Engine", "LoadedModel", "RequestPool", "Job", "get_engine", "EngineError",
           "numpy_bridge_ready"]

DEVICE_PREFIXES = ("CPU", "GPU", "NPU", "AUTO", "MULTI", "HETERO", "BATCH")
HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")


class EngineError(ValueError):
    """A model could not be read or compiled; the message names it."""


@dataclass(frozen=True)
class InputSpec:
    """How the host feeds the model.

    The host always passes uint8 NHWC images of the model's input size with
    colour order ``host_color``; the engine converts to float, reorders
    colour to ``model_color`` and applies ``(x - mean) / scale`` per channel
    (in the model's colour order, 0..255 units).
    """

    host_color: str = "BGR"
    model_color: str = "RGB"
    mean: tuple[float, ...] | None = None
    scale: tuple[float, ...] | None = None
    size: tuple[int, int] | None = None  # (height, width) for models with dynamic spatial dims; width -1 keeps it dynamic
    #: Engine-side resize: the host passes full-size frames of this (height, width) and the
    #: compiled model scales them (bilinear, on uint8) to ``inner`` (height, width, default the
    #: model's size), then pads with ``pad_value`` (pixel units, before mean and scale) at
    #: (top, left) to the model's size (letterbox).
    resize_from: tuple[int, int] | None = None
    inner: tuple[int, int] | None = None
    pad_top_left: tuple[int, int] = (0, 0)
    pad_value: float = 0.0


@dataclass
class LoadedModel:
    """A compiled model shared by all cameras, plus what hosts need to feed it."""

    path: Path
    device: str
    compiled: Any
    input_name: str
    input_hw: tuple[int, int]          # model input (height, width); width -1 if dynamic
    output_names: list[str]
    optimal_requests: int
    metadata: dict[str, str] = field(default_factory=dict)
    _arbiter: Any = field(default=None, repr=False)
    _arbiter_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def create_pool(self, num_requests: int = 0, priority: Any = None) -> RequestPool:
        """A pool of ``num_requests`` requests (0: the device's optimal number, at least 2).
        With a ``priority`` (:class:`pipeline.arbiter.SourcePriority`) the pool's starts are
        ordered against other cameras' by the model's :class:`pipeline.arbiter.RequestArbiter`."""
        n = num_requests if num_requests > 0 else max(2, self.optimal_requests)
        return RequestPool(self, n, priority)

    def arbiter(self) -> Any:
        """The model's request arbiter (created on first use; ``optimal_requests`` at once)."""
        with self._arbiter_lock:
            if self._arbiter is None:
                from .arbiter import RequestArbiter

                self._arbiter = RequestArbiter(self.optimal_requests)
            return self._arbiter


class _Request:
    """One infer request with its own input buffer and output views.

    For a static input shape the request is bound once to a uint8 buffer owned
    here, and each job copies its image into it (a few microseconds for model-size
    images, and no new tensor object per frame).  Outputs of static shape are
    read through numpy views taken once; dynamic ones are fetched after each run.
    """

    __slots__ = ("request", "_buffer", "_bound", "_n_out", "_views")

    def __init__(self, model: LoadedModel) -> None:
        self.request = model.compiled.create_infer_request()
        port = model.compiled.input(0)
        shape = port.get_partial_shape()
        self._buffer = np.empty(shape.to_shape(), np.uint8) if shape.is_static else None
        self._bound = False
        self._n_out = len(model.output_names)
        static_out = all(o.get_partial_shape().is_static for o in model.compiled.outputs)
        self._views: list[np.ndarray] | None = (
            [self.request.get_output_tensor(i).data for i in range(self._n_out)] if static_out else None)

    def feed(self, image: np.ndarray) -> np.ndarray | None:
        """Set ``image`` (1, H, W, C) as input; returns the array the request reads, if shared."""
        import openvino as ov

        buf = self._buffer
        if buf is not None and image.shape == buf.shape:
            np.copyto(buf, image)
            if not self._bound:
                self.request.set_input_tensor(ov.Tensor(buf, shared_memory=True))
                self._bound = True
            return None
        if not image.flags.c_contiguous:
            image = np.ascontiguousarray(image)
        self.request.set_input_tensor(ov.Tensor(image, shared_memory=True))
        self._bound = False
        return image

    def outputs(self) -> list[np.ndarray]:
        """Views of the output tensors (valid until the request runs again)."""
        if self._views is not None:
            return self._views
        return [self.request.get_output_tensor(i).data for i in range(self._n_out)]


class RequestPool(InferencePool):
    """Requests of one camera on a shared compiled model.

    Not thread-safe: one pool is used by one thread (the camera's worker).
    ``start`` blocks only when every request is busy, and then waits for the
    oldest job.  ``postprocess`` receives the output arrays (views into the
    request's buffers, valid only during the call) and returns the result.
    """

    model: LoadedModel
    #: a request whose wait raised is not reused: its job stays first in flight until drained
    retire_failed_wait = False

    def __init__(self, model: LoadedModel, num_requests: int, priority: Any = None) -> None:
        super().__init__(model, 0, priority)
        self._idle: list[_Request] = []
        self.grow(num_requests)

    def grow(self, size: int) -> None:
        """Add requests until the pool has ``size`` (never shrinks)."""
        while self.size < size:
            self._idle.append(_Request(self.model))
            self.size += 1

    def start(self, image: np.ndarray, postprocess: Callable[[list[np.ndarray]], Any]) -> Job:
        """Start inference on ``image`` (uint8, (H, W, 3) or (1, H, W, 3)).

        An image of the model's static input shape is copied into the request's own
        input buffer (so the caller may reuse it at once); any other shape (models
        with dynamic input) is shared, not copied, and must stay unchanged until the
        job is finished."""
        if not self._idle:
            self.finish(self._inflight[0])
        slot = self._idle.pop()
        if image.ndim == 3:
            image = image[None]
        keep = slot.feed(image)
        try:
            ticket = self._acquire()
        except BaseException:
            self._idle.append(slot)
            raise
        slot.request.start_async()
        job = Job(slot, postprocess, self._arbiter, ticket)
        job.result = keep  # keeps a shared input alive while the request reads it
        return self._started(job)

    def _completed(self, job: Job) -> bool:
        return job.request.request.wait_for(0)

    def _wait(self, job: Job) -> None:
        job.request.request.wait()

    def _outputs(self, job: Job) -> list[np.ndarray]:
        return job.request.outputs()

    def _recycle(self, job: Job) -> None:
        self._idle.append(job.request)  # the request may run again: its output views are done with


def validate_device(device: str) -> str:
    head = device.split(":", 1)[0].split(".", 1)[0].upper()
    if head not in DEVICE_PREFIXES:
        raise EngineError(f"unknown device {device!r}; valid: {', '.join(DEVICE_PREFIXES)} "
                          "(optionally with ':' and a device list, e.g. AUTO:CPU)")
    return device


_BRIDGE_LOCK = threading.Lock()
_bridge_ready = False


def numpy_bridge_ready() -> None:
    """Have OpenVINO's Python binding set up its numpy bridge now, once per process.

    The binding sets it up on the first conversion between a tensor and an array (``.data``,
    arrays passed to ``infer``/``start_async``), inside a C++ static whose set-up releases the
    GIL: two threads making their first conversion at the same time can deadlock, one holding
    the GIL while it waits for the static, the other holding the static while it waits for the
    GIL (4 threads starting ``infer`` together hung in 10 of 20 processes, OpenVINO 2026.4).
    Call it before starting threads that use OpenVINO; :class:`Engine` does."""
    global _bridge_ready
    import openvino as ov

    with _BRIDGE_LOCK:
        if not _bridge_ready:
            _ = ov.Tensor(np.zeros((1,), np.float32)).data
            _bridge_ready = True


class Engine:
    """Process-wide OpenVINO Core and compiled-model cache (thread-safe)."""

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None) -> None:
        import openvino as ov

        self.core = ov.Core()
        numpy_bridge_ready()
        self._lock = threading.Lock()
        self._models: dict[tuple[Any, ...], LoadedModel] = {}
        self.cache_dir = Path(cache_dir) if cache_dir else _default_cache_dir()
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            self.core.set_property({"CACHE_DIR": str(self.cache_dir)})
        except OSError:
            pass
        self.default_config: dict[str, Any] = {}

    def load(self, path: str | os.PathLike[str], spec: InputSpec, device: str = "CPU",
             hint: str = "THROUGHPUT", config: dict[str, Any] | None = None, keep: bool = True) -> LoadedModel:
        """Read, add preprocessing to, and compile a model (cached per arguments; ``keep=False``
        compiles without adding the result to the cache, e.g. for a one-off measurement)."""
        path = Path(path)
        validate_device(device)
        from .devices import unavailable_reason

        missing = unavailable_reason(self.core, device)
        if missing:
            raise EngineError(missing)  # e.g. "device GPU not available; available: CPU"
        if hint not in HINTS:
            raise EngineError(f"unknown performance hint {hint!r}; valid: {', '.join(HINTS)}")
        merged = {**self.default_config, **(config or {})}
        key = (str(path.resolve()), device, spec, hint, tuple(sorted((k, str(v)) for k, v in merged.items())))
        with self._lock:
            hit = self._models.get(key)
            if hit is not None:
                return hit
            model = self._compile(path, spec, device, hint, merged)
            if keep:
                self._models[key] = model
            return model

    def read_model(self, path: str | os.PathLike[str]) -> Any:
        """The ``openvino.Model`` in ``path`` (not compiled); a missing, corrupt or unknown file
        is an :class:`EngineError` naming it."""
        path = Path(path)
        if not path.is_file():
            raise EngineError(f"model file not found: {path}")
        _check_model_file(path)
        try:
            return self.core.read_model(str(path))
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises RuntimeError subclasses
            hint = (f" (expected the weights in {path.with_suffix('.bin')}, as OpenVINO writes them)"
                    if path.suffix.lower() == ".xml" and "bin" in str(exc) else "")
            raise EngineError(f"cannot read model {path}: {_ov_reason(exc)}{hint}") from None

    def _compile(self, path: Path, spec: InputSpec, device: str, hint: str,
                 config: dict[str, Any]) -> LoadedModel:

        model = self.read_model(path)
        inp = image_input(model)
        if inp is None:
            raise EngineError(f"model {path} has {len(model.inputs)} inputs; vapipe image stages need "
                              f"{ACCEPTED_INPUTS}")
        metadata = onnx_metadata(model)
        pshape = inp.get_partial_shape()
        if pshape.rank.get_length() != 4:
            raise EngineError(f"model {path} input has shape {pshape}; expected a 4-D image tensor")
        dims = [d.get_length() if d.is_static else -1 for d in pshape]
        layout = "NHWC" if dims[3] == 3 else "NCHW" if dims[1] == 3 else None
        if layout is None:
            raise EngineError(f"model {path} input shape {pshape} has no 3-channel axis; expected NHWC or NCHW")
        h, w = (dims[1], dims[2]) if layout == "NHWC" else (dims[2], dims[3])
        if spec.size is not None:
            h = spec.size[0] if h < 0 else h
            w = spec.size[1] if w < 0 else w
        if h < 0 or (w < 0 and (spec.size is None or spec.size[1] != -1)):
            raise EngineError(f"model {path} has a dynamic input size {pshape} and this stage's decoder sets none; "
                              "expected a model with a fixed input height and width")
        # The host passes u8 NHWC; everything else happens inside the compiled model.
        shape = [1, 3, h, w] if layout == "NCHW" else [1, h, w, 3]
        try:
            model.reshape({inp.get_any_name(): shape})
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises RuntimeError subclasses
            raise EngineError(f"model {path} cannot take the input size this stage's decoder gives "
                              f"({shape}, {layout}): {_ov_reason(exc)}") from None
        if len(model.inputs) > 1:  # image-size inputs beside the image
            fold_image_info(model, (h, w))
        model = with_preprocessing(model, spec, layout, (h, w))
        props: dict[str, Any] = {"PERFORMANCE_HINT": hint, **config}
        if device.upper().startswith("BATCH:") and not model.input(0).get_partial_shape().is_static:
            # auto-batching needs a static input: a model of dynamic width runs unbatched
            device = device.split(":", 1)[1].split("(", 1)[0]
            props.pop("AUTO_BATCH_TIMEOUT", None)
        if device.upper().startswith("MULTI") or hint == "CUMULATIVE_THROUGHPUT":
            # OpenVINO 2026.4: MULTI models (also AUTO with CUMULATIVE_THROUGHPUT) imported from
            # CACHE_DIR lose their output names ("Can not find port: Identity" on
            # create_infer_request); compile them uncached.
            props.setdefault("CACHE_DIR", "")
        try:
            compiled = self.core.compile_model(model, device, props)
        except Exception as exc:  # noqa: BLE001
            raise EngineError(f"cannot compile {path} for device {device!r}: {_ov_reason(exc)}") from None
        try:
            optimal = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        except Exception:  # noqa: BLE001 - some virtual devices do not report it
            optimal = 2
        names = [o.get_any_name() if o.get_names() else f"output{i}" for i, o in enumerate(compiled.outputs)]
        return LoadedModel(path=path, device=device, compiled=compiled, input_name=inp.get_any_name(),
                           input_hw=(h, w), output_names=names, optimal_requests=optimal, metadata=metadata)


#: model file suffixes OpenVINO reads, and the front end that must accept them
MODEL_FORMATS = {".xml": "ir", ".onnx": "onnx", ".tflite": "tflite", ".pb": "tf", ".pdmodel": "paddle"}


def _check_model_file(path: Path) -> None:
    """Reject files that are not models before ``read_model`` tries every front end on them
    (the TensorFlow one prints parse errors of its own on stderr)."""
    framework = MODEL_FORMATS.get(path.suffix.lower())
    if framework is None:
        raise EngineError(f"model {path}: unknown model format {path.suffix or '(no suffix)'!r}; expected "
                          f"{', '.join(MODEL_FORMATS)}")
    if framework not in ("onnx", "tflite", "ir"):
        return
    try:
        from openvino.frontend import FrontEndManager

        ok = FrontEndManager().load_by_framework(framework).supported(str(path))
    except Exception:  # noqa: BLE001 - cannot tell: read_model decides
        return
    if not ok:
        what = {"onnx": "ONNX model file", "tflite": "TensorFlow Lite model file",
                "ir": "OpenVINO IR (.xml with its .bin beside it)"}[framework]
        raise EngineError(f"model {path} is not a valid {what}")


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vapipe" / "ov_cache"


_ENGINE: Engine | None = None
_ENGINE_LOCK = threading.Lock()


def get_engine() -> Engine:
    """The process-wide engine (created on first use)."""
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = Engine()
        return _ENGINE
