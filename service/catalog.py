"""The pipelines a server offers, and a request turned into the spec an instance runs.

A pipeline ``NAME`` of the YAML is served as ``NAME/1`` unless it gives
``version``.  Request ``parameters`` set stage parameters by ``STAGE.PARAM``
(``STAGE.PARAM.KEY`` sets one key of a mapping parameter such as ``options``)
or by a name the pipeline declares under ``parameters``.  A metadata
destination becomes sink parameters: ``file`` sets the pipeline's ``metadata``
stages (or adds one), ``mqtt`` adds an ``mqtt`` stage.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import yaml

from pipeline.config import ConfigError, ConfigFile, PipelineSpec, StageSpec, load_config, validate_pipeline
from pipeline.overrides import set_stage_param
from pipeline.registry import resolve_stage_type

from .security import PATH_PARAMS, Forbidden, Guard

__all__ = ["Catalog", "PipelineNotFound"]

log = logging.getLogger("vapipe.serve")


class PipelineNotFound(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def user_stage_pipelines(path: str | Path) -> dict[str, str]:
    """Pipelines of a YAML file that use a user stage (``module:Class``), read without importing anything."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}  # load_config reports it with the line
    out: dict[str, str] = {}
    pipelines = raw.get("pipelines") if isinstance(raw, dict) else None
    for name, body in (pipelines or {}).items() if isinstance(pipelines, dict) else []:
        stages = body.get("stages") if isinstance(body, dict) else None
        for st in stages if isinstance(stages, list) else []:
            if isinstance(st, dict) and ":" in str(st.get("type", "")):
                out[str(name)] = str(st["type"])
                break
    return out


class Catalog:
    def __init__(self, config_path: str | Path, guard: Guard) -> None:
        self.path = str(config_path)
        self.guard = guard
        excluded = {} if guard.allow_user_stages else user_stage_pipelines(config_path)
        for name, type_name in excluded.items():
            log.warning("pipeline %r is not served: it uses the user stage %s (start with --allow-user-stages)",
                        name, type_name)
        self.excluded = excluded
        self.config: ConfigFile = load_config(config_path, check_files=False, exclude=set(excluded))
        self._schemas: dict[str, dict[str, Any]] = {}

    # listing ----------------------------------------------------------------------------------
    def specs(self) -> list[PipelineSpec]:
        return list(self.config.pipelines.values())

    def get(self, name: str, version: str) -> PipelineSpec:
        spec = self.config.pipelines.get(name)
        if spec is None or spec.version != str(version):
            valid = ", ".join(f"{s.name}/{s.version}" for s in self.specs()) or "(none)"
            raise PipelineNotFound(f"no pipeline {name}/{version}; valid: {valid}")
        return spec

    def describe(self, spec: PipelineSpec) -> dict[str, Any]:
        return {"name": spec.name, "version": spec.version, "type": "vapipe", "description": spec.description,
                "parameters": self.parameters_schema(spec)}

    def parameters_schema(self, spec: PipelineSpec) -> dict[str, Any]:
        """JSON Schema of the request's ``parameters``: declared names, then every settable STAGE.PARAM."""
        if spec.name in self._schemas:
            return self._schemas[spec.name]
        props: dict[str, Any] = {}
        stage_props: dict[str, dict[str, Any]] = {}
        for st in spec.stages:
            try:
                schema = resolve_stage_type(st.type).Params.model_json_schema(by_alias=True)
            except Exception:  # noqa: BLE001 - a parameter type without a JSON schema
                continue
            for pname, pschema in schema.get("properties", {}).items():
                if _is_path_param(pname) or pname == "uri":
                    continue
                entry = {k: v for k, v in pschema.items() if k in ("type", "description", "default", "enum",
                                                                   "minimum", "maximum")}
                if pname in st.params:
                    entry["default"] = st.params[pname]
                stage_props[f"{st.name}.{pname}"] = entry
        for name, target in spec.parameters.items():
            base = stage_props.get(".".join(target.split(".")[:2]), {})
            props[name] = {"description": f"sets {target}" + (f": {base['description']}" if "description" in base
                                                              else "")}
        props.update(stage_props)
        self._schemas[spec.name] = {"type": "object", "properties": props}
        return self._schemas[spec.name]

    # requests ---------------------------------------------------------------------------------
    def build(self, spec: PipelineSpec, parameters: dict[str, Any] | None, destination: dict[str, Any] | None,
              tags: dict[str, Any] | None, instance_id: str) -> PipelineSpec:
        """A copy of ``spec`` with the request applied; ValueError (400) or Forbidden (403) naming the field."""
        for st in spec.stages:
            self.guard.stage_type(spec.name, st.name, st.type)
        spec = spec.model_copy(deep=True)
        for key, value in (parameters or {}).items():
            self._set_parameter(spec, str(key), value)
        if destination:
            self._attach(spec, destination, tags or {}, instance_id)
        try:
            validate_pipeline(spec, "request", check_files=True)
            _check_devices(spec)
        except ConfigError as exc:
            raise ValueError(_request_error(str(exc), spec, parameters or {})) from None
        return spec

    def _set_parameter(self, spec: PipelineSpec, key: str, value: Any) -> None:
        target = spec.parameters.get(key, key)
        stage_name, _, rest = target.partition(".")
        names = [s.name for s in spec.stages]
        if not rest or stage_name not in names:
            declared = ", ".join(spec.parameters) or "none"
            raise ValueError(f"parameters.{key}: expected STAGE.PARAM (stages: {', '.join(names)}) or a declared "
                             f"parameter ({declared})")
        stage = spec.stage(stage_name)
        param, _, sub = rest.partition(".")
        fields = resolve_stage_type(stage.type).Params.model_fields
        aliases = {f.alias: n for n, f in fields.items() if f.alias}
        if param not in fields and param not in aliases:
            raise ValueError(f"parameters.{key}: stage {stage_name!r} has no parameter {param!r}; valid: "
                             f"{', '.join(a for a in (f.alias or n for n, f in fields.items()) if not _is_path_param(a))}")
        value = self.guard.parameter(key, param if not sub else sub, value)
        if param == "source" or (stage_name == names[0] and param == "uri"):
            raise Forbidden(f"parameters.{key}: the source is given by 'source', not by a parameter")
        try:
            set_stage_param(stage, rest, value)
        except ValueError as exc:
            raise ValueError(f"parameters.{key}: {exc}") from None

    def _attach(self, spec: PipelineSpec, destination: dict[str, Any], tags: dict[str, Any], instance_id: str) -> None:
        meta = destination.get("metadata")
        if not meta:
            return
        kind = meta.get("type")
        schema = meta.get("schema", "dlstreamer")
        last = spec.stages[-1].name
        if kind == "file":
            path = self.guard.destination_path(str(meta["path"]))
            params = {"path": str(path), "schema": schema, "format": meta.get("format", "json"),
                      "append": meta.get("format", "json") == "json-lines", "tags": tags}
            sinks = [s for s in spec.stages if s.type == "metadata"]
            if not sinks:
                spec.stages.append(StageSpec(name="destination", type="metadata", params={}, inputs=[last]))
                sinks = [spec.stages[-1]]
            for st in sinks:
                st.params.update(params)
        elif kind == "mqtt":
            params = {"host": meta["host"], "topic": meta["topic"], "schema": schema, "tags": tags,
                      "instance": instance_id, "qos": int(meta.get("qos", 0))}
            if meta.get("mqtt-client-id"):
                params["client_id"] = str(meta["mqtt-client-id"])
            spec.stages.append(StageSpec(name="destination_mqtt", type="mqtt", params=params, inputs=[last]))
        else:
            raise ValueError(f"destination.metadata.type {kind!r} is not supported; valid: file, mqtt")


