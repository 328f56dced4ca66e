"""Stage type names -> stage classes.

Built-in types are short names (``decode``, ``detect``, ...); user stages are
named ``"package.module:ClassName"`` and imported on demand.
"""

from __future__ import annotations

import importlib

from .stage import Stage

__all__ = ["BUILTIN_STAGES", "resolve_stage_type", "UnknownStageType"]

BUILTIN_STAGES: dict[str, str] = {
    "decode": "stages.decode:Decode",
    "detect": "stages.detect:Detect",
    "classify": "stages.classify:Classify",
    "encode": "stages.encode:Encode",
    "metadata": "stages.metadata:Metadata",
    "preprocess": "stages.preprocess:Preprocess",
    "mqtt": "stages.mqtt:Mqtt",
}


class UnknownStageType(ValueError):
    """The stage type is neither built in nor an importable ``module:Class``."""


def resolve_stage_type(type_name: str) -> type[Stage]:
    """The class for ``type_name``; errors list the built-in types."""
    target = BUILTIN_STAGES.get(type_name, type_name)
    if ":" not in target:
        raise UnknownStageType(f"unknown stage type {type_name!r}; valid: {', '.join(sorted(BUILTIN_STAGES))} "
                               "or 'package.module:ClassName'")
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownStageType(f"stage type {type_name!r}: cannot import module {module_name!r} ({exc})") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Stage)):
        raise UnknownStageType(f"stage type {type_name!r}: {module_name} has no Stage subclass {class_name!r}")
    return cls
