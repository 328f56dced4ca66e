"""Changes to a pipeline's parameters from the command line (``--set STAGE.PARAM=VALUE``)
and from override files (``{stage: {param: value}}``, as ``vapipe tune`` writes them).

Each returns a changed copy of the spec, validated as the pipeline file is; errors are
:class:`~pipeline.config.ConfigError` with one line naming the ``--set`` item or the file
and what is valid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .config import ConfigError, PipelineSpec, StageSpec, first_error, validate_pipeline
from .registry import resolve_stage_type

__all__ = ["set_stage_param", "apply_overrides", "load_override_file", "apply_override_file"]


def set_stage_param(stage: StageSpec, path: str, value: Any) -> None:
    """Set ``PARAM`` of ``stage``, or with ``PARAM.KEY[.KEY ...]`` one key of the mapping
    parameter ``PARAM``, starting from the stage's value or the parameter's default (the
    other keys stay).  ValueError when ``PARAM`` is not a mapping."""
    param, _, sub = path.partition(".")
    if not sub:
        stage.params[param] = value
        return
    current = stage.params.get(param)
    if current is None:
        field = _param_field(stage, param)
        default = field.get_default(call_default_factory=True) if field is not None else None
        if hasattr(default, "model_dump"):
            default = default.model_dump()
        current = {} if default is None else default
    if not isinstance(current, dict):
        raise ValueError(f"{stage.name}.{param} is not a mapping")
    stage.params[param] = _with_key(dict(current), sub.split("."), value)


def _with_key(mapping: dict[str, Any], keys: list[str], value: Any) -> dict[str, Any]:
    head, rest = keys[0], keys[1:]
    inner = mapping.get(head)
    mapping[head] = _with_key(dict(inner) if isinstance(inner, dict) else {}, rest, value) if rest else value
    return mapping


def apply_overrides(spec: PipelineSpec, sets: list[str]) -> PipelineSpec:
    """Apply ``STAGE.PARAM=VALUE`` strings (VALUE parsed as YAML) to a copy of ``spec``;
    ``STAGE.PARAM.KEY=VALUE`` sets one key of a mapping parameter (``decode.reconnect.max_attempts=3``)."""
    spec = spec.model_copy(deep=True)
    for item in sets:
        key, eq, value = item.partition("=")
        stage_name, dot, param = key.partition(".")
        if not eq or not dot or not param:
            raise ConfigError(f"--set {item!r}: expected STAGE.PARAM=VALUE")
        try:
            stage = spec.stage(stage_name)
        except ConfigError as exc:
            raise ConfigError(f"--set {item}: {exc}") from None
        try:
            parsed = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            parsed = value
        head = param.partition(".")[0]
        if head != param and _param_field(stage, head) is None:
            raise ConfigError(f"--set {item}: unknown parameter {head!r}; valid: {', '.join(_param_names(stage))}")
        try:
            set_stage_param(stage, param, parsed)
        except ValueError as exc:
            raise ConfigError(f"--set {item}: {exc}") from None
        single = PipelineSpec(name=spec.name, stages=[stage])
        try:
            validate_pipeline(single, "--set", check_files=True)
        except ConfigError as exc:
            reason = str(exc).split(f"stage {stage.name!r}: ", 1)[-1]
            raise ConfigError(f"--set {item}: {reason}") from None
    return spec


def _param_field(stage: StageSpec, name: str) -> Any:
    """The pydantic field of ``stage``'s type that the YAML calls ``name`` (by name or alias), or None."""
    fields = resolve_stage_type(stage.type).Params.model_fields
    return fields.get(name) or next((f for f in fields.values() if f.alias == name), None)


def _param_names(stage: StageSpec) -> list[str]:
    """The parameters of ``stage``'s type as the YAML names them (aliases where they have one)."""
    return [f.alias or n for n, f in resolve_stage_type(stage.type).Params.model_fields.items()]


def load_override_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a YAML override file ``{stage: {param: value}}`` (as ``vapipe tune`` writes)."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"override file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read override file {p}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except Exception as exc:  # noqa: BLE001 - as in parse_config: !!int abc, nesting too deep
        raise ConfigError(f"{p}: invalid YAML value: {type(exc).__name__}: {exc}") from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ConfigError(f"{p}: expected a mapping {{STAGE: {{PARAM: VALUE}}}}")
    return {str(k): {str(pk): pv for pk, pv in v.items()} for k, v in raw.items()}


def apply_override_file(spec: PipelineSpec, path: str | Path) -> PipelineSpec:
    """Apply an override file to a copy of ``spec`` (same semantics as ``--set STAGE.PARAM=VALUE``
    for every entry); an unknown stage, parameter or bad value is a one-line error naming the file."""
    overrides = load_override_file(path)
    spec = spec.model_copy(deep=True)
    names = [s.name for s in spec.stages]
    for stage_name, params in overrides.items():
        if stage_name not in names:
            raise ConfigError(f"{path}: pipeline {spec.name!r} has no stage {stage_name!r}; stages: {', '.join(names)}")
        stage = spec.stage(stage_name)
        cls = resolve_stage_type(stage.type)
        valid = set(cls.Params.model_fields) | {f.alias for f in cls.Params.model_fields.values() if f.alias}
        for param in params:
            if param not in valid:
                raise ConfigError(f"{path}: stage {stage_name!r}: unknown parameter {param!r}; "
                                  f"valid: {', '.join(_param_names(stage))}")
        stage.params.update(params)
        try:
            cls.Params(**stage.params)
        except ValidationError as exc:
            raise ConfigError(f"{path}: stage {stage_name!r}: {first_error(exc, cls.Params)}") from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{path}: stage {stage_name!r}: {exc}") from None
    validate_pipeline(spec, str(path), check_files=True)
    return spec
