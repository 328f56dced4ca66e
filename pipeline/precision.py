"""Inference precision chosen by measurement: f32 wherever it costs no more than the default.

OpenVINO's CPU plugin computes in a lower precision by default where the CPU has
instructions for it: bf16 on CPUs with AVX-512 BF16 or AMX, f16 on ARM.  Whether that
is faster depends on the CPU and the model.  With AMX, bf16 is several times faster;
with AVX-512 BF16 alone it can be slower than f32, because the plugin converts between
f32 and bf16 around layers that have no bf16 kernels.  On an Intel Xeon with AVX-512
BF16 and no AMX, one thread per inference, bf16 against f32:

* pose detector (224x224): 13.4 ms against 7.1 ms;
* BlazeFace: 1.5 ms against 0.8 ms;
* face mesh: 1.6 ms against 1.1 ms.

So the planner measures each CPU model twice, at the runtime's default precision and at
f32 (one inference on one thread each, the two in turns, cached per machine like every
other cost), and compiles it at f32 where that costs at most ``F32_MARGIN`` times the
default.  f32 is the precision models are trained and validated in, so it wins a tie.
A precision hint in the stage's ``config`` wins over the measurement; ``--cores 0``
measures nothing and leaves the runtime's default.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Callable

from .costs import ModelProbe

__all__ = ["HINT", "F32_MARGIN", "Precision", "default_precision", "sets_hint", "with_hint", "f32_probe", "choose"]

#: the OpenVINO property that sets a model's inference precision
HINT = "INFERENCE_PRECISION_HINT"
#: f32 is chosen when it costs at most this much times the runtime's default
F32_MARGIN = 1.05


@dataclass(frozen=True)
class Precision:
    """The precision a model is compiled at, chosen by measurement.

    ``hint``: the value given to ``INFERENCE_PRECISION_HINT`` (None: the runtime's default
    is kept); ``default``: the runtime's default precision on this device; ``default_ms``
    and ``f32_ms``: one inference on one thread at each (CPU ms)."""

    hint: str | None
    default: str
    default_ms: float
    f32_ms: float

    def describe(self) -> str:
        """E.g. ``f32 (bf16: 13.35 ms)`` or ``bf16 (f32: 2.10 ms)``."""
        if self.hint == "f32":
            return f"f32 ({self.default}: {self.default_ms:.2f} ms)"
        return f"{self.default} (f32: {self.f32_ms:.2f} ms)"


@functools.lru_cache(maxsize=None)
def default_precision(device: str = "CPU") -> str:
    """The precision OpenVINO's ``device`` computes in by default (``bf16``, ``f16``, ``f32``)."""
    from .engine import get_engine

    try:
        value = get_engine().core.get_property(device, HINT)
    except Exception:  # noqa: BLE001 - a plugin without the property computes as it was given
        return "f32"
    name = value.to_string() if hasattr(value, "to_string") else str(value)
    return {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}.get(name, name)


def sets_hint(config: dict[str, Any]) -> bool:
    """Whether an OpenVINO ``config`` sets the precision (keys in any case)."""
    return any(str(k).upper() == HINT for k in config)


def with_hint(config: dict[str, Any], hint: str | None) -> dict[str, Any]:
    """``config`` with the precision ``hint`` added, unless it sets one (or ``hint`` is None)."""
    return {**config, HINT: hint} if hint and not sets_hint(config) else dict(config)


def f32_probe(probe: ModelProbe) -> ModelProbe | None:
    """``probe`` compiled at f32, when the choice is the planner's to make: an OpenVINO model
    on the CPU whose ``config`` sets no precision, on a CPU whose default is not f32."""
    if probe.engine != "openvino" or not probe.on_cpu:
        return None
    if sets_hint(probe.config):
        return None
    if default_precision("CPU") == "f32":
        return None
    return replace(probe, config={**probe.config, HINT: "f32"})


def choose(probe: ModelProbe, costs: Callable[[list[ModelProbe]], list[tuple[dict[str, Any], str]]]
           ) -> tuple[ModelProbe, dict[str, Any], str, Precision | None]:
    """(probe, cost entry, origin, precision) of the faster compilation of ``probe``.

    ``costs`` returns (entry with ``ms``, origin) for each of a list of probes (cached, or
    measured together, in turns, so that a noisy moment cannot favour one of them).  Where
    the planner does not choose (:func:`f32_probe` is None), ``probe`` and its cost at the
    runtime's default precision come back unchanged."""
    alt = f32_probe(probe)
    if alt is None:
        (entry, origin), = costs([probe])
        return probe, entry, origin, None
    (entry, origin), (alt_entry, alt_origin) = costs([probe, alt])
    default_ms, f32_ms = float(entry["ms"]), float(alt_entry["ms"])
    if f32_ms <= F32_MARGIN * default_ms:
        return alt, alt_entry, alt_origin, Precision("f32", default_precision("CPU"), default_ms, f32_ms)
    return probe, entry, origin, Precision(None, default_precision("CPU"), default_ms, f32_ms)
