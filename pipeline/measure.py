"""Measurements of what the parts of a pipeline cost on this machine, in milliseconds of CPU
time (see :mod:`pipeline.costs` for what each cost covers and how it is kept): one inference
of a model on one stream of one thread, one frame decoded, encoded, or prepared on the host.
Each takes a fraction of a second."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from .costs import THREAD_KEYS, ModelProbe

__all__ = ["measure_decode", "measure_encode", "measure_host", "measure_model", "measure_models",
           "BUDGET_S", "MIN_SAMPLES", "MAX_SAMPLES"]

#: a measurement stops after this much CPU time (at least MIN_SAMPLES samples)
BUDGET_S = 0.25
MIN_SAMPLES = 3
MAX_SAMPLES = 40


def _timed_in_turns(fns: Sequence[Callable[[], Any]], clock: Callable[[], float], warmup: int = 1) -> list[float]:
    """Median cost in ms of each of ``fns`` by ``clock`` (seconds), one call of each per turn,
    until each has had BUDGET_S (at least MIN_SAMPLES, at most MAX_SAMPLES turns)."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    samples: list[list[float]] = [[] for _ in fns]
    spent = 0.0
    while len(samples[0]) < MIN_SAMPLES or (spent < BUDGET_S * len(fns) and len(samples[0]) < MAX_SAMPLES):
        for fn, taken in zip(fns, samples):
            t0 = clock()
            fn()
            taken.append(clock() - t0)
            spent += taken[-1]
    return [float(np.median(taken)) * 1000.0 for taken in samples]


def _process_cpu() -> float:
    return time.process_time()


def _model_runner(probe: ModelProbe) -> tuple[Callable[[], Any], list[int]]:
    """(one inference of ``probe``'s model on one stream of one thread, the input size fed)."""
    from .engines import load_model

    config = {k: v for k, v in probe.config.items() if str(k).upper() not in THREAD_KEYS}
    config.update({"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1, "ENABLE_CPU_PINNING": False})
    spec = probe.spec
    if probe.input_hw is not None and spec.size is None:
        spec = replace(spec, size=probe.input_hw)
    elif probe.input_hw is not None and spec.size is not None and spec.size[1] == -1:
        spec = replace(spec, size=(spec.size[0], probe.input_hw[1]))
    model = load_model(probe.engine, probe.path, spec, probe.device, "LATENCY", config, keep=False)
    h, w = model.input_hw
    if spec.resize_from is not None:
        h, w = spec.resize_from
    image = np.random.default_rng(0).integers(0, 256, (1, h, w, 3), dtype=np.uint8)
    if probe.engine == "openvino":
        import openvino as ov

        request = model.compiled.create_infer_request()
        # the tensor owns a copy: a tensor sharing ``image`` would read freed memory once this
        # function returns (a frame-sized input is its own mapping, unmapped when freed)
        request.set_input_tensor(ov.Tensor(image, shared_memory=False))
        return request.infer, list(model.input_hw)

    def run() -> Any:
        return model.infer(image)
    return run, list(model.input_hw)


def measure_model(probe: ModelProbe) -> dict[str, Any]:
    """``{"ms": CPU ms of one inference on one stream of one thread (median of a few),
    "input_hw": [height, width] the model was fed}``."""
    return measure_models([probe])[0]


def measure_models(probes: Sequence[ModelProbe]) -> list[dict[str, Any]]:
    """:func:`measure_model` of each probe, measured in turns (one inference of each per turn)
    so that the host's noise falls on all of them alike: the precision choice compares two
    compilations of one model (measured one after the other, a noisy moment during the
    second once made bf16 look as slow as f32 on a CPU where it is 25 % faster, and the
    cache kept that).  In turns, each inference starts with the other's weights in the
    caches, as inferences beside other stages do in a pipeline: the face mesh costs about
    15 % more so than back to back, at either precision."""
    runners = [_model_runner(p) for p in probes]
    # process CPU time: the inference may run on the engine's threads, not the caller's
    costs = _timed_in_turns([run for run, _ in runners], _process_cpu)
    return [{"ms": round(ms, 4), "input_hw": hw} for ms, (_, hw) in zip(costs, runners)]


def measure_decode(uri: str, needs_image: bool, build_source: Callable[[str], Any]) -> tuple[float, Any]:
    """CPU ms per frame of the source on one decoder thread (the calling thread), with the
    full-size BGR conversion when ``needs_image``; and one decoded frame (for host costs).

    ``build_source(uri)`` returns an opened source stage (``units``/``decode_unit``)."""
    source = build_source(uri)
    samples: list[float] = []
    first = None
    spent = 0.0
    try:
        for unit in source.units():
            t0 = time.thread_time()
            frames = source.decode_unit(unit)
            for f in frames:
                if needs_image:
                    f.image()
            dt = time.thread_time() - t0
            if frames:
                samples.extend([dt / len(frames)] * len(frames))
                spent += dt
                first = first or frames[0]
            if unit is None or (len(samples) >= 8 and spent >= BUDGET_S) or len(samples) >= 3 * MAX_SAMPLES:
                break
    finally:
        source.close()
    if not samples:
        raise ValueError(f"source {uri} gave no frames to measure")
    # the first frames include the decoder's start-up; a GOP's I-frame costs more: mean of the rest
    body = samples[1:] if len(samples) > 2 else samples
    return float(np.mean(body)) * 1000.0, first


def measure_encode(width: int, height: int, codec: str, options: dict[str, str], pix_fmt: str = "yuv420p",
                   frames: int = 16) -> float:
    """CPU ms per frame of encoding ``width`` x ``height`` video on one thread (the calling
    thread: ``thread_count=1``), on moving noise (a hard case, as camera video is)."""
    import io

    import av

    rng = np.random.default_rng(2)
    w, h = width + width % 2, height + height % 2
    tile = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
    pictures = [np.ascontiguousarray(np.kron(np.roll(tile, i, axis=1), np.ones((8, 8, 1), np.uint8))[:h, :w])
                for i in range(4)]
    with av.open(io.BytesIO(), "w", format="matroska") as out:
        stream = out.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt = w, h, pix_fmt
        stream.codec_context.thread_count = 1
        stream.options = options
        spent = 0.0
        for i in range(frames):
            vf = av.VideoFrame.from_ndarray(pictures[i % len(pictures)], format="bgr24")
            t0 = time.thread_time()
            packets = stream.encode(vf)
            spent += time.thread_time() - t0
            out.mux(packets)
        t0 = time.thread_time()
        out.mux(stream.encode(None))  # frames still in the encoder's lookahead count too
        spent += time.thread_time() - t0
    return spent / frames * 1000.0


def measure_host(prepare: Callable[[], Any]) -> float:
    """Thread CPU ms of one host-side input preparation (e.g. scaling a frame to the model)."""
    return _timed_in_turns([prepare], time.thread_time)[0]