_STAGE_ERROR = re.compile(r"^request:\d+: pipeline '[^']*' stage '([^']*)': parameter '([^']*)': (.*)$")


def _check_devices(spec: PipelineSpec) -> None:
    """ConfigError naming the stage when a stage's ``device`` is not on this machine (a GPU on a
    server without one is refused with the request, not found missing once the instance starts)."""
    from pipeline.devices import missing_here

    for st in spec.stages:
        device = st.params.get("device")
        if isinstance(device, str):
            reason = missing_here(device)
            if reason:
                raise ConfigError(f"request:0: pipeline {spec.name!r} stage {st.name!r}: parameter 'device': {reason}")


def _request_error(text: str, spec: PipelineSpec, parameters: dict[str, Any]) -> str:
    """A pipeline check's error as the request's field: ``parameters.KEY: ...`` for a parameter the
    request set (the value in error, inside it or holding it: ``STAGE.PARAM.KEY`` and ``STAGE.PARAM``
    both name ``PARAM.KEY``), ``destination.metadata.PARAM: ...`` for the destination's stage, else
    the message without the check's file position."""
    match = _STAGE_ERROR.match(text)
    if match is None:
        return re.sub(r"^request:\d+: ", "", text)
    stage, param, message = match.groups()
    loc = param.split(".")
    for key in parameters:
        target_stage, *path = spec.parameters.get(str(key), str(key)).split(".")
        depth = min(len(path), len(loc))
        if target_stage == stage and depth and path[:depth] == loc[:depth]:
            return f"parameters.{key}: {message}"
    if stage.startswith("destination"):
        return f"destination.metadata.{param}: {message}"
    return f"stage {stage!r} parameter {param!r}: {message}"


def _is_path_param(name: str) -> bool:
    low = name.lower()
    return low in PATH_PARAMS or low.endswith(("_path", "_dir", "_file"))
