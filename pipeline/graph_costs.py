"""What the parts of a pipeline graph cost on this machine, for the thread plan.

:func:`measure_graph` takes from the cost cache, or measures now and stores, the decode cost
per frame of every file source (live sources: what an earlier run observed, else assumed),
the worker's host work per frame (what an earlier run of the same settings observed, else
the input preparation of each model), each CPU model's inference on one thread at the
precision it will run at, and each encoder's cost per frame.  :func:`with_cost` puts a
model's cost on its :class:`pipeline.planner.InferInfo`.
"""

from __future__ import annotations

from typing import Any

from .costs import (DEFAULT_OBJECTS_PER_FRAME, CostCache, ModelProbe, decode_key, host_key, model_costs, model_key,
                    objects_key)
from .measure import measure_decode, measure_host, measure_models
from .planner import ASSUMED_DECODE_MS, EncoderInfo, InferInfo
from .precision import Precision
from .precision import choose as choose_precision

__all__ = ["Measured", "measure_graph", "with_cost", "stage_params", "ASSUMED_SOURCE_WH"]

#: source size assumed for planning when a live source's size is not known yet
ASSUMED_SOURCE_WH = (1920, 1080)


def stage_params(graph: Any, name: str, overrides: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """Parameters of stage ``name`` of ``graph`` with ``overrides`` applied."""
    return {**graph.graph.nodes[name]["spec"].params, **((overrides or {}).get(name, {}))}


def non_negative_int(value: Any) -> int:
    """``value`` as an int >= 0; 0 when it is not a number."""
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


class Measured:
    def __init__(self) -> None:
        self.encoders: list[EncoderInfo] = []
        self.decode_ms: list[float] = []
        self.decode_origin = "assumed"
        self.host_ms: float | None = None
        self.host_origin = "assumed"
        self.host_key: str | None = None  # where a run keeps the host work it observed
        self.paced = False  # a source delivers frames at its own pace (camera, stream, real-time file)
        self.models: dict[str, tuple[float, str, ModelProbe, Precision | None]] = {}
        self.failures: list[str] = []  # what could not be measured (the run itself reports why)


def measure_graph(graph: Any, stages: dict[str, Any], uris: list[str], needs_image: bool,
                  overrides: dict[str, dict[str, Any]] | None, cache: CostCache) -> Measured:
    from .stage import InferStage

    out = Measured()
    frames: dict[str, Any] = {}
    src_wh = None
    origins = set()
    decoded: dict[str, float] = {}
    for uri in uris:
        if uri not in decoded:
            try:
                ms, wh, frame, origin = _decode_cost(graph, uri, needs_image, overrides, cache)
                out.paced = out.paced or _paced(graph, uri, overrides)
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
    observed = None
    if uris:
        # a run's observed host work (every stage's share of the worker, with the objects it met)
        # replaces the estimate from input preparation alone, which is then not measured
        out.host_key = host_key({name: [graph.graph.nodes[name]["spec"].type, stage_params(graph, name, overrides)]
                                 for name in stages if name != graph.source}, src_wh)
        seen = cache.get(out.host_key)
        observed = float(seen) if isinstance(seen, (int, float)) else None
    host = 0.0
    host_known = False
    for name, st in stages.items():
        if not isinstance(st, InferStage):
            continue
        try:
            probe = st.planning_probe(src_wh)
            if probe is None or not probe.on_cpu:
                continue
            probe, entry, origin, precision = choose_precision(probe, lambda ps: model_costs(ps, cache, measure_models))
            key = model_key(probe)
        except Exception as exc:  # noqa: BLE001 - a model that cannot be read fails the stage's open
            out.failures.append(f"stage {name}: {exc}")
            continue
        out.models[name] = (float(entry["ms"]), origin, probe, precision)
        if not uris or observed is not None:
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
    if observed is not None:
        out.host_ms, out.host_origin = observed, "observed"
    elif host_known:
        out.host_ms = host + HOST_OVERHEAD_MS * sum(1 for s in stages.values() if isinstance(s, InferStage))
        out.host_origin = "measured"
    for name, st in stages.items():
        probe_cost = st.planning_cost(src_wh)
        if probe_cost is None:
            continue
        user = stage_params(graph, name, overrides).get("threads")
        try:
            key, measure = probe_cost
            ms, origin = cache.cached(key, lambda measure=measure: round(float(measure()), 4))
            out.encoders.append(EncoderInfo(name, float(ms), origin, non_negative_int(user) if user is not None else None))
        except Exception as exc:  # noqa: BLE001 - an encoder that cannot start fails the stage itself
            out.failures.append(f"stage {name}: {exc}")
            out.encoders.append(EncoderInfo(name, None, "assumed", non_negative_int(user) if user is not None else None))
    return out


#: worker-thread bookkeeping per inference stage and frame beyond input preparation (queue
#: hand-offs, result mapping); the runtime check observes the real host cost
HOST_OVERHEAD_MS = 0.2


def _probe_source(graph: Any, uri: str, overrides: dict[str, dict[str, Any]] | None, opened: bool) -> Any:
    """The pipeline's source stage for ``uri`` on one decoder thread, without looping or pacing."""
    cls = graph.classes()[graph.source]
    fields = cls.Params.model_fields
    params = {k: v for k, v in {**stage_params(graph, graph.source, overrides), "uri": uri}.items() if k in fields}
    if opened:
        params.update({k: v for k, v in (("threads", 1), ("loop", False), ("realtime", False)) if k in fields})
    source = cls(cls.Params(**params), name=graph.source)
    if opened:
        source.open()
    return source


def _first_frame(graph: Any, uri: str, overrides: dict[str, dict[str, Any]] | None) -> Any:
    """The source's first decoded frame, or None; a camera or stream is not read before the run
    connects to it (it may be down, and its retries would hold up the start unstoppably)."""
    if _connects(graph, uri, overrides):
        return None
    source = _probe_source(graph, uri, overrides, opened=True)
    try:
        for unit in source.units():
            frames = source.decode_unit(unit)
            if frames or unit is None:
                return frames[0] if frames else None
    finally:
        source.close()
    return None


def _connects(graph: Any, uri: str, overrides: dict[str, dict[str, Any]] | None) -> bool:
    """True for a source that is not probed before it connects (a camera or stream)."""
    return not getattr(_probe_source(graph, uri, overrides, opened=False), "can_probe", True)


def _paced(graph: Any, uri: str, overrides: dict[str, dict[str, Any]] | None) -> bool:
    """True for a source that delivers frames at its own pace: a camera or stream, or a file
    read in real time."""
    return _connects(graph, uri, overrides) or bool(stage_params(graph, graph.source, overrides).get("realtime"))


def _decode_cost(graph: Any, uri: str, needs_image: bool, overrides: dict[str, dict[str, Any]] | None,
                 cache: CostCache) -> tuple[float, tuple[int, int] | None, Any, str]:
    """(ms per frame, source size, a decoded frame or None, origin) of one source."""
    key = decode_key(uri, needs_image)
    entry = cache.get(key)
    connects = _connects(graph, uri, overrides)
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


def with_cost(info: InferInfo, measured: Measured, pipeline: str, cache: CostCache) -> InferInfo:
    from dataclasses import replace

    hit = measured.models.get(info.name)
    if hit is None:
        return info
    ms, origin, probe, precision = hit
    per_frame, objects_origin = probe.per_frame, "assumed"
    if per_frame is None:
        seen = cache.get(objects_key(pipeline, info.name))
        if isinstance(seen, (int, float)):
            objects, objects_origin = float(seen), "observed"
        else:
            objects = DEFAULT_OBJECTS_PER_FRAME
        per_frame = objects * probe.per_object
    return replace(info, ms=ms, per_frame=per_frame, origin=origin, objects=probe.per_frame is None,
                   per_object=probe.per_object, precision=precision, objects_origin=objects_origin)
