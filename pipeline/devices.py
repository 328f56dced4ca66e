"""OpenVINO devices: what is present, key properties, and how a device string resolves.

Device strings: a physical device (``CPU``, ``GPU``, ``GPU.1``, ``NPU``) or a
virtual one over a list: ``AUTO[:list]`` (``-CPU`` excludes), ``MULTI:list``,
``HETERO:list``, ``BATCH:DEV(N)``.  :func:`unavailable_reason` names a device
that the string asks for but the machine lacks, in one line.
"""

from __future__ import annotations

import re
from typing import Any

from .ov_errors import ov_reason

__all__ = ["named_devices", "unavailable_reason", "missing_here", "device_info", "list_devices", "resolve_device",
           "tiny_model", "format_devices", "KEY_PROPERTIES"]

VIRTUAL = ("AUTO", "MULTI", "HETERO", "BATCH")
KEY_PROPERTIES = ("FULL_DEVICE_NAME", "DEVICE_TYPE", "DEVICE_ARCHITECTURE", "OPTIMIZATION_CAPABILITIES",
                  "PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT",
                  "ENABLE_CPU_PINNING", "SCHEDULING_CORE_TYPE", "ENABLE_HYPER_THREADING", "RANGE_FOR_STREAMS",
                  "RANGE_FOR_ASYNC_INFER_REQUESTS")
COMPILED_PROPERTIES = ("EXECUTION_DEVICES", "PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS",
                       "OPTIMAL_NUMBER_OF_INFER_REQUESTS", "INFERENCE_PRECISION_HINT")


def named_devices(device: str) -> list[str]:
    """Physical devices a device string names (``AUTO:GPU,-CPU`` -> ``[GPU]``; exclusions dropped)."""
    head, _, rest = device.strip().partition(":")
    if head.upper() not in VIRTUAL:
        return [device.strip()]
    out: list[str] = []
    for item in re.split(r"[,\s]+", rest):
        item = re.sub(r"\(.*\)$", "", item.strip())  # BATCH:GPU(4)
        if item and not item.startswith("-"):
            out.extend(named_devices(item))
    return out


def _present(name: str, available: list[str]) -> bool:
    up = name.upper()
    return any(a.upper() == up or a.upper().split(".", 1)[0] == up for a in available)


def unavailable_reason(core: Any, device: str) -> str | None:
    """One line if ``device`` names a device that is not present, else None."""
    available = list(core.available_devices)
    for name in named_devices(device):
        if not _present(name, available):
            return f"device {name} not available; available: {', '.join(available) or 'none'}"
    return None


def missing_here(device: str) -> str | None:
    """:func:`unavailable_reason` on this machine's OpenVINO runtime, started only for a
    device other than the CPU (which is always present): for checks before a run."""
    if device.strip().upper() in ("", "CPU"):
        return None
    from .engine import get_engine

    return unavailable_reason(get_engine().core, device)


def _value(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if hasattr(v, "to_string"):  # openvino.Type: bf16, f32, ...
        return v.to_string()
    name = getattr(v, "name", None)
    return name if isinstance(name, str) else str(v)


def device_info(core: Any, device: str, keys: tuple[str, ...] = KEY_PROPERTIES) -> dict[str, Any]:
    """Key properties of a device that it supports (defaults before any compile)."""
    try:
        supported = set(core.get_property(device, "SUPPORTED_PROPERTIES"))
    except Exception:  # noqa: BLE001 - plugins differ
        supported = set(keys)
    out: dict[str, Any] = {}
    for key in keys:
        if key not in supported:
            continue
        try:
            out[key] = _value(core.get_property(device, key))
        except Exception:  # noqa: BLE001
            continue
    return out


def tiny_model() -> Any:
    """A 1x3x8x8 -> ReLU model: compiling it is cheap and shows what a device chooses."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    param = ops.parameter([1, 3, 8, 8], np.float32, name="x")
    return ov.Model([ops.relu(param)], [param], "tiny")


def resolve_device(core: Any, device: str, hint: str | None = "THROUGHPUT",
                   config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compile the tiny model on ``device`` and report what the compiled model uses."""
    reason = unavailable_reason(core, device)
    if reason:
        return {"device": device, "error": reason}
    props: dict[str, Any] = dict(config or {})
    head = device.split(":", 1)[0].upper()
    if hint and head not in ("HETERO", "BATCH"):
        props.setdefault("PERFORMANCE_HINT", hint)
    try:
        compiled = core.compile_model(tiny_model(), device, props)
    except Exception as exc:  # noqa: BLE001
        return {"device": device, "error": f"cannot compile for {device!r}: {ov_reason(exc)}"}
    out: dict[str, Any] = {"device": device}
    if props:
        out["requested"] = {k: _value(v) for k, v in props.items()}
    for key in COMPILED_PROPERTIES:
        try:
            out[key] = _value(compiled.get_property(key))
        except Exception:  # noqa: BLE001 - virtual devices report fewer properties
            continue
    return out


def list_devices(core: Any | None = None) -> list[dict[str, Any]]:
    """Every available device with its key properties."""
    if core is None:
        import openvino as ov

        core = ov.Core()
    return [{"device": d, **device_info(core, d)} for d in core.available_devices]


def format_devices(devices: list[dict[str, Any]], resolved: dict[str, Any] | None = None) -> str:
    lines = []
    for d in devices:
        lines.append(f"{d['device']}: {d.get('FULL_DEVICE_NAME', '?')}")
        for k, v in d.items():
            if k not in ("device", "FULL_DEVICE_NAME"):
                lines.append(f"  {k}: {_fmt(v)}")
    if resolved is not None:
        lines.append(f"{resolved['device']} resolves to:")
        if "error" in resolved:
            lines.append(f"  error: {resolved['error']}")
        for k, v in resolved.items():
            if k not in ("device", "error"):
                lines.append(f"  {k}: {_fmt(v)}")
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    return ", ".join(str(x) for x in v) if isinstance(v, list) else str(v)
